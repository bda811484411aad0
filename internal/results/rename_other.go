//go:build !linux

package results

// renameNoReplace renames oldpath to newpath unless newpath exists.
func renameNoReplace(oldpath, newpath string) error { return renameIfAbsent(oldpath, newpath) }

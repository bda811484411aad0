package results

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// PartialPrefix starts the name of a folder being written: a run folder is
// written under a hidden temporary name beside its final one and renamed into
// place when complete, so a folder with a run's name is always complete. A
// process killed while writing leaves a hidden .partial-* folder (summary.json,
// written last, is missing unless the kill came after the last write); it is
// no results folder: delete it.
const PartialPrefix = ".partial-"

// ErrExists is returned when the folder to write already exists: results are
// never overwritten.
var ErrExists = errors.New("already exists; results folders are never overwritten")

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// NewRunID returns a run ID (the results folder's name): the UTC start, the
// testid (characters other than letters, digits, '_', '.', '-' replaced by
// '_') and a random suffix, so that two runs started in the same second
// with the same testid get different folders.
func NewRunID(started time.Time, testID string) string {
	id := started.UTC().Format("20060102T150405Z")
	if testID != "" {
		id += "-" + unsafeID.ReplaceAllString(testID, "_")
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	return id + "-" + hex.EncodeToString(b[:])
}

// reservedNames are the files and folders of a run folder that extra files
// may not replace.
var reservedNames = []string{SummaryFile, ReportFile, RequestsHLogFile, WindowsFile, hdrDir, seriesDir}

// CheckExtraFileName returns an error unless name can hold an extra file of a
// run folder: a plain file name, not hidden, not one of the folder's own files.
func CheckExtraFileName(name string) error {
	switch {
	case name == "" || name == "." || name == ".." || name != filepath.Base(name) || strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("%q is not a plain file name", name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("%q is a hidden name; give a visible file name", name)
	}
	if ReservedName(name) {
		return fmt.Errorf("%q is reserved for the results folder's own files (%s)", name, strings.Join(reservedNames, ", "))
	}
	return nil
}

// ReservedName says whether name (in any case) is one of a run folder's own
// files or folders.
func ReservedName(name string) bool {
	for _, r := range reservedNames {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}

// Save writes the run into a new folder under parent named by its run ID
// (NewRunID when the summary has none, or when the name is taken) and
// returns the folder's path. The folder appears complete or not at all
// (WriteNew); existing folders are never touched.
func (r *Run) Save(parent string, opt WriteOptions, files map[string]string) (string, error) {
	const attempts = 5
	var err error
	for i := range attempts {
		if r.Summary.RunID == "" || i > 0 {
			r.Summary.RunID = NewRunID(r.Summary.Started, r.Summary.TestID)
		}
		dir := filepath.Join(parent, r.Summary.RunID)
		if err = r.WriteNew(dir, opt, files); !errors.Is(err, ErrExists) {
			return dir, err
		}
	}
	return "", err
}

// WriteNew writes the run folder dir, which must not exist, with extra
// files: into a temporary sibling folder first (PartialPrefix), synced to
// disk, then renamed to dir without replacing anything. On any error the
// temporary folder is removed and dir is not created.
func (r *Run) WriteNew(dir string, opt WriteOptions, files map[string]string) (err error) {
	for name := range files {
		if err := CheckExtraFileName(name); err != nil {
			return fmt.Errorf("results: extra file %w", err)
		}
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("results: %s %w", dir, ErrExists)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil { //nolint:gosec // a results folder users read
		return fmt.Errorf("results: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, PartialPrefix+filepath.Base(dir)+"-")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil { //nolint:gosec // MkdirTemp makes it 0700; a results folder users read
		return fmt.Errorf("results: %w", err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o644); err != nil { //nolint:gosec // a results folder users read
			return fmt.Errorf("results: %w", err)
		}
	}
	if err := r.WriteDir(tmp, opt); err != nil { // summary.json last
		return err
	}
	if err := syncTree(tmp); err != nil {
		return fmt.Errorf("results: syncing %s: %w", tmp, err)
	}
	if err := renameNoReplace(tmp, dir); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("results: %s %w", dir, ErrExists)
		}
		return fmt.Errorf("results: %w", err)
	}
	if err := syncPath(parent); err != nil {
		return fmt.Errorf("results: syncing %s: %w", parent, err)
	}
	return nil
}

// ReplaceFile writes data to path through a temporary sibling file and a
// rename, so readers see the old or the new content, never a part.
func ReplaceFile(path string, write func(f *os.File) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), PartialPrefix+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil { //nolint:gosec // a results folder users read
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// syncTree flushes every file and folder under root to disk, so that the
// rename that publishes root cannot outlive its content in a crash.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return syncPath(p)
	})
}

func syncPath(p string) error {
	f, err := os.Open(p) //nolint:gosec // a path this package wrote
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// renameIfAbsent renames oldpath to newpath after checking that newpath does
// not exist (a rename of a folder onto an empty one would replace it). Two
// writers racing between the check and the rename are not excluded: it is
// the fallback where renameat2(RENAME_NOREPLACE) is missing.
func renameIfAbsent(oldpath, newpath string) error {
	if _, err := os.Lstat(newpath); err == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrExist}
	}
	return os.Rename(oldpath, newpath)
}

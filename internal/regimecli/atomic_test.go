package regimecli

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteFilesAtomicUndo: when the rename of the second file fails, the
// first is put back as it was (a file that was there before holds its old
// bytes; one that was not is gone), and no temporary file is left.
// Not parallel: it swaps the package's rename.
func TestWriteFilesAtomicUndo(t *testing.T) {
	for _, existed := range []bool{true, false} {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.svg")
		if existed {
			require.NoError(t, os.WriteFile(a, []byte("earlier a"), 0o600))
			require.NoError(t, os.WriteFile(b, []byte("earlier b"), 0o600))
		}
		calls := 0
		rename = func(from, to string) error {
			if to == b && filepath.Dir(from) == dir && filepath.Base(from) != "b.svg" && filepath.Ext(from) != ".old" {
				calls++
				return errors.New("injected rename failure")
			}
			return os.Rename(from, to)
		}
		err := writeFilesAtomic(map[string][]byte{a: []byte("new a"), b: []byte("new b")})
		rename = os.Rename
		require.ErrorContains(t, err, "injected rename failure")
		require.Equal(t, 1, calls, "the new b's rename was tried once")
		var names []string
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		if existed {
			require.Equal(t, []string{"a.json", "b.svg"}, names, "no temporary or moved-aside file left")
			for path, want := range map[string]string{a: "earlier a", b: "earlier b"} {
				got, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, want, string(got), path)
			}
		} else {
			require.Empty(t, names, "a.json removed again, no temporary file left")
		}
	}

	// no failure: both written, the earlier files replaced
	dir := t.TempDir()
	a := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(a, []byte("earlier a"), 0o600))
	require.NoError(t, writeFilesAtomic(map[string][]byte{a: []byte("new a"), filepath.Join(dir, "b.svg"): []byte("new b")}))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 2)
	got, err := os.ReadFile(a)
	require.NoError(t, err)
	require.Equal(t, "new a", string(got))

	// a folder is refused before anything is written
	require.NoError(t, os.Mkdir(filepath.Join(dir, "pic"), 0o700))
	err = writeFilesAtomic(map[string][]byte{filepath.Join(dir, "c.json"): []byte("c"), filepath.Join(dir, "pic"): []byte("p")})
	require.ErrorContains(t, err, "pic is a folder; give a file name")
	require.NoFileExists(t, filepath.Join(dir, "c.json"))
}

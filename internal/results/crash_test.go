package results

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests below run this test binary again as a child process that saves
// results folders (env saveChildDir names the parent folder); the child
// prints "ready" before its first save and each folder's path once Save
// returned it.
const (
	saveChildDir   = "XK6_REGIME_SAVE_CHILD_DIR"
	saveChildSaves = "XK6_REGIME_SAVE_CHILD_SAVES"
	saveChildID    = "XK6_REGIME_SAVE_CHILD_RUN_ID"
	childIters     = 5_000
	childExtra     = "extra.txt"
)

// childRun is the run every child saves: same start, same testid.
func childRun() *Run {
	run := synthRun(childIters, DefaultSeriesLimit, 21)
	run.Summary.TestID = "same-testid"
	run.Summary.End = &RunEnd{Status: EndCompleted}
	return run
}

// saveChild is the child's body; it never returns.
func saveChild(dir string) {
	saves, _ := strconv.Atoi(os.Getenv(saveChildSaves))
	run := childRun()
	fmt.Println("ready")
	for range saves {
		run.Summary.RunID = os.Getenv(saveChildID) // "" draws a new run ID
		p, err := run.Save(dir, WriteOptions{Report: true}, map[string]string{childExtra: "x"})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		fmt.Println(p)
	}
	os.Exit(0)
}

// startSaver starts a child saving saves folders into dir.
func startSaver(t *testing.T, dir string, saves int, runID string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9DuringSave$", "-test.count=1") //nolint:gosec // this test binary
	cmd.Env = append(os.Environ(), saveChildDir+"="+dir, saveChildSaves+"="+strconv.Itoa(saves), saveChildID+"="+runID)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	return cmd, r
}

// folderHash is a digest of every file under dir (names and contents).
func folderHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	var names []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	}))
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		fmt.Fprintf(h, "%s %d\n", strings.TrimPrefix(n, dir), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// requireComplete checks that dir is a whole results folder of childRun.
func requireComplete(t *testing.T, dir string) {
	t.Helper()
	r, err := LoadDir(dir)
	require.NoError(t, err, dir)
	require.Equal(t, filepath.Base(dir), r.Summary.RunID)
	require.EqualValues(t, childIters, r.Summary.Series.Iterations["load"].Iterations, dir)
	require.Len(t, r.Series["load"].Points, childIters, dir)
	for _, f := range []string{ReportFile, childExtra} {
		require.FileExists(t, filepath.Join(dir, f))
	}
	html, err := os.ReadFile(filepath.Join(dir, ReportFile))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(html), "</html>\n"), "%s: report.html is whole", dir)
}

// TestKill9DuringSave kills a process with SIGKILL at random points while
// it saves results folders, 20 times into one parent folder: every folder
// with a run's name is complete and valid, folders saved before are
// untouched, and what a kill leaves behind is a hidden .partial-* folder.
func TestKill9DuringSave(t *testing.T) {
	if dir := os.Getenv(saveChildDir); dir != "" {
		saveChild(dir)
	}
	t.Parallel()
	parent := t.TempDir()

	// one save's duration here, to spread the kills over a few saves
	t0 := time.Now()
	_, err := childRun().Save(t.TempDir(), WriteOptions{Report: true}, map[string]string{childExtra: "x"})
	require.NoError(t, err)
	one := time.Since(t0)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))

	const kills = 20
	done := map[string]string{} // folder -> hash, once reported complete
	partials := 0
	for i := range kills {
		cmd, out := startSaver(t, parent, 1000, "")
		delay := time.Duration(rng.Int64N(int64(3 * one)))
		time.Sleep(delay) // the random point of the kill, not a synchronisation
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		rest, _ := io.ReadAll(out)
		_ = cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "round %d: the child was killed (%v)", i, cmd.ProcessState)
		for _, l := range strings.Split(string(rest), "\n") {
			if strings.HasPrefix(l, parent) {
				done[l] = ""
			}
		}
		entries, err := os.ReadDir(parent)
		require.NoError(t, err)
		for _, e := range entries {
			p := filepath.Join(parent, e.Name())
			if strings.HasPrefix(e.Name(), PartialPrefix) {
				partials++ // a kill mid-save: hidden, never a run's name
				require.NoError(t, os.RemoveAll(p))
				continue
			}
			h := folderHash(t, p)
			if prev := done[p]; prev != "" {
				require.Equal(t, prev, h, "round %d: %s changed after it was saved", i, p)
				continue
			}
			requireComplete(t, p) // complete or absent: a folder with a run's name is whole
			done[p] = h
		}
	}
	t.Logf("%d kills (one save takes %s here): %d folders complete, %d partial folders left by kills mid-save",
		kills, one.Round(time.Millisecond), len(done), partials)
	require.Positive(t, partials, "some kills landed mid-save")
}

// TestConcurrentSavesSameRunID: two processes save the same run (same
// start, same testid, even the same preset run ID) into one folder at the
// same time: two complete folders, neither overwritten.
func TestConcurrentSavesSameRunID(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	var outs []*bufio.Reader
	var cmds []*exec.Cmd
	for range 2 {
		cmd, out := startSaver(t, parent, 1, "20260102T030405Z-same-testid")
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	var paths []string
	for i, cmd := range cmds {
		rest, err := io.ReadAll(outs[i])
		require.NoError(t, err)
		require.NoError(t, cmd.Wait(), string(rest))
		paths = append(paths, strings.TrimSpace(string(rest)))
	}
	require.NotEqual(t, paths[0], paths[1])
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	require.Len(t, entries, 2, "two folders and nothing else")
	for _, p := range paths {
		requireComplete(t, p)
	}
	t.Logf("two concurrent saves of one run ID: %s and %s", filepath.Base(paths[0]), filepath.Base(paths[1]))
}

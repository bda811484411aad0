package pgtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// needServer skips without PostgreSQL's server binaries, and fails in CI.
func needServer(t *testing.T) {
	t.Helper()
	if BinDir() == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("PostgreSQL server binaries not found; in CI make deps installs them")
		}
		t.Skip("PostgreSQL server binaries not found (apt-get install -y postgresql)")
	}
}

// serverPID is the pid and folder of a URL's server, found by its port.
func serverPID(t *testing.T, url string) (int, string) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
	require.NoError(t, err)
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid"))
		if err != nil {
			continue
		}
		lines := strings.Split(string(b), "\n")
		if len(lines) > 3 && strings.Contains(url, ":"+strings.TrimSpace(lines[3])+"/") {
			pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
			require.NoError(t, err)
			return pid, d
		}
	}
	t.Fatalf("no cluster folder for %s", url)
	return 0, ""
}

func TestStartStop(t *testing.T) {
	needServer(t)
	url, stop, err := StartCluster()
	require.NoError(t, err)
	pid, dir := serverPID(t, url)
	require.NoError(t, syscall.Kill(pid, 0), "the server runs")
	require.NoError(t, stop())
	require.NoError(t, stop(), "a second stop is a no-op")
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the server is gone")
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "its folder is deleted")
}

// A server that died before its stop is reported, not stopped quietly.
func TestStopReportsAServerThatDied(t *testing.T) {
	needServer(t)
	url, stop, err := StartCluster()
	require.NoError(t, err)
	pid, _ := serverPID(t, url)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	err = stop()
	require.Error(t, err)
	require.Contains(t, err.Error(), "postgres had exited before it was stopped")
}

// The folder of a cluster whose server is gone (a test binary killed by its
// timeout) is deleted by the next start; a live one's is not.
func TestStaleFoldersRemoved(t *testing.T) {
	needServer(t)
	// a pid that is surely gone: a finished child's
	c := exec.Command("true")
	require.NoError(t, c.Run())
	stale, err := os.MkdirTemp("", dirPattern)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(stale) })
	require.NoError(t, os.MkdirAll(filepath.Join(stale, "data"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(stale, "data", "postmaster.pid"),
		[]byte(strconv.Itoa(c.ProcessState.Pid())+"\n/x\n1\n5432\n"), 0o600))
	young, err := os.MkdirTemp("", dirPattern) // no pid file yet: initdb at work
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(young) })
	old, err := os.MkdirTemp("", dirPattern)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(old) })
	long := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(old, long, long))

	url, stop, err := StartCluster()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, stop()) })
	_, live := serverPID(t, url)
	_, err = os.Stat(stale)
	require.ErrorIs(t, err, os.ErrNotExist, "the dead server's folder")
	_, err = os.Stat(old)
	require.ErrorIs(t, err, os.ErrNotExist, "an hour-old folder without a server")
	_, err = os.Stat(young)
	require.NoError(t, err, "a young folder without a pid file yet")
	removeStale()
	_, err = os.Stat(live)
	require.NoError(t, err, "a running cluster's folder")
}

// The demo module keeps a copy of this package (it cannot import the root
// module's test helpers); the two must not drift apart.
func TestDemoCopyIdentical(t *testing.T) {
	a, err := os.ReadFile("pgtest.go")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join("..", "..", "demo", "internal", "pgtest", "pgtest.go"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "demo/internal/pgtest/pgtest.go differs from test/pgtest/pgtest.go: copy it over")
}

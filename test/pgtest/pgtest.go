// Package pgtest starts a throw-away PostgreSQL cluster on 127.0.0.1: for the
// demo service's store tests, the scenario kit's end-to-end tests and the
// live tag-quality harness (demo service with PostgreSQL).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// postgresBinDir finds initdb and postgres: on PATH, else the newest Debian
// /usr/lib/postgresql/*/bin.
func binDir() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

// Start runs a throw-away cluster on a free 127.0.0.1 port and
// returns its URL; the cluster is stopped and deleted at cleanup. As root
// (initdb refuses root) the server runs as user postgres, or nobody. It
// skips the test when the server binaries are not installed, and fails it
// in CI (CI set), where make deps installs them.
func Start(tb testing.TB) string {
	tb.Helper()
	if BinDir() == "" {
		msg := "PostgreSQL server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql/*/bin; " +
			"install them with: apt-get install -y postgresql (make deps does)"
		if os.Getenv("CI") != "" {
			tb.Fatal(msg + "; in CI (CI is set) a missing part fails the test")
		}
		tb.Skip(msg)
	}
	url, stop, err := StartCluster()
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, stop()) })
	return url
}

// BinDir is where initdb and postgres are: on PATH, else the newest Debian
// /usr/lib/postgresql/*/bin; "" when not installed.
func BinDir() string { return binDir() }

// StartCluster runs a throw-away cluster on a free 127.0.0.1 port and returns
// its URL and a function that stops it and deletes its files. As root (initdb
// refuses root) the server runs as user postgres, or nobody.
func StartCluster() (url string, stop func() error, err error) {
	bin := binDir()
	if bin == "" {
		return "", nil, fmt.Errorf("PostgreSQL server binaries (initdb, postgres) not found on PATH or in " +
			"/usr/lib/postgresql/*/bin; install them with: apt-get install -y postgresql")
	}
	removeStale()
	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if err := os.Chmod(dir, 0o755); err != nil {
		cleanup()
		return "", nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			cleanup()
			return "", nil, fmt.Errorf("running as root needs a user postgres or nobody to run the server: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			cleanup()
			return "", nil, err
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	run := func(name string, args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
		}
		return nil
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		cleanup()
		return "", nil, err
	}
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		cleanup()
		return "", nil, err
	}
	// postgres itself, not pg_ctl (which daemonizes it): a child of this
	// process, killed with it (Pdeathsig) should a test binary die by its
	// timeout without stopping it
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		cleanup()
		return "", nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir, //nolint:gosec // the installed server
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.Stdout, cmd.Stderr = logf, logf
	// a process group of its own: a terminal's Ctrl+C goes to the test or
	// the harness, which stop it in turn
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		cleanup()
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); _ = logf.Close(); close(done) }()
	serverLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		return string(b)
	}
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			defer cleanup()
			crashed := func() error {
				return fmt.Errorf("postgres had exited before it was stopped (%v):\n%s", waitErr, serverLog())
			}
			select {
			case <-done:
				stopErr = crashed()
				return
			default:
			}
			// immediate shutdown: the cluster is thrown away
			if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
				<-done // it exited meanwhile
				stopErr = crashed()
				return
			}
			select {
			case <-done:
				// an immediate shutdown exits 0; a server that died just
				// before (a zombie takes the signal) exited otherwise
				if waitErr != nil {
					stopErr = crashed()
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				stopErr = errors.New("postgres did not stop within 10 s of SIGQUIT; killed")
			}
		})
		return stopErr
	}
	// ready when postmaster.pid's status line says so (what pg_ctl -w
	// reads), bounded by 20 s and by the server's exit
	deadline := time.Now().Add(20 * time.Second)
	for !pidFileReady(filepath.Join(data, "postmaster.pid")) {
		select {
		case <-done:
			out := serverLog() // before its folder goes
			cleanup()
			return "", nil, fmt.Errorf("postgres exited before it was ready (%v):\n%s", waitErr, out)
		case <-time.After(20 * time.Millisecond): // polling an external process's readiness, bounded by deadline
		}
		if time.Now().After(deadline) {
			out := serverLog() // before its folder goes
			_ = stop()
			return "", nil, fmt.Errorf("postgres not ready within 20 s:\n%s", out)
		}
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), stop, nil
}

// pidFileReady reports whether the server's postmaster.pid says it accepts
// connections: its 8th line is "ready" (PostgreSQL 10 and later).
func pidFileReady(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	return len(lines) >= 8 && strings.TrimSpace(lines[7]) == "ready"
}

// dirPattern names a cluster's temporary folder.
const dirPattern = "xk6-regime-pg-"

// removeStale deletes the folders of clusters whose server is gone: a test
// binary killed by its timeout runs no cleanup (its server dies with it,
// Pdeathsig), and leaves a whole cluster behind. A folder whose server
// still runs, or that is younger than an hour and has no postmaster.pid
// (initdb at work), is left alone.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid"))
		if err != nil {
			if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > time.Hour {
				_ = os.RemoveAll(d)
			}
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// Package pgtest starts a throw-away PostgreSQL cluster for tests: the demo
// service's store tests and the scenario kit's end-to-end tests.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// postgresBinDir finds initdb and pg_ctl: on PATH, else the newest Debian
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
// (initdb refuses root) the server runs as user postgres, or nobody.
func Start(tb testing.TB) string {
	tb.Helper()
	bin := binDir()
	if bin == "" {
		tb.Skip("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin; " +
			"install them with: apt-get install -y postgresql")
	}
	dir, err := os.MkdirTemp("", "xk6-regime-pg-")
	require.NoError(tb, err)
	tb.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(tb, os.Chmod(dir, 0o755))

	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		require.NoError(tb, err, "running as root needs a user postgres or nobody to run the server")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(tb, os.Chown(dir, uid, gid))
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	run := func(name string, args ...string) {
		tb.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		out, err := cmd.CombinedOutput()
		require.NoError(tb, err, "%s %v:\n%s", name, args, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(tb, ln.Close())

	data := filepath.Join(dir, "data")
	run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off", port, dir)
	run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "20", "start")
	tb.Cleanup(func() { run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop") })
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

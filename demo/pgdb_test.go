package demo

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

	"github.com/xk6-regime/xk6-regime/demo/eventspb"
)

// postgresBinDir finds initdb and pg_ctl: on PATH, else the newest Debian
// /usr/lib/postgresql/*/bin.
func postgresBinDir() string {
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

// startPostgres runs a throw-away cluster on a free 127.0.0.1 port and
// returns its URL; the cluster is stopped and deleted at cleanup. As root
// (initdb refuses root) the server runs as user postgres, or nobody.
func startPostgres(tb testing.TB) string {
	tb.Helper()
	bin := postgresBinDir()
	if bin == "" {
		tb.Skip("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin; " +
			"install them with: apt-get install -y postgresql")
	}
	dir, err := os.MkdirTemp("", "demo-pg-")
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

func TestPostgresStore(t *testing.T) {
	t.Parallel()
	url := startPostgres(t)
	ctx := t.Context()

	cfg := testConfig()
	cfg.PoolMax = 3
	db, err := openPostgres(ctx, url, cfg.PoolMax, cfg.AcquireTimeout)
	require.NoError(t, err)
	t.Cleanup(db.close)
	require.Equal(t, int64(0), db.poolStat().TotalConns, "the pool starts empty")

	again, err := openPostgres(ctx, url, 1, time.Second)
	require.NoError(t, err, "schema creation is idempotent")
	again.close()

	svc, srv := newTestServer(t, cfg, db)
	steps := []struct {
		step
		want int
	}{
		{step{"GET", "/api/challenges", ""}, 200},
		{step{"POST", "/api/players/pg1/goals/initialize", ""}, 201},
		{step{"POST", "/api/players/pg1/goals/initialize", ""}, 200},
		{step{"PUT", "/api/players/pg1/active-challenge", `{"challenge_id":"win-3-matches"}`}, 200},
		{step{"PUT", "/api/players/nobody/active-challenge", `{"challenge_id":"win-3-matches"}`}, 404},
		{step{"POST", "/api/players/pg1/rewards/claim", `{"challenge_id":"win-3-matches"}`}, 200},
		{step{"POST", "/api/players/pg1/rewards/claim", `{"challenge_id":"win-3-matches"}`}, 409},
		{step{"POST", "/api/players/nobody/rewards/claim", `{"challenge_id":"win-3-matches"}`}, 404},
	}
	for _, s := range steps {
		r := do(t, srv, s.method, s.path, s.body)
		require.Equal(t, s.want, r.code, "%s %s: %s", s.method, s.path, r.body)
	}
	list := decode[challengesResponse](t, do(t, srv, "GET", "/api/challenges", ""))
	require.Equal(t, catalogue, list.Challenges)

	// The database is authoritative: uncached reads see the writes.
	p, err := db.player(ctx, "pg1")
	require.NoError(t, err)
	require.Equal(t, "win-3-matches", p.ActiveChallengeID)
	require.Len(t, p.Goals, len(catalogue))
	g, ok := p.goal("win-3-matches")
	require.True(t, ok)
	require.True(t, g.Claimed)
	_, err = db.player(ctx, "nobody")
	require.ErrorIs(t, err, errPlayerNotFound)
	_, err = db.claimReward(ctx, "pg1", "win-3-matches")
	require.ErrorIs(t, err, errAlreadyClaimed)

	client := eventspb.NewEventIngestClient(startGRPC(t, svc))
	a1, err := client.SendStat(ctx, &eventspb.StatEvent{PlayerId: "pg1", Stat: "matches_won", Value: 1})
	require.NoError(t, err)
	a2, err := client.SendLogin(ctx, &eventspb.LoginEvent{PlayerId: "pg1", Platform: "pc"})
	require.NoError(t, err)
	require.Positive(t, a1.GetEventId())
	require.Positive(t, a2.GetEventId())

	st := db.poolStat()
	require.Equal(t, int64(3), st.MaxConns)
	require.GreaterOrEqual(t, st.NewConns, int64(1))
	require.LessOrEqual(t, st.TotalConns, int64(3))
	require.Positive(t, st.ConnSetup)
	require.Positive(t, st.Acquires)

	r := do(t, srv, "GET", "/metrics", "")
	fams := parseMetrics(t, r.body)
	require.Equal(t, 1.0, value(t, fams, "demo_database_info", map[string]string{"backend": "postgres"}))
}

func TestPostgresOverloadTimesOut(t *testing.T) {
	t.Parallel()
	url := startPostgres(t)
	db, err := openPostgres(t.Context(), url, 1, 50*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(db.close)

	held, err := db.pool.Acquire(t.Context())
	require.NoError(t, err)
	start := time.Now()
	_, err = db.challenges(t.Context())
	require.ErrorIs(t, err, errOverloaded)
	require.Less(t, time.Since(start), time.Second)
	require.Equal(t, int64(1), db.poolStat().AcquireTimeouts)
	held.Release()
	cs, err := db.challenges(t.Context())
	require.NoError(t, err)
	require.Len(t, cs, len(catalogue))
}

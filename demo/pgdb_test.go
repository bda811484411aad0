package demo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/demo/eventspb"
	"github.com/xk6-regime/xk6-regime/demo/internal/pgtest"
)

func TestPostgresStore(t *testing.T) {
	t.Parallel()
	url := pgtest.Start(t)
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
	url := pgtest.Start(t)
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

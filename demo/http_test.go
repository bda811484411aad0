package demo

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type step struct{ method, path, body string }

func TestHTTPHandlers(t *testing.T) {
	t.Parallel()
	initP1 := step{"POST", "/api/players/p1/goals/initialize", ""}
	claimWin := step{"POST", "/api/players/p1/rewards/claim", `{"challenge_id":"win-3-matches"}`}
	cases := []struct {
		name      string
		before    []step
		req       step
		wantCode  int
		wantError string // error kind of a 4xx/5xx body
		wantBody  string // substring of a success body
	}{
		{"list challenges", nil, step{"GET", "/api/challenges", ""}, 200, "", `"id":"daily-login","name":"Log in today","goal_count":1,"reward":{"kind":"coins","amount":50}`},
		{"initialize creates", nil, initP1, 201, "", `"created":true`},
		{"initialize again is idempotent", []step{initP1}, initP1, 200, "", `"created":false`},
		{"initialize bad id", nil, step{"POST", "/api/players/bad%20id/goals/initialize", ""}, 400, "invalid_player_id", ""},
		{"initialize too long id", nil, step{"POST", "/api/players/" + strings.Repeat("a", 65) + "/goals/initialize", ""}, 400, "invalid_player_id", ""},
		{"set active", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", `{"challenge_id":"score-5000"}`}, 200, "", `{"player_id":"p1","active_challenge_id":"score-5000"}`},
		{"set active unknown player", nil, step{"PUT", "/api/players/p1/active-challenge", `{"challenge_id":"score-5000"}`}, 404, "player_not_found", ""},
		{"set active unknown challenge", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", `{"challenge_id":"nope"}`}, 404, "challenge_not_found", ""},
		{"set active empty body", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", ""}, 400, "invalid_body", ""},
		{"set active missing field", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", `{}`}, 400, "invalid_body", ""},
		{"set active unknown field", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", `{"challenge_id":"score-5000","x":1}`}, 400, "invalid_body", ""},
		{"set active wrong type", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", `{"challenge_id":5}`}, 400, "invalid_body", ""},
		{"set active two objects", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", `{"challenge_id":"a"}{}`}, 400, "invalid_body", ""},
		{"set active bad challenge id", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", `{"challenge_id":"a b"}`}, 400, "invalid_body", ""},
		{"set active huge body", []step{initP1}, step{"PUT", "/api/players/p1/active-challenge", `{"challenge_id":"` + strings.Repeat("a", 5000) + `"}`}, 400, "invalid_body", ""},
		{"claim", []step{initP1}, claimWin, 200, "", `"challenge_id":"win-3-matches","reward":{"kind":"coins","amount":150}`},
		{"claim twice", []step{initP1, claimWin}, claimWin, 409, "already_claimed", ""},
		{"claim unknown player", nil, claimWin, 404, "player_not_found", ""},
		{"claim unknown challenge", []step{initP1}, step{"POST", "/api/players/p1/rewards/claim", `{"challenge_id":"nope"}`}, 404, "challenge_not_found", ""},
		{"claim not json", []step{initP1}, step{"POST", "/api/players/p1/rewards/claim", `challenge_id=win-3-matches`}, 400, "invalid_body", ""},
		{"unknown api path", nil, step{"GET", "/api/nope", ""}, 404, "not_found", ""},
		{"unknown path outside /api", nil, step{"GET", "/nope", ""}, 404, "not_found", ""},
		{"wrong method on an api path", nil, step{"POST", "/api/challenges", ""}, 405, "method_not_allowed", ""},
		{"wrong method on a player path", nil, step{"GET", "/api/players/p1/rewards/claim", ""}, 405, "method_not_allowed", ""},
		{"wrong method on healthz", nil, step{"POST", "/healthz", ""}, 405, "method_not_allowed", ""},
		{"wrong method on metrics", nil, step{"DELETE", "/metrics", ""}, 405, "method_not_allowed", ""},
		{"healthz", nil, step{"GET", "/healthz", ""}, 200, "", `"status":"ok"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			_, srv := newTestServer(t, cfg, newTestMemDB(t, cfg, noSleep))
			for _, s := range tc.before {
				r := do(t, srv, s.method, s.path, s.body)
				require.Less(t, r.code, 300, "setup %s %s: %s", s.method, s.path, r.body)
			}
			r := do(t, srv, tc.req.method, tc.req.path, tc.req.body)
			require.Equal(t, tc.wantCode, r.code, r.body)
			require.Equal(t, "application/json", r.header.Get("Content-Type"))
			if tc.wantError != "" {
				e := decode[errorBody](t, r)
				require.Equal(t, tc.wantError, e.Error)
				require.NotEmpty(t, e.Message)
			}
			if tc.wantCode == http.StatusMethodNotAllowed {
				require.NotEmpty(t, r.header.Get("Allow"))
				require.NotContains(t, r.header.Get("Allow"), tc.req.method)
			}
			require.Contains(t, r.body, tc.wantBody)
		})
	}
}

func TestHTTPClaimUpdatesGoals(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.CacheTTL = 0 // every read goes to the database
	_, srv := newTestServer(t, cfg, newTestMemDB(t, cfg, noSleep))
	require.Equal(t, 201, do(t, srv, "POST", "/api/players/p9/goals/initialize", "").code)
	require.Equal(t, 200, do(t, srv, "POST", "/api/players/p9/rewards/claim", `{"challenge_id":"daily-login"}`).code)
	require.Equal(t, 200, do(t, srv, "PUT", "/api/players/p9/active-challenge", `{"challenge_id":"weekly-streak"}`).code)
	p := decode[playerResponse](t, do(t, srv, "POST", "/api/players/p9/goals/initialize", ""))
	require.Equal(t, "weekly-streak", p.ActiveChallengeID)
	require.Len(t, p.Goals, len(catalogue))
	for _, g := range p.Goals {
		require.Equal(t, g.ChallengeID == "daily-login", g.Claimed, g.ChallengeID)
	}
	require.Equal(t, 409, do(t, srv, "POST", "/api/players/p9/rewards/claim", `{"challenge_id":"daily-login"}`).code)
}

// Two requests racing to claim the same reward: exactly one wins.
func TestHTTPConcurrentClaimsOneWins(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	_, srv := newTestServer(t, cfg, newTestMemDB(t, cfg, noSleep))
	require.Equal(t, 201, do(t, srv, "POST", "/api/players/p1/goals/initialize", "").code)
	codes := make(chan int, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			codes <- do(t, srv, "POST", "/api/players/p1/rewards/claim", `{"challenge_id":"score-5000"}`).code
		})
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	require.Equal(t, map[int]int{200: 1, 409: 7}, n)
}

// With the only connection taken, requests answer 503 + Retry-After after
// the acquire timeout, not later, and count as timeouts.
func TestHTTPOverloadAnswers503Quickly(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.PoolMax = 1
	cfg.AcquireTimeout = 30 * time.Millisecond
	db := newTestMemDB(t, cfg, noSleep)
	svc, srv := newTestServer(t, cfg, db)

	held, err := db.pool.Acquire(t.Context())
	require.NoError(t, err)
	for _, s := range []step{
		{"GET", "/api/challenges", ""},
		{"POST", "/api/players/p1/goals/initialize", ""},
	} {
		start := time.Now()
		r := do(t, srv, s.method, s.path, s.body)
		took := time.Since(start)
		require.Equal(t, http.StatusServiceUnavailable, r.code, r.body)
		require.Equal(t, "1", r.header.Get("Retry-After"))
		require.Equal(t, "overloaded", decode[errorBody](t, r).Error)
		require.GreaterOrEqual(t, took, cfg.AcquireTimeout)
		require.Less(t, took, cfg.AcquireTimeout+time.Second)
	}
	held.Release()
	require.Equal(t, 200, do(t, srv, "GET", "/api/challenges", "").code, "recovers once a connection is free")
	st := svc.db.poolStat()
	require.Equal(t, int64(2), st.AcquireTimeouts)
}

// The first request pays the connection setup; warm requests reuse the
// connection and the caches.
func TestColdStartThenWarm(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.ConnSetup = 40 * time.Millisecond
	cfg.QueryTime = 0
	cfg.RowTime = 0
	var setups, queries int
	var mu sync.Mutex
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		if d == cfg.ConnSetup {
			setups++
		} else {
			queries++
		}
		return ctx.Err()
	}
	svc, srv := newTestServer(t, cfg, newTestMemDB(t, cfg, sleep))
	require.Equal(t, int64(0), svc.db.poolStat().TotalConns, "pool starts empty")
	for range 5 {
		require.Equal(t, 200, do(t, srv, "GET", "/api/challenges", "").code)
	}
	mu.Lock()
	require.Equal(t, 1, setups, "one connection opened")
	require.Equal(t, 1, queries, "catalogue queried once, then cached")
	mu.Unlock()
	cs := svc.store.cacheStats()["challenges"]
	require.Equal(t, cacheStat{Hits: 4, Misses: 1, Entries: 1}, cs)
}

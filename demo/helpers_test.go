package demo

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// noSleep makes simulated setups and queries instant: tests of behaviour
// need no real latency.
func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func testConfig() Config {
	c := DefaultConfig()
	c.HTTPAddr, c.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	c.PoolMax = 4
	c.AcquireTimeout = 2 * time.Second
	return c
}

func newTestMemDB(tb testing.TB, cfg Config, sleep func(context.Context, time.Duration) error) *memDB {
	tb.Helper()
	db, err := newMemDB(memDBConfig{
		MaxConns:       cfg.PoolMax,
		ConnSetup:      cfg.ConnSetup,
		QueryTime:      cfg.QueryTime,
		RowTime:        cfg.RowTime,
		AcquireTimeout: cfg.AcquireTimeout,
		Sleep:          sleep,
	})
	require.NoError(tb, err)
	tb.Cleanup(db.close)
	return db
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestServer serves a service over db on an httptest server.
func newTestServer(tb testing.TB, cfg Config, db database) (*service, *httptest.Server) {
	tb.Helper()
	svc := newService(cfg, db, discardLogger())
	srv := httptest.NewServer(svc.api.handler())
	tb.Cleanup(srv.Close)
	return svc, srv
}

type response struct {
	code   int
	header http.Header
	body   string
}

func do(tb testing.TB, srv *httptest.Server, method, path, body string) response {
	tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(tb.Context(), method, srv.URL+path, rd)
	require.NoError(tb, err)
	res, err := srv.Client().Do(req)
	require.NoError(tb, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(tb, err)
	return response{code: res.StatusCode, header: res.Header, body: string(b)}
}

func decode[T any](tb testing.TB, r response) T {
	tb.Helper()
	var v T
	require.NoError(tb, json.Unmarshal([]byte(r.body), &v), "body: %s", r.body)
	return v
}

package demo

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, c Config)
		wantErr []string
	}{
		{name: "defaults", check: func(t *testing.T, c Config) { require.Equal(t, DefaultConfig(), c) }},
		{
			name: "env then flags",
			env:  map[string]string{"DEMO_POOL_MAX": "7", "DEMO_CONN_SETUP": "5ms", "DATABASE_URL": "postgres://x"},
			args: []string{"-pool-max", "9", "-acquire-timeout", "250ms"},
			check: func(t *testing.T, c Config) {
				require.Equal(t, 9, c.PoolMax)
				require.Equal(t, 5*time.Millisecond, c.ConnSetup)
				require.Equal(t, 250*time.Millisecond, c.AcquireTimeout)
				require.Equal(t, "postgres://x", c.DatabaseURL)
			},
		},
		{name: "ipv6 loopback and localhost", args: []string{"-http-addr", "[::1]:8080", "-grpc-addr", "localhost:9090"}},
		{name: "remote allowed", args: []string{"-http-addr", "0.0.0.0:8080", "-allow-remote"}},
		{
			name:    "remote refused",
			args:    []string{"-http-addr", "0.0.0.0:8080", "-grpc-addr", ":9090"},
			wantErr: []string{`-http-addr "0.0.0.0:8080": 0.0.0.0 is not a loopback address`, `-grpc-addr ":9090": all interfaces is not a loopback`, "-allow-remote"},
		},
		{
			name:    "every bad value reported",
			args:    []string{"-pool-max", "0", "-acquire-timeout", "0s", "-conn-setup", "-1s", "-cache-ttl", "48h", "-http-addr", "nope"},
			wantErr: []string{"-pool-max 0: want 1 to 1000", "-acquire-timeout 0s: want 1ms to 30s", "-conn-setup -1s: want 0s to 10s", "-cache-ttl 48h0m0s: want 0s to 24h0m0s", `-http-addr "nope": want host:port`},
		},
		{name: "bad env", env: map[string]string{"DEMO_POOL_MAX": "many"}, wantErr: []string{`environment DEMO_POOL_MAX="many": want an integer`}},
		{name: "same port", args: []string{"-http-addr", "127.0.0.1:8000", "-grpc-addr", "127.0.0.1:8000"}, wantErr: []string{"need different ports"}},
		{name: "stray argument", args: []string{"serve"}, wantErr: []string{"unexpected arguments"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := LoadConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
			}
			for _, w := range tc.wantErr {
				require.ErrorContains(t, err, w)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
	_, err := LoadConfig([]string{"-h"}, func(string) string { return "" }, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
}

// Run serves, and a canceled context shuts it down cleanly.
func TestRunServesAndShutsDown(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.ConnSetup = time.Millisecond
	db := newTestMemDB(t, cfg, nil)
	svc := newService(cfg, db, discardLogger())
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	grpcLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.serve(ctx, httpLn, grpcLn) }()

	res, err := http.Get("http://" + httpLn.Addr().String() + "/api/challenges")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after cancel")
	}
	_, err = db.pool.Acquire(t.Context())
	require.Error(t, err, "the pool is closed on shutdown")
}

// TestHelpHidesThePassword: -h printed DATABASE_URL, password included, as
// the flag's default.
func TestHelpHidesThePassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"postgres://app:s3cret@127.0.0.1:5432/demo", "postgres://app:xxxxx@127.0.0.1:5432/demo"},
		{"host=127.0.0.1 user=app password=s3cret dbname=demo", "password=xxxxx dbname=demo"},
		{"host=127.0.0.1 password='s3 cret' dbname=demo", "password=xxxxx dbname=demo"},
	} {
		var usage strings.Builder
		_, err := LoadConfig([]string{"-h"}, func(k string) string {
			if k == "DATABASE_URL" {
				return tc.url
			}
			return ""
		}, &usage)
		require.ErrorIs(t, err, flag.ErrHelp)
		require.NotContains(t, usage.String(), "s3", tc.url)
		require.Contains(t, usage.String(), tc.want)
	}
	c, err := LoadConfig([]string{"-database-url", "postgres://a:b@127.0.0.1/x"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "postgres://a:b@127.0.0.1/x", c.DatabaseURL, "the flag still sets the real value")
}

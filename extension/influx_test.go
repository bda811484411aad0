package extension

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"github.com/xk6-regime/xk6-regime/detector"
	"go.k6.io/k6/v2/output"
)

var influxTestNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestInfluxConfigPrecedence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		json    string
		env     map[string]string
		arg     string
		tags    map[string]string
		check   func(t *testing.T, c influxConfig)
		wantErr []string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c influxConfig) {
				require.Equal(t, "http://127.0.0.1:8086", c.URL)
				require.True(t, c.V1)
				require.Equal(t, "k6", c.Bucket)
				require.Empty(t, c.Token)
				require.Equal(t, time.Second, c.FlushInterval)
				require.Equal(t, 1000, c.BatchSize)
				require.Equal(t, 10000, c.BufferLimit)
				require.Equal(t, 5*time.Second, c.Timeout)
				require.Equal(t, 3, c.MaxRetries)
				require.Equal(t, 10*time.Second, c.StopTimeout)
				require.Equal(t, "k6-20260301T120000Z", c.TestID)
				require.True(t, c.TestIDAuto)
			},
		},
		{
			// found by FuzzInfluxConfig: the JSON config's URL is checked
			// as the environment's is
			name:    "JSON URL checked",
			json:    `{"url": "@", "database": "db"}`,
			wantErr: []string{`JSON config key "url": URL scheme must be http or https, got ""`, `JSON config key "url": URL has no host`},
		},
		{
			name:    "JSON URL not a string",
			json:    `{"url": 8086}`,
			wantErr: []string{`JSON config key "url": must be a URL string`},
		},
		{
			name: "JSON URL with credentials",
			json: `{"url": "http://bob:pw@127.0.0.1:8086"}`,
			check: func(t *testing.T, c influxConfig) {
				require.Equal(t, "http://127.0.0.1:8086", c.URL)
				require.Equal(t, "bob:pw", c.Token, "user info becomes the 1.8 token")
			},
		},
		{
			name: "json < env < argument",
			json: `{"batchSize": 10, "flushInterval": 250, "timeout": "2s", "testid": "from-json", "database": "jsondb"}`,
			env:  map[string]string{"K6_REGIME_INFLUXDB_BATCH_SIZE": "20", "K6_REGIME_INFLUXDB_TESTID": "from-env", "PATH": "/bin"},
			arg:  "http://influx.local:9999/argdb?retentionPolicy=week&testid=from-arg",
			check: func(t *testing.T, c influxConfig) {
				require.Equal(t, 20, c.BatchSize)
				require.Equal(t, 250*time.Millisecond, c.FlushInterval, "a bare JSON number is milliseconds")
				require.Equal(t, 2*time.Second, c.Timeout)
				require.Equal(t, "from-arg", c.TestID)
				require.Equal(t, "http://influx.local:9999", c.URL)
				require.Equal(t, "argdb/week", c.Bucket)
			},
		},
		{
			name: "v1 credentials from the URL",
			arg:  "https://alice:pa55@127.0.0.1:8086/k6",
			check: func(t *testing.T, c influxConfig) {
				require.Equal(t, "https://127.0.0.1:8086", c.URL)
				require.Equal(t, "alice:pa55", c.Token)
				require.Equal(t, "k6", c.Bucket)
			},
		},
		{
			name: "v2 from the environment",
			env: map[string]string{
				"K6_REGIME_INFLUXDB_URL": "http://127.0.0.1:8086", "K6_REGIME_INFLUXDB_ORG": "acme",
				"K6_REGIME_INFLUXDB_BUCKET": "perf", "K6_REGIME_INFLUXDB_TOKEN": "tok",
			},
			check: func(t *testing.T, c influxConfig) {
				require.False(t, c.V1)
				require.Equal(t, "acme", c.Org)
				require.Equal(t, "perf", c.Bucket)
				require.Equal(t, "tok", c.Token)
			},
		},
		{
			name: "testid from --tag",
			tags: map[string]string{"testid": "run42"},
			check: func(t *testing.T, c influxConfig) {
				require.Equal(t, "run42", c.TestID)
				require.False(t, c.TestIDAuto)
			},
		},
		{
			name:    "every bad value at once",
			env:     map[string]string{"K6_REGIME_INFLUXDB_BATCH_SIZE": "lots", "K6_REGIME_INFLUXDB_TIMEOUT": "soon"},
			arg:     "http://127.0.0.1:8086/k6?maxRetries=-1&flushInterval=0s",
			wantErr: []string{"batchSize=\"lots\" (from K6_REGIME_INFLUXDB_BATCH_SIZE): must be an integer from 1 to 100000", "timeout=\"soon\"", "maxRetries=\"-1\"", "flushInterval=\"0s\""},
		},
		{
			name:    "unknown environment variable",
			env:     map[string]string{"K6_REGIME_INFLUXDB_BATCHSIZE": "10"},
			wantErr: []string{"unknown environment variable K6_REGIME_INFLUXDB_BATCHSIZE", "K6_REGIME_INFLUXDB_BATCH_SIZE"},
		},
		{
			name:    "unknown query parameter and JSON key",
			json:    `{"bacthSize": 1}`,
			arg:     "http://127.0.0.1:8086/k6?db=k6",
			wantErr: []string{`query parameter "db": unknown setting`, `JSON config key "bacthSize": unknown setting`},
		},
		{
			name:    "bad scheme",
			arg:     "udp://127.0.0.1:8089",
			wantErr: []string{`URL scheme must be http or https, got "udp"`},
		},
		{
			name:    "bucket needs org, and no database",
			env:     map[string]string{"K6_REGIME_INFLUXDB_BUCKET": "perf", "K6_REGIME_INFLUXDB_DATABASE": "k6"},
			wantErr: []string{"org is required", "set either bucket and org (InfluxDB 2.x) or database (InfluxDB 1.8)"},
		},
		{
			name:    "token and username",
			arg:     "http://bob:pw@127.0.0.1:8086/k6?token=abc",
			wantErr: []string{"token=[redacted]", "set either token or username/password"},
		},
		{
			name:    "batch larger than buffer",
			arg:     "http://127.0.0.1:8086/k6?batchSize=100&bufferLimit=10",
			wantErr: []string{"batchSize=\"100\"", "must not exceed bufferLimit (10)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var raw json.RawMessage
			if tc.json != "" {
				raw = json.RawMessage(tc.json)
			}
			c, err := parseInfluxConfig(raw, tc.env, tc.arg, tc.tags, influxTestNow)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				require.Contains(t, err.Error(), "xk6-regime-influxdb: invalid configuration")
				for _, w := range tc.wantErr {
					require.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

// TestInfluxConfigErrorsRedactSecrets: no configuration error quotes a
// token or password, even when the URL holding it does not parse.
func TestInfluxConfigErrorsRedactSecrets(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-T0KEN"
	cases := map[string]struct {
		env map[string]string
		arg string
	}{
		"unparsable URL with password": {arg: "http://bob:" + secret + "@127.0.0.1:port/k6"},
		"control character in URL":     {arg: "http://bob:" + secret + "@127.0.0.1:8086/k6\x7f"},
		"token in query, other error":  {arg: "http://127.0.0.1:8086/k6?token=" + secret + "&batchSize=x&username=u"},
		"token env with bad URL env": {env: map[string]string{
			"K6_REGIME_INFLUXDB_TOKEN": secret, "K6_REGIME_INFLUXDB_URL": "http://u:" + secret + "@h:x",
		}},
		"password without user": {env: map[string]string{"K6_REGIME_INFLUXDB_PASSWORD": secret}},
		// found by FuzzInfluxConfig: url.Parse quotes what it takes for a port
		"password where the port goes": {arg: "http://:" + secret},
		"password where the host goes": {arg: "http://bob:" + secret + "%zz@127.0.0.1/k6"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := parseInfluxConfig(nil, tc.env, tc.arg, nil, influxTestNow)
			require.Error(t, err)
			require.NotContains(t, err.Error(), secret)
		})
	}
}

func TestIsPowerOf10(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]bool{1: true, 2: false, 10: true, 11: false, 100: true, 110: false, 1000: true, 0: false} {
		require.Equal(t, want, isPowerOf10(n), n)
	}
}

// fakeInflux records the line protocol written to /api/v2/write.
type fakeInflux struct {
	*httptest.Server
	mu     sync.Mutex
	lines  []string
	auth   []string
	params []string
	status int // answer for writes; 0 = 204
}

func newFakeInflux(tb testing.TB, status int) *fakeInflux {
	tb.Helper()
	f := &fakeInflux{status: status}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.params = append(f.params, r.URL.RawQuery)
		if f.status == 0 {
			sc := bufio.NewScanner(strings.NewReader(string(body)))
			for sc.Scan() {
				f.lines = append(f.lines, sc.Text())
			}
		}
		f.mu.Unlock()
		if f.status != 0 {
			// echo the credentials back, as a careless proxy might
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.status)
			_ = json.NewEncoder(w).Encode(map[string]string{
				"code": "unauthorized", "message": "bad credentials " + r.Header.Get("Authorization"),
			})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(f.Close)
	return f
}

func (f *fakeInflux) written(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func newTestInfluxOutput(t *testing.T, rs *RunState, arg string, env map[string]string) (*influxOutput, *logtest.Hook) {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	o, err := newInfluxOutput(output.Params{
		ConfigArgument: arg, Environment: env, Logger: logger,
	}, rs)
	require.NoError(t, err)
	return o, hook
}

// TestInfluxOutputWrites drives the real detection path of a run state and
// checks the points a fake InfluxDB receives: transitions, windows, the
// summary and the output's own counts, with the testid tag and the 1.8
// credentials.
func TestInfluxOutputWrites(t *testing.T) {
	t.Parallel()
	srv := newFakeInflux(t, 0)
	rs, reg := newTestRunState(t)
	o, hook := newTestInfluxOutput(t, rs, srv.URL+"/k6?testid=unit&flushInterval=50ms", map[string]string{
		"K6_REGIME_INFLUXDB_USERNAME": "k6", "K6_REGIME_INFLUXDB_PASSWORD": "pw",
	})
	require.NoError(t, o.Start())
	feedColdSteady(rs, reg, 3000)
	require.NoError(t, o.Stop())

	tr := srv.written("regime_transition,")
	require.NotEmpty(t, tr, "no transition written")
	require.Contains(t, tr[0], "scenario=load")
	require.Contains(t, tr[0], "testid=unit")
	require.Contains(t, tr[0], "from=cold")
	require.Contains(t, tr[0], "kind=cold_end")
	require.Contains(t, tr[0], "elapsed_ms=")
	require.Contains(t, strings.Join(tr, "\n"), "to=steady")

	win := srv.written("regime_window,")
	require.NotEmpty(t, win)
	for _, l := range win {
		require.Contains(t, l, "regime=")
		require.Contains(t, l, "median=")
		require.Contains(t, l, "stable=")
		require.NotContains(t, l, "NaN")
	}

	sum := srv.written("regime_summary,")
	require.Len(t, sum, 3, "one point per regime of the one scenario")
	joined := strings.Join(sum, "\n")
	for _, want := range []string{"regime=cold", "regime=warmup", "regime=steady", "ttss_ms=", "cold_start_ms=", "p99_9=", "dropped_points=0i"} {
		require.Contains(t, joined, want)
	}
	out := srv.written("regime_output,")
	require.Len(t, out, 1)
	require.Contains(t, out[0], "points_dropped=0i")

	srv.mu.Lock()
	require.Equal(t, "Token k6:pw", srv.auth[0])
	require.Contains(t, srv.params[0], "bucket=k6")
	srv.mu.Unlock()
	total, _, _ := o.dropped()
	require.Zero(t, total)
	require.Equal(t, o.handed.Load(), o.delivered.Load())
	for _, e := range hook.AllEntries() {
		require.Greater(t, e.Level, logrus.WarnLevel, "unexpected %s: %s", e.Level, e.Message)
		require.NotContains(t, e.Message, "pw")
	}
}

// TestInfluxOutputNeverBlocks: with InfluxDB hanging, observer calls
// return at once, what does not fit the buffer is dropped and counted, Stop
// returns after stopTimeout and reports the drops.
func TestInfluxOutputNeverBlocks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		<-release // a server that never answers while the test runs
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	rs, _ := newTestRunState(t)
	o, hook := newTestInfluxOutput(t, rs, srv.URL+"/k6?bufferLimit=100&batchSize=10&flushInterval=10ms&timeout=30s&stopTimeout=300ms", nil)
	require.NoError(t, o.Start())

	const n = 100_000
	w := detector.Window{N: 100, Median: 5, Tail: 7, Drift: math.NaN(), Regime: detector.Warmup}
	begin := time.Now()
	for i := range n {
		w.Seq, w.Last.Time = i, int64(i)
		rs.eachObserver(func(ob Observer) { ob.Window("load", "", w) })
	}
	perCall := time.Since(begin) / n
	require.Less(t, perCall, 50*time.Microsecond, "observer calls must not wait for InfluxDB")

	stopBegin := time.Now()
	require.NoError(t, o.Stop())
	require.Less(t, time.Since(stopBegin), 3*time.Second)

	total, buffer, _ := o.dropped()
	require.Greater(t, buffer, int64(n-200), "the bounded buffer must drop")
	require.GreaterOrEqual(t, total, buffer)
	var warned bool
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "dropped") {
			warned = true
			require.Contains(t, e.Message, fmt.Sprintf("dropped %d points", total))
			require.Contains(t, e.Message, "gave up waiting after stopTimeout 300ms")
		}
	}
	require.True(t, warned, "no drop report in %v", hook.AllEntries())
	// a late callback is counted, not written
	rs.eachObserver(func(ob Observer) { ob.Window("load", "", w) })
	o.Window("load", "", w)
	require.Equal(t, int64(1), o.droppedLate.Load())
}

// TestInfluxOutputRedactsToken: a server that echoes the credentials in its
// error answers: neither the failure warnings nor the final report show the
// token.
func TestInfluxOutputRedactsToken(t *testing.T) {
	t.Parallel()
	const token = "tok-VERY-secret-42"
	srv := newFakeInflux(t, http.StatusUnauthorized)
	rs, reg := newTestRunState(t)
	o, hook := newTestInfluxOutput(t, rs, srv.URL+"?flushInterval=20ms&maxRetries=0&bucket=perf&org=acme", map[string]string{
		"K6_REGIME_INFLUXDB_TOKEN": token,
	})
	require.NoError(t, o.Start())
	feedColdSteady(rs, reg, 1500)
	require.NoError(t, o.Stop())

	srv.mu.Lock()
	require.NotEmpty(t, srv.auth)
	require.Equal(t, "Token "+token, srv.auth[0], "the server did get the token")
	srv.mu.Unlock()

	require.Positive(t, o.writeErrors.Load())
	var sawError, sawReport bool
	for _, e := range hook.AllEntries() {
		s, err := e.String()
		require.NoError(t, err)
		require.NotContains(t, s, token, "token leaked in a log line")
		if strings.Contains(e.Message, "write to") && strings.Contains(e.Message, "failed") {
			sawError = true
			require.Contains(t, e.Message, "[redacted]")
		}
		if strings.Contains(e.Message, "not acknowledged by InfluxDB") {
			sawReport = true
		}
	}
	require.True(t, sawError, "no write failure logged")
	require.True(t, sawReport, "no drop report")
	total, _, unacked := o.dropped()
	require.Equal(t, o.handed.Load(), unacked, "nothing was acknowledged")
	require.Equal(t, total, unacked)
}

package engine_test

// The InfluxDB output (internal/influxdb) fed by the real engine: a run
// state's detection path, and what a fake InfluxDB server receives. These
// are external tests because internal/influxdb imports this package
// (export_test.go hands them the run state).

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/output"

	"github.com/xk6-regime/xk6-regime/internal/engine"
	"github.com/xk6-regime/xk6-regime/internal/influxdb"
)

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

// newTestInfluxOutput is the output observing rs, with settings from arg
// and env, logging to a test hook at debug level.
func newTestInfluxOutput(t *testing.T, rs *engine.RunState, arg string, env map[string]string) (*influxdb.Output, *logtest.Hook) {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	o, err := influxdb.New(output.Params{ConfigArgument: arg, Environment: env, Logger: logger}, rs)
	require.NoError(t, err)
	return o.(*influxdb.Output), hook
}

// TestInfluxOutputWrites drives the real detection path of a run state and
// checks the points a fake InfluxDB receives: transitions, windows, the
// summary and the output's own counts, with the testid tag and the 1.8
// credentials.
func TestInfluxOutputWrites(t *testing.T) {
	t.Parallel()
	srv := newFakeInflux(t, 0)
	rs, reg := engine.NewTestRunState(t)
	o, hook := newTestInfluxOutput(t, rs, srv.URL+"/k6?testid=unit&flushInterval=50ms", map[string]string{
		"K6_REGIME_INFLUXDB_USERNAME": "k6", "K6_REGIME_INFLUXDB_PASSWORD": "pw",
	})
	require.NoError(t, o.Start())
	engine.FeedColdSteady(rs, reg, 3000)
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
	c := o.Counts()
	require.Zero(t, c.Dropped)
	require.Equal(t, c.Handed, c.Written)
	for _, e := range hook.AllEntries() {
		require.Greater(t, e.Level, logrus.WarnLevel, "unexpected %s: %s", e.Level, e.Message)
		require.NotContains(t, e.Message, "pw")
	}
}

// TestInfluxOutputFinishesAtExit: k6 stops its outputs before
// handleSummary; with k6's Exit event to come, Stop returns at once (a
// hanging InfluxDB delays no results folder: a SIGTERM and a SIGKILL 10 s
// later lost it), and the summary points are written at Exit, with every
// iteration ingested after Stop counted and how the run ended.
func TestInfluxOutputFinishesAtExit(t *testing.T) {
	t.Parallel()
	srv := newFakeInflux(t, 0)
	rs, reg := engine.NewTestRunState(t)
	engine.HookExit(rs)
	o, _ := newTestInfluxOutput(t, rs, srv.URL+"/k6?testid=unit&flushInterval=50ms", nil)
	require.NoError(t, o.Start())
	engine.FeedColdSteady(rs, reg, 1500)
	require.NoError(t, o.Stop())
	require.Empty(t, srv.written("regime_summary,"), "no summary points before Exit")
	// k6's metrics engine takes the last samples after the output's Stop
	engine.FeedColdSteady(rs, reg, 1500)
	engine.Exit(rs, nil)
	sum := srv.written("regime_summary,")
	require.Len(t, sum, 3)
	require.Contains(t, sum[0], "iterations=3000i", "every iteration, those after Stop too")
	require.Contains(t, sum[0], `end_status="completed"`)
	out := srv.written("regime_output,")
	require.Len(t, out, 1)
	require.False(t, rs.AtExit(func() {}), "no function is taken after Exit")
}

// TestInfluxOutputRedactsToken: a server that echoes the credentials in its
// error answers: neither the failure warnings nor the final report show the
// token.
func TestInfluxOutputRedactsToken(t *testing.T) {
	t.Parallel()
	const token = "tok-VERY-secret-42"
	srv := newFakeInflux(t, http.StatusUnauthorized)
	rs, reg := engine.NewTestRunState(t)
	o, hook := newTestInfluxOutput(t, rs, srv.URL+"?flushInterval=20ms&maxRetries=0&bucket=perf&org=acme", map[string]string{
		"K6_REGIME_INFLUXDB_TOKEN": token,
	})
	require.NoError(t, o.Start())
	engine.FeedColdSteady(rs, reg, 1500)
	require.NoError(t, o.Stop())

	srv.mu.Lock()
	require.NotEmpty(t, srv.auth)
	require.Equal(t, "Token "+token, srv.auth[0], "the server did get the token")
	srv.mu.Unlock()

	c := o.Counts()
	require.Positive(t, c.WriteErrors)
	var sawError, sawReport bool
	for _, e := range hook.AllEntries() {
		s, err := e.String()
		require.NoError(t, err)
		require.NotContains(t, s, token, "token leaked in a log line")
		if strings.Contains(e.Message, "write to") && strings.Contains(e.Message, "failed") {
			sawError = true
			require.Contains(t, e.Message, "[redacted]")
			require.Contains(t, e.Message, "InfluxDB refused the credentials", "a 401 names the credentials")
		}
		if strings.Contains(e.Message, "not acknowledged by InfluxDB") {
			sawReport = true
		}
	}
	require.True(t, sawError, "no write failure logged")
	require.True(t, sawReport, "no drop report")
	require.Equal(t, c.Handed, c.Unacknowledged, "nothing was acknowledged")
	require.Equal(t, c.Dropped, c.Unacknowledged)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// settledScript judges the same budget twice: on the settled view (the
// thresholds helper's settled()) and on all samples.
const settledScript = `
import http from 'k6/http';
import regime from 'k6/x/regime';
import { settled } from '${REPO}/thresholds/index.js';

export const options = {
  scenarios: {
    load: { executor: 'constant-arrival-rate', rate: 100, timeUnit: '1s', duration: '30s', preAllocatedVUs: 20, maxVUs: 100 },
  },
};
const budgets = { 'http_req_duration{endpoint:item}': ['p(95)<50'], 'http_req_failed': ['rate<0.01'] };
options.thresholds = Object.assign(
  settled(budgets, { scenarios: options.scenarios, scenarioNames: ['load'], ttss: 15000 }),
  { 'http_req_duration{endpoint:item}': ['p(95)<50'] },
  // so that handleSummary sees the scenario's gauges (the test compares
  // them with summary())
  Object.fromEntries(['p50', 'p90', 'p95', 'p99', 'max'].map((q) => ['regime_settled_' + q + '{scenario:load}', ['value>0']])),
);
regime.configure(options, { scope: 'endpoint', input: 'request' });

export default function () {
  http.get(__ENV.BASE_URL + '/item', { tags: { endpoint: 'item' } });
}

export function handleSummary(data) {
  const verdicts = {};
  for (const [name, m] of Object.entries(data.metrics)) {
    for (const [expr, t] of Object.entries(m.thresholds || {})) verdicts[name + ' ' + expr] = t.ok;
  }
  // the settled gauges' values, as k6 judged them
  const gauges = Object.fromEntries(Object.entries(data.metrics)
    .filter(([name]) => name.startsWith('regime_settled_')).map(([name, m]) => [name, m.values]));
  return {
    'verdicts.json': JSON.stringify(verdicts),
    'regime.json': JSON.stringify(regime.summary()),
    'gauges.json': JSON.stringify(gauges),
  };
}
`

// clockServer answers /item after a latency that depends on the time since
// its first request: warmFor at slow, then ~fast (10% jitter); with drift
// set, the latency grows by drift per request instead, for good.
func clockServer(tb testing.TB, warmFor, slow, fast, drift time.Duration) *httptest.Server {
	tb.Helper()
	srv, _ := clockServerN(tb, warmFor, slow, fast, drift)
	return srv
}

// clockServerN is clockServer with the count of the requests it has served.
func clockServerN(tb testing.TB, warmFor, slow, fast, drift time.Duration) (*httptest.Server, *atomic.Int64) {
	tb.Helper()
	served := &atomic.Int64{}
	var mu sync.Mutex
	var t0 time.Time
	var n int64
	rng := rand.New(rand.NewPCG(3, 4))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		if t0.IsZero() {
			t0 = time.Now()
		}
		n++
		d := fast
		switch {
		case drift > 0:
			d = fast + time.Duration(n)*drift
		case time.Since(t0) < warmFor:
			d = slow
		}
		d += time.Duration(rng.Float64() * 0.1 * float64(d))
		mu.Unlock()
		time.Sleep(d) // the simulated service time itself
		_, _ = fmt.Fprint(w, "ok")
		served.Add(1)
	}))
	tb.Cleanup(srv.Close)
	return srv, served
}

func readVerdicts(t *testing.T, dir string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "verdicts.json"))
	require.NoError(t, err)
	v := map[string]bool{}
	require.NoError(t, json.Unmarshal(b, &v))
	return v
}

// TestSettledThresholds: a server that warms up for 10 s (100 ms) and then
// holds (~5 ms) for the rest of a 30-s run. The settled thresholds pass
// (steady from ~10 s, p95 near 5 ms, TTSS under 15 s) while the same budget
// (p95 < 50 ms) on all samples fails (a third of the requests took 100 ms),
// so k6 exits 99 on the latter alone. (The run was 24 s until 2026-11-28,
// when in a CI mimic the level after the step moved once under the
// parallel tests and the settled view's last level held 46% of the run,
// 50% needed. The warm-up took 40 ms and the budget was 20 ms until the
// same day, when in a CI run the machine's slow spell put the settled
// p95 of the 5-ms requests at 20.7 ms and their p99 at 32.8 ms, the
// settled boundary right at 10.0 s: the budget must lie between the two
// levels with room for the machine's own delay.)
func TestSettledThresholds(t *testing.T) {
	t.Parallel() // with the other parallel tests of the package: a sleeping server each
	srv := clockServer(t, 10*time.Second, 100*time.Millisecond, 5*time.Millisecond, 0)
	script := strings.ReplaceAll(settledScript, "${REPO}", repoRoot(t))
	res := runK6(t, script, map[string]string{"BASE_URL": srv.URL})
	require.Equal(t, 99, res.ExitCode, "stderr:\n%s", res.Stderr)
	v := readVerdicts(t, res.Dir)
	require.False(t, v["http_req_duration{endpoint:item} p(95)<50"], "all samples: %v", v)
	for _, k := range []string{
		"regime_settled_p95{endpoint:item,scenario:load} value<50",
		"regime_settled_error_rate{scenario:load} value<0.01",
		"regime_settled_ttss{scenario:load} value<15000",
		"regime_settled{scenario:load} rate==1",
		"regime_settled_count{scenario:load} count>0",
		"regime_settled_count{endpoint:item,scenario:load} count>0",
	} {
		ok, found := v[k]
		require.True(t, found, "threshold %q not judged; verdicts: %v", k, v)
		require.True(t, ok, "threshold %q failed; stderr:\n%s", k, res.Stderr)
	}
	// the step is at 10 s; the tails of the first 2 s after it can stay
	// above the rest of the run's (blocks of 13.9 and 13.0 ms against
	// 8-10 ms after, in one of six local -race runs of 2026-11-28; the
	// cause is not established), which the dual gate calls warm-up: up
	// to 12.x s; and after a warm-up the settled view starts one block
	// later (its guard block): 10.5 to 13.x s
	require.Regexp(t, `settled view of load: warm-?up, steady from (10\.[5-9]|1[123]\.\d) s`, res.Stderr)
	s := readSummaryFile(t, filepath.Join(res.Dir, "regime.json"))
	st := s.Scenarios["load"].Settled
	require.NotNil(t, st)
	require.True(t, st.Steady)
	require.InDelta(t, 12000, *st.TTSSMs, 2000)
	// the warm-up's requests take 100-110 ms: over 1% of them in the
	// settled steady state puts its p99 there. The settled ones take
	// 5-5.5 ms plus k6's own time, whose p99 reached 32.8 ms once on 2
	// cores under -race (a CI run, 2026-11-28): half-way between the two
	// levels is the bound.
	require.Less(t, st.Stats.P99Ms, 50.0, "no 100 ms request in the settled steady state")
	// each gauge holds the figure of summary()'s settled view
	b, err := os.ReadFile(filepath.Join(res.Dir, "gauges.json"))
	require.NoError(t, err)
	var gauges map[string]map[string]float64
	require.NoError(t, json.Unmarshal(b, &gauges))
	for q, want := range map[string]float64{"p50": st.Stats.P50Ms, "p90": st.Stats.P90Ms, "p95": st.Stats.P95Ms, "p99": st.Stats.P99Ms, "max": st.Stats.MaxMs} {
		g, ok := gauges["regime_settled_"+q+"{scenario:load}"]
		require.True(t, ok, "no gauge regime_settled_%s{scenario:load} in %s", q, b)
		require.InDelta(t, want, g["value"], 1e-9*want, "regime_settled_%s", q)
	}
	require.Less(t, st.Stats.P50Ms, st.Stats.P90Ms)
	require.LessOrEqual(t, st.Stats.P90Ms, st.Stats.P95Ms)
	require.LessOrEqual(t, st.Stats.P99Ms, st.Stats.MaxMs)
}

// TestSettledNeverSettling: latency that grows for good has no settled
// steady state: regime_settled fails, the gauges have no data and their
// count>0 guards fail, exit 99 with the reason in the log.
func TestSettledNeverSettling(t *testing.T) {
	t.Parallel() // with the other parallel tests of the package: a sleeping server each
	srv := clockServer(t, 0, 0, time.Millisecond, 15*time.Microsecond)
	script := strings.ReplaceAll(settledScript, "${REPO}", repoRoot(t))
	res := runK6(t, script, map[string]string{"BASE_URL": srv.URL})
	require.Equal(t, 99, res.ExitCode, "stderr:\n%s", res.Stderr)
	require.Regexp(t, `settled view of load: no steady state \(.+\)`, res.Stderr)
	v := readVerdicts(t, res.Dir)
	require.False(t, v["regime_settled{scenario:load} rate==1"], "verdicts: %v", v)
	require.False(t, v["regime_settled_count{scenario:load} count>0"], "verdicts: %v", v)
}

// TestSettledPartialOnInterrupt: a run stopped by SIGINT still writes the
// settled view of what it saw, marked partial, in summary.json, and marks it
// partial already at k6's TestEnd: in summary() (called in handleSummary,
// before saveResults) and in the log line.
func TestSettledPartialOnInterrupt(t *testing.T) {
	srv, served := clockServerN(t, 3*time.Second, 20*time.Millisecond, 3*time.Millisecond, 0)
	dir := t.TempDir()
	script := `
import http from 'k6/http';
import regime from 'k6/x/regime';
export const options = { scenarios: { load: { executor: 'constant-arrival-rate', rate: 100, timeUnit: '1s', duration: '60s', preAllocatedVUs: 20, maxVUs: 50 } } };
regime.configure(options, {});
export default function () { http.get(__ENV.BASE_URL + '/item'); }
export function handleSummary() {
  const before = JSON.stringify(regime.summary());
  regime.saveResults({ dir: 'out', files: { 'summary-before-save.json': before } });
  return {};
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(script), 0o600))
	cmd := exec.Command(k6Binary(t), "run", "--no-usage-report", "--quiet", "script.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true", "BASE_URL="+srv.URL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// stop it once the server has served 1,300 requests (13 s at 100/s,
	// however long k6 took to start), checked every 100 ms; bounded: k6's
	// own 60 s end, then 90 s for the stop
	sent := false
	for deadline := time.Now().Add(90 * time.Second); ; {
		if !sent && served.Load() >= 1300 {
			_ = cmd.Process.Signal(syscall.SIGINT)
			sent = true
		}
		select {
		case <-done:
		case <-time.After(100 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			_ = cmd.Process.Kill()
			t.Fatalf("k6 did not stop (SIGINT sent: %v); stderr:\n%s", sent, stderr.String())
		}
		break
	}
	require.True(t, sent, "k6 ended before 1,300 requests (%d); stderr:\n%s", served.Load(), stderr.String())
	found, _ := filepath.Glob(filepath.Join(dir, "out", "*", "summary.json"))
	require.Len(t, found, 1, "stderr:\n%s", stderr.String())
	b, err := os.ReadFile(found[0])
	require.NoError(t, err)
	var s struct {
		Scenarios map[string]struct {
			Settled *struct {
				Partial bool `json:"partial"`
				Steady  bool `json:"steady"`
				Blocks  int  `json:"blocks"`
			} `json:"settled"`
		} `json:"scenarios"`
	}
	require.NoError(t, json.Unmarshal(b, &s))
	v := s.Scenarios["load"].Settled
	require.NotNil(t, v, "summary.json: %s", b)
	require.True(t, v.Partial, "summary.json: %s", b)
	require.GreaterOrEqual(t, v.Blocks, 10, "15 s of 1-s blocks judged")

	b, err = os.ReadFile(filepath.Join(filepath.Dir(found[0]), "summary-before-save.json"))
	require.NoError(t, err)
	var js struct {
		Scenarios map[string]struct {
			Settled *struct {
				Partial bool `json:"partial"`
			} `json:"settled"`
		} `json:"scenarios"`
	}
	require.NoError(t, json.Unmarshal(b, &js))
	require.NotNil(t, js.Scenarios["load"].Settled, "summary(): %s", b)
	require.True(t, js.Scenarios["load"].Settled.Partial, "summary() before saveResults: %s", b)
	require.Contains(t, stderr.String(), "settled view of load (partial: the run was cut short)")
}

type settledSummary struct {
	Scenarios map[string]struct {
		Settled *struct {
			Steady bool     `json:"steady"`
			TTSSMs *float64 `json:"ttss_ms"`
			Stats  *struct {
				P50Ms float64 `json:"p50_ms"`
				P90Ms float64 `json:"p90_ms"`
				P95Ms float64 `json:"p95_ms"`
				P99Ms float64 `json:"p99_ms"`
				MaxMs float64 `json:"max_ms"`
			} `json:"stats"`
		} `json:"settled"`
	} `json:"scenarios"`
}

func readSummaryFile(t *testing.T, path string) settledSummary {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var s settledSummary
	require.NoError(t, json.Unmarshal(b, &s), string(b))
	return s
}

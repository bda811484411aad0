package e2e

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// regimeSummary is the part of regime.summary() the tests read.
type regimeSummary struct {
	Scenarios map[string]struct {
		Iterations   int64    `json:"iterations"`
		Untagged     int64    `json:"untagged"`
		Class        string   `json:"class"`
		Regime       string   `json:"regime"`
		Relapses     int64    `json:"relapses"`
		Steady       bool     `json:"steady"`
		HeldFraction float64  `json:"held_fraction"`
		GateFraction float64  `json:"gate_fraction"`
		LevelDrift   *float64 `json:"level_drift"`
		TTSS         *float64 `json:"ttss_ms"`
		Regimes      map[string]struct {
			Count int64    `json:"count"`
			P50   *float64 `json:"p50"`
			Max   *float64 `json:"max"`
		} `json:"regimes"`
		SteadyStart *struct {
			Index int64 `json:"index"`
		} `json:"steady_start"`
		DeclaredAt *struct {
			Index int64 `json:"index"`
		} `json:"declared_at"`
		ColdStart struct {
			DurationMs float64 `json:"duration_ms"`
			Iterations int64   `json:"iterations"`
		} `json:"cold_start"`
	} `json:"scenarios"`
}

func readSummary(t *testing.T, path string) regimeSummary {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var s regimeSummary
	require.NoError(t, json.Unmarshal(b, &s), string(b))
	return s
}

const countsScript = `
import http from 'k6/http';
import { check } from 'k6';
import { Counter } from 'k6/metrics';
import regime from 'k6/x/regime';

const calls = new Counter('custom_calls');
// one sample per request, tagged with the phase the server served it in:
// the server's first 40 requests are its cold start (about 84 ms falling
// to 8 ms; the first ten or so over 40 ms)
const served = new Counter('served');

export const options = {
  scenarios: {
    load: { executor: 'constant-vus', vus: 4, duration: '20s', tags: { phase: 'gameplay' } },
  },
  thresholds: {
    // no request the server served cold may carry the steady tag (judged by
    // the server's own count, not by a latency bound that a busy machine's
    // scheduler can cross on a steady request)
    'served{regime:steady,server:cold}': ['count==0'],
    // and cold requests exist and were tagged cold, so the threshold above
    // means something
    'served{regime:cold,server:cold}': ['count>0'],
    'http_req_duration{regime:cold}': ['max>40'],
  },
};

// windows of 500 ms: the level after the warm-up ramp (~2 s) holds its 12
// windows by ~8 s, early enough in 20 s for the gate fraction
regime.configure(options, { detector: { window_min_duration: '500ms' } });

export default function () {
  const res = http.get(__ENV.BASE_URL + '/item', { tags: { endpoint: 'item' } });
  check(res, { 'status is 200': (r) => r.status === 200 });
  calls.add(1);
  served.add(1, { server: Number(res.headers['X-Request-Index']) < 40 ? 'cold' : 'warm' });
}

export function handleSummary(data) {
  return { 'regime.json': JSON.stringify(regime.summary(), null, 1) };
}
`

// TestRegimeTagsAndCounts runs k6 against a server with a cold start, a
// warm-up ramp and a steady state, and checks that every sample of every
// iteration carries a regime, that --out json and the extension count the
// same iterations per regime, that they sum to the total, and that the
// steady sub-metric saw no cold sample.
func TestRegimeTagsAndCounts(t *testing.T) {
	srv := newScheduleServer(t, coldWarmSteady(40, 1500, 4*time.Millisecond))
	res := runK6(t, countsScript, map[string]string{"BASE_URL": srv.URL}, "--out", "json=out.json.gz")
	require.Equal(t, 0, res.ExitCode, "stderr:\n%s", res.Stderr)

	perRegime := map[string]int64{}
	var total int64
	servedCold := map[string]int64{} // regime -> requests the server served cold
	perMetricUntagged := map[string]int{}
	readPoints(t, filepath.Join(res.Dir, "out.json.gz"), func(p *jsonPoint) {
		r, ok := p.Data.Tags["regime"]
		if !ok {
			if p.Metric != "vus" && p.Metric != "vus_max" && !strings.HasPrefix(p.Metric, "regime_") {
				perMetricUntagged[p.Metric]++ // engine-level and per-scenario metrics belong to no iteration
			}
			return
		}
		switch p.Metric {
		case "iterations":
			perRegime[r]++
			total++
		case "served":
			if p.Data.Tags["server"] == "cold" {
				servedCold[r]++
			}
		}
	})
	require.Empty(t, perMetricUntagged, "samples without a regime tag, by metric")
	require.Positive(t, perRegime["cold"], "no cold iteration")
	require.Positive(t, perRegime["steady"], "no steady iteration")
	require.Zero(t, servedCold["steady"], "requests the server served cold, tagged steady")
	require.Positive(t, servedCold["cold"], "no cold-served request tagged cold")

	sum := readSummary(t, filepath.Join(res.Dir, "regime.json"))
	sc, ok := sum.Scenarios["load"]
	require.True(t, ok, "summary has no scenario 'load': %+v", sum)
	require.Equal(t, total, sc.Iterations, "iterations: extension vs --out json")
	require.Zero(t, sc.Untagged)
	var fromExt int64
	for _, name := range []string{"cold", "warmup", "steady"} {
		require.Equal(t, perRegime[name], sc.Regimes[name].Count, "regime %s: extension vs --out json", name)
		fromExt += sc.Regimes[name].Count
	}
	require.Equal(t, total, fromExt, "regimes must sum to the total")
	// Steady state must be reached (the schedule settles after ~1,540
	// requests, a few seconds). Whether it holds to the end of 20 s on 2
	// shared cores under -race is the machine's business (a neighbour can
	// shift the measured level for longer than relapse_windows windows), so
	// the end-of-run verdict is checked for consistency with what was
	// reported: held, or a relapse counted in the summary and logged.
	require.NotNil(t, sc.TTSS, "steady state never reached")
	require.Contains(t, res.Stderr, "reached steady state")
	if sc.Steady {
		require.Equal(t, "steady", sc.Regime)
		require.NotNil(t, sc.SteadyStart)
		require.NotNil(t, sc.DeclaredAt)
		require.LessOrEqual(t, sc.SteadyStart.Index, sc.DeclaredAt.Index)
	} else {
		// not held: a relapse, or a final steady state too short or whose
		// level drifted, each reported
		require.Contains(t, res.Stderr, "not held to the end in load")
		drifted := sc.LevelDrift != nil && math.Abs(math.Log1p(*sc.LevelDrift)) > math.Log1p(0.25)
		require.True(t, sc.Relapses > 0 || sc.HeldFraction < sc.GateFraction || drifted,
			"not held without a reason (class %s, regime %s, relapses %d, held %.2f of %.2f, drift %v)",
			sc.Class, sc.Regime, sc.Relapses, sc.HeldFraction, sc.GateFraction, sc.LevelDrift)
		t.Logf("the steady gate was not held on this run (relapses %d, held %.2f, drift %v)", sc.Relapses, sc.HeldFraction, sc.LevelDrift)
	}
	require.Equal(t, perRegime["cold"], sc.ColdStart.Iterations)
	require.Positive(t, sc.ColdStart.DurationMs)
}

const gateScript = `
import http from 'k6/http';
import regime from 'k6/x/regime';
import { steady } from '${REPO}/thresholds/index.js';

export const options = {
  scenarios: {
    gameplay: { executor: 'constant-vus', vus: 2, duration: '8s', tags: { phase: 'gameplay' } },
  },
};
options.thresholds = steady(
  { 'http_req_duration{endpoint:item}': ['p(95)<1000'] },
  { phases: ['gameplay'], scenarios: options.scenarios },
);
// windows of 250 ms: the service method then needs 2.25 s of a first level
// (9 windows) instead of 9 s, so that an 8 s test can reach and lose it
regime.configure(options, { detector: { window_min_duration: '250ms' } });

export default function () {
  http.get(__ENV.BASE_URL + '/item', { tags: { endpoint: 'item' } });
}
`

// TestNeverSettlingServerFailsTheGate: a server whose latency keeps growing
// never reaches steady state, so the steady-only gate fails (exit 99) with a
// log line, where stock k6 would pass the Trend threshold on no data.
func TestNeverSettlingServerFailsTheGate(t *testing.T) {
	srv := newScheduleServer(t, neverSettles(4*time.Microsecond))
	script := strings.ReplaceAll(gateScript, "${REPO}", repoRoot(t))
	res := runK6(t, script, map[string]string{"BASE_URL": srv.URL})
	require.Equal(t, 99, res.ExitCode, "stderr:\n%s", res.Stderr)
	// with 250 ms windows a level that grows like the square root of time
	// (a closed model on latency proportional to the request count) can look
	// flat for 9 windows; then the gate says why it was not held: the level
	// drifted, the steady state was too short a part of the run, or it
	// relapsed (which of them depends on when the windows looked flat)
	require.Regexp(t, `steady state was (never reached in gameplay|reached but not held to the end in gameplay(: its level drifted by \+\d+%|: the final steady state spans \d+% of the scenario, the gate needs| \(it relapsed\)))`, res.Stderr)
	require.Contains(t, res.Stderr, "regime_steady")
}

// untaggedGateScript: tagging 'off' (or 'wrap' with no wrapped call), a
// gate on regime_steady and regime_settled only.
const untaggedGateScript = `
import http from 'k6/http';
import regime from 'k6/x/regime';

export const options = {
  // 12 s: the settled view judges 10 one-second blocks at least
  scenarios: { gameplay: { executor: 'constant-vus', vus: 2, duration: __ENV.DURATION || '12s' } },
  thresholds: {
    'regime_steady{scenario:gameplay}': ['rate==1'],
    'regime_settled{scenario:gameplay}': ['rate==1'],
  },
};
regime.configure(options, { tagging: __ENV.TAGGING || 'auto', detector: { window_min_duration: '250ms' } });

export default function () {
  http.get(__ENV.BASE_URL + '/item');
}

export function handleSummary() {
  return { [__ENV.SUMMARY]: JSON.stringify(regime.summary()) };
}
`

// TestUntaggedRunsStillGate: with tagging 'off', or 'wrap' and no wrapped
// call, no sample carries a regime tag, but the steady gate and the
// settled view are still pushed at the end: a server that never settles
// fails them (exit 99, the reason logged), one that settles passes them,
// and summary() says the same. (The iteration hook once went away in these
// modes, and with it the samples channel the gate is pushed through: the
// thresholds then passed on no data whatever the server did.)
func TestUntaggedRunsStillGate(t *testing.T) {
	type run struct {
		name, tagging string
		settles       bool
		args          []string
		env           map[string]string
		srv           *scheduleServer
		summary       string
		res           k6Result
		err           error
	}
	var runs []*run
	for _, tagging := range []string{"off", "wrap"} {
		for _, settles := range []bool{false, true} {
			name := tagging + "/never-settles"
			if settles {
				name = tagging + "/settles"
			}
			runs = append(runs, &run{name: name, tagging: tagging, settles: settles, env: map[string]string{"TAGGING": tagging}})
		}
	}
	// without 'scenario' in systemTags k6 tags no sample with its scenario,
	// so the detectors learn nothing; the gate is still pushed, and with the
	// scenario tag its threshold selects (it once lacked it: no data, pass)
	runs = append(runs, &run{name: "auto/no-scenario-system-tag", settles: true, env: map[string]string{"DURATION": "3s"},
		args: []string{"--system-tags", "status,method,name,url,group,check,error,error_code,expected_response,proto"}})
	// the five at once (2 VUs each against a server that sleeps): 12 s
	bin := k6Binary(t)
	var wg sync.WaitGroup
	for _, r := range runs {
		latency := neverSettles(4 * time.Microsecond)
		if r.settles {
			// 10 ms: well above what four neighbours (whose own servers
			// slow down) move a 2-VU closed loop's iteration by
			latency = coldWarmSteady(40, 200, 10*time.Millisecond)
		}
		r.srv = newScheduleServer(t, latency)
		r.summary = filepath.Join(t.TempDir(), "regime.json")
		r.env["BASE_URL"], r.env["SUMMARY"] = r.srv.URL, r.summary
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(untaggedGateScript), 0o600))
		wg.Go(func() {
			r.res, r.err = runK6Script(bin, dir, "script.js", r.env, append([]string{"--quiet"}, r.args...)...)
		})
	}
	wg.Wait()
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			require.NoError(t, r.err)
			res := r.res
			if r.tagging == "" {
				require.Equal(t, 99, res.ExitCode, "stderr:\n%s", res.Stderr)
				require.Contains(t, res.Stderr, "keep 'scenario' in systemTags")
				require.Regexp(t, `thresholds on metrics '[^']*regime_steady\{scenario:gameplay\}`, res.Stderr)
				return
			}
			b, err := os.ReadFile(r.summary)
			require.NoError(t, err, "stderr:\n%s", res.Stderr)
			var s struct {
				Scenarios map[string]struct {
					Steady bool `json:"steady"`
				} `json:"scenarios"`
			}
			require.NoError(t, json.Unmarshal(b, &s))
			if !r.settles {
				require.Equal(t, 99, res.ExitCode, "stderr:\n%s", res.Stderr)
				require.Regexp(t, `steady state was (never reached|reached but not held to the end) in gameplay`, res.Stderr)
				require.Regexp(t, `thresholds on metrics '[^']*regime_steady\{scenario:gameplay\}`, res.Stderr)
				require.False(t, s.Scenarios["gameplay"].Steady)
				return
			}
			require.Equal(t, 0, res.ExitCode, "stderr:\n%s", res.Stderr)
			require.True(t, s.Scenarios["gameplay"].Steady)
			require.NotContains(t, res.Stderr, "no iteration ran")
		})
	}
}

const trendBudgetScript = `
import http from 'k6/http';
import { Trend } from 'k6/metrics';
import regime from 'k6/x/regime';
import { steady } from '${REPO}/thresholds/index.js';

const latency = new Trend('my_latency', true);
export const options = {
  scenarios: {
    gameplay: { executor: 'constant-vus', vus: 2, duration: '10s', tags: { phase: 'gameplay' } },
  },
};
// a Trend of the script's own, with no counter: steady() guards it on its
// own sub-metric (the steady gate left out: this test is about the guard)
options.thresholds = steady(
  { ['my_latency{endpoint:' + __ENV.BUDGET_ENDPOINT + '}']: ['p(95)<1000'] },
  { phases: ['gameplay'], scenarios: options.scenarios, gate: false },
);
regime.configure(options, { detector: { window_min_duration: '250ms' } });

export default function () {
  const res = http.get(__ENV.BASE_URL + '/item');
  latency.add(res.timings.duration, { endpoint: 'item' });
}
`

// TestTrendBudgetWithoutCounter: steady()'s guard of a Trend budget with no
// counter is one k6 takes (k6 refuses count on a Trend: exit 104 before
// the test) and that fails on no sample: the budget of the endpoint the
// script tags passes, the same budget of a misspelled endpoint fails (exit
// 99) on max>0, where the p(95) alone passes on no data.
func TestTrendBudgetWithoutCounter(t *testing.T) {
	bin := k6Binary(t)
	script := strings.ReplaceAll(trendBudgetScript, "${REPO}", repoRoot(t))
	type run struct {
		endpoint string
		res      k6Result
		err      error
	}
	runs := []*run{{endpoint: "item"}, {endpoint: "itme"}}
	var wg sync.WaitGroup
	for _, r := range runs {
		srv := newScheduleServer(t, coldWarmSteady(20, 20, 10*time.Millisecond))
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(script), 0o600))
		wg.Go(func() {
			r.res, r.err = runK6Script(bin, dir, "script.js", map[string]string{"BASE_URL": srv.URL, "BUDGET_ENDPOINT": r.endpoint}, "--quiet")
		})
	}
	wg.Wait()
	require.NoError(t, runs[0].err)
	require.NoError(t, runs[1].err)
	require.Equal(t, 0, runs[0].res.ExitCode, "stderr:\n%s", runs[0].res.Stderr)
	require.Equal(t, 99, runs[1].res.ExitCode, "stderr:\n%s", runs[1].res.Stderr)
	require.Regexp(t, `thresholds on metrics '[^']*my_latency\{endpoint:itme,phase:gameplay,regime:steady\}`, runs[1].res.Stderr)
	require.Contains(t, runs[0].res.Stderr, "reached steady state", "the passing run judged steady samples")
}

// TestRelapseFailsTheGate: a server that settles and then slows down for
// good relapses; the steady-only gate fails (exit 99) and says the steady
// state was reached but not held, instead of judging the run by the steady
// samples from before the slowdown.
func TestRelapseFailsTheGate(t *testing.T) {
	// +100% of the level per second from request 1,500 or 5 s on,
	// whichever comes first (steady state is declared after ~800 requests,
	// about 2 s: 9 windows of 250 ms). The run lasts 12 s, not the 8 s of
	// the other gate tests: the service preset relapses after 10 window
	// closes beyond 1.5 times the level (5 beyond 2.25 times), and the
	// windows stretch as the requests slow down (at least 20 a window);
	// in 8 s a CI run ended before the relapse.
	srv := newScheduleServer(t, settlesThenSlows(1500, 5*time.Second, 4*time.Millisecond, 1))
	script := strings.ReplaceAll(gateScript, "${REPO}", repoRoot(t))
	script = strings.Replace(script, "duration: '8s'", "duration: '12s'", 1)
	require.Contains(t, script, "duration: '12s'")
	res := runK6(t, script, map[string]string{"BASE_URL": srv.URL})
	require.Equal(t, 99, res.ExitCode, "%d requests; stderr:\n%s", srv.n.Load(), res.Stderr)
	require.Contains(t, res.Stderr, "reached steady state")
	require.Contains(t, res.Stderr, "scenario gameplay lost steady state at iteration")
	// the reason: the relapse, or, when a steady state was declared again
	// on the slowing level (its relative growth falls with time), that
	// level's drift; either way not the steady samples from before
	require.Contains(t, res.Stderr, "steady state was reached but not held to the end in gameplay")
	require.Regexp(t, `not held to the end in gameplay( \(it relapsed\)|: its level drifted)`, res.Stderr)
	require.Contains(t, res.Stderr, "regime_steady")
}

// TestUnknownPhaseOrScenarioFailsAtStart: thresholds and settings naming a
// scenario that does not exist stop k6 before the test.
func TestUnknownPhaseOrScenarioFailsAtStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, want string
	}{
		{
			name: "threshold phase",
			body: `options.thresholds = steady({ 'http_req_duration': ['p(95)<10'] }, { phases: ['nope'], scenarios: options.scenarios });`,
			want: `phase "nope" matches no scenario`,
		},
		{
			name: "configure scenario",
			body: `regime.configure(options, { scenarios: { nope: {} } });`,
			want: `option 'scenarios.nope': no such scenario in options.scenarios; valid names: gameplay`,
		},
		{
			name: "tolerance out of range",
			body: `regime.configure(options, { detector: { median_tolerance: 7 } });`,
			want: `median_tolerance`,
		},
		{
			name: "bad scope",
			body: `regime.configure(options, { scope: 'vu' });`,
			want: `option 'scope' is "vu"; valid values: scenario, endpoint`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script := `
import regime from 'k6/x/regime';
import { steady } from '` + repoRoot(t) + `/thresholds/index.js';
export const options = { scenarios: { gameplay: { executor: 'constant-vus', vus: 1, duration: '30s', tags: { phase: 'gameplay' } } } };
` + tc.body + `
export default function () { throw new Error('the test must not start'); }
`
			start := time.Now()
			res := runK6(t, script, nil)
			require.NotEqual(t, 0, res.ExitCode)
			require.Less(t, time.Since(start), 25*time.Second, "k6 must stop before the 30 s test")
			require.Contains(t, res.Stderr, tc.want)
			require.NotContains(t, res.Stderr, "the test must not start")
		})
	}
}

const asyncScript = `
import http from 'k6/http';
import regime from 'k6/x/regime';

export const options = { scenarios: { async_load: { executor: 'constant-vus', vus: 2, duration: '4s' } } };

export default async function () {
  await http.asyncRequest('GET', __ENV.BASE_URL + '/item');
  await new Promise((resolve) => setTimeout(resolve, 25)); // the asynchronous part of the iteration
}

export function handleSummary() {
  return { 'regime.json': JSON.stringify(regime.summary()) };
}
`

// TestAsyncIterationsTimedToTheirEnd: the detector and the per-regime
// distributions see an async iteration's whole duration, including what runs
// after the function returned its promise.
func TestAsyncIterationsTimedToTheirEnd(t *testing.T) {
	srv := newScheduleServer(t, func(int64, *rand.Rand) time.Duration { return time.Millisecond })
	res := runK6(t, asyncScript, map[string]string{"BASE_URL": srv.URL})
	require.Equal(t, 0, res.ExitCode, "stderr:\n%s", res.Stderr)
	sum := readSummary(t, filepath.Join(res.Dir, "regime.json"))
	sc := sum.Scenarios["async_load"]
	require.Positive(t, sc.Iterations)
	for name, r := range sc.Regimes {
		if r.Count > 0 {
			require.GreaterOrEqual(t, *r.P50, 25.0, "regime %s: the awaited 25 ms timer must be in the iteration's duration", name)
		}
	}
}

// wrapScript: tagging 'wrap', every other iteration through a wrapped
// function, the others not.
const wrapScript = `
import http from 'k6/http';
import regime from 'k6/x/regime';

export const options = {
  scenarios: { api: { executor: 'constant-vus', vus: 2, duration: '6s' } },
  thresholds: {
    'http_reqs{ep:w}': ['count>=0'], 'http_reqs{ep:n}': ['count>=0'],
    'http_reqs{ep:n,regime:cold}': ['count>=0'], 'http_reqs{ep:n,regime:warmup}': ['count>=0'], 'http_reqs{ep:n,regime:steady}': ['count>=0'],
    'iterations{regime:cold}': ['count>=0'], 'iterations{regime:warmup}': ['count>=0'], 'iterations{regime:steady}': ['count>=0'],
  },
};
regime.configure(options, { tagging: 'wrap', detector: { window_min_duration: '250ms' } });

const wrapped = regime.wrap(() => http.get(__ENV.BASE_URL + '/w', { tags: { ep: 'w' } }));

export default function () {
  if (__ITER % 2) wrapped(); else http.get(__ENV.BASE_URL + '/n', { tags: { ep: 'n' } });
}

export function handleSummary(data) {
  const m = (k) => (data.metrics[k] ? data.metrics[k].values.count : -1);
  const s = regime.summary().scenarios.api;
  return { [__ENV.SUMMARY]: JSON.stringify({
    w: m('http_reqs{ep:w}'), n: m('http_reqs{ep:n}'),
    nTagged: m('http_reqs{ep:n,regime:cold}') + m('http_reqs{ep:n,regime:warmup}') + m('http_reqs{ep:n,regime:steady}'),
    itTagged: m('iterations{regime:cold}') + m('iterations{regime:warmup}') + m('iterations{regime:steady}'),
    iterations: s.iterations, untagged: s.untagged }) };
}
`

// TestWrapTagsOnlyWrappedIterations: with tagging 'wrap', an iteration that
// calls no wrapped function carries no regime tag (it once carried the
// regime of the VU's last wrapped call, so steady-only thresholds judged
// requests the script left out), while one that does carries it to its
// end, its iteration samples included.
func TestWrapTagsOnlyWrappedIterations(t *testing.T) {
	srv := newScheduleServer(t, coldWarmSteady(20, 100, 2*time.Millisecond))
	summary := filepath.Join(t.TempDir(), "wrap.json")
	res := runK6(t, wrapScript, map[string]string{"BASE_URL": srv.URL, "SUMMARY": summary})
	require.Equal(t, 0, res.ExitCode, "stderr:\n%s", res.Stderr)
	b, err := os.ReadFile(summary)
	require.NoError(t, err, "stderr:\n%s", res.Stderr)
	var s struct{ W, N, NTagged, ItTagged, Iterations, Untagged int64 }
	require.NoError(t, json.Unmarshal(b, &s))
	require.Greater(t, s.N, int64(100), "%+v", s)
	require.Greater(t, s.W, int64(100), "%+v", s)
	require.Zero(t, s.NTagged, "unwrapped requests carry no regime: %+v", s)
	require.Equal(t, s.W, s.ItTagged, "each iteration through wrap() carries its regime to its end: %+v", s)
	require.Equal(t, s.N, s.Untagged, "the other iterations are untagged: %+v", s)
	require.Equal(t, s.Iterations, s.ItTagged+s.Untagged, "%+v", s)
}

const foreignTagScript = `
import http from 'k6/http';
import exec from 'k6/execution';
import regime from 'k6/x/regime';
export const options = { scenarios: { api: { executor: 'constant-vus', vus: 2, duration: '2s' } } };
export default function () {
  exec.vu.metrics.tags['regime'] = 'steady';
  http.get(__ENV.BASE_URL);
}
export function handleSummary() {
  return { 'regime.json': JSON.stringify(regime.summary()), 'saved.txt': regime.saveResults({ dir: __ENV.OUT }) };
}
`

// TestForeignRegimeTagWarned: a script that sets the VU tag 'regime'
// itself overrides the extension's tag in its samples and the counts; the
// extension says so, in k6's log and in summary.json's warnings (it was
// silent: every iteration counted steady while the scenario never was).
func TestForeignRegimeTagWarned(t *testing.T) {
	srv := newScheduleServer(t, coldWarmSteady(10, 10, time.Millisecond))
	out := t.TempDir()
	res := runK6(t, foreignTagScript, map[string]string{"BASE_URL": srv.URL, "OUT": out})
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, `regime: the script sets the VU tag "regime" itself (value "steady")`)
	dirs, err := filepath.Glob(filepath.Join(out, "*", "summary.json"))
	require.NoError(t, err)
	require.Len(t, dirs, 1)
	b, err := os.ReadFile(dirs[0])
	require.NoError(t, err)
	require.Contains(t, string(b), `iterations started with a \"regime\" tag the script set on the VU itself`)
}

package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/metrics"
)

// Run states fed through their real detection path, for the tests.

// newTestRunState is a run state with its metrics registered, fed through
// its real detection path.
func newTestRunState(tb testing.TB) (*RunState, *metrics.Registry) {
	tb.Helper()
	rs := newRunState()
	rs.logger, _ = logtest.NewNullLogger()
	reg := metrics.NewRegistry()
	metrics.RegisterBuiltinMetrics(reg)
	rs.registry = reg
	require.NoError(tb, rs.registerMetrics(reg))
	return rs, reg
}

// feedColdSteady ingests n iteration samples: a cold start, then steady.
func feedColdSteady(rs *RunState, reg *metrics.Registry, n int) {
	m := reg.Get(iterationDurationMetric)
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range n {
		v := 5 + rng.Float64()*0.5
		regime := "steady"
		if i < 40 {
			v += 80 * math.Exp(-float64(i)/10)
			regime = "cold"
		}
		tags := reg.RootTagSet().With("scenario", "load").With("regime", regime)
		rs.ingest(sinkIteration, metrics.Sample{
			TimeSeries: metrics.TimeSeries{Metric: m, Tags: tags},
			Time:       base.Add(time.Duration(i) * 5 * time.Millisecond), Value: v,
		})
	}
}

// goldenRunState is a run state fed through its real detection path with
// two scenarios: "load" judges iterations (a cold start, then steady),
// "api" judges requests per endpoint (one endpoint warms up, one is flat,
// one fails now and then), with TestEnd run.
func goldenRunState(t *testing.T) *RunState {
	t.Helper()
	rs, reg := newTestRunState(t)
	tracked, err := reg.NewMetric("golden_items", metrics.Counter)
	require.NoError(t, err)
	cfg, err := parseConfig([]byte(`{"scenarios":{"load":{},"api":{},"idle":{}}}`),
		[]byte(`{"track":["golden_items"],"scenarios":{"api":{"scope":"endpoint","input":"request","maxEndpoints":2}}}`))
	require.NoError(t, err)
	require.NoError(t, rs.setConfig(cfg))
	rs.bd.setMaxEndpoints(func(scenario string) int { return cfg.forScenario(scenario).MaxEndpoints }) // as configure() does
	it, req := reg.Get(iterationDurationMetric), reg.Get(httpReqDurationMetric)
	load := rs.Scenario("load")
	load.mu.Lock()
	load.start = time.Unix(1_699_999_999, 500_000_000) // as k6's scenario state gives it
	load.mu.Unlock()
	rs.Scenario("idle") // declared, never ran
	rng := rand.New(rand.NewPCG(11, 12))
	base := time.Unix(1_700_000_000, 0)
	for i := range 6000 {
		at := base.Add(time.Duration(i) * 5 * time.Millisecond)
		v := 5 + rng.Float64()*0.5
		regime := "steady"
		if i < 40 {
			v += 80 * math.Exp(-float64(i)/10)
			regime = "cold"
		} else if i < 400 {
			regime = "warmup"
		}
		tags := reg.RootTagSet().With("scenario", "load").With("regime", regime)
		rs.ingest(sinkIteration, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: it, Tags: tags}, Time: at, Value: v})
		for k, ep := range []string{"/warm", "/flat", "/flaky"} {
			w := 2 + rng.Float64()
			if k == 0 {
				w += 20 * math.Exp(-float64(i)/800)
			}
			status := "200"
			if k == 2 && i%97 == 0 {
				status = "500"
			}
			rt := reg.RootTagSet().With("scenario", "api").With("endpoint", ep).With("status", status).
				With("expected_response", fmt.Sprint(status == "200")).With("method", "GET").With("name", ep)
			rs.ingest(sinkHTTP, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: req, Tags: rt}, Time: at, Value: w})
		}
		if i%50 == 0 {
			for _, phase := range []string{"warmup", "gameplay"} {
				tt := reg.RootTagSet().With("scenario", "load").With("phase", phase)
				rs.ingest(sinkTracked, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: tracked, Tags: tt}, Time: at, Value: float64(i % 7)})
			}
		}
		if i%3 == 0 {
			tags := reg.RootTagSet().With("scenario", "api").With("regime", regime)
			rs.ingest(sinkIteration, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: it, Tags: tags}, Time: at, Value: v * 3})
		}
	}
	ch := make(chan metrics.SampleContainer, 1<<16)
	var out chan<- metrics.SampleContainer = ch
	rs.samples.Store(&out)
	rs.testEnd()
	return rs
}

// TestTrackedInfinityLeftOut: k6's metric.add() refuses NaN, not x/0; a
// +Inf sample of a tracked metric is counted apart, and summary() and
// summary.json can still be written (one made both fail, and the results
// folder was lost).
func TestTrackedInfinityLeftOut(t *testing.T) {
	rs, reg := newTestRunState(t)
	probe, err := reg.NewMetric("probe_ms", metrics.Trend)
	require.NoError(t, err)
	cfg, err := parseConfig([]byte(`{"scenarios":{"load":{}}}`), []byte(`{"track":["probe_ms"]}`))
	require.NoError(t, err)
	require.NoError(t, rs.setConfig(cfg))
	feedColdSteady(rs, reg, 200)
	tt := reg.RootTagSet().With("scenario", "load").With("phase", "p")
	at := time.Unix(1_700_000_000, 0)
	for _, v := range []float64{3, math.Inf(1), 5, math.Inf(-1)} {
		rs.ingest(sinkTracked, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: probe, Tags: tt}, Time: at, Value: v})
	}
	ch := make(chan metrics.SampleContainer, 1<<16)
	var out chan<- metrics.SampleContainer = ch
	rs.samples.Store(&out)
	rs.testEnd()
	rep := rs.Report()
	c := rep.Tracked["probe_ms"]["p"]
	require.NotNil(t, c)
	require.Equal(t, int64(2), c.Count)
	require.Equal(t, int64(2), c.NonFinite)
	require.Equal(t, 8.0, c.Sum)
	require.Equal(t, 5.0, c.Max)
	_, err = json.Marshal(rep)
	require.NoError(t, err)
	run, err := BuildRun(rs, "inf", time.Unix(1_700_000_100, 0))
	require.NoError(t, err)
	_, err = json.Marshal(run.Summary)
	require.NoError(t, err)
}

// TestIterationsWithoutScenarioInSummary: iterations with no scenario tag
// (systemTags without 'scenario') are counted in summary.json, with a
// warning, not only in summary() and a log line.
func TestIterationsWithoutScenarioInSummary(t *testing.T) {
	rs, reg := newTestRunState(t)
	feedColdSteady(rs, reg, 100)
	m := reg.Get(iterationDurationMetric)
	for range 3 {
		rs.ingest(sinkIteration, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: m, Tags: reg.RootTagSet()},
			Time: time.Unix(1_700_000_000, 0), Value: 5})
	}
	run, err := BuildRun(rs, "untagged", time.Unix(1_700_000_100, 0))
	require.NoError(t, err)
	require.Equal(t, int64(3), run.Summary.IterationsWithoutScenario)
	require.Contains(t, strings.Join(run.Summary.Warnings, "\n"), "3 iterations had no 'scenario' tag")
}

// TestMisplacedObservationsWarn: an iteration that started before its
// scenario (its duration reaches back past the scenario's start), one timed
// two days ahead of the run (a clock that stepped) and one of no measurable
// duration (below 1 µs) are each counted once in the settled view
// (summary.json's settled.early, late and clamped) and named in a warning,
// never silently folded into the first or last bucket.
func TestMisplacedObservationsWarn(t *testing.T) {
	rs, reg := newTestRunState(t)
	st := rs.Scenario("load")
	start := time.Date(2026, 3, 1, 11, 59, 59, 0, time.UTC) // a second before feedColdSteady's first iteration
	st.mu.Lock()
	st.start = start
	st.mu.Unlock()
	feedColdSteady(rs, reg, 3000)
	m := reg.Get(iterationDurationMetric)
	tags := reg.RootTagSet().With("scenario", "load").With("regime", "steady")
	for _, it := range []struct {
		end time.Time
		ms  float64
	}{
		{start.Add(10 * time.Millisecond), 50}, // started 40 ms before the scenario
		{start.Add(48 * time.Hour), 5},         // two days ahead
		{start.Add(5 * time.Second), 0.0001},   // 0.1 µs: clamped to 1 µs
	} {
		rs.ingest(sinkIteration, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: m, Tags: tags}, Time: it.end, Value: it.ms})
	}
	ch := make(chan metrics.SampleContainer, 1<<16)
	var out chan<- metrics.SampleContainer = ch
	rs.samples.Store(&out)
	rs.testEnd()
	run, err := BuildRun(rs, "misplaced", start.Add(time.Minute))
	require.NoError(t, err)
	v := run.Summary.Scenarios["load"].Settled
	require.NotNil(t, v)
	require.Equal(t, [3]int64{1, 1, 1}, [3]int64{v.Early, v.Late, v.Clamped}, "early, late, clamped")
	require.Contains(t, strings.Join(run.Summary.Warnings, "\n"),
		"scenario load: the settled view kept 1 observations that started before the scenario in its first time bucket and 1 timed")
}

// TestNeverReachedSaysWhy: the log line of a scenario that never reached
// steady state says what it saw: its iterations, the endpoints that held
// it back (scope 'endpoint' waits for all of them), and the settled
// view's reason.
func TestNeverReachedSaysWhy(t *testing.T) {
	rs, reg := newTestRunState(t)
	logger, hook := logtest.NewNullLogger()
	rs.logger = logger
	cfg, err := parseConfig([]byte(`{"scenarios":{"api":{}}}`),
		[]byte(`{"scenarios":{"api":{"scope":"endpoint","input":"request","detector":{"window_min_duration":"250ms"}}}}`))
	require.NoError(t, err)
	require.NoError(t, rs.setConfig(cfg))
	req := reg.Get(httpReqDurationMetric)
	rng := rand.New(rand.NewPCG(5, 6))
	base := time.Unix(1_700_000_000, 0)
	for i := range 6000 { // 30 s; /rare is asked once a second
		at := base.Add(time.Duration(i) * 5 * time.Millisecond)
		for _, ep := range []string{"/hot", "/rare"} {
			if ep == "/rare" && i%200 != 0 {
				continue
			}
			tags := reg.RootTagSet().With("scenario", "api").With("endpoint", ep).With("status", "200").
				With("expected_response", "true").With("method", "GET").With("name", ep)
			rs.ingest(sinkHTTP, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: req, Tags: tags}, Time: at, Value: 2 + rng.Float64()})
		}
	}
	ch := make(chan metrics.SampleContainer, 1<<16)
	var out chan<- metrics.SampleContainer = ch
	rs.samples.Store(&out)
	rs.testEnd()
	var line string
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "never reached in api") {
			line = e.Message
		}
	}
	require.NotEmpty(t, line, "no never-reached line")
	require.Contains(t, line, "endpoints not steady, which the scenario's regime waits for: /rare: 30 observations")
	require.NotContains(t, line, "/hot:")
}

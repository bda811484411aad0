package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/detector"
)

// TestScopeDetectorsDropTheTrace: the extension's detectors make online
// decisions only, so they keep no trace for Hindsight (96 KiB and 1-2 ns
// per observation each, per scenario and endpoint).
func TestScopeDetectorsDropTheTrace(t *testing.T) {
	t.Parallel()
	s := newScenario("s", ScenarioConfig{Detector: detector.ServiceConfig()})
	sc := s.scopeFor("", func(*endpointScope, detector.Transition) {}, nil)
	sc.det.Observe(0, 1)
	_, err := sc.det.Hindsight()
	require.ErrorIs(t, err, detector.ErrNoTrace)
}

// gateRun feeds a scenario "load" one iteration every 2 ms from a series of
// levels (one per second) through the detection sink, as k6's metrics
// engine does, and returns the run state and the samples pushed.
func gateRun(t *testing.T, levels []float64, gateFraction float64) (*RunState, chan metrics.SampleContainer, *logtest.Hook) {
	t.Helper()
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	rs := newRunState()
	logger, hook := logtest.NewNullLogger()
	rs.logger = logger
	rs.registry = registry
	require.NoError(t, rs.registerMetrics(registry))
	cfg := defaultConfig()
	cfg.Defaults.GateFraction = gateFraction
	rs.cfg.Store(cfg)
	ch := make(chan metrics.SampleContainer, 1000)
	out := chan<- metrics.SampleContainer(ch)
	rs.samples.Store(&out)
	tags := registry.RootTagSet().With(scenarioTag, "load")
	start := time.Unix(1_700_000_000, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range len(levels) * 500 {
		rs.ingest(sinkIteration, metrics.Sample{
			TimeSeries: metrics.TimeSeries{Metric: builtin.IterationDuration, Tags: tags},
			Time:       start.Add(time.Duration(i) * 2 * time.Millisecond),
			Value:      levels[i/500] * (1 + 0.1*rng.Float64()),
		})
	}
	return rs, ch, hook
}

func gateSample(t *testing.T, ch chan metrics.SampleContainer) float64 {
	t.Helper()
	for {
		select {
		case c := <-ch:
			for _, s := range c.GetSamples() {
				if s.Metric.Name == "regime_steady" {
					return s.Value
				}
			}
		default:
			t.Fatal("no regime_steady sample pushed")
		}
	}
}

func flatLevels(secs int, v float64) []float64 {
	out := make([]float64, secs)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestGateFrozenAtTestEnd: the steady gate is judged at k6's TestEnd and
// summary() says the same afterwards, whatever samples the metrics engine
// delivers later (they are counted, not observed): a relapse after the gate
// was pushed can no longer make summary() disagree with the exit code.
func TestGateFrozenAtTestEnd(t *testing.T) {
	t.Parallel()
	rs, ch, _ := gateRun(t, flatLevels(30, 5), 0.5)
	rs.testEnd()
	require.Equal(t, 1.0, gateSample(t, ch))
	st := rs.Scenario("load")
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	tags := registry.RootTagSet().With(scenarioTag, "load")
	late := time.Unix(1_700_000_060, 0)
	for i := range 10_000 { // 20 s of a 10x slower level, delivered after the gate
		rs.ingest(sinkIteration, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.IterationDuration, Tags: tags},
			Time: late.Add(time.Duration(i) * 2 * time.Millisecond), Value: 50})
	}
	st.mu.Lock()
	sum := st.report()
	st.mu.Unlock()
	require.Equal(t, true, sum.Steady)
	require.EqualValues(t, 0, sum.Relapses)
	require.EqualValues(t, 25_000, sum.Iterations, "late samples are counted")
}

// TestGateFraction: a steady state declared in the last part of the
// scenario fails the gate ("reached but not held") and says why; the same
// run passes with gateFraction 0.
func TestGateFraction(t *testing.T) {
	t.Parallel()
	// a warm-up of 14 s (10 ms down to 2.5 ms, 10% faster every second),
	// then 16 s at 2 ms: steady state is declared in the last part of the run
	var levels []float64
	for i := range 14 {
		levels = append(levels, 10*math.Pow(0.9, float64(i)))
	}
	levels = append(levels, flatLevels(16, 2)...)
	for _, tc := range []struct {
		fraction float64
		held     bool
	}{{0.5, false}, {0, true}} {
		rs, ch, hook := gateRun(t, levels, tc.fraction)
		rs.testEnd()
		want := 0.0
		if tc.held {
			want = 1
		}
		require.Equal(t, want, gateSample(t, ch), "gateFraction %g", tc.fraction)
		st := rs.Scenario("load")
		st.mu.Lock()
		sum := st.report()
		st.mu.Unlock()
		require.Equal(t, tc.held, sum.Steady)
		f := sum.HeldFraction
		require.Greater(t, f, 0.0)
		require.Less(t, f, 0.5)
		if !tc.held {
			require.Contains(t, hook.LastEntry().Message, "steady state was reached but not held to the end in load")
			require.Contains(t, hook.LastEntry().Message, "the gate needs 50% (gateFraction)")
		}
	}
}

// TestEndpointDetectorCap: with scope endpoint, every endpoint value got a
// detector (about 144 KiB each, up to 22 MiB with the largest settings).
// Beyond maxEndpoints they share one, "(other)", and are counted.
func TestEndpointDetectorCap(t *testing.T) {
	t.Parallel()
	cfg := defaultScenarioConfig()
	cfg.Scope, cfg.Input, cfg.MaxEndpoints = scopeEndpoint, inputRequest, 5
	s := newScenario("s", cfg)
	rs := newRunState()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range 200 {
		s.observe(rs, fmt.Sprintf("ep%d", i%50), int64(i), 1+float64(i%3))
	}
	require.Len(t, s.scopes, 6)
	require.Contains(t, s.scopes, otherEndpoint)
	require.EqualValues(t, 180, s.overObs)
	require.EqualValues(t, 180, s.scopes[otherEndpoint].det.Snapshot().N)
}

// TestGateLevelDrift: a steady state whose level kept moving (+60% over
// 32 s, too slowly for a relapse) fails the gate and says why; a level that
// stepped once by +35% and stayed holds it (both report the change in
// summary()).
func TestGateLevelDrift(t *testing.T) {
	t.Parallel()
	rising := make([]float64, 32)
	for i := range rising {
		rising[i] = 5 * (1 + 0.6*float64(i)/32)
	}
	rs, ch, hook := gateRun(t, rising, 0.5)
	rs.testEnd()
	require.Equal(t, 0.0, gateSample(t, ch))
	st := rs.Scenario("load")
	st.mu.Lock()
	sum := st.report()
	st.mu.Unlock()
	require.Equal(t, false, sum.Steady)
	require.Equal(t, "steady", sum.Regime)
	require.GreaterOrEqual(t, sum.HeldFraction, 0.5, "held long enough: the level is what fails")
	require.Greater(t, *sum.LevelDrift, 0.25)
	require.Contains(t, hook.LastEntry().Message, "steady state was reached but not held to the end in load: its level drifted by +")

	rs, ch, _ = gateRun(t, append(flatLevels(16, 5), flatLevels(16, 6.75)...), 0.5)
	rs.testEnd()
	require.Equal(t, 1.0, gateSample(t, ch), "a step that stays is no drift")
	st = rs.Scenario("load")
	st.mu.Lock()
	sum = st.report()
	st.mu.Unlock()
	require.InDelta(t, 0.35, *sum.LevelDrift, 0.08)

	rs, ch, _ = gateRun(t, flatLevels(32, 5), 0.5)
	rs.testEnd()
	require.Equal(t, 1.0, gateSample(t, ch))
	st = rs.Scenario("load")
	st.mu.Lock()
	sum = st.report()
	st.mu.Unlock()
	require.Less(t, math.Abs(*sum.LevelDrift), 0.1)
}

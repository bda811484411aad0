package extension

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/js/modulestest"
	"go.k6.io/k6/v2/lib"
	"go.k6.io/k6/v2/metrics"
)

// fakeVU is one VU of a simulated run: a real JS runtime with the module
// imported, moved to a VU context in scenario "load".
type fakeVU struct {
	rt    *modulestest.Runtime
	state *lib.State
}

func newFakeVU(t *testing.T, root *RootModule, registry *metrics.Registry, samples chan metrics.SampleContainer, start time.Time) *fakeVU {
	t.Helper()
	rt := modulestest.NewRuntime(t)
	rt.VU.InitEnvField.Registry = registry
	mi, ok := root.NewModuleInstance(rt.VU).(*moduleInstance)
	require.True(t, ok)
	require.NoError(t, rt.VU.Runtime().Set("regime", mi.Exports().Default))
	state := &lib.State{
		Tags:    lib.NewVUStateTags(registry.RootTagSet().With("scenario", "load").With("phase", "gameplay")),
		Samples: samples,
		Options: lib.Options{},
	}
	rt.VU.CtxField = lib.WithScenarioState(rt.VU.CtxField, &lib.ScenarioState{Name: "load", StartTime: start})
	rt.MoveToVUContext(state)
	return &fakeVU{rt: rt, state: state}
}

// TestManyVUsRace drives hundreds of VUs (real JS runtimes, each assigning
// __ITER like k6 does at every iteration start) while a separate goroutine
// plays k6's metrics engine: it feeds every iteration_duration sample to the
// metric's submetrics, as the engine does. Run with -race.
func TestManyVUsRace(t *testing.T) {
	t.Parallel()
	const vus, iters = 300, 60
	if testing.Short() {
		t.Skip("long: hundreds of JS runtimes")
	}
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	root := NewRootModule()
	samples := make(chan metrics.SampleContainer, 1000)

	// the engine: reads every sample, hands iteration_duration to the submetric sinks
	counts := map[string]int64{}
	pushed := map[string]int{}
	engineDone := make(chan struct{})
	go func() {
		defer close(engineDone)
		for c := range samples {
			for _, s := range c.GetSamples() {
				if s.Metric != builtin.IterationDuration {
					pushed[s.Metric.Name]++
					continue
				}
				r, _ := s.Tags.Get(RegimeTag)
				counts[r]++
				for _, sm := range s.Metric.Submetrics {
					if s.Tags.Contains(sm.Tags) {
						sm.Metric.Sink.Add(s)
					}
				}
			}
		}
	}()

	start := time.Now()
	fake := make([]*fakeVU, vus)
	for i := range fake {
		fake[i] = newFakeVU(t, root, registry, samples, start)
	}
	var wg sync.WaitGroup
	for v, fv := range fake {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(v), 7))
			for i := range iters {
				require.NoError(t, fv.rt.VU.Runtime().Set("__ITER", i)) // k6's per-iteration assignment
				got, err := fv.rt.VU.Runtime().RunString(`__ITER`)
				require.NoError(t, err)
				require.EqualValues(t, i, got.Export(), "scripts still read __ITER")
				n := v*iters + i
				val := 5 + rng.Float64()*0.2
				if n < 200 {
					val += 50
				}
				tags := fv.state.Tags.GetCurrentValues().Tags
				samples <- metrics.Samples{{
					TimeSeries: metrics.TimeSeries{Metric: builtin.IterationDuration, Tags: tags},
					Time:       start.Add(time.Duration(n) * time.Millisecond),
					Value:      val,
				}}
			}
		}()
	}
	wg.Wait()
	root.rs.testEnd()
	close(samples)
	<-engineDone

	var total int64
	for r, n := range counts {
		require.NotEmpty(t, r, "an iteration without a regime tag")
		total += n
	}
	require.EqualValues(t, vus*iters, total)

	sum, err := summaryJS(root.rs.Report())
	require.NoError(t, err)
	sc := sum["scenarios"].(map[string]any)["load"].(map[string]any)
	require.EqualValues(t, total, sc["iterations"])
	regimes := sc["regimes"].(map[string]any)
	for _, name := range regimeNames {
		require.EqualValues(t, counts[name], regimes[name].(map[string]any)["count"], name)
	}
	require.Equal(t, 1, pushed["regime_steady"], "the steady gate is pushed once per scenario")
}

func TestConfigureValidation(t *testing.T) {
	t.Parallel()
	opts := `{"scenarios":{"warmup":{},"gameplay":{}}}`
	cases := []struct {
		name, settings, want string
	}{
		{"unknown scenario", `{"scenarios":{"init":{}}}`, "option 'scenarios.init': no such scenario in options.scenarios; valid names: gameplay, warmup"},
		{"unknown key", `{"tagz":"auto"}`, `unknown field "tagz"`},
		{"bad tagging", `{"tagging":"manual"}`, "option 'tagging' is \"manual\"; valid values: auto, wrap, off"},
		{"bad input", `{"input":"samples"}`, "option 'input' is \"samples\"; valid values: iteration, request, observe"},
		{"request needs endpoint", `{"input":"request"}`, "needs 'scope' to be \"endpoint\""},
		{"detector range", `{"scenarios":{"gameplay":{"detector":{"median_tolerance":-1}}}}`, "option 'scenarios.gameplay.detector': median_tolerance"},
		{"detector unknown", `{"detector":{"windowz":3}}`, `option 'detector': unknown field "windowz"`},
		{"maxEndpoints", `{"scenarios":{"gameplay":{"maxEndpoints":0}}}`, "option 'scenarios.gameplay.maxEndpoints' is 0; valid values: 1..100000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig([]byte(opts), []byte(tc.settings))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("several problems at once", func(t *testing.T) {
		t.Parallel()
		_, err := parseConfig([]byte(opts), []byte(`{"tagging":"x","scope":"y"}`))
		require.ErrorContains(t, err, "'tagging'")
		require.ErrorContains(t, err, "'scope'")
	})
	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseConfig([]byte(opts), []byte(`{"scenarios":{"gameplay":{"scope":"endpoint"}}}`))
		require.NoError(t, err)
		require.Equal(t, scopeEndpoint, cfg.forScenario("gameplay").Scope)
		require.Equal(t, inputRequest, cfg.forScenario("gameplay").Input)
		require.Equal(t, scopeScenario, cfg.forScenario("warmup").Scope)
		require.Equal(t, []string{"gameplay", "warmup"}, cfg.Declared)
	})
	t.Run("no scenarios means default", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseConfig([]byte(`{"vus":2}`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"default"}, cfg.Declared)
	})
}

// TestConfigureOnlyInInit: configure() in VU context is an error, and so is
// a second call with other settings.
func TestConfigureContext(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	rt := modulestest.NewRuntime(t)
	mi := root.NewModuleInstance(rt.VU).(*moduleInstance)
	require.NoError(t, rt.VU.Runtime().Set("regime", mi.Exports().Default))
	_, err := rt.VU.Runtime().RunString(`regime.configure({scenarios:{a:{}}}, {scope:'scenario'})`)
	require.NoError(t, err)
	_, err = rt.VU.Runtime().RunString(`regime.configure({scenarios:{a:{}}}, {scope:'endpoint'})`)
	require.ErrorContains(t, err, "called twice in this script with different settings", "one script, not another VU")
	_, err = rt.VU.Runtime().RunString(`regime.configure({scenarios:{a:{}}}, {scope:'scenario'})`)
	require.NoError(t, err, "the same settings again are harmless")

	other := modulestest.NewRuntime(t) // another VU's init context
	omi := root.NewModuleInstance(other.VU).(*moduleInstance)
	require.NoError(t, other.VU.Runtime().Set("regime", omi.Exports().Default))
	_, err = other.VU.Runtime().RunString(`regime.configure({scenarios:{a:{}}}, {scope:'endpoint'})`)
	require.ErrorContains(t, err, "another VU's init context")
	_, err = rt.VU.Runtime().RunString(`regime.wrap(42)`)
	require.ErrorContains(t, err, "regime.wrap: expected a function")

	rt.MoveToVUContext(&lib.State{Tags: lib.NewVUStateTags(metrics.NewRegistry().RootTagSet())})
	_, err = rt.VU.Runtime().RunString(`regime.configure({}, {})`)
	require.ErrorContains(t, err, "must be called in the init context")
	_, err = rt.VU.Runtime().RunString(`regime.observe(-1)`)
	require.ErrorContains(t, err, "-1 is not > 0")
}

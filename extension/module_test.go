package extension

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/js/modulestest"
	"go.k6.io/k6/v2/lib"
	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/engine"
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
				r, _ := s.Tags.Get(engine.RegimeTag)
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
	for _, name := range detector.RegimeNames() {
		require.EqualValues(t, counts[name], regimes[name].(map[string]any)["count"], name)
	}
	require.Zero(t, pushed["regime_steady"], "the steady gate is pushed at the end of the test, not before")
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
	_, err = rt.VU.Runtime().RunString(`regime.configure({scenarios:{a:{}}}, {tagging:'auto', scope:'scenario'})`)
	require.NoError(t, err, "the same configuration, the default spelt out")

	other := modulestest.NewRuntime(t) // another VU's init context
	omi := root.NewModuleInstance(other.VU).(*moduleInstance)
	require.NoError(t, other.VU.Runtime().Set("regime", omi.Exports().Default))
	_, err = other.VU.Runtime().RunString(`regime.configure({scenarios:{a:{}}}, {scope:'endpoint'})`)
	require.ErrorContains(t, err, "another VU's init context")
	_, err = other.VU.Runtime().RunString(`regime.configure({scenarios:{a:{}}}, {tagging:'maybe'})`)
	require.ErrorContains(t, err, "called twice in this script with different settings", "this script's first call comes first")
	third, _ := initVU(t, root)
	_, err = third.VU.Runtime().RunString(`regime.configure({scenarios:{a:{}}}, {tagging:'maybe'})`)
	require.ErrorContains(t, err, "another VU's init context", "invalid settings differ from another VU's")
	_, err = third.VU.Runtime().RunString(`regime.configure({vus: 2, scenarios:{a:{executor:'constant-vus'}}}, {scope:'scenario'})`)
	require.ErrorContains(t, err, "called twice in this script with different settings")
	_, err = rt.VU.Runtime().RunString(`regime.wrap(42)`)
	require.ErrorContains(t, err, "regime.wrap: expected a function")

	rt.MoveToVUContext(&lib.State{Tags: lib.NewVUStateTags(metrics.NewRegistry().RootTagSet())})
	_, err = rt.VU.Runtime().RunString(`regime.configure({}, {})`)
	require.ErrorContains(t, err, "must be called in the init context")
	_, err = rt.VU.Runtime().RunString(`regime.observe(-1)`)
	require.ErrorContains(t, err, "-1 is not > 0")
}

// TestConfigureComparesConfigurations: every VU's init context calls
// configure(); the same settings with their keys in another order are the
// same settings (an object reaches Go as a map, which marshals with its
// keys sorted: the same JSON). Refused settings refuse alike in every call.
func TestConfigureComparesConfigurations(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	first, _ := initVU(t, root)
	_, err := first.VU.Runtime().RunString(`regime.configure({scenarios: {a: {}, b: {}}}, ` +
		`{tagging: 'wrap', scenarios: {a: {scope: 'endpoint', maxEndpoints: 7, detector: {window_min: 30}}}})`)
	require.NoError(t, err)
	_, err = first.VU.Runtime().RunString(`regime.configure({scenarios: {b: {}, a: {}}}, ` +
		`{scenarios: {a: {detector: {window_min: 30}, maxEndpoints: 7, scope: 'endpoint'}}, tagging: 'wrap'})`)
	require.NoError(t, err, "the same script: its keys in another order")
	second, _ := initVU(t, root)
	_, err = second.VU.Runtime().RunString(`regime.configure({scenarios: {b: {}, a: {}}}, ` +
		`{scenarios: {a: {maxEndpoints: 7, scope: 'endpoint', detector: {window_min: 30}}}, tagging: 'wrap'})`)
	require.NoError(t, err, "another VU: its keys in another order")
	require.Equal(t, engine.TaggingWrap, root.rs.Tagging())

	bad := NewRootModule()
	rt, _ := initVU(t, bad)
	for range 2 {
		_, err = rt.VU.Runtime().RunString(`regime.configure({}, {tagging: 'maybe'})`)
		require.ErrorContains(t, err, `option 'tagging' is "maybe"`, "the same refused settings, refused again alike")
	}
	_, err = rt.VU.Runtime().RunString(`regime.configure({}, {tagging: 'never'})`)
	require.ErrorContains(t, err, "called twice in this script with different settings")
}

// TestConfigureSameJSONTakesTheFirstConfiguration: a VU whose call brings
// the first call's JSON (every VU of an ordinary script) takes that
// configuration as it is, without parsing it (or reading a profile file)
// again; another spelling of the same settings (a default spelled out) is
// parsed and compared.
func TestConfigureSameJSONTakesTheFirstConfiguration(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	const call = `regime.configure({scenarios: {a: {}}}, {tagging: 'wrap', scenarios: {a: {maxEndpoints: 7}}})`
	instance := func() (*modulestest.Runtime, *moduleInstance) {
		rt := modulestest.NewRuntime(t)
		registry := metrics.NewRegistry()
		metrics.RegisterBuiltinMetrics(registry)
		rt.VU.InitEnvField.Registry = registry
		mi := root.NewModuleInstance(rt.VU).(*moduleInstance)
		require.NoError(t, rt.VU.Runtime().Set("regime", mi.Exports().Default))
		return rt, mi
	}
	rt1, mi1 := instance()
	_, err := rt1.VU.Runtime().RunString(call)
	require.NoError(t, err)
	require.Same(t, root.cfg, mi1.configuredCfg)
	rt2, mi2 := instance()
	_, err = rt2.VU.Runtime().RunString(call)
	require.NoError(t, err)
	require.Same(t, root.cfg, mi2.configuredCfg, "the same JSON: the first call's configuration itself")
	rt3, mi3 := instance()
	_, err = rt3.VU.Runtime().RunString(`regime.configure({scenarios: {a: {}}}, {tagging: 'wrap', seriesLimit: 100000, scenarios: {a: {maxEndpoints: 7}}})`)
	require.NoError(t, err)
	require.NotSame(t, root.cfg, mi3.configuredCfg, "another spelling (a default spelled out): parsed, then compared")
	require.True(t, root.cfg.Equal(mi3.configuredCfg))
}

// initVU is a module instance in an init context, with a registry.
func initVU(t *testing.T, root *RootModule) (*modulestest.Runtime, *metrics.Registry) {
	t.Helper()
	registry := metrics.NewRegistry()
	metrics.RegisterBuiltinMetrics(registry)
	rt := modulestest.NewRuntime(t)
	rt.VU.InitEnvField.Registry = registry
	mi := root.NewModuleInstance(rt.VU).(*moduleInstance)
	require.NoError(t, rt.VU.Runtime().Set("regime", mi.Exports().Default))
	return rt, registry
}

// handleSummaryVU is a module instance in a VU context outside any scenario,
// as handleSummary, setup() and teardown() run.
func handleSummaryVU(t *testing.T, root *RootModule) *modulestest.Runtime {
	t.Helper()
	rt, registry := initVU(t, root)
	rt.MoveToVUContext(&lib.State{Tags: lib.NewVUStateTags(registry.RootTagSet())})
	return rt
}

// scenarioVU is a module instance configured with settings (a JS object
// literal), then in a VU context of scenario "load" with no regime tag yet.
func scenarioVU(t *testing.T, root *RootModule, settings string) *modulestest.Runtime {
	t.Helper()
	rt, registry := initVU(t, root)
	_, err := rt.VU.Runtime().RunString(`regime.configure({scenarios: {load: {}}}, ` + settings + `)`)
	require.NoError(t, err)
	rt.VU.CtxField = lib.WithScenarioState(rt.VU.CtxField, &lib.ScenarioState{Name: "load", StartTime: time.Now()})
	rt.MoveToVUContext(&lib.State{Tags: lib.NewVUStateTags(registry.RootTagSet().With("scenario", "load"))})
	return rt
}

// TestSaveResultsOnlyAfterTheTest: saveResults in the init context, or in
// setup(), the default function or teardown() (before k6's TestEnd), is an
// error that writes nothing, whatever its options; current() outside a
// scenario iteration is an error, never "". (After the test:
// internal/engine's TestSaveResultsAfterTheTest.)
func TestSaveResultsOnlyAfterTheTest(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	initRT, _ := initVU(t, root)
	dir := t.TempDir()
	_, err := initRT.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q})`, dir))
	require.ErrorContains(t, err, "saveResults() must be called after the test (in handleSummary), not in the init context")

	rt := handleSummaryVU(t, root)
	_, err = rt.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q})`, dir))
	require.ErrorContains(t, err, "saveResults() must be called from handleSummary")
	_, err = rt.VU.Runtime().RunString(`regime.saveResults({dir: 'x', extra: {f: () => 1}, nosuchkey: 1})`)
	require.ErrorContains(t, err, "saveResults() must be called from handleSummary", "before the options are read")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)

	_, err = rt.VU.Runtime().RunString(`regime.current()`)
	require.ErrorContains(t, err, "no regime outside a scenario iteration")
}

// TestCurrentWithoutTag: with tagging 'off' an iteration has no regime tag;
// current() gives its scenario's regime.
func TestCurrentWithoutTag(t *testing.T) {
	t.Parallel()
	rt := scenarioVU(t, NewRootModule(), `{tagging: 'off'}`)
	v, err := rt.VU.Runtime().RunString(`regime.current()`)
	require.NoError(t, err)
	require.Equal(t, "cold", v.String())
}

// TestObserveRefusesUnscalableValues: a first observe(5e-324) made the
// detector's scale infinite, so no later value could ever be steady.
func TestObserveRefusesUnscalableValues(t *testing.T) {
	t.Parallel()
	rt := scenarioVU(t, NewRootModule(), `{input: 'observe', detector: {method: 'benchmark'}}`)
	_, err := rt.VU.Runtime().RunString(`regime.observe(5e-324)`)
	require.ErrorContains(t, err, "5e-324 is below 1e-300")
	_, err = rt.VU.Runtime().RunString(`for (let i = 0; i < 2000; i++) regime.observe(10 + (i % 7) / 10)`)
	require.NoError(t, err)
	v, err := rt.VU.Runtime().RunString(`regime.current()`)
	require.NoError(t, err)
	require.Equal(t, "steady", v.String(), "values after the refused one settle")
}

// TestObserveNeedsInputObserve: observe() in a scenario that learns from
// its iterations is an error naming the setting.
func TestObserveNeedsInputObserve(t *testing.T) {
	t.Parallel()
	rt := scenarioVU(t, NewRootModule(), `{}`)
	_, err := rt.VU.Runtime().RunString(`regime.observe(5)`)
	require.ErrorContains(t, err, `regime.observe: scenario "load" learns from input "iteration"; configure it with input: "observe"`)
}

// TestIterationStartFastPathAllocatesNothing: once the VU carries its
// scenario's regime tag, the hook's work at each iteration start (k6 sets
// __ITER), engine calls included (FlushPending, Tagging, Scenario.Regime),
// allocates nothing. (Setting the same tag again allocates nothing either,
// so this guards allocations, not the pointer comparison itself.)
func TestIterationStartFastPathAllocatesNothing(t *testing.T) {
	root := NewRootModule()
	rt, registry := initVU(t, root)
	mi := root.NewModuleInstance(rt.VU).(*moduleInstance)
	require.NoError(t, rt.VU.Runtime().Set("regime", mi.Exports().Default))
	_, err := rt.VU.Runtime().RunString(`regime.configure({scenarios: {load: {}}}, {})`)
	require.NoError(t, err)
	rt.VU.CtxField = lib.WithScenarioState(rt.VU.CtxField, &lib.ScenarioState{Name: "load", StartTime: time.Now()})
	rt.MoveToVUContext(&lib.State{Tags: lib.NewVUStateTags(registry.RootTagSet().With("scenario", "load"))})
	mi.iterationStart(false) // the slow path: the regime tag is set
	v, ok := rt.VU.State().Tags.GetCurrentValues().Tags.Get(engine.RegimeTag)
	require.True(t, ok)
	require.Equal(t, "cold", v)
	require.Zero(t, testing.AllocsPerRun(1000, func() { mi.iterationStart(false) }))
}

// TestConfigureNamesUnencodableValues: NaN, Infinity and functions in the
// settings are refused naming the option (json.Marshal's own error named a
// Go type).
func TestConfigureNamesUnencodableValues(t *testing.T) {
	t.Parallel()
	for call, want := range map[string]string{
		`regime.configure({scenarios:{a:{}}}, {gateFraction: NaN})`:                                  "settings: gateFraction is NaN: give a finite number",
		`regime.configure({scenarios:{a:{}}}, {scenarios: {a: {detector: {window_min: Infinity}}}})`: "settings: scenarios.a.detector.window_min is +Inf",
		`regime.configure({scenarios:{a:{}}}, {tagging: () => 1})`:                                   "settings: tagging is a function: give a value",
		`regime.configure({scenarios:{a:{}}, thresholds: {x: [NaN]}}, {})`:                           "options: thresholds.x[0] is NaN",
		`const c = {}; c.self = c; regime.configure({scenarios:{a:{}}}, c)`:                          "settings: json: unsupported value: encountered a cycle",
	} {
		root := NewRootModule()
		rt := modulestest.NewRuntime(t)
		mi := root.NewModuleInstance(rt.VU).(*moduleInstance)
		require.NoError(t, rt.VU.Runtime().Set("regime", mi.Exports().Default))
		_, err := rt.VU.Runtime().RunString(call)
		require.ErrorContains(t, err, want, call)
	}
}

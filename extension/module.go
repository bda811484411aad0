package extension

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/grafana/sobek"
	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/observation"
	"github.com/xk6-regime/xk6-regime/internal/results"
	"go.k6.io/k6/v2/js/common"
	"go.k6.io/k6/v2/js/modules"
	"go.k6.io/k6/v2/lib"
	"go.k6.io/k6/v2/metrics"
)

// RootModule is the k6/x/regime module; one per process, sharing the run
// state between every VU and the handleSummary runtime. Register it with
// modules.Register; an output reaches the same run through Run.
type RootModule struct {
	rs  *RunState
	rec *recorder // what saveResults writes
	end *runEnd   // how the run ended

	endOnce sync.Once

	cfgMu   sync.Mutex
	cfgJSON string // settings of the first regime.configure() call
}

var _ modules.Module = (*RootModule)(nil)

// NewRootModule returns a module with a run state of its own, observed by
// its results writer (saveResults).
func NewRootModule() *RootModule {
	r := &RootModule{rs: newRunState(), rec: newRecorder(results.DefaultSeriesLimit), end: newRunEnd()}
	r.rs.AddObserver(r.rec)
	return r
}

// Run is the module's run state: what its JS functions read, and what an
// output observes.
func (r *RootModule) Run() *RunState { return r.rs }

// moduleInstance is the module as seen by one VU (one JS runtime). It is
// used only from that VU's goroutine.
type moduleInstance struct {
	root *RootModule
	rs   *RunState
	vu   modules.VU

	iterValue sobek.Value // what the script reads as __ITER

	// fast path of the iteration hook: nothing to do while the VU's tag set
	// and its scenario's regime are what they were at the last tagging.
	lastTags   *metrics.TagSet
	st         *scenarioState
	lastRegime int32
	execNoted  bool

	configured string // settings of this runtime's regime.configure() call
}

var _ modules.Instance = (*moduleInstance)(nil)

// NewModuleInstance is called by k6 for every JS runtime that imports
// k6/x/regime: the init runtime, each VU, handleSummary's.
func (r *RootModule) NewModuleInstance(vu modules.VU) modules.Instance {
	mi := &moduleInstance{root: r, rs: r.rs, vu: vu, iterValue: sobek.Undefined()}
	if env := vu.InitEnv(); env != nil {
		if err := r.rs.install(env.Registry, env.Logger, vu.Events()); err != nil {
			common.Throw(vu.Runtime(), err)
		}
		r.endOnce.Do(func() {
			r.end.install(env.Registry, env.Logger, vu.Events())
			if env.Logger != nil {
				r.rs.bd.setLogger(env.Logger)
			}
		})
		if env.TestPreInitState != nil {
			if env.LookupEnv != nil {
				if v, ok := env.LookupEnv(profileEnv); ok {
					r.rs.profileEnv.Store(v)
				}
			}
			ro := env.RuntimeOptions
			r.rs.engineOff.Store(strings.EqualFold(ro.SummaryMode.String, "disabled") && ro.NoThresholds.Bool)
		}
	}
	if err := mi.installIterationHook(); err != nil {
		common.Throw(vu.Runtime(), err)
	}
	return mi
}

// Exports lists the JS API; the default export holds the same functions.
func (mi *moduleInstance) Exports() modules.Exports {
	named := map[string]any{
		"configure": mi.configure,
		"wrap":      mi.wrap,
		"observe":   mi.observe,
		"current":   mi.current,
		"summary":   mi.summary,
	}
	for k, v := range resultsExports(mi.vu, mi.rs, mi.root.rec, mi.root.end) {
		named[k] = v // saveResults, textSummary
	}
	return modules.Exports{Default: named, Named: named}
}

// installIterationHook turns the global __ITER into an accessor. k6 assigns
// __ITER with Runtime.Set on the VU's goroutine right before every
// iteration (before the IterStart event and before the iteration function
// runs), so its setter is a synchronous per-iteration hook that costs one
// native call: no goroutine hand-off, unlike an IterStart subscription.
// Scripts still read __ITER as before.
func (mi *moduleInstance) installIterationHook() error {
	rt := mi.vu.Runtime()
	if v := rt.GlobalObject().Get("__ITER"); v != nil {
		mi.iterValue = v
	}
	getter := rt.ToValue(func(sobek.FunctionCall) sobek.Value { return mi.iterValue })
	setter := rt.ToValue(func(call sobek.FunctionCall) sobek.Value {
		mi.iterValue = call.Argument(0)
		mi.iterationStart(false)
		return sobek.Undefined()
	})
	if err := rt.GlobalObject().DefineAccessorProperty("__ITER", getter, setter, sobek.FLAG_TRUE, sobek.FLAG_TRUE); err != nil {
		return fmt.Errorf("k6/x/regime: cannot install the iteration hook: %w", err)
	}
	return nil
}

// iterationStart runs at the start of each iteration of this VU: from the
// __ITER hook (fromWrap false) or from a function made by regime.wrap().
func (mi *moduleInstance) iterationStart(fromWrap bool) {
	state := mi.vu.State()
	if state == nil {
		return
	}
	if !mi.execNoted {
		// once per VU: k6's execution state says, after the run, whether it
		// was stopped before its end (the run's end in summary.json)
		mi.execNoted = true
		mi.root.end.noteExecution(lib.GetExecutionState(mi.vu.Context()))
	}
	rs := mi.rs
	if rs.pending.Load() {
		rs.flushPending(state.Samples)
	}
	switch rs.cfg.Load().Tagging {
	case taggingAuto:
		if fromWrap {
			return // the hook has tagged this iteration already
		}
	case taggingWrap:
		if !fromWrap {
			return
		}
	default:
		return
	}
	cur := state.Tags.GetCurrentValues().Tags
	if cur == mi.lastTags && mi.st != nil && mi.st.regime.Load() == mi.lastRegime {
		return
	}
	mi.tag(state, cur)
}

// tag sets the regime tag of the VU to its scenario's current regime: the
// slow path, taken when the regime changes or k6 reset the VU's tags (it
// does when a scenario activates the VU).
func (mi *moduleInstance) tag(state *lib.State, cur *metrics.TagSet) {
	ss := lib.GetScenarioState(mi.vu.Context())
	if ss == nil {
		return
	}
	st := mi.rs.scenario(ss.Name)
	mi.rs.noteVU(state, st, ss, cur)
	r := st.regime.Load()
	state.Tags.Modify(func(t *metrics.TagsAndMeta) { t.SetTag(regimeTag, detector.Regime(r).String()) })
	mi.lastTags = state.Tags.GetCurrentValues().Tags
	mi.st, mi.lastRegime = st, r
}

// configure(options, settings) validates and installs the detection
// settings. It must run in the init context, where a bad setting stops k6
// before the test starts.
func (mi *moduleInstance) configure(options sobek.Value, settings sobek.Value) error {
	if mi.vu.State() != nil {
		return errors.New("regime.configure() must be called in the init context (top level of the script)")
	}
	optJSON, err := exportJSON(options)
	if err != nil {
		return fmt.Errorf("regime.configure: options: %w", err)
	}
	setJSON, err := exportJSON(settings)
	if err != nil {
		return fmt.Errorf("regime.configure: settings: %w", err)
	}
	key := string(optJSON) + "\x00" + string(setJSON)
	if mi.configured != "" && mi.configured != key {
		return errors.New("regime.configure() was called twice in this script with different settings; call it once, at the top level")
	}
	mi.configured = key
	mi.root.cfgMu.Lock()
	defer mi.root.cfgMu.Unlock()
	if mi.root.cfgJSON != "" {
		if mi.root.cfgJSON != key {
			return errors.New("regime.configure() was called with different settings in another VU's init context; " +
				"the settings must not depend on __VU, random values or the time")
		}
		return mi.applyTagging(mi.rs.cfg.Load())
	}
	lookup := func(string) (string, bool) { return "", false }
	if env := mi.vu.InitEnv(); env != nil && env.TestPreInitState != nil && env.LookupEnv != nil {
		lookup = env.LookupEnv
	}
	cfg, err := parseConfigEnv(optJSON, setJSON, lookup)
	if err != nil {
		return err
	}
	if err := mi.rs.setConfig(cfg); err != nil {
		return err
	}
	mi.root.rec.setSeriesLimit(cfg.SeriesLimit)
	mi.rs.bd.setMaxEndpoints(func(scenario string) int { return cfg.forScenario(scenario).MaxEndpoints })
	mi.root.cfgJSON = key
	return mi.applyTagging(cfg)
}

// applyTagging removes this runtime's iteration hook when the script does
// not want automatic tagging, so wrap() is the only per-iteration cost.
func (mi *moduleInstance) applyTagging(cfg *config) error {
	if cfg.Tagging == taggingAuto {
		return nil
	}
	err := mi.vu.Runtime().GlobalObject().DefineDataProperty("__ITER", mi.iterValue, sobek.FLAG_TRUE, sobek.FLAG_TRUE, sobek.FLAG_TRUE)
	if err != nil {
		return fmt.Errorf("k6/x/regime: cannot remove the iteration hook: %w", err)
	}
	return nil
}

func exportJSON(v sobek.Value) ([]byte, error) {
	if v == nil || sobek.IsUndefined(v) || sobek.IsNull(v) {
		return nil, nil
	}
	return json.Marshal(v.Export())
}

// wrap(fn) returns fn with the regime tag set at each call: the tagging
// path for scripts configured with tagging: 'wrap'.
func (mi *moduleInstance) wrap(fn sobek.Value) (sobek.Value, error) {
	callable, ok := sobek.AssertFunction(fn)
	if !ok {
		return nil, fmt.Errorf("regime.wrap: expected a function, got %s", describe(fn))
	}
	rt := mi.vu.Runtime()
	return rt.ToValue(func(call sobek.FunctionCall) sobek.Value {
		mi.iterationStart(true)
		v, err := callable(call.This, call.Arguments...)
		if err != nil {
			var ex *sobek.Exception
			if errors.As(err, &ex) {
				panic(ex)
			}
			common.Throw(rt, err)
		}
		return v
	}), nil
}

// observe(value) feeds one measurement to the detector of the VU's
// scenario, for scenarios configured with input: 'observe'.
func (mi *moduleInstance) observe(value float64) error {
	state := mi.vu.State()
	if state == nil {
		return errors.New("regime.observe() can only be called while a VU runs an iteration, not in the init context")
	}
	if err := observation.Check(value); err != nil {
		return fmt.Errorf("regime.observe: value must be a finite number >= %g: %w", observation.Min, err)
	}
	ss := lib.GetScenarioState(mi.vu.Context())
	if ss == nil {
		return errors.New("regime.observe: no scenario is running")
	}
	st := mi.rs.scenario(ss.Name)
	if st.cfg.Input != inputObserve {
		return fmt.Errorf("regime.observe: scenario %q learns from input %q; configure it with input: %q to feed it values",
			ss.Name, st.cfg.Input, inputObserve)
	}
	st.mu.Lock()
	if !st.frozen {
		now := time.Now()
		st.observe(mi.rs, "", now, value)
		// the scenario's span includes its observations: they reach the
		// detector at once, its iteration samples only when k6 flushes
		// them, so a gate judged before the last flush saw steady state
		// declared after the last iteration it knew of (held 0% of the
		// run: TestXk6Build's smoke test, 4,000 iterations in 14 ms, failed
		// so about half the time)
		if now.After(st.lastSeen) {
			st.lastSeen = now
		}
	}
	pending := st.coldCount != st.coldPushed
	st.mu.Unlock()
	if pending {
		mi.rs.pending.Store(true)
	}
	return nil
}

// current returns the regime of the VU's running iteration: its regime tag,
// or (with tagging 'off', or 'wrap' outside a wrapped function) its
// scenario's regime. Outside a scenario iteration (init, setup(),
// teardown(), handleSummary) there is none: an error, never "".
func (mi *moduleInstance) current() (string, error) {
	state := mi.vu.State()
	if state == nil {
		return "", errors.New("regime.current() can only be called while a VU runs an iteration, not in the init context")
	}
	if v, ok := state.Tags.GetCurrentValues().Tags.Get(regimeTag); ok && v != "" {
		return v, nil
	}
	ss := lib.GetScenarioState(mi.vu.Context())
	if ss == nil {
		return "", errors.New("regime.current() has no regime outside a scenario iteration " +
			"(setup(), teardown() and handleSummary run in none)")
	}
	return detector.Regime(mi.rs.scenario(ss.Name).regime.Load()).String(), nil
}

// summary returns what the detectors found, per scenario, for handleSummary
// (an error, a bug, is thrown in JavaScript).
func (mi *moduleInstance) summary() (map[string]any, error) {
	return mi.rs.summary()
}

func describe(v sobek.Value) string {
	if v == nil || sobek.IsUndefined(v) {
		return "undefined"
	}
	if sobek.IsNull(v) {
		return "null"
	}
	return fmt.Sprintf("%s %q", v.ExportType(), v.String())
}

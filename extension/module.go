package extension

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sync"

	"github.com/grafana/sobek"
	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/engine"
	"github.com/xk6-regime/xk6-regime/internal/observation"
	"go.k6.io/k6/v2/js/common"
	"go.k6.io/k6/v2/js/modules"
	"go.k6.io/k6/v2/lib"
	"go.k6.io/k6/v2/metrics"
)

// RootModule is the k6/x/regime module; one per process, sharing the run
// state between every VU and the handleSummary runtime. Register it with
// modules.Register; an output reaches the same run through Run.
type RootModule struct {
	rs *engine.RunState

	cfgMu sync.Mutex
	cfg   *engine.Config // the configuration of the first regime.configure() call
	// cfgJSON is that call's options and settings as JSON: a VU whose call
	// brings the same JSON (every VU of an ordinary script) takes cfg as it
	// is, without parsing again or reading a profile file again
	cfgJSON string
}

var _ modules.Module = (*RootModule)(nil)

// NewRootModule returns a module with a run state of its own.
func NewRootModule() *RootModule { return &RootModule{rs: engine.NewRunState()} }

// Run is the module's run state: what its JS functions read, and what an
// output observes.
func (r *RootModule) Run() *engine.RunState { return r.rs }

// moduleInstance is the module as seen by one VU (one JS runtime). It is
// used only from that VU's goroutine.
type moduleInstance struct {
	root *RootModule
	rs   *engine.RunState
	vu   modules.VU

	iterValue sobek.Value // what the script reads as __ITER

	// fast path of the iteration hook: nothing to do while the VU's tag set
	// and its scenario's regime are what they were at the last tagging.
	lastTags   *metrics.TagSet
	lastBase   *metrics.TagSet // lastTags without the regime tag ('wrap')
	st         *engine.Scenario
	lastRegime detector.Regime
	execNoted  bool
	// the tag set at which note() last recorded the VU's scenario (tagging
	// 'off', and 'wrap' outside wrap())
	notedTags *metrics.TagSet

	// this runtime's first regime.configure() call: its configuration, or
	// the error its settings were refused with
	configured    bool
	configuredCfg *engine.Config
	configuredErr error
}

var _ modules.Instance = (*moduleInstance)(nil)

// NewModuleInstance is called by k6 for every JS runtime that imports
// k6/x/regime: the init runtime, each VU, handleSummary's.
func (r *RootModule) NewModuleInstance(vu modules.VU) modules.Instance {
	mi := &moduleInstance{root: r, rs: r.rs, vu: vu, iterValue: sobek.Undefined()}
	if env := vu.InitEnv(); env != nil {
		if err := r.rs.Install(env, vu.Events()); err != nil {
			common.Throw(vu.Runtime(), err)
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
		"configure":   mi.configure,
		"wrap":        mi.wrap,
		"observe":     mi.observe,
		"current":     mi.current,
		"summary":     mi.summary,
		"saveResults": mi.saveResults,
		"textSummary": mi.textSummary,
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
		mi.rs.NoteExecution(lib.GetExecutionState(mi.vu.Context()))
	}
	rs := mi.rs
	rs.FlushPending(state.Samples)
	switch rs.Tagging() {
	case engine.TaggingAuto:
		if fromWrap {
			return // the hook has tagged this iteration already
		}
	case engine.TaggingWrap:
		if !fromWrap {
			mi.note(state, mi.untagWrapped(state))
			return
		}
	default:
		mi.note(state, state.Tags.GetCurrentValues().Tags)
		return
	}
	cur := state.Tags.GetCurrentValues().Tags
	if cur != mi.lastTags && mi.lastTags != nil && cur != mi.lastBase {
		// the VU's tags changed since this extension set them: by k6 (a
		// scenario's activation resets them: no regime tag) or by the
		// script; a regime value not the one set is the script's own
		if v, ok := cur.Get(engine.RegimeTag); ok && v != mi.lastRegime.String() {
			mi.rs.NoteForeignRegimeTag(v)
		}
	}
	if mi.st != nil && mi.st.Regime() == mi.lastRegime {
		if cur == mi.lastTags {
			return
		}
		if fromWrap && cur == mi.lastBase && mi.lastBase != nil {
			// 'wrap': the set untagWrapped swapped back to at this
			// iteration's start; the tagged one is still right
			tagged := mi.lastTags
			state.Tags.Modify(func(t *metrics.TagsAndMeta) { t.Tags = tagged })
			return
		}
	}
	mi.tag(state, cur)
}

// untagWrapped takes off the regime tag that a wrap() call of this VU's
// last iteration set ('wrap'): only the iterations that call a wrapped
// function carry it, from that call to their end (their iteration samples
// included). Without it, an iteration that calls no wrapped function
// carried the regime of the VU's last wrapped call, however old. The
// usual case, the tag set the wrap() call left, is a pointer swap back
// to the set it was made from, and the next wrapped call's a swap again
// while the regime holds. It returns the VU's tag set after its change,
// for note (one read of the set per iteration).
func (mi *moduleInstance) untagWrapped(state *lib.State) *metrics.TagSet {
	cur := state.Tags.GetCurrentValues().Tags
	if mi.lastTags == nil {
		return cur
	}
	switch {
	case cur == mi.lastTags:
		// both sets are kept: the next wrapped call swaps back (iterationStart)
		base := mi.lastBase
		state.Tags.Modify(func(t *metrics.TagsAndMeta) { t.Tags = base })
		return base
	case cur == mi.lastBase:
		// untagged already (no wrapped call since)
	default:
		if _, ok := cur.Get(engine.RegimeTag); ok {
			// the script changed the VU's tags since: take the tag off theirs
			state.Tags.Modify(func(t *metrics.TagsAndMeta) { t.DeleteTag(engine.RegimeTag) })
			cur = state.Tags.GetCurrentValues().Tags
		}
		mi.lastTags, mi.lastBase = nil, nil
	}
	return cur
}

// note records the VU's scenario for the engine without tagging (tagging
// 'off', and the iterations of 'wrap' outside wrap()): k6's samples channel,
// through which the steady gate and the settled view are pushed at the
// end, and the scenario's start and tags. Without it a run that tags
// nothing would push no regime_* metric, and every threshold on them would
// pass on no data. Its cost per iteration is a pointer comparison: k6
// replaces the VU's tag set when a scenario activates the VU. cur is the
// VU's current tag set, read by the caller.
func (mi *moduleInstance) note(state *lib.State, cur *metrics.TagSet) {
	if cur == mi.notedTags || cur == mi.lastTags {
		return // noted already, or tagged by wrap() (tag() notes too)
	}
	ss := lib.GetScenarioState(mi.vu.Context())
	if ss == nil {
		return
	}
	mi.rs.NoteVU(state, mi.rs.Scenario(ss.Name), ss, cur)
	mi.notedTags = cur
}

// tag sets the regime tag of the VU to its scenario's current regime: the
// slow path, taken when the regime changes or k6 reset the VU's tags (it
// does when a scenario activates the VU).
func (mi *moduleInstance) tag(state *lib.State, cur *metrics.TagSet) {
	ss := lib.GetScenarioState(mi.vu.Context())
	if ss == nil {
		return
	}
	st := mi.rs.Scenario(ss.Name)
	mi.rs.NoteVU(state, st, ss, cur)
	r := st.Regime()
	base := cur
	if _, ok := cur.Get(engine.RegimeTag); ok {
		base = cur.Without(engine.RegimeTag)
	}
	state.Tags.Modify(func(t *metrics.TagsAndMeta) { t.SetTag(engine.RegimeTag, r.String()) })
	mi.lastTags, mi.lastBase = state.Tags.GetCurrentValues().Tags, base
	mi.st, mi.lastRegime = st, r
}

// configure(options, settings) validates and installs the detection
// settings. It must run in the init context, where a bad setting stops k6
// before the test starts. Every VU's init context runs the script: the
// first call installs its configuration, and every other call must bring
// the same one: the same JSON (the fast path: the first configuration is
// taken as it is), or settings that parse to an equal configuration
// (engine.Config.Equal: defaults spelt out or left out alike).
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
	mi.root.cfgMu.Lock()
	if mi.root.cfg != nil && key == mi.root.cfgJSON && (!mi.configured || mi.configuredCfg == mi.root.cfg) {
		cfg := mi.root.cfg
		mi.root.cfgMu.Unlock()
		mi.configured, mi.configuredCfg, mi.configuredErr = true, cfg, nil
		return nil
	}
	mi.root.cfgMu.Unlock()
	lookup := func(string) (string, bool) { return "", false }
	if env := mi.vu.InitEnv(); env != nil && env.TestPreInitState != nil && env.LookupEnv != nil {
		lookup = env.LookupEnv
	}
	cfg, parseErr := engine.ParseConfig(optJSON, setJSON, lookup)
	if mi.configured && !sameSettings(mi.configuredCfg, mi.configuredErr, cfg, parseErr) {
		return errors.New("regime.configure() was called twice in this script with different settings; call it once, at the top level")
	}
	if !mi.configured {
		mi.configured, mi.configuredCfg, mi.configuredErr = true, cfg, parseErr
	}
	mi.root.cfgMu.Lock()
	defer mi.root.cfgMu.Unlock()
	if mi.root.cfg != nil {
		if parseErr != nil || !mi.root.cfg.Equal(cfg) {
			return errors.New("regime.configure() was called with different settings in another VU's init context; " +
				"the settings must not depend on __VU, random values or the time")
		}
		return nil
	}
	if parseErr != nil {
		return parseErr
	}
	if err := mi.rs.Configure(cfg); err != nil {
		return err
	}
	mi.root.cfg, mi.root.cfgJSON = cfg, key
	return nil
}

// sameSettings says whether two regime.configure() calls brought the same
// settings: equal configurations, or settings refused alike (invalid
// settings have no configuration to compare).
func sameSettings(a *engine.Config, aErr error, b *engine.Config, bErr error) bool {
	if aErr != nil || bErr != nil {
		return aErr != nil && bErr != nil && aErr.Error() == bErr.Error()
	}
	return a.Equal(b)
}

func exportJSON(v sobek.Value) ([]byte, error) {
	if v == nil || sobek.IsUndefined(v) || sobek.IsNull(v) {
		return nil, nil
	}
	x := v.Export()
	b, err := json.Marshal(x)
	if err != nil {
		// name the option json.Marshal's error does not (its Go type)
		if named := jsonValue(x, "", 0); named != nil {
			return nil, named
		}
		return nil, err // a cycle, for one: said as json.Marshal says it
	}
	return b, nil
}

// jsonValue finds what JSON cannot carry in an exported settings value (NaN,
// ±Infinity, a function) and names its option: json.Marshal's own error
// names a Go type, not the option.
func jsonValue(x any, path string, depth int) error {
	if depth > 64 {
		return nil // a cycle (sobek keeps them in the exported maps)
	}
	name := path
	if name == "" {
		name = "the value"
	}
	switch t := x.(type) {
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return fmt.Errorf("%s is %v: give a finite number", name, t)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if err := jsonValue(t[k], p, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if err := jsonValue(e, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	default:
		if x != nil && reflect.TypeOf(x).Kind() == reflect.Func {
			return fmt.Errorf("%s is a function: give a value", name)
		}
	}
	return nil
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
	return mi.rs.Observe(ss.Name, value)
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
	if v, ok := state.Tags.GetCurrentValues().Tags.Get(engine.RegimeTag); ok && v != "" {
		return v, nil
	}
	ss := lib.GetScenarioState(mi.vu.Context())
	if ss == nil {
		return "", errors.New("regime.current() has no regime outside a scenario iteration " +
			"(setup(), teardown() and handleSummary run in none)")
	}
	return mi.rs.Scenario(ss.Name).Regime().String(), nil
}

// summary returns what the detectors found, per scenario, for handleSummary
// (an error, a bug, is thrown in JavaScript).
func (mi *moduleInstance) summary() (map[string]any, error) {
	return summaryJS(mi.rs.SummaryReport())
}

// summaryJS is the report as JavaScript reads it: its JSON, decoded, at
// the edge. The typed report handed to sobek as it is would not read the
// same: sobek names a struct's fields by k6's field name mapper, not by
// their JSON names (ttss_ms would be t_t_s_s_ms, p99_9 p999), keeps an
// embedded struct as an object of its own (Detection's fields would move
// under "detection"), and ignores omitempty, the report's own marshallers
// (a settled view that cannot be written is its error) and the JSON form of
// times. The JSON is what index.d.ts types (TestIndexTypesMatchReport).
func summaryJS(rep *engine.RunReport) (map[string]any, error) {
	b, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("regime.summary(): the report cannot be written: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("regime.summary(): the report cannot be read back: %w", err)
	}
	return m, nil
}

// saveResults({dir, testid, extra, report, files, aborted, thresholds,
// required}) writes results/<run id>/ and returns that path. It must be
// called from handleSummary (k6 runs it on interrupted runs too), once the
// test has ended.
func (mi *moduleInstance) saveResults(v sobek.Value) (string, error) {
	if mi.vu.State() == nil && mi.vu.InitEnv() != nil {
		return "", errors.New("saveResults() must be called after the test (in handleSummary), not in the init context")
	}
	if !mi.rs.Ended() {
		return "", engine.ErrNotAfterTest // before the options are read, as SaveResults does
	}
	b, err := exportJSON(v)
	if err != nil {
		return "", fmt.Errorf("saveResults: options: %w", err)
	}
	return mi.rs.SaveResults(b)
}

// textSummary() is the console regime table of the saved results (or of
// the run so far when nothing was saved).
func (mi *moduleInstance) textSummary() (string, error) { return mi.rs.TextSummary() }

func describe(v sobek.Value) string {
	if v == nil || sobek.IsUndefined(v) {
		return "undefined"
	}
	if sobek.IsNull(v) {
		return "null"
	}
	return fmt.Sprintf("%s %q", v.ExportType(), v.String())
}

package engine

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"go.k6.io/k6/v2/js/common"
	"go.k6.io/k6/v2/lib"
	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/latency"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// Names of the k6 built-in metrics the detectors learn from.
const (
	iterationDurationMetric = "iteration_duration"
	httpReqDurationMetric   = "http_req_duration"
	grpcReqDurationMetric   = "grpc_req_duration"

	scenarioTag = "scenario"
)

// RegimeTag is the tag that carries an iteration's regime (cold, warmup,
// steady) on its samples: set by the JS module, read back by the engine.
const RegimeTag = "regime"

// k6 event type numbers (internal/event, which an extension cannot import).
// The names are checked when an event arrives.
const (
	eventTestEnd = 3
)

// RunState is the engine's state for one k6 process (one test run). The JS
// module drives it (Install, Configure, the iteration hook's NoteExecution,
// FlushPending, Tagging, Scenario and NoteVU, Observe, Report, SaveResults,
// TextSummary); an output observes it (AddObserver, RemoveObserver, Report).
//
// It is safe for concurrent use: VUs read scenario regimes lock-free; each
// scenario has its own mutex; the map of scenarios has mu.
type RunState struct {
	cfg atomic.Pointer[Config]

	rec     *recorder // what SaveResults writes
	end     *runEnd   // how the run ended
	endOnce sync.Once

	// the profile's checks made at TestEnd, for summary.json
	profileMu      sync.Mutex
	profileResults []results.ProfileCheck
	// profileEnv is K6_REGIME_PROFILE as the init context saw it ("": unset),
	// for the warning when no regime.configure() call read it
	profileEnv atomic.Value

	mu        sync.RWMutex
	scenarios map[string]*Scenario
	optionSc  []string // scenario names from the VUs' options
	// the tags of a scenario that never ran (no VU gave its tag set): the
	// run's tags and the scenario's own, from the options (set once)
	optionTags atomic.Pointer[map[string]map[string]string]
	logger     logrus.FieldLogger
	registry   *metrics.Registry
	m          regimeMetrics

	installOnce sync.Once
	trackOnce   sync.Once
	bd          *breakdown
	tags        tagCache // the tag values of the samples' tag sets

	samples   atomic.Pointer[chan<- metrics.SampleContainer]
	pending   atomic.Bool
	pendingMu sync.Mutex
	queue     []metrics.SampleContainer
	ended     atomic.Bool
	dropped   atomic.Int64 // samples produced after the test ended
	// foreign counts the iterations that started with a regime tag the
	// script set on the VU itself (exec.vu.metrics.tags): it overrides the
	// extension's, in the samples and the counts
	foreign     atomic.Int64
	foreignOnce sync.Once

	observers atomic.Pointer[[]Observer]

	ingested      atomic.Int64 // iteration samples seen by the detection sink
	noScenarioTag atomic.Int64 // samples without the scenario tag
	// engineOff: k6 runs no metrics engine (--summary-mode=disabled with
	// --no-thresholds), so the detection sinks receive nothing.
	engineOff atomic.Bool
}

// Observer receives the detectors' events as they happen (an output, the
// results writer). Calls come from k6's metrics engine goroutine, or a VU in
// regime.observe(), with the scenario's lock held: they must not block.
type Observer interface {
	// Transition: a regime change of a scenario (or of one of its endpoints).
	Transition(scenario string, t TransitionRecord)
	// Window: a detector window closed (endpoint "" for the scenario's).
	Window(scenario, endpoint string, w detector.Window)
	// Iteration: one finished iteration of a scenario, its 0-based index in
	// the scenario (arrival order at the metrics engine), the regime it was
	// tagged with ("" when untagged), its end time and duration in ms.
	Iteration(scenario string, index int64, regime string, end time.Time, ms float64)
}

// AddObserver registers o: from then on it receives the run's events.
// RemoveObserver unregisters it. Both are safe for concurrent use.
func (rs *RunState) AddObserver(o Observer) {
	for {
		old := rs.observers.Load()
		var next []Observer
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, o)
		if rs.observers.CompareAndSwap(old, &next) {
			return
		}
	}
}

// RemoveObserver unregisters o; after it returns, o receives no more events.
func (rs *RunState) RemoveObserver(o Observer) {
	for {
		old := rs.observers.Load()
		if old == nil {
			return
		}
		next := make([]Observer, 0, len(*old))
		for _, x := range *old {
			if x != o {
				next = append(next, x)
			}
		}
		if rs.observers.CompareAndSwap(old, &next) {
			return
		}
	}
}

func (rs *RunState) eachObserver(fn func(Observer)) {
	if obs := rs.observers.Load(); obs != nil {
		for _, o := range *obs {
			fn(o)
		}
	}
}

// regimeMetrics are the custom metrics the extension registers.
type regimeMetrics struct {
	ttss      *metrics.Metric // Trend, time: time to steady state per scenario
	coldStart *metrics.Metric // Counter, time: summed duration of cold iterations
	coldIters *metrics.Metric // Counter: number of cold iterations
	steady    *metrics.Metric // Rate: 1 when steady state was reached and held, else 0 (at test end)
	relapses  *metrics.Metric // Counter: steady state lost

	// the settled view, at test end (settled.go)
	settled, settledCount                                      *metrics.Metric // Rate, Counter
	settledP50, settledP90, settledP95, settledP99, settledMax *metrics.Metric // Gauge, time
	settledTTSS                                                *metrics.Metric // Gauge, time
	// against a profile (regime.configure's profile): the run's figure /
	// the profile's, and how many figures were compared
	profileTTSS, profileP50, profileP99, profileChecks *metrics.Metric // Gauges, Counter
	settledErrors                                      *metrics.Metric // Gauge
}

// NewRunState returns the state of a new run, observed by its results
// writer (SaveResults).
func NewRunState() *RunState {
	rs := newRunState()
	rs.AddObserver(rs.rec)
	return rs
}

// newRunState is a run state whose results writer does not observe it (the
// tests that feed a run state directly start from it).
func newRunState() *RunState {
	rs := &RunState{scenarios: make(map[string]*Scenario), logger: logrus.StandardLogger(), bd: newBreakdown(),
		rec: newRecorder(results.DefaultSeriesLimit), end: newRunEnd()}
	rs.cfg.Store(defaultConfig())
	return rs
}

// Install hooks the run into k6 from an init context (env, with the VU's
// events). Once per process: the run's metrics, the detection sinks on k6's
// metrics, and the handlers of k6's TestStart, TestEnd and Exit events. From
// every init context of the test itself: K6_REGIME_PROFILE, and whether k6
// runs a metrics engine at all.
func (rs *RunState) Install(env *common.InitEnvironment, events common.Events) error {
	if err := rs.install(env.Registry, env.Logger, events); err != nil {
		return err
	}
	rs.endOnce.Do(func() {
		rs.end.install(env.Registry, env.Logger, events)
		if env.Logger != nil {
			rs.bd.setLogger(env.Logger)
		}
	})
	if env.TestPreInitState != nil {
		if env.LookupEnv != nil {
			if v, ok := env.LookupEnv(profileEnv); ok {
				rs.profileEnv.Store(v)
			}
		}
		ro := env.RuntimeOptions
		rs.engineOff.Store(strings.EqualFold(ro.SummaryMode.String, "disabled") && ro.NoThresholds.Bool)
		rs.end.summaryOff.Store(strings.EqualFold(ro.SummaryMode.String, "disabled"))
	}
	return nil
}

// install registers the metrics, the detection sink and the end-of-test
// handler; it runs once per process, from the first VU's init context.
func (rs *RunState) install(registry *metrics.Registry, logger logrus.FieldLogger, events common.Events) error {
	var err error
	rs.installOnce.Do(func() {
		rs.registry = registry
		if logger != nil {
			rs.logger = logger
		}
		if err = rs.registerMetrics(registry); err != nil {
			return
		}
		for _, a := range []struct {
			name string
			kind sinkKind
		}{
			{iterationDurationMetric, sinkIteration},
			{httpReqDurationMetric, sinkHTTP},
			{grpcReqDurationMetric, sinkGRPC},
			{httpReqConnectingMetric, sinkConnect},
			{httpReqTLSMetric, sinkTLS},
		} {
			if err = rs.attachSink(registry, a.name, a.kind); err != nil {
				return
			}
		}
		rs.subscribeTestEnd(events)
	})
	return err
}

func (rs *RunState) registerMetrics(r *metrics.Registry) error {
	var err error
	reg := func(name string, t metrics.MetricType, vt ...metrics.ValueType) *metrics.Metric {
		if err != nil {
			return nil
		}
		var m *metrics.Metric
		m, err = r.NewMetric(name, t, vt...)
		return m
	}
	rs.m = regimeMetrics{
		ttss:      reg("regime_ttss", metrics.Trend, metrics.Time),
		coldStart: reg("regime_cold_start", metrics.Counter, metrics.Time),
		coldIters: reg("regime_cold_iterations", metrics.Counter),
		steady:    reg("regime_steady", metrics.Rate),
		relapses:  reg("regime_relapses", metrics.Counter),

		settled:       reg("regime_settled", metrics.Rate),
		settledCount:  reg("regime_settled_count", metrics.Counter),
		settledP50:    reg("regime_settled_p50", metrics.Gauge, metrics.Time),
		settledP90:    reg("regime_settled_p90", metrics.Gauge, metrics.Time),
		settledP95:    reg("regime_settled_p95", metrics.Gauge, metrics.Time),
		settledP99:    reg("regime_settled_p99", metrics.Gauge, metrics.Time),
		settledMax:    reg("regime_settled_max", metrics.Gauge, metrics.Time),
		settledTTSS:   reg("regime_settled_ttss", metrics.Gauge, metrics.Time),
		settledErrors: reg("regime_settled_error_rate", metrics.Gauge),

		profileTTSS:   reg("regime_profile_ttss", metrics.Gauge),
		profileP50:    reg("regime_profile_p50", metrics.Gauge),
		profileP99:    reg("regime_profile_p99", metrics.Gauge),
		profileChecks: reg("regime_profile_checks", metrics.Counter),
	}
	return err
}

type sinkKind uint8

const (
	sinkIteration sinkKind = iota // iteration_duration: accounting and default detection input
	sinkHTTP                      // http_req_duration: breakdown, endpoint detection
	sinkGRPC                      // grpc_req_duration: breakdown, endpoint detection
	sinkConnect                   // http_req_connecting: new connections
	sinkTLS                       // http_req_tls_handshaking
	sinkTracked                   // custom metrics named in configure({track}), by phase
)

// detectionSink receives, from k6's metrics engine, every sample of the
// metric it is attached to (as a submetric with no tag filter). It is never
// shown: its metric is marked observed up front, so the engine does not add
// it to the end-of-test summary, and it has no thresholds.
type detectionSink struct {
	rs   *RunState
	kind sinkKind
}

var _ metrics.Sink = (*detectionSink)(nil)

func (d *detectionSink) Add(s metrics.Sample) { d.rs.ingest(d.kind, s) }

func (d *detectionSink) Format(time.Duration) map[string]float64 { return map[string]float64{} }

func (d *detectionSink) IsEmpty() bool { return true }

// attachSink hooks a detection sink onto a built-in metric. k6's metrics
// engine adds every sample of a metric to each of its submetrics whose tags
// the sample contains; an empty tag set matches every sample.
func (rs *RunState) attachSink(r *metrics.Registry, metricName string, kind sinkKind) error {
	parent := r.Get(metricName)
	if parent == nil {
		return fmt.Errorf("k6/x/regime: k6 has no %q metric to learn from", metricName)
	}
	sub := &metrics.Submetric{
		Name:   metricName + "{__regime_detector__}",
		Suffix: "__regime_detector__",
		Tags:   r.RootTagSet(),
		Parent: parent,
	}
	sub.Metric = &metrics.Metric{
		Name:     sub.Name,
		Type:     parent.Type,
		Contains: parent.Contains,
		Sink:     &detectionSink{rs: rs, kind: kind},
		Sub:      sub,
		Observed: true, // keeps it out of the end-of-test summary
	}
	parent.Submetrics = append(parent.Submetrics, sub)
	return nil
}

// Configure installs the configuration of regime.configure() (ParseConfig)
// for the run: the detectors, the tracked metrics, the series limit of the
// results and the endpoint caps of the request breakdown. Every VU's init
// context runs the same script; the caller installs the first call's
// configuration and checks that the others are Equal to it.
func (rs *RunState) Configure(cfg *Config) error {
	if err := rs.setConfig(cfg); err != nil {
		return err
	}
	rs.rec.setSeriesLimit(cfg.SeriesLimit)
	rs.bd.setMaxEndpoints(func(scenario string) int { return cfg.forScenario(scenario).MaxEndpoints })
	return nil
}

// Tagging is the tagging mode of the run's configuration (TaggingAuto,
// TaggingWrap or TaggingOff), read by every VU at every iteration start.
func (rs *RunState) Tagging() string { return rs.cfg.Load().Tagging }

// setConfig installs a configuration: the run's, and the tracked metrics'
// sinks (once).
func (rs *RunState) setConfig(cfg *Config) error {
	if rs.registry != nil {
		var missing []string
		for _, name := range cfg.Track {
			if rs.registry.Get(name) == nil {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("regime.configure: option 'track' names metrics that do not exist (yet): %s; "+
				"create them (new Counter(...), ...) before calling regime.configure()", strings.Join(missing, ", "))
		}
	}
	rs.cfg.Store(cfg)
	var err error
	if rs.registry != nil {
		rs.trackOnce.Do(func() {
			for _, name := range cfg.Track {
				if err = rs.attachSink(rs.registry, name, sinkTracked); err != nil {
					return
				}
			}
		})
	}
	return err
}

// Scenario returns the state of a scenario, creating it on first use.
func (rs *RunState) Scenario(name string) *Scenario {
	rs.mu.RLock()
	st := rs.scenarios[name]
	rs.mu.RUnlock()
	if st != nil {
		return st
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if st = rs.scenarios[name]; st == nil {
		st = newScenario(name, rs.cfg.Load().forScenario(name))
		st.logger = rs.logger
		rs.scenarios[name] = st
	}
	return st
}

// ingest is called by k6's metrics engine goroutine for every sample of the
// metrics the detection sinks are attached to, in batches every 50 ms.
func (rs *RunState) ingest(kind sinkKind, s metrics.Sample) {
	if kind == sinkTracked {
		rs.bd.addTracked(s)
		return
	}
	tags := rs.tags.get(s.Tags)
	switch kind {
	case sinkConnect, sinkTLS:
		rs.bd.addConnect(s, tags, kind == sinkTLS)
		return
	case sinkHTTP:
		rs.bd.addLatency(s, tags, "http")
	case sinkGRPC:
		rs.bd.addLatency(s, tags, "grpc")
	}
	name, ok := tags.scenario, tags.hasScenario
	if !ok {
		if kind == sinkIteration {
			// requests of setup() and teardown() have no scenario either (their
			// breakdown rows are "(setup)" and "(teardown)"); only
			// an iteration without one means the system tag was turned off
			rs.noScenarioTag.Add(1)
		}
		return
	}
	st := tags.st.Load()
	if st == nil {
		st = rs.Scenario(name)
		tags.st.Store(st)
	}
	endNs := s.Time.UnixNano()
	st.mu.Lock()
	defer st.mu.Unlock()
	switch kind {
	case sinkHTTP:
		st.recordRequest(endNs, s.Value, tags.failed("http"))
	case sinkGRPC:
		st.recordRequest(endNs, s.Value, tags.failed("grpc"))
	}
	if kind != sinkIteration && st.cfg.Input != inputRequest {
		return
	}
	if kind == sinkIteration {
		rs.ingested.Add(1)
		idx, tag := st.account(s, endNs, tags)
		rs.eachObserver(func(o Observer) { o.Iteration(st.name, idx, tag, s.Time, s.Value) })
		if st.cfg.Input == inputIteration && !st.frozen {
			st.observe(rs, "", endNs, s.Value)
		}
	} else if !st.frozen {
		endpoint := tags.endpointTag
		if st.cfg.EndpointTag != "endpoint" {
			endpoint, _ = s.Tags.Get(st.cfg.EndpointTag)
		}
		st.observe(rs, endpoint, endNs, s.Value)
	}
	if st.coldCount != st.coldPushed {
		rs.pending.Store(true)
	}
}

// regimeHistograms calls fn, with the scenario's lock held, for each
// scenario and regime with the histogram of its iteration durations (ms).
// fn must not keep h; copy or merge it.
func (rs *RunState) regimeHistograms(fn func(scenario string, r detector.Regime, h *latency.Histogram)) {
	for _, name := range rs.knownScenarios() {
		st := rs.Scenario(name)
		st.mu.Lock()
		for i := range st.tagged {
			fn(name, detector.Regime(i), st.tagged[i].hist)
		}
		st.mu.Unlock()
	}
}

// onTransition returns the transition handler of a scenario's detectors.
// It runs inside Observe, with st.mu held.
func (rs *RunState) onTransition(st *Scenario) func(*endpointScope, detector.Transition) {
	return func(sc *endpointScope, t detector.Transition) {
		start := st.start
		if start.IsZero() {
			start = st.firstSeen
		}
		at := time.Unix(0, t.At.Time)
		rec := TransitionRecord{
			Endpoint: sc.name, Kind: t.Kind, From: t.From, To: t.To,
			At: t.At, Boundary: t.Boundary, Elapsed: at.Sub(start),
		}
		if len(st.transitions) < maxTransitions {
			st.transitions = append(st.transitions, rec)
		} else {
			st.droppedTransitions++
		}
		rs.eachObserver(func(o Observer) { o.Transition(st.name, rec) })
		fields := logrus.Fields{
			"scenario": st.name, "regime": t.To.String(), "iteration": t.At.Index,
			"elapsed": rec.Elapsed.Round(time.Millisecond).String(),
		}
		if sc.name != "" {
			fields["endpoint"] = sc.name
		}
		switch {
		case t.Kind == "relapse":
			st.relapses++
			rs.enqueue(rs.sample(rs.m.relapses, st, at, 1))
			fields["since_iteration"] = t.Boundary.Index
			rs.logger.WithFields(fields).Warnf("regime: %s lost steady state at iteration %d (level shift since iteration %d)",
				scopeLabel(st.name, sc.name), t.At.Index, t.Boundary.Index)
			return
		case t.To == detector.Steady:
			fields["steady_start"] = t.Boundary.Index
			if !st.ttssPushed && st.aggregateRegimeAfter(sc) == detector.Steady {
				st.ttssPushed = true
				st.ttss = time.Unix(0, st.latestSteadyStart(sc, t)).Sub(start)
				st.declaredAfter = at.Sub(start)
				rs.enqueue(rs.sample(rs.m.ttss, st, at, float64(st.ttss)/float64(time.Millisecond)))
				fields["ttss"] = st.ttss.Round(time.Millisecond).String()
			}
			rs.logger.WithFields(fields).Infof("regime: %s reached steady state at iteration %d (steady since iteration %d)",
				scopeLabel(st.name, sc.name), t.At.Index, t.Boundary.Index)
		default:
			fields["boundary"] = t.Boundary.Index
			rs.logger.WithFields(fields).Infof("regime: %s entered %s at iteration %d (%s at iteration %d)",
				scopeLabel(st.name, sc.name), t.To, t.At.Index, t.Kind, t.Boundary.Index)
		}
	}
}

func scopeLabel(scenario, endpoint string) string {
	if endpoint == "" {
		return "scenario " + scenario
	}
	return fmt.Sprintf("scenario %s endpoint %s", scenario, endpoint)
}

// sample builds one sample of a regime metric with the scenario's tags.
func (rs *RunState) sample(m *metrics.Metric, st *Scenario, t time.Time, v float64) metrics.Sample {
	return metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: m, Tags: rs.scenarioTags(st)}, Time: t, Value: v}
}

// scenarioTags are the tags of st's regime metrics (st.mu held, or st not
// shared yet): its VUs' tags (baseTags), or for a scenario that never ran
// the run's and the scenario's tags from the options; always with the
// scenario tag, so that regime_steady{scenario:x} selects them.
func (rs *RunState) scenarioTags(st *Scenario) *metrics.TagSet {
	if st.baseTags != nil {
		return st.baseTags
	}
	tags := rs.registry.RootTagSet()
	if opt := rs.optionTags.Load(); opt != nil {
		for k, v := range (*opt)[st.name] {
			tags = tags.With(k, v)
		}
	}
	return tags.With(scenarioTag, st.name)
}

// enqueue queues a sample for the next VU that starts an iteration (k6's
// samples channel may only be written from where k6 guarantees it is open).
func (rs *RunState) enqueue(s metrics.Sample) {
	if rs.ended.Load() {
		rs.dropped.Add(1)
		return
	}
	rs.pendingMu.Lock()
	rs.queue = append(rs.queue, metrics.Samples{s})
	rs.pendingMu.Unlock()
	rs.pending.Store(true)
}

// FlushPending sends the samples the engine queued (pushed metrics, the
// cold-start increments) to k6's samples channel out. A VU calls it at each
// iteration start, where k6 guarantees the channel is open; it costs one
// atomic load when nothing is queued.
func (rs *RunState) FlushPending(out chan<- metrics.SampleContainer) {
	if rs.pending.Load() {
		rs.flushPending(out)
	}
}

// flushPending sends the queued samples and the cold-start increments. It
// runs on a VU goroutine at an iteration start, or at test end.
func (rs *RunState) flushPending(out chan<- metrics.SampleContainer) {
	if !rs.pending.CompareAndSwap(true, false) {
		return
	}
	rs.pendingMu.Lock()
	queue := rs.queue
	rs.queue = nil
	rs.pendingMu.Unlock()

	now := time.Now()
	rs.mu.RLock()
	for _, st := range rs.scenarios {
		st.mu.Lock()
		if st.coldCount != st.coldPushed {
			queue = append(queue, metrics.Samples{
				rs.sample(rs.m.coldStart, st, now, st.coldSumMs-st.coldPushedMs),
				rs.sample(rs.m.coldIters, st, now, float64(st.coldCount-st.coldPushed)),
			})
			st.coldPushed, st.coldPushedMs = st.coldCount, st.coldSumMs
		}
		st.mu.Unlock()
	}
	rs.mu.RUnlock()
	for _, c := range queue {
		out <- c
	}
}

// knownScenarios lists every scenario the run declared or saw, sorted.
func (rs *RunState) knownScenarios() []string {
	set := map[string]struct{}{}
	for _, n := range rs.cfg.Load().Declared {
		set[n] = struct{}{}
	}
	rs.mu.RLock()
	for _, n := range rs.optionSc {
		set[n] = struct{}{}
	}
	for n := range rs.scenarios {
		set[n] = struct{}{}
	}
	rs.mu.RUnlock()
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// testEnd pushes the steady gate of every scenario (1 when steady state was
// reached and held to the end, 0 otherwise: never vacuous) while k6's
// samples channel is still open, and logs the scenarios that never settled.
func (rs *RunState) testEnd() {
	out := rs.samples.Load()
	if out == nil {
		rs.logger.Error("regime: no iteration ran, so no scenario reached steady state; " +
			"thresholds on regime_steady have no data and the thresholds helper's count>0 guard fails them")
		rs.ended.Store(true)
		return
	}
	if rs.engineOff.Load() {
		// decided from k6's options, not from the samples seen so far: at
		// TestEnd the engine may not have delivered a short run's samples yet
		rs.logger.Error("regime: k6 runs no metrics engine with --summary-mode=disabled and --no-thresholds together, " +
			"so the detectors received no samples: no regime was detected and regime_steady is 0; drop one of the two")
	}
	if n := rs.noScenarioTag.Load(); n > 0 {
		// at TestEnd k6 may still hold the last samples: the results count them all
		rs.logger.Errorf("regime: %d iterations (so far; summary.json counts them all) had no 'scenario' tag and were not used; keep 'scenario' in systemTags", n)
	}
	if env, _ := rs.profileEnv.Load().(string); env != "" {
		if cfg := rs.cfg.Load(); cfg == nil || cfg.Profile == nil {
			rs.logger.Errorf("regime: %s=%s is set, but the script never called regime.configure(options, {...}), which reads it: "+
				"no profile judged this run (call it, with {} if there is nothing else to set)", profileEnv, env)
		}
	}
	rs.pending.Store(true)
	rs.flushPending(*out)
	now := time.Now()
	// a run cut short (a signal, a threshold's abortOnFail, test.abort())
	// is settled on what it saw: marked partial here already, so that
	// summary(), textSummary() and the log line say so before saveResults
	partial := rs.end.cutShort()
	for _, name := range rs.knownScenarios() {
		st := rs.Scenario(name)
		st.mu.Lock()
		// the verdict is final: later samples no longer move the detectors
		g := st.verdict()
		g.judged = true
		st.gate, st.frozen = g, true
		gateFraction := st.cfg.GateFraction
		v := 0.0
		if g.held {
			v = 1
		}
		s := rs.sample(rs.m.steady, st, now, v)
		st.settled = st.settledView(partial)
		settled := rs.settledSamples(st, st.settled, now)
		line := settledLine(name, st.settled)
		why := st.notReachedWhy()
		checks, checkSamples := rs.profileChecks(st, now)
		loadErr := rs.profileLoad(st)
		st.mu.Unlock()
		*out <- metrics.Samples{s}
		*out <- settled
		*out <- checkSamples
		rs.logger.Info(line)
		if loadErr != nil {
			rs.logger.Warn("regime: " + loadErr.Error())
		}
		for _, c := range checks {
			if c.Within() {
				rs.logger.Info("regime: profile: " + c.Text())
			} else {
				rs.logger.Warn("regime: profile: " + c.Text())
			}
		}
		switch {
		case g.held:
		case g.drifted:
			rs.logger.Warnf("regime: steady state was reached but not held to the end in %s: its level drifted by %+.0f%% "+
				"from the first to the last third of the final steady state, moving the same way in each (beyond median_tolerance %.0f%%)",
				name, 100*g.drift, 100*st.cfg.Detector.MedianTolerance)
		case g.steadyAtEnd:
			rs.logger.Warnf("regime: steady state was reached but not held to the end in %s: the final steady state "+
				"spans %.0f%% of the scenario, the gate needs %.0f%% (gateFraction)", name, 100*g.fraction, 100*gateFraction)
		case g.reached:
			rs.logger.Warnf("regime: steady state was reached but not held to the end in %s (it relapsed)", name)
		default:
			rs.logger.Warnf("regime: steady state was never reached in %s%s", name, why)
		}
	}
	// what the samples ingested during the loop above queued (a transition's
	// regime_ttss or regime_relapses, cold-start increments) before the
	// scenarios were frozen; nothing is queued after this (ended)
	rs.pending.Store(true)
	rs.ended.Store(true)
	rs.flushPending(*out)
}

// subscribeTestEnd runs testEnd when k6 emits its global TestEnd event. The
// event's type is checked by name, since k6 may renumber its events.
func (rs *RunState) subscribeTestEnd(events common.Events) {
	if events.Global == nil {
		return
	}
	_, ch := events.Global.Subscribe(eventTestEnd)
	go func() {
		for e := range ch {
			if name := e.Type.String(); name != "TestEnd" {
				rs.logger.Errorf("regime: expected k6's TestEnd event as number %d, got %q; "+
					"this k6 version is not supported, the steady gate is not pushed", eventTestEnd, name)
			} else {
				rs.testEnd()
			}
			e.Done()
		}
	}()
}

// NoteVU records, from a VU in scenario st (k6's ss), what the engine needs
// later: k6's samples channel, the scenario names and start, and the
// scenario's tags (cur, the VU's).
func (rs *RunState) NoteVU(state *lib.State, st *Scenario, ss *lib.ScenarioState, cur *metrics.TagSet) {
	if rs.samples.Load() == nil {
		ch := state.Samples
		if rs.samples.CompareAndSwap(nil, &ch) {
			rs.mu.Lock()
			optionTags := make(map[string]map[string]string, len(state.Options.Scenarios))
			for name, sc := range state.Options.Scenarios {
				rs.optionSc = append(rs.optionSc, name)
				tags := make(map[string]string)
				for k, v := range state.Options.RunTags {
					tags[k] = v
				}
				if sc != nil {
					for k, v := range sc.GetTags() {
						tags[k] = v
					}
				}
				optionTags[name] = tags
			}
			rs.optionTags.Store(&optionTags)
			rs.mu.Unlock()
		}
	}
	st.mu.Lock()
	if st.start.IsZero() {
		st.start = ss.StartTime
	}
	if st.baseTags == nil {
		tags := cur
		for _, k := range []string{"vu", "iter", "group", RegimeTag} {
			tags = tags.Without(k)
		}
		// k6 tags samples with the scenario only while 'scenario' is in
		// systemTags; the regime metrics always carry it
		st.baseTags = tags.With(scenarioTag, st.name)
	}
	st.mu.Unlock()
}

// NoteExecution keeps k6's execution state, from a VU's context (the first
// VU's): after the run it says whether the run was stopped before its end.
func (rs *RunState) NoteExecution(es *lib.ExecutionState) { rs.end.noteExecution(es) }

// NoteForeignRegimeTag records that an iteration started with a regime tag
// value the extension did not set (the script set the VU's tag itself); the
// first is logged, and the results say how many.
func (rs *RunState) NoteForeignRegimeTag(value string) {
	rs.foreign.Add(1)
	rs.foreignOnce.Do(func() {
		rs.logger.Warnf("regime: the script sets the VU tag %q itself (value %q): it overrides the extension's regime tag in "+
			"every sample of its iterations and in the regime counts; 'regime' is the extension's tag: give yours another name", RegimeTag, value)
	})
}

// AtExit runs f at k6's Exit event, after handleSummary has written the
// results folders and they record how the run ended (so an output that
// waits for a slow server there delays no results folder), and returns
// true; false, f not taken, when this process gets no Exit event (no
// script imported k6/x/regime) or it has passed.
func (rs *RunState) AtExit(f func()) bool { return rs.end.addExitHook(f) }

// Observe feeds one measurement of regime.observe() to the detector of a
// scenario, which must be configured with input 'observe'.
func (rs *RunState) Observe(scenario string, value float64) error {
	st := rs.Scenario(scenario)
	if st.cfg.Input != inputObserve {
		return fmt.Errorf("regime.observe: scenario %q learns from input %q; configure it with input: %q to feed it values",
			scenario, st.cfg.Input, inputObserve)
	}
	st.mu.Lock()
	if !st.frozen {
		now := time.Now()
		st.observe(rs, "", now.UnixNano(), value)
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
		rs.pending.Store(true)
	}
	return nil
}

// Ended reports whether the test has ended (k6's TestEnd): from then on the
// steady gates are judged and the figures are final.
func (rs *RunState) Ended() bool { return rs.ended.Load() }

package engine

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/latency"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// maxTransitions bounds the transitions kept per scenario for the summary;
// the detector's hysteresis keeps real runs far below it.
const maxTransitions = 1000

// regimeStats is the distribution of the iterations tagged with one regime.
type regimeStats struct {
	count int64
	sumMs float64
	hist  *latency.Histogram
}

// TransitionRecord is one regime change of a scenario, as logged and as
// observers receive it.
type TransitionRecord struct {
	Endpoint string
	Kind     string
	From, To detector.Regime
	At       detector.Point
	Boundary detector.Point
	Elapsed  time.Duration // from the scenario's start to the transition
}

// endpointScope is one detector and what it has seen.
type endpointScope struct {
	name string // endpoint tag value; "" for the scenario scope
	det  *detector.Detector
	tb   *detector.TimeBuckets // its observations, for the settled view
}

// Scenario is everything the engine knows about one scenario. Outside the
// package it offers only its current regime (Regime), which a VU reads at
// every iteration start.
//
// regime is read lock-free by every VU at every iteration start; the rest
// changes together under mu, written by k6's metrics engine goroutine (the
// hidden submetric sink) and by regime.observe().
type Scenario struct {
	name   string
	cfg    ScenarioConfig
	regime atomic.Int32 // detector.Regime for new iterations

	mu        sync.Mutex
	start     time.Time       // scenario start (from k6's scenario state)
	baseTags  *metrics.TagSet // scenario tags (phase, run tags) for pushed samples
	scopes    map[string]*endpointScope
	scopeList []*endpointScope // the same scopes, in order of creation
	// the endpoint of the last observation and its scope (an endpoint's
	// scope never changes: its own, or (other) once the cap is reached)
	lastEndpoint string
	lastScope    *endpointScope
	order        []string // endpoint names in order of appearance
	tagged       [3]regimeStats
	untagged     int64
	firstSeen    time.Time
	lastSeen     time.Time

	coldSumMs, coldPushedMs float64
	coldCount, coldPushed   int64
	ttss                    time.Duration // from start to the first steady_start; 0 until declared
	declaredAfter           time.Duration // from start to the first declaration
	ttssPushed              bool
	relapses                int64
	transitions             []TransitionRecord
	droppedTransitions      int64

	// observations of endpoints beyond cfg.MaxEndpoints, fed to the
	// otherEndpoint detector; logger reports the first one
	overObs int64
	logger  logrus.FieldLogger
	// frozen is set when the steady gate is judged (k6's TestEnd): samples
	// the metrics engine delivers later are counted and recorded but no
	// longer observed, so that the gate, summary() and the saved results
	// tell the same story.
	frozen bool
	gate   gateVerdict
	// iters holds the iterations (durations, requests, online steady tags)
	// by start time for the settled view; settled is that view, computed
	// at TestEnd (nil before).
	iters   *detector.TimeBuckets
	settled *results.Settled
}

// Regime is the regime new iterations of the scenario start in: one atomic
// load, which a VU makes at every iteration start.
func (s *Scenario) Regime() detector.Regime { return detector.Regime(s.regime.Load()) }

// gateVerdict is the steady gate of a scenario.
type gateVerdict struct {
	judged bool // at TestEnd; before it, the verdict of the run so far
	// held: steady at the end, declared early enough (GateFraction)
	held bool
	// reached: steady state was declared at some point
	reached bool
	// steadyAtEnd: every detector of the scenario is steady
	steadyAtEnd bool
	// fraction of the scenario's time the final steady state spans (0 when
	// not steady at the end)
	fraction float64
	// drift: the change of the level from the first to the last third of
	// the final steady state (of the scope that moved most; measured when it
	// spans stable_windows windows); drifted: a level that kept moving
	// beyond median_tolerance (detector.Drift)
	drifted, measured bool
	drift             float64
}

// verdict judges the steady gate on what the detectors have seen. Callers
// hold s.mu.
func (s *Scenario) verdict() gateVerdict {
	if s.gate.judged {
		return s.gate
	}
	v := gateVerdict{reached: s.ttssPushed, steadyAtEnd: s.steadyHeld()}
	if v.steadyAtEnd {
		start := s.start
		if start.IsZero() || (!s.firstSeen.IsZero() && s.firstSeen.After(start)) {
			start = s.firstSeen
		}
		var declared int64
		for _, sc := range s.scopes {
			if p := sc.det.Snapshot().DeclaredAt; p != nil && p.Time > declared {
				declared = p.Time
			}
			if c, held, ok := sc.det.Drift(); ok && (!v.measured || math.Abs(c) > math.Abs(v.drift)) {
				v.measured, v.drifted, v.drift = true, !held, c
			}
		}
		span := s.lastSeen.Sub(start)
		if span > 0 {
			v.fraction = float64(s.lastSeen.UnixNano()-declared) / float64(span)
			v.fraction = min(max(v.fraction, 0), 1)
		}
		v.held = v.fraction >= s.cfg.GateFraction && !v.drifted
	}
	return v
}

func newScenario(name string, cfg ScenarioConfig) *Scenario {
	s := &Scenario{name: name, cfg: cfg, scopes: make(map[string]*endpointScope)}
	for i := range s.tagged {
		s.tagged[i].hist = newDurationHistogram()
	}
	return s
}

// newDurationHistogram holds iteration durations in milliseconds, from 1 us
// to 1 h with 3 significant digits.
func newDurationHistogram() *latency.Histogram {
	return latency.New(3_600_000, 3)
}

// scopeFor returns the detector of an endpoint ("" = the whole scenario),
// creating it on first use. Callers hold s.mu.
func (s *Scenario) scopeFor(endpoint string, onTransition func(*endpointScope, detector.Transition), onWindow func(string, detector.Window)) *endpointScope {
	if sc, ok := s.scopes[endpoint]; ok {
		return sc
	}
	if endpoint != "" && s.endpointDetectors() >= s.maxEndpoints() {
		// beyond the cap: one detector for every further endpoint
		s.overObs++
		if sc, ok := s.scopes[otherEndpoint]; ok {
			return sc
		}
		if s.logger != nil {
			s.logger.Warnf("regime: scenario %s has more than %d endpoints (tag %q); further endpoints share one detector, %s. "+
				"Raise maxEndpoints in regime.configure() if they are real endpoints (about 144 KiB per detector with the default detector options)",
				s.name, s.maxEndpoints(), s.cfg.EndpointTag, otherEndpoint)
		}
		endpoint = otherEndpoint
	}
	sc := &endpointScope{name: endpoint}
	dcfg := s.cfg.Detector
	if p, ok := s.cfg.Priors[endpoint]; ok {
		dcfg = p.Apply(dcfg)
	}
	dcfg.DropTrace = true // tags and gates are online decisions: Hindsight is never called here
	dcfg.OnTransition = func(t detector.Transition) { onTransition(sc, t) }
	if onWindow != nil {
		dcfg.OnWindow = func(w detector.Window) { onWindow(endpoint, w) }
	}
	det, err := detector.New(dcfg)
	if err != nil {
		// the configuration was validated at init; this cannot happen
		panic(err)
	}
	sc.det = det
	s.scopes[endpoint] = sc
	s.scopeList = append(s.scopeList, sc)
	s.order = append(s.order, endpoint)
	return sc
}

// maxEndpoints is the scenario's cap on endpoint detectors.
func (s *Scenario) maxEndpoints() int {
	if s.cfg.MaxEndpoints > 0 {
		return s.cfg.MaxEndpoints
	}
	return defaultMaxEndpoints
}

// endpointDetectors counts the detectors of named endpoints (not the
// scenario's own, nor otherEndpoint's). Callers hold s.mu.
func (s *Scenario) endpointDetectors() int {
	n := len(s.scopes)
	if _, ok := s.scopes[""]; ok {
		n--
	}
	if _, ok := s.scopes[otherEndpoint]; ok {
		n--
	}
	return n
}

// aggregateRegime is the regime a new iteration of the scenario starts in:
// with one detector per endpoint, the least advanced of them, so that an
// iteration is steady only when every endpoint it may call is. Callers hold s.mu.
func (s *Scenario) aggregateRegime() detector.Regime {
	if len(s.scopes) == 0 {
		return detector.Cold
	}
	r := detector.Steady
	for _, sc := range s.scopeList { // a slice: no map iteration per observation
		if cur := sc.det.Regime(); cur < r {
			r = cur
		}
	}
	return r
}

// steadyHeld says whether every detector of the scenario is steady now.
// Callers hold s.mu.
func (s *Scenario) steadyHeld() bool {
	return len(s.scopes) > 0 && s.aggregateRegime() == detector.Steady
}

func (s *Scenario) endpointNames() []string {
	names := append([]string(nil), s.order...)
	sort.Strings(names)
	return names
}

// account adds a finished iteration to the distribution of the regime it
// was tagged with. Callers hold st.mu.
func (st *Scenario) account(s metrics.Sample, endNs int64, tags *sampleTags) (index int64, regime string) {
	index = st.tagged[0].count + st.tagged[1].count + st.tagged[2].count + st.untagged
	t := s.Time
	if st.firstSeen.IsZero() || t.Before(st.firstSeen) {
		st.firstSeen = t.Add(-time.Duration(s.Value * float64(time.Millisecond)))
	}
	if t.After(st.lastSeen) {
		st.lastSeen = t
	}
	tag, ok := tags.regime, tags.hasRegime
	st.recordIteration(endNs, s.Value, ok && tag == "steady")
	if !ok {
		st.untagged++
		return index, ""
	}
	r, ok := detector.LookupRegime(tag)
	if !ok {
		st.untagged++
		return index, tag
	}
	rg := &st.tagged[r]
	rg.count++
	rg.sumMs += s.Value
	rg.hist.RecordMs(s.Value)
	if r == detector.Cold {
		st.coldCount++
		st.coldSumMs += s.Value
	}
	return index, tag
}

// observe feeds one value (that ended at endNs, Unix ns) to an endpoint's
// detector and publishes the scenario's regime for new iterations. Callers
// hold st.mu.
func (st *Scenario) observe(rs *RunState, endpoint string, endNs int64, v float64) {
	sc := st.lastScope
	if sc == nil || st.lastEndpoint != endpoint {
		var ok bool
		if sc, ok = st.scopes[endpoint]; !ok {
			sc = st.scopeFor(endpoint, rs.onTransition(st), func(ep string, w detector.Window) {
				rs.eachObserver(func(o Observer) { o.Window(st.name, ep, w) })
			})
		}
		st.lastEndpoint, st.lastScope = endpoint, sc
	}
	sc.det.Observe(endNs, v)
	st.recordObservation(sc, endNs, v)
	st.regime.Store(int32(st.aggregateRegime()))
}

// aggregateRegimeAfter is the scenario regime once sc's pending transition
// to steady is applied (the detector updates its regime after the hook).
func (st *Scenario) aggregateRegimeAfter(changed *endpointScope) detector.Regime {
	r := detector.Steady
	for _, sc := range st.scopes {
		if sc == changed {
			continue
		}
		if cur := sc.det.Regime(); cur < r {
			r = cur
		}
	}
	return r
}

// latestSteadyStart is the time the last of the scenario's detectors became
// steady (the retroactive steady_start), in Unix nanoseconds.
func (st *Scenario) latestSteadyStart(changed *endpointScope, t detector.Transition) int64 {
	latest := t.Boundary.Time
	for _, sc := range st.scopes {
		if sc == changed {
			continue
		}
		if ss := sc.det.Snapshot().SteadyStart; ss != nil && ss.Time > latest {
			latest = ss.Time
		}
	}
	return latest
}

// notReachedWhy says, for the log line of a scenario that never reached
// steady state, what it saw: its iterations, the endpoints that held the
// scenario back (scope 'endpoint': steady when all of its endpoints are),
// and why the settled view found no steady state either. Callers hold
// st.mu.
func (st *Scenario) notReachedWhy() string {
	var b strings.Builder
	fmt.Fprintf(&b, " (%d iterations observed by the end of the test; k6 may count a few more after it", st.iterations())
	var held []string
	for _, sc := range st.scopeList {
		if sc.name == "" || sc.det == nil || sc.det.Regime() == detector.Steady {
			continue
		}
		n := int64(0)
		if sc.tb != nil {
			n = sc.tb.N()
		}
		held = append(held, fmt.Sprintf("%s: %d observations, %s", sc.name, n, sc.det.Regime()))
	}
	if len(held) > 0 {
		more := ""
		if len(held) > 5 {
			more = fmt.Sprintf("; and %d more", len(held)-5)
			held = held[:5]
		}
		fmt.Fprintf(&b, "; endpoints not steady, which the scenario's regime waits for: %s%s", strings.Join(held, "; "), more)
	}
	b.WriteString(")")
	if st.settled != nil && !st.settled.Steady && st.settled.Reason != "" {
		fmt.Fprintf(&b, "; the settled view: %s", st.settled.Reason)
	}
	return b.String()
}

// iterations counts the scenario's iterations, tagged or not. Callers hold
// st.mu.
func (st *Scenario) iterations() int64 {
	n := st.untagged
	for i := range st.tagged {
		n += st.tagged[i].count
	}
	return n
}

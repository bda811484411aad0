package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

var regimeNames = detector.RegimeNames()

// RunReport is what the engine knows about a run: built once, by
// RunState.Report, and read three ways: handed to JavaScript as its JSON
// (the JS module's summary(), typed by index.d.ts: TestIndexTypesMatchReport
// keeps the two together), turned into summary.json (recorder.buildRun) and written
// to InfluxDB (internal/influxdb's SummaryPoints). The types the InfluxDB
// output reads are exported (ScenarioReport, Detection, RegimeDist); the
// others are reached through its fields only.
type RunReport struct {
	RunStarted                *time.Time                                 `json:"run_started"` // the earliest scenario start, UTC; nil before any
	Requests                  []*requestReport                           `json:"requests"`
	ConnectionColdStart       map[string]*results.ConnPhase              `json:"connection_cold_start"`
	Tracked                   map[string]map[string]*results.TrackedCell `json:"tracked"`
	Scenarios                 map[string]*ScenarioReport                 `json:"scenarios"`
	DroppedSamples            int64                                      `json:"dropped_samples"`
	IterationsWithoutScenario int64                                      `json:"iterations_without_scenario"`
	Profile                   *results.ProfileUse                        `json:"profile"`
	// End says how the run ended as far as is known in handleSummary (a
	// signal, an abort, or completed): set by SummaryReport only, since it
	// reads k6's thresholds, which only handleSummary may.
	End *results.RunEnd `json:"end"`
}

// ScenarioReport is what the detectors found in one scenario: the regimes
// with their counts and percentiles (iteration duration, ms), the
// boundaries, TTSS, the cold-start cost, the class, the relapses and the
// settled view.
type ScenarioReport struct {
	Scope      string                 `json:"scope"`
	Input      string                 `json:"input"`
	Regime     string                 `json:"regime"` // at the moment of the report
	Iterations int64                  `json:"iterations"`
	Untagged   int64                  `json:"untagged"`
	Regimes    map[string]*RegimeDist `json:"regimes"`
	Relapses   int64                  `json:"relapses"`
	// TTSSMs and DeclaredAfterMs: nil until steady state was declared.
	TTSSMs          *float64 `json:"ttss_ms"`
	DeclaredAfterMs *float64 `json:"declared_after_ms"`
	Steady          bool     `json:"steady"`
	HeldFraction    float64  `json:"held_fraction"`
	// StartedMs is the scenario's start (Unix ms; 0 unknown): TTSS and the
	// settled boundary count from it
	StartedMs    float64           `json:"started_ms,omitempty"`
	GateFraction float64           `json:"gate_fraction"`
	LevelDrift   *float64          `json:"level_drift"`
	ColdStart    results.ColdStart `json:"cold_start"`
	// The scenario detector's findings (scope "scenario"); with scope
	// "endpoint" Class is the worst of the endpoints' and the points are nil.
	Detection
	Endpoints          map[string]*Detection  `json:"endpoints,omitempty"`
	EndpointLimit      *results.EndpointLimit `json:"endpoint_limit,omitempty"`
	Transitions        []transitionReport     `json:"transitions"`
	TransitionsDropped int64                  `json:"transitions_dropped"`
	Settled            settledReport          `json:"settled"`
}

// Detection is one detector's findings, with times from the scenario start.
// The counts are nil where no single detector stands behind the figures
// (scope "endpoint", at the scenario level).
type Detection struct {
	Class            string         `json:"class"`
	Observations     *int64         `json:"observations,omitempty"`
	ColdEnd          *results.Point `json:"cold_end"`
	SteadyStart      *results.Point `json:"steady_start"`
	DeclaredAt       *results.Point `json:"declared_at"`
	DetectorRelapses *int           `json:"detector_relapses,omitempty"`
	OutOfRange       *int64         `json:"out_of_range,omitempty"`
}

// RegimeDist is the iteration duration distribution of one regime (ms);
// the figures are nil without iterations.
type RegimeDist struct {
	Count int64    `json:"count"`
	SumMs float64  `json:"sum_ms"`
	Min   *float64 `json:"min"`
	Mean  *float64 `json:"mean"`
	P50   *float64 `json:"p50"`
	P90   *float64 `json:"p90"`
	P95   *float64 `json:"p95"`
	P99   *float64 `json:"p99"`
	P999  *float64 `json:"p99_9"`
	Max   *float64 `json:"max"`
}

// transitionReport is one regime change, where it was decided (index) and
// where, in hindsight, the new regime began (boundary).
type transitionReport struct {
	Endpoint  string  `json:"endpoint"`
	Kind      string  `json:"kind"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Index     int64   `json:"index"`
	Boundary  int64   `json:"boundary"`
	ElapsedMs float64 `json:"elapsed_ms"`
}

// requestReport is one cell of the request breakdown (scenario x phase x
// regime x endpoint x protocol); the figures are nil without requests.
type requestReport struct {
	Scenario            string   `json:"scenario"`
	Phase               string   `json:"phase"`
	Regime              string   `json:"regime"`
	Endpoint            string   `json:"endpoint"`
	Protocol            string   `json:"protocol"`
	Count               int64    `json:"count"`
	Errors              int64    `json:"errors"`
	Status5xx           int64    `json:"status_5xx"`
	NoResponse          int64    `json:"no_response"`
	ErrorRate           *float64 `json:"error_rate"`
	NewConnections      int64    `json:"new_connections"`
	ConnectMs           float64  `json:"connect_ms"`
	TLSMs               float64  `json:"tls_ms"`
	LastNewConnectionMs *float64 `json:"last_new_connection_ms"`
	P50                 *float64 `json:"p50,omitempty"`
	P90                 *float64 `json:"p90,omitempty"`
	P95                 *float64 `json:"p95,omitempty"`
	P99                 *float64 `json:"p99,omitempty"`
	P999                *float64 `json:"p99_9,omitempty"`
	Max                 *float64 `json:"max,omitempty"`
}

// settledReport is the settled view as the report holds it. A view that
// cannot be marshalled (a non-finite figure: a bug) is written as its
// error, never a failure of the whole report: summary() runs in
// handleSummary, and a panic there once lost the run's results (make
// demo, a NaN trend).
type settledReport struct{ *results.Settled }

func (s settledReport) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(s.Settled)
	if err != nil {
		return json.Marshal(map[string]string{"error": "the settled view cannot be written: " + err.Error()})
	}
	return b, nil
}

// SummaryReport is Report with how the run ended: summary()'s. Only after
// the test (handleSummary, after k6's last threshold evaluation): during
// it k6 still evaluates the thresholds that current() reads, and the run
// has not ended; End is nil then.
func (rs *RunState) SummaryReport() *RunReport {
	r := rs.Report()
	if rs.Ended() || rs.end.decided() {
		r.End = rs.end.current()
	}
	return r
}

// Report builds the run's report, per scenario; each scenario is read
// under its own lock. It is safe for concurrent use, during the run too.
// Its End is nil (SummaryReport sets it).
func (rs *RunState) Report() *RunReport {
	r := &RunReport{
		Requests:                  rs.bd.requestReports(),
		ConnectionColdStart:       rs.bd.connectionColdStart(),
		Tracked:                   rs.bd.trackedCells(),
		Scenarios:                 map[string]*ScenarioReport{},
		DroppedSamples:            rs.dropped.Load(),
		IterationsWithoutScenario: rs.noScenarioTag.Load(),
		Profile:                   rs.profileUse(),
	}
	var first time.Time
	for _, name := range rs.knownScenarios() {
		st := rs.Scenario(name)
		st.mu.Lock()
		sc := st.report()
		overObs, maxEp := st.overObs, st.maxEndpoints()
		if !st.start.IsZero() && (first.IsZero() || st.start.Before(first)) {
			first = st.start
		}
		st.mu.Unlock()
		lim := rs.bd.endpointLimit(name)
		if lim != nil || overObs > 0 {
			if lim == nil {
				lim = &results.EndpointLimit{ValuesExact: false, Examples: []string{}}
			}
			lim.Max, lim.Observations = maxEp, overObs
			sc.EndpointLimit = lim
		}
		r.Scenarios[name] = sc
	}
	if !first.IsZero() {
		t := first.UTC()
		r.RunStarted = &t
	}
	return r
}

// report of one scenario; callers hold st.mu.
func (st *Scenario) report() *ScenarioReport {
	start := st.start
	if start.IsZero() {
		start = st.firstSeen
	}
	out := &ScenarioReport{
		Scope:              st.cfg.Scope,
		Input:              st.cfg.Input,
		Regime:             detector.Regime(st.regime.Load()).String(),
		Regimes:            map[string]*RegimeDist{},
		Relapses:           st.relapses,
		GateFraction:       st.cfg.GateFraction,
		Transitions:        make([]transitionReport, 0, len(st.transitions)),
		TransitionsDropped: st.droppedTransitions,
	}
	for i := range st.tagged {
		out.Regimes[regimeNames[i]] = distribution(&st.tagged[i])
	}
	out.Iterations = st.iterations()
	out.Untagged = st.untagged
	g := st.verdict()
	out.Steady, out.HeldFraction = g.held, g.fraction
	if !start.IsZero() {
		out.StartedMs = float64(start.UnixNano()) / 1e6
	}
	if g.measured {
		out.LevelDrift = &g.drift
	}
	if st.ttssPushed {
		out.TTSSMs, out.DeclaredAfterMs = ptrTo(ms(st.ttss)), ptrTo(ms(st.declaredAfter))
	}
	out.ColdStart = st.coldStart()
	out.Class = detector.Undecided.String()
	if st.cfg.Scope == scopeEndpoint {
		out.Endpoints = map[string]*Detection{}
	}
	for _, name := range st.endpointNames() {
		d := detectionOf(st.scopes[name].det.Snapshot(), start)
		if name == "" {
			out.Detection = *d
			continue
		}
		if out.Endpoints != nil {
			out.Endpoints[name] = d
		}
	}
	if st.cfg.Scope == scopeEndpoint {
		out.Class = worstClass(st)
	}
	for _, t := range st.transitions {
		out.Transitions = append(out.Transitions, transitionReport{
			Endpoint: t.Endpoint, Kind: t.Kind, From: t.From.String(), To: t.To.String(),
			Index: t.At.Index, Boundary: t.Boundary.Index, ElapsedMs: ms(t.Elapsed),
		})
	}
	// the settled view: computed at TestEnd; before it (summary() during
	// the run), of the run so far, marked partial
	v := st.settled
	if v == nil {
		v = st.settledView(true)
	}
	out.Settled = settledReport{v}
	return out
}

// coldStart is the cost of the cold start: the cold iterations, and what
// the cold and warm-up iterations took beyond the steady mean (the cost
// paid once; against the mean, since a sum of durations against the median
// would count skewed latency's mean-median gap as a cost). Callers hold
// st.mu.
func (st *Scenario) coldStart() results.ColdStart {
	c := results.ColdStart{DurationMs: st.coldSumMs, Iterations: st.coldCount}
	if steady := &st.tagged[detector.Steady]; steady.count > 0 {
		mean := steady.sumMs / float64(steady.count)
		excess := 0.0
		for _, r := range []detector.Regime{detector.Cold, detector.Warmup} {
			rg := &st.tagged[r]
			excess += rg.sumMs - float64(rg.count)*mean
		}
		c.ExcessMs = &excess
	}
	return c
}

// detectionOf describes one detector's findings, with elapsed times from start.
func detectionOf(s detector.Snapshot, start time.Time) *Detection {
	point := func(p *detector.Point) *results.Point {
		if p == nil {
			return nil
		}
		return &results.Point{Index: p.Index, ElapsedMs: ms(time.Unix(0, p.Time).Sub(start))}
	}
	relapses := s.NRelapses
	return &Detection{
		Class:            s.Class.String(),
		Observations:     ptrTo(s.N),
		ColdEnd:          point(s.ColdEnd),
		SteadyStart:      point(s.SteadyStart),
		DeclaredAt:       point(s.DeclaredAt),
		DetectorRelapses: &relapses,
		OutOfRange:       ptrTo(s.OutOfRange),
	}
}

// worstClass summarises the classes of a scenario's endpoint detectors:
// no steady state if any has none, else slowdown if any slowed down, else
// warmup if any warmed up, else flat.
func worstClass(st *Scenario) string {
	if len(st.scopes) == 0 {
		return detector.Undecided.String()
	}
	rank := map[detector.Class]int{
		detector.Flat: 0, detector.ClassWarmup: 1, detector.Slowdown: 2, detector.Undecided: 3, detector.NoSteadyState: 4,
	}
	worst := detector.Flat
	for _, sc := range st.scopes {
		if c := sc.det.Snapshot().Class; rank[c] > rank[worst] {
			worst = c
		}
	}
	return worst.String()
}

func distribution(rg *regimeStats) *RegimeDist {
	d := &RegimeDist{Count: rg.count, SumMs: rg.sumMs}
	if rg.count == 0 {
		return d
	}
	h := rg.hist
	d.Min, d.Max = ptrTo(h.MinMs), ptrTo(h.MaxMs)
	d.Mean = ptrTo(rg.sumMs / float64(rg.count))
	d.P50, d.P90, d.P95 = ptrTo(h.QuantileMs(50)), ptrTo(h.QuantileMs(90)), ptrTo(h.QuantileMs(95))
	d.P99, d.P999 = ptrTo(h.QuantileMs(99)), ptrTo(h.QuantileMs(99.9))
	return d
}

func ptrTo[T any](v T) *T { return &v }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// result is the scenario as summary.json keeps it (its distributions are
// computed again from the histograms: results.Run.Finalize). A settled view
// that cannot be written (a non-finite figure: a bug) is left out, with the
// error.
func (sc *ScenarioReport) result() (*results.Scenario, error) {
	out := &results.Scenario{
		Scope: sc.Scope, Input: sc.Input, Class: sc.Class, Regime: sc.Regime, Steady: sc.Steady,
		HeldFraction: sc.HeldFraction, GateFraction: sc.GateFraction, LevelDrift: sc.LevelDrift, StartedMs: sc.StartedMs,
		Iterations: sc.Iterations, Untagged: sc.Untagged, TTSSMs: sc.TTSSMs, DeclaredAfterMs: sc.DeclaredAfterMs,
		ColdEnd: sc.ColdEnd, SteadyStart: sc.SteadyStart, DeclaredAt: sc.DeclaredAt,
		Relapses: sc.Relapses, ColdStart: sc.ColdStart, Regimes: map[string]*results.Dist{},
		Transitions: make([]results.Transition, 0, len(sc.Transitions)), EndpointLimit: sc.EndpointLimit,
	}
	for name, d := range sc.Regimes {
		out.Regimes[name] = d.result()
	}
	for _, t := range sc.Transitions {
		out.Transitions = append(out.Transitions, results.Transition{
			Endpoint: t.Endpoint, Kind: t.Kind, From: t.From, To: t.To,
			Index: t.Index, Boundary: t.Boundary, ElapsedMs: t.ElapsedMs,
		})
	}
	if sc.Endpoints != nil {
		out.Endpoints = map[string]*results.Detection{}
		for name, d := range sc.Endpoints {
			out.Endpoints[name] = &results.Detection{Class: d.Class, ColdEnd: d.ColdEnd, SteadyStart: d.SteadyStart, DeclaredAt: d.DeclaredAt}
		}
	}
	if _, err := json.Marshal(sc.Settled.Settled); err != nil {
		return out, fmt.Errorf("the settled view cannot be written: %w", err)
	}
	out.Settled = sc.Settled.Settled
	return out, nil
}

func (d *RegimeDist) result() *results.Dist {
	v := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return &results.Dist{Count: d.Count, SumMs: d.SumMs, Min: v(d.Min), Mean: v(d.Mean), P50: v(d.P50),
		P90: v(d.P90), P95: v(d.P95), P99: v(d.P99), P999: v(d.P999), Max: v(d.Max)}
}

// result is the row as summary.json keeps it (its distribution is computed
// again from its histogram: results.Run.Finalize).
func (r *requestReport) result() *results.RequestRow {
	row := &results.RequestRow{
		Scenario: r.Scenario, Phase: r.Phase, Regime: r.Regime, Endpoint: r.Endpoint, Protocol: r.Protocol,
		Status5xx: r.Status5xx, NoResponse: r.NoResponse, NewConnections: r.NewConnections,
		ConnectMs: r.ConnectMs, TLSMs: r.TLSMs, LastNewConnectionMs: r.LastNewConnectionMs,
	}
	d := (&RegimeDist{Count: r.Count, P50: r.P50, P90: r.P90, P95: r.P95, P99: r.P99, P999: r.P999, Max: r.Max}).result()
	d.Errors = r.Errors
	row.Dist = *d
	if r.ErrorRate != nil {
		row.ErrorRate = *r.ErrorRate
	}
	return row
}

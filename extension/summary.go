package extension

import (
	"encoding/json"
	"time"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

var regimeNames = detector.RegimeNames()

// summary builds, per scenario, what the detectors found: the regimes with
// their counts and percentiles (iteration duration, ms), the boundaries,
// TTSS, the cold-start cost, the class and the relapses. The shape is
// documented in README.md and typed in index.d.ts.
func (rs *runState) summary() map[string]any {
	scenarios := map[string]any{}
	for _, name := range rs.knownScenarios() {
		st := rs.scenario(name)
		st.mu.Lock()
		sum := st.summary()
		overObs, maxEp := st.overObs, st.maxEndpoints()
		st.mu.Unlock()
		lim := rs.bd.endpointLimit(name)
		if lim != nil || overObs > 0 {
			if lim == nil {
				lim = &results.EndpointLimit{ValuesExact: false, Examples: []string{}}
			}
			sum["endpoint_limit"] = map[string]any{
				"max": maxEp, "values": lim.Values, "values_exact": lim.ValuesExact,
				"requests": lim.Requests, "observations": overObs, "examples": lim.Examples,
			}
		}
		scenarios[name] = sum
	}
	var started any
	rs.mu.RLock()
	var first time.Time
	for _, st := range rs.scenarios {
		st.mu.Lock()
		if !st.start.IsZero() && (first.IsZero() || st.start.Before(first)) {
			first = st.start
		}
		st.mu.Unlock()
	}
	rs.mu.RUnlock()
	if !first.IsZero() {
		started = first.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"run_started":                 started,
		"requests":                    rs.bd.requests(),
		"connection_cold_start":       rs.bd.connectionColdStart(),
		"tracked":                     rs.bd.trackedSummary(),
		"scenarios":                   scenarios,
		"dropped_samples":             rs.dropped.Load(),
		"iterations_without_scenario": rs.noScenarioTag.Load(),
		"profile":                     rs.profileUse(),
	}
}

// summary of one scenario; callers hold st.mu.
func (st *scenarioState) summary() map[string]any {
	start := st.start
	if start.IsZero() {
		start = st.firstSeen
	}
	regimes := map[string]any{}
	var total int64
	for i := range st.tagged {
		rg := &st.tagged[i]
		total += rg.count
		regimes[regimeNames[i]] = distribution(rg)
	}
	out := map[string]any{
		"scope":             st.cfg.Scope,
		"input":             st.cfg.Input,
		"regime":            detector.Regime(st.regime.Load()).String(),
		"iterations":        total + st.untagged,
		"untagged":          st.untagged,
		"regimes":           regimes,
		"relapses":          st.relapses,
		"ttss_ms":           nil,
		"declared_after_ms": nil,
	}
	g := st.verdict()
	out["steady"] = g.held
	out["held_fraction"] = g.fraction
	out["gate_fraction"] = st.cfg.GateFraction
	out["level_drift"] = nil
	if g.measured {
		out["level_drift"] = g.drift
	}
	if st.ttssPushed {
		out["ttss_ms"] = ms(st.ttss)
		out["declared_after_ms"] = ms(st.declaredAfter)
	}

	cold := map[string]any{
		"duration_ms": st.coldSumMs,
		"iterations":  st.coldCount,
		"excess_ms":   nil,
	}
	// the cost paid once: what the cold and warm-up iterations took beyond
	// the steady median
	if steady := &st.tagged[detector.Steady]; steady.count > 0 {
		p50 := steady.hist.Quantile(50)
		excess := 0.0
		for _, r := range []detector.Regime{detector.Cold, detector.Warmup} {
			rg := &st.tagged[r]
			excess += rg.sumMs - float64(rg.count)*p50
		}
		cold["excess_ms"] = excess
	}
	out["cold_start"] = cold

	endpoints := map[string]any{}
	for _, name := range st.endpointNames() {
		sc := st.scopes[name]
		snap := sc.det.Snapshot()
		d := detection(snap, start)
		if name == "" {
			for k, v := range d {
				out[k] = v
			}
			continue
		}
		endpoints[name] = d
	}
	if st.cfg.Scope == scopeEndpoint {
		out["endpoints"] = endpoints
		out["class"] = worstClass(st)
	}
	if _, ok := out["class"]; !ok {
		out["class"] = detector.Undecided.String()
		out["cold_end"], out["steady_start"], out["declared_at"] = nil, nil, nil
	}

	trs := make([]any, 0, len(st.transitions))
	for _, t := range st.transitions {
		trs = append(trs, map[string]any{
			"endpoint": t.Endpoint, "kind": t.Kind, "from": t.From.String(), "to": t.To.String(),
			"index": t.At.Index, "boundary": t.Boundary.Index, "elapsed_ms": ms(t.Elapsed),
		})
	}
	out["transitions"] = trs
	out["transitions_dropped"] = st.droppedTransitions
	// the settled view: computed at TestEnd; before it (summary() during
	// the run), of the run so far, marked partial
	v := st.settled
	if v == nil {
		v = st.settledView(true)
	}
	out["settled"] = settledMap(v)
	return out
}

// settledMap is the settled view with its JSON field names, as summary()
// hands it to JavaScript (sobek would name a struct's fields its own way).
// A view that cannot be marshalled (a non-finite figure: a bug) is handed
// over as its error, never a panic: summary() runs in handleSummary, and a
// panic there lost the run's results (make demo, a NaN trend).
func settledMap(v *results.Settled) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{"error": "the settled view cannot be written: " + err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"error": "the settled view cannot be read back: " + err.Error()}
	}
	return m
}

// detection describes one detector's findings, with elapsed times from start.
func detection(s detector.Snapshot, start time.Time) map[string]any {
	point := func(p *detector.Point) any {
		if p == nil {
			return nil
		}
		return map[string]any{"index": p.Index, "elapsed_ms": ms(time.Unix(0, p.Time).Sub(start))}
	}
	return map[string]any{
		"class":             s.Class.String(),
		"observations":      s.N,
		"cold_end":          point(s.ColdEnd),
		"steady_start":      point(s.SteadyStart),
		"declared_at":       point(s.DeclaredAt),
		"detector_relapses": len(s.Relapses),
		"out_of_range":      s.OutOfRange,
	}
}

// worstClass summarises the classes of a scenario's endpoint detectors:
// no steady state if any has none, else slowdown if any slowed down, else
// warmup if any warmed up, else flat.
func worstClass(st *scenarioState) string {
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

func distribution(rg *regimeStats) map[string]any {
	d := map[string]any{"count": rg.count, "sum_ms": rg.sumMs}
	if rg.count == 0 {
		for _, k := range []string{"min", "mean", "p50", "p90", "p95", "p99", "p99_9", "max"} {
			d[k] = nil
		}
		return d
	}
	h := rg.hist
	d["min"] = h.Min()
	d["mean"] = rg.sumMs / float64(rg.count)
	d["p50"] = h.Quantile(50)
	d["p90"] = h.Quantile(90)
	d["p95"] = h.Quantile(95)
	d["p99"] = h.Quantile(99)
	d["p99_9"] = h.Quantile(99.9)
	d["max"] = h.Max()
	return d
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

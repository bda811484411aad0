package engine

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// The settled view of every scenario, computed at the end of the run with
// the whole run in hand (detector.Settle), beside the online tags. Each
// scope (the scenario's own detector and each endpoint's) keeps its
// observations in time buckets (an HDR histogram per bucket of start times,
// bounded: at most detector.DefaultMaxBuckets of them, merged pairwise as
// the run grows); the scenario also keeps its iterations' durations, the
// requests and failed requests that started in each bucket, and how many
// iterations the online tags called steady. Nothing is kept per sample.
//
// The scenario's settled boundary is the latest of its scopes'; its figures
// are those of the iterations that started from it on. Each endpoint's
// figures are those of its requests from its own boundary.

// newBuckets returns the time buckets of a series whose first observation
// started at origin, at most maxBuckets of them.
func newBuckets(origin time.Time, maxBuckets int) *detector.TimeBuckets {
	tb, err := detector.NewTimeBuckets(origin.UnixNano(), detector.DefaultBucketWidth, maxBuckets)
	if err != nil {
		panic(err) // constant, valid arguments
	}
	return tb
}

// bucketOrigin is where a scenario's buckets start: the scenario's start
// when k6 told it, else the first observation's start. Callers hold st.mu.
func (st *Scenario) bucketOrigin(first time.Time) time.Time {
	if !st.start.IsZero() && st.start.Before(first) {
		return st.start
	}
	return first
}

// iterationBuckets returns the scenario's iteration buckets, created at the
// first iteration (firstNs: its start, Unix ns). Callers hold st.mu.
func (st *Scenario) iterationBuckets(firstNs int64) *detector.TimeBuckets {
	if st.iters == nil {
		st.iters = newBuckets(st.bucketOrigin(time.Unix(0, firstNs)), detector.DefaultMaxBuckets)
	}
	return st.iters
}

// startNs is when an observation that ended at endNs (Unix ns) and took ms
// milliseconds started.
func startNs(endNs int64, ms float64) int64 {
	return endNs - int64(ms*float64(time.Millisecond))
}

// recordIteration keeps one finished iteration (end time in Unix ns,
// duration ms, online tag) for the settled view. Callers hold st.mu.
func (st *Scenario) recordIteration(endNs int64, ms float64, steady bool) {
	start := startNs(endNs, ms)
	tb := st.iterationBuckets(start)
	tb.Record(start, ms)
	if steady {
		tb.Mark(start)
	}
}

// recordRequest counts one request (end time in Unix ns, duration ms) and
// whether it failed, in the bucket where it started. Callers hold st.mu.
func (st *Scenario) recordRequest(endNs int64, ms float64, failed bool) {
	start := startNs(endNs, ms)
	st.iterationBuckets(start).Count(start, failed)
}

// recordObservation keeps one observation of a scope (end time in Unix
// ns). Callers hold st.mu.
func (st *Scenario) recordObservation(sc *endpointScope, endNs int64, ms float64) {
	if sc.name == "" && st.cfg.Input == inputIteration {
		// the scenario's detector judges its iterations: the same series,
		// which recordIteration keeps
		if sc.tb == nil {
			sc.tb = st.iterationBuckets(startNs(endNs, ms))
		}
		return
	}
	start := startNs(endNs, ms)
	if sc.tb == nil {
		max := detector.DefaultMaxBuckets
		if sc.name != "" {
			max = detector.EndpointMaxBuckets
		}
		sc.tb = newBuckets(st.bucketOrigin(time.Unix(0, start)), max)
	}
	sc.tb.Record(start, ms)
}

// settleConfig is the settled view's configuration for a scenario: its
// detector's median_tolerance with the service method (the same meaning of
// "the same level" online and settled), the defaults otherwise (the
// benchmark method's bands are for JMH forks, not request streams). The
// tail's band is the settled view's own (see detector.SettleConfig).
func (st *Scenario) settleConfig() detector.SettleConfig {
	cfg := detector.DefaultSettleConfig()
	if d := st.cfg.Detector; d.Method == detector.MethodService {
		cfg.Tolerance = d.MedianTolerance
	}
	return cfg
}

// settledView computes the scenario's settled view from what it has seen;
// partial marks a view of a run that did not reach its end. Callers hold
// st.mu.
func (st *Scenario) settledView(partial bool) *results.Settled {
	cfg := st.settleConfig()
	start := st.start
	if start.IsZero() {
		start = st.firstSeen
	}
	out := &results.Settled{Class: detector.NoSteadyState.String(), Partial: partial,
		Tolerance: cfg.Tolerance, TailTolerance: cfg.TailTolerance}
	var lead *detector.Settled // the scope whose boundary is the latest
	steady := len(st.scopes) > 0
	var reasons []string
	worst := detector.Flat
	for _, name := range st.endpointNames() {
		sc := st.scopes[name]
		if sc.tb == nil {
			steady = false
			continue
		}
		v := detector.Settle(sc.tb, cfg)
		if name != "" {
			if out.Endpoints == nil {
				out.Endpoints = map[string]*results.Settled{}
			}
			ev := results.FromSettled(&v, cfg, start.UnixNano(), partial)
			out.Endpoints[name] = ev
		}
		if !v.Steady {
			steady = false
			label := "the scenario"
			if name != "" {
				label = "endpoint " + name
			}
			reasons = append(reasons, label+": "+v.Reason)
			continue
		}
		if lead == nil || v.Boundary.Time > lead.Boundary.Time {
			vv := v
			lead = &vv
		}
		worst = worseClass(worst, v.Class)
	}
	switch {
	case len(st.scopes) == 0:
		out.Reason = "no observations"
		return out
	case !steady || lead == nil:
		if len(reasons) == 0 {
			reasons = append(reasons, "no observations")
		}
		out.Reason = strings.Join(reasons, "; ")
		if lead == nil && len(st.scopes) == 1 {
			for _, sc := range st.scopes {
				if sc.tb != nil {
					v := detector.Settle(sc.tb, cfg)
					out.Fill(&v)
				}
			}
		}
		return out
	}
	out.Fill(lead)
	out.Steady, out.Class = true, worst.String()
	if st.iters == nil {
		return out
	}
	sp := st.iters.From(lead.Boundary.Time)
	ttss := ms(time.Duration(lead.Boundary.Time - start.UnixNano()))
	out.Boundary = &results.Point{Index: sp.Before, ElapsedMs: ttss}
	out.AtMs = float64(lead.Boundary.Time) / 1e6
	out.TTSSMs = &ttss
	out.Stats = results.FromSettledStats(sp.Stats)
	if o := results.OnlineFrom(sp); o != nil {
		if st.ttssPushed {
			d := ms(st.ttss) - ttss
			o.StartDiffMs = &d
		}
		out.Online = o
	}
	return out
}

// worseClass orders classes for a scenario of several series: a slowdown
// over a warm-up over flat.
func worseClass(a, b detector.Class) detector.Class {
	rank := func(c detector.Class) int {
		switch c {
		case detector.Slowdown:
			return 2
		case detector.ClassWarmup:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// settledSamples are the settled view's metrics of a scenario, pushed at
// the end of the test so that thresholds judge them: regime_settled (1 when
// steady state was found and held to the end), regime_settled_count (the
// observations in it; 0 without one, so that a count>0 guard fails), and
// only with a steady state the gauges regime_settled_p50/p90/p95/p99/max
// and regime_settled_ttss (ms) and regime_settled_error_rate. The
// scenario's carry its tags; each endpoint's add the endpoint tag, and come
// first (see below).
func (rs *RunState) settledSamples(st *Scenario, v *results.Settled, now time.Time) metrics.Samples {
	var out metrics.Samples
	add := func(v *results.Settled, endpoint string) {
		tags := rs.scenarioTags(st)
		if endpoint != "" {
			tags = tags.With(st.cfg.EndpointTag, endpoint)
		}
		push := func(m *metrics.Metric, x float64) {
			out = append(out, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: m, Tags: tags}, Time: now, Value: x})
		}
		held, count := 0.0, 0.0
		if v.Steady {
			held = 1
			if v.Stats != nil {
				count = float64(v.Stats.Count)
			}
		}
		push(rs.m.settled, held)
		push(rs.m.settledCount, count)
		if !v.Steady || v.Stats == nil {
			return
		}
		s := v.Stats
		push(rs.m.settledP50, s.P50Ms)
		push(rs.m.settledP90, s.P90Ms)
		push(rs.m.settledP95, s.P95Ms)
		push(rs.m.settledP99, s.P99Ms)
		push(rs.m.settledMax, s.MaxMs)
		if v.TTSSMs != nil {
			push(rs.m.settledTTSS, *v.TTSSMs)
		}
		if s.ErrorRate != nil {
			push(rs.m.settledErrors, *s.ErrorRate)
		}
	}
	names := make([]string, 0, len(v.Endpoints))
	for n := range v.Endpoints {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(v.Endpoints[n], n)
	}
	// the scenario's own samples last: a threshold on a gauge with only the
	// scenario tag, e.g. regime_settled_p95{scenario:x}, also matches the
	// endpoints' samples, and k6 judges a gauge's last value
	add(v, "")
	return out
}

// settledLine is the settled view of a scenario in one log line.
func settledLine(name string, v *results.Settled) string {
	if v.Partial {
		name += " (partial: the run was cut short)"
	}
	if !v.Steady {
		return fmt.Sprintf("regime: settled view of %s: no steady state (%s)", name, v.Reason)
	}
	s := fmt.Sprintf("regime: settled view of %s: %s, steady from %.1f s (iteration %d)", name, v.Class, *v.TTSSMs/1000, v.Boundary.Index)
	if v.Stats != nil {
		s += fmt.Sprintf(", steady p50 %.2f ms p95 %.2f ms p99 %.2f ms over %d iterations", v.Stats.P50Ms, v.Stats.P95Ms, v.Stats.P99Ms, v.Stats.Count)
	}
	if o := v.Online; o != nil {
		s += fmt.Sprintf("; online tags: %.1f%% of steady-tagged iterations before the settled boundary, %.1f%% of settled-steady iterations tagged steady",
			100*o.Contamination, 100*o.Coverage)
	}
	return s
}

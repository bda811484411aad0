package results

import (
	"math"
	"sort"

	"github.com/xk6-regime/xk6-regime/detector"
)

// FromSettled is one series' settled view (detector.Settle) in the results'
// terms; startNs (Unix ns) is the scenario's start, from which TTSS is
// measured.
func FromSettled(v *detector.Settled, cfg detector.SettleConfig, startNs int64, partial bool) *Settled {
	out := &Settled{Steady: v.Steady, Class: v.Class.String(), Reason: v.Reason, Partial: partial,
		Tolerance: cfg.Tolerance, TailTolerance: cfg.TailTolerance}
	out.Fill(v)
	if v.Steady {
		ttss := float64(v.Boundary.Time-startNs) / 1e6
		out.Boundary = &Point{Index: v.Boundary.Index, ElapsedMs: ttss}
		out.AtMs = float64(v.Boundary.Time) / 1e6
		out.TTSSMs = &ttss
		out.Stats = FromSettledStats(v.Stats)
	}
	return out
}

// Fill copies a series' settled figures (not its boundary or stats).
func (out *Settled) Fill(v *detector.Settled) {
	out.LevelMs, out.Trend, out.TrendLow, out.TrendHigh = v.Level, v.Trend, v.TrendLow, v.TrendHigh
	out.Blocks, out.SteadyBlocks, out.BucketMs = v.Blocks, v.SteadyBlocks, float64(v.BucketWidth)/1e6
	out.Early, out.Late, out.Clamped = v.Early, v.Late, v.OutOfRange
	if v.Envelope != [2]float64{} {
		e, t := v.Envelope, v.TailEnvelope
		out.Envelope, out.TailEnvelope = &e, &t
	}
	if !v.Steady && out.Reason == "" {
		out.Reason = v.Reason
	}
}

// FromSettledStats converts the figures of a settled steady state.
func FromSettledStats(s detector.SettledStats) *SettledStats {
	out := &SettledStats{Count: s.Count, Requests: s.Requests, Failed: s.Failed,
		MinMs: s.Min, MeanMs: s.Mean, P50Ms: s.P50, P90Ms: s.P90, P95Ms: s.P95, P99Ms: s.P99, MaxMs: s.Max}
	if s.Requests > 0 {
		r := s.ErrorRate()
		out.ErrorRate = &r
	}
	return out
}

// settleSeries re-settles a scenario from its iteration series (what merge
// has of several instances): each point's iterations are recorded at its
// start with its median (exact for points of one iteration, the series'
// resolution otherwise: see SeriesInfo), steady-tagged points marked.
// Request counts are not in the series, so the view has no error rate.
func settleSeries(pts []SeriesPoint, startNs int64, partial bool) *Settled {
	cfg := detector.DefaultSettleConfig()
	if len(pts) == 0 {
		return &Settled{Class: detector.NoSteadyState.String(), Reason: "no observations", Partial: partial,
			Tolerance: cfg.Tolerance, TailTolerance: cfg.TailTolerance}
	}
	starts := make([]int64, len(pts))
	origin := int64(math.MaxInt64)
	for i, p := range pts {
		starts[i] = int64((p.EndMs - float64(p.Med)) * 1e6)
		origin = min(origin, starts[i])
	}
	if startNs > 0 && startNs < origin {
		origin = startNs
	}
	tb, err := detector.NewTimeBuckets(origin, detector.DefaultBucketWidth, detector.DefaultMaxBuckets)
	if err != nil {
		panic(err) // constant, valid arguments
	}
	order := make([]int, len(pts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return starts[order[a]] < starts[order[b]] })
	for _, i := range order {
		p := pts[i]
		tb.RecordN(starts[i], float64(p.Med), int64(p.N))
		if p.Regime == 2 {
			tb.MarkN(starts[i], int64(p.N))
		}
	}
	v := detector.Settle(tb, cfg)
	if startNs <= 0 {
		startNs = origin
	}
	out := FromSettled(&v, cfg, startNs, partial)
	if v.Steady {
		out.Online = OnlineFrom(tb.From(v.Boundary.Time))
	}
	return out
}

// OnlineFrom compares the marked (online steady-tagged) observations with
// a settled boundary: sp is what the buckets hold from the boundary on.
// Nil without marks or without observations after the boundary.
func OnlineFrom(sp detector.Span) *OnlineVsSettled {
	tagged := sp.Marked + sp.MarkedBefore
	if tagged == 0 || sp.Stats.Count == 0 {
		return nil
	}
	return &OnlineVsSettled{SteadyTagged: tagged,
		Contamination: float64(sp.MarkedBefore) / float64(tagged),
		Coverage:      float64(sp.Marked) / float64(sp.Stats.Count)}
}

package detector

import (
	"fmt"
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The settled view: the verdict on a request stream with the whole run in
// hand, for the end of every k6 run. The online detector decides each
// iteration's tag with only the past; some tags are premature or late. At
// the end the whole series is known, and the settled view re-segments it:
// where steady state began, whether it held to the end, and the
// percentiles of what followed.
//
// It reads TimeBuckets (an HDR histogram per time bucket of iteration
// starts), never single samples, so its memory is bounded and its work
// depends on the number of buckets, not of observations. Four stages, one
// file each:
//
//  1. blocks (settle_blocks.go): buckets joined into blocks of at least
//     a second and BlockMinN observations; log median and log tail each;
//  2. segments (settle_segment.go): Tukey's running median of 3, then
//     PELT with the squared-error cost and a penalty set by the tolerance
//     (a step smaller than the band is not worth a segment);
//  3. the level (settle_walk.go): the final level is the median of the
//     smoothed blocks of the second half (a steady state must span at
//     least MinFraction of the run, 0.5 by default, so the second half is
//     inside it); the steady state starts at the earliest segment whose
//     level lies within the tolerance of it (within half of it after a
//     visible warm-up, whose next stage is often within the band), past
//     any leading block that does not. Stages 2-3 run on the medians and on the tails (the dual
//     gate: a JIT's compile pauses and the first connections keep the tail
//     high after the median settled), each with its band; the later start
//     wins;
//  4. trend (settle_trend.go): no steady state when the Theil-Sen change
//     over the steady stretch is significant (its autocorrelation-corrected
//     95% interval excludes 0), larger than the tolerance and monotone
//     (Kendall's tau at least 0.75: a drift or a slow ramp, not a level
//     that switched once).
//
// Then: no steady state when the steady stretch spans less than
// MinFraction of the series (White 1997: a truncation point in the second
// half leaves too little to call a steady state); otherwise the class is
// flat (the medians settled in the first block), warm-up (what came before
// was slower) or slowdown (faster), as Barrett et al. (OOPSLA 2017) name
// them. The steady state's percentiles are those of the buckets from the
// boundary on, merged.
//
// It shares no code with the live harness's reference
// (live/harness/reference.go: MSER's truncation point and a Mann-Kendall
// test), which judges it; both read 1-s blocks and use a 25% band, the
// width of the machine's wander, because that is what "the same level"
// means on shared cores.

// SettleConfig holds the settled view's parameters.
type SettleConfig struct {
	// BlockMin is the shortest block (1 s: the scale of the machine's
	// waves is 5-30 s, and a second of requests has a stable median).
	BlockMin time.Duration
	// BlockMinN is the fewest observations in a block.
	BlockMinN int64
	// Tolerance is the relative band around the final level within which a
	// block's (smoothed) median counts as the same level: the service
	// method's median_tolerance, 25% by default, because on shared cores
	// the 1-s medians of a flat server wander by 15-25% in waves.
	Tolerance float64
	// TailTolerance is the same band for the blocks' tails (1 = a factor
	// 2: the p99 of a second of requests jumps by that much on 2 cores).
	TailTolerance float64
	// MinFraction is the share of the series' time the steady state must
	// span from its start to the end.
	MinFraction float64
	// MinBlocks is the fewest blocks a series needs to be judged at all.
	MinBlocks int
}

// DefaultSettleConfig returns the settled view's defaults.
func DefaultSettleConfig() SettleConfig {
	return SettleConfig{
		BlockMin:      time.Second,
		BlockMinN:     30,
		Tolerance:     0.25,
		TailTolerance: 1.0,
		MinFraction:   0.5,
		MinBlocks:     10,
	}
}

// Validate reports every invalid parameter.
func (c SettleConfig) Validate() []error {
	var errs []error
	if c.BlockMin <= 0 {
		errs = append(errs, fmt.Errorf("settle block_min must be positive, got %s", c.BlockMin))
	}
	if c.BlockMinN < 5 {
		errs = append(errs, fmt.Errorf("settle block_min_n must be at least 5, got %d", c.BlockMinN))
	}
	if !(c.Tolerance > 0 && c.Tolerance <= 10) {
		errs = append(errs, fmt.Errorf("settle tolerance must be in (0, 10], got %g", c.Tolerance))
	}
	if !(c.TailTolerance > 0 && c.TailTolerance <= 10) {
		errs = append(errs, fmt.Errorf("settle tail_tolerance must be in (0, 10], got %g", c.TailTolerance))
	}
	if !(c.MinFraction >= 0 && c.MinFraction <= 1) {
		errs = append(errs, fmt.Errorf("settle min_fraction must be in [0, 1], got %g", c.MinFraction))
	}
	if c.MinBlocks < 2*minSegment {
		errs = append(errs, fmt.Errorf("settle min_blocks must be at least %d, got %d", 2*minSegment, c.MinBlocks))
	}
	return errs
}

// Settled is the settled view of one series.
type Settled struct {
	// Steady: a steady state was found and held to the end (class flat,
	// warm-up or slowdown).
	Steady bool
	Class  Class
	// Reason says why there is no steady state ("" when steady).
	Reason string
	// Boundary is where steady state starts: Index is the number of
	// observations that started before it (the index of the first steady
	// one when they are numbered by start), Time its Unix ns. Zero when
	// not steady.
	Boundary Point
	// MedianBoundary and TailBoundary (Unix ns) are where each statistic
	// settled; Boundary is the later.
	MedianBoundary, TailBoundary int64
	// Origin and End (Unix ns) bound the series' buckets.
	Origin, End int64
	// Level is the steady median level (ms; the median of the blocks'
	// medians); Tolerance and TailTolerance the relative bands used.
	Level, Tolerance, TailTolerance float64
	// Trend is the Theil-Sen change of the level over the steady stretch
	// (relative), TrendLow and TrendHigh its interval.
	Trend, TrendLow, TrendHigh float64
	// Blocks is how many blocks were judged, SteadyBlocks how many of them
	// are steady; BucketWidth the buckets' width (ns).
	Blocks, SteadyBlocks int
	BucketWidth          int64
	// Stats are the steady buckets' figures (empty when not steady).
	Stats SettledStats
	// Hist holds the steady buckets' durations (µs); nil when not steady.
	Hist *hdrhistogram.Histogram `json:"-"`
}

// SettledStats are the figures of the observations a settled view calls
// steady (ms; error rate as a fraction of requests).
type SettledStats struct {
	Count                              int64
	Requests, Failed                   int64
	Min, Mean, P50, P90, P95, P99, Max float64
}

// ErrorRate is Failed / Requests (0 without requests).
func (s SettledStats) ErrorRate() float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Failed) / float64(s.Requests)
}

// Settle computes the settled view of tb.
func Settle(tb *TimeBuckets, cfg SettleConfig) Settled {
	out := Settled{Class: NoSteadyState, Origin: tb.Origin(), End: tb.Start(tb.Len()), BucketWidth: tb.Width()}
	if tb.N() == 0 {
		out.Reason = "no observations"
		return out
	}
	scratch := NewBucketHistogram()
	bl := blocks(tb, int64(cfg.BlockMin), cfg.BlockMinN, scratch)
	out.Blocks = len(bl)
	if len(bl) < cfg.MinBlocks {
		out.Reason = fmt.Sprintf("too short to judge: %d blocks of at least %s and %d observations, %d needed",
			len(bl), cfg.BlockMin, cfg.BlockMinN, cfg.MinBlocks)
		return out
	}
	y := make([]float64, len(bl))
	u := make([]float64, len(bl))
	for i, b := range bl {
		y[i], u[i] = b.med, b.tail
	}
	ys, us := smooth3(y), smooth3(u)
	tol, ttol := math.Log1p(cfg.Tolerance), math.Log1p(cfg.TailTolerance)
	out.Tolerance, out.TailTolerance = cfg.Tolerance, cfg.TailTolerance
	mStarts, tStarts := peltMean(ys, penaltyOf(len(ys), tol)), peltMean(us, penaltyOf(len(us), ttol))
	level, tlevel := medianOf(ys[len(ys)/2:]), medianOf(us[len(us)/2:])
	// after a visible warm-up (the first segment more than twice the band
	// slower than the final level: a JIT's first seconds, 2-10 times
	// slower), the level that follows may be an intermediate stage within
	// the band (HotSpot: +15-25% for 5-10 s): the steady state starts at the
	// earliest segment within half the band; without one, within the band
	// (unless the stretch half the band skips is faster than the final
	// level and what is left is too short to be a steady state: that is no
	// intermediate stage of the warm-up but a late switch of the level, by
	// 12-25%, to a slower one, as settled services on shared cores make)
	total := float64(out.End - bl[0].start)
	mFirst := trimLeading(y, firstAtLevel(ys, mStarts, level, tol), level, tol)
	if end := segmentEnd(mStarts, 0, len(ys)); medianOf(ys[:end])-level > 2*tol {
		f := trimLeading(y, firstAtLevel(ys, mStarts, level, tol/2), level, tol)
		lateSwitch := f > mFirst && medianOf(ys[mFirst:f]) < level && float64(out.End-bl[f].start) < cfg.MinFraction*total
		if !lateSwitch {
			mFirst = f
		}
	}
	tFirst := trimLeading(u, firstAtLevel(us, tStarts, tlevel, ttol), tlevel, ttol)
	first := max(mFirst, tFirst)
	out.MedianBoundary, out.TailBoundary = bl[mFirst].start, bl[tFirst].start
	out.Level = math.Exp(medianOf(ys[first:]))
	slope, lo, hi, tau := theilSen(y[first:])
	span := float64(len(y) - first - 1)
	if len(y)-first >= 3 {
		// fewer blocks have no trend to speak of (theilSen's interval is
		// then infinite, and over a span of 0 blocks NaN): left at 0
		out.Trend, out.TrendLow, out.TrendHigh = math.Expm1(slope*span), math.Expm1(lo*span), math.Expm1(hi*span)
	}
	start := bl[first].start
	switch {
	case float64(out.End-start) < cfg.MinFraction*total:
		out.Reason = fmt.Sprintf("the last level holds %.0f%% of the series, %.0f%% needed",
			100*float64(out.End-start)/total, 100*cfg.MinFraction)
		return out
	case (lo > 0 || hi < 0) && math.Abs(slope*span) > tol && math.Abs(tau) >= trendTau:
		out.Reason = fmt.Sprintf("the level drifts by %+.0f%% (%+.0f%% to %+.0f%%) over the last %.0f s, beyond the tolerance of %.0f%%, "+
			"its blocks monotone (Kendall's tau %+.2f)",
			100*out.Trend, 100*out.TrendLow, 100*out.TrendHigh, float64(out.End-start)/1e9, 100*out.Tolerance, tau)
		return out
	}
	out.Steady = true
	out.SteadyBlocks = len(bl) - first
	switch {
	case mFirst == 0:
		out.Class = Flat
	case medianOf(ys[:mFirst]) > level:
		out.Class = ClassWarmup
	default:
		out.Class = Slowdown
	}
	out.Boundary = Point{Time: start}
	sp := tb.From(start)
	out.Boundary.Index = sp.Before
	out.Stats, out.Hist = sp.Stats, sp.Hist
	return out
}

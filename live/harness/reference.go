package harness

import (
	"math"
	"slices"
	"sort"
)

// The offline reference: what a careful engineer decides with the whole run
// in hand. It shares no code with the online detector (package detector),
// and its parameters are its own constants (below), read nowhere else; it
// reads the recorded series after the run. Some have the values of the
// service preset's (1-s blocks, a 25% level band, a factor 2 on the tail,
// a 3-block running median) because both were set from the same
// measurement of this machine's wander (the paragraph below); the method
// (MSER, a walk back from its point, Mann-Kendall) is not the detector's.
// This single-run reference judges a case with fewer than
// ConsensusMinRuns runs (the short form in make test); with more, each
// run is judged against the consensus of the case's runs (consensus.go).
//
//  1. Blocks of RefBlock (1 s) by iteration start time; each block's median
//     (robust to the heavy tails of request latency), on a log scale so that
//     levels compare by ratio. Blocks of fewer than RefBlockMin iterations
//     are left out.
//  2. The warm-up truncation point d is MSER's (White 1997; White, Cobb &
//     Spratt 2000): the d that minimises the squared standard error of the
//     mean of the blocks after it, sum_{i>=d} (y_i - mean_d)^2 / (n-d)^2,
//     searched over the first half of the run, as MSER prescribes. Hoad,
//     Robinson & Davies (JORS 2010) found MSER-5 the most robust of 44
//     warm-up methods; blocks of a second (hundreds of requests) play the
//     role of its batches.
//  3. A tolerance band of RefBand (25%): walking back from d, the boundary
//     moves earlier over every block whose 3-block running median lies
//     within the band of the level after d (the median of those blocks);
//     MSER trades bias against variance, the band says which differences
//     matter. A boundary at the first block is a flat run; otherwise the
//     blocks before it were slower (warm-up) or faster (slowdown).
//  4. The tail too (the dual gate of median and tail): the same on the log
//     p99 of each block, with a band of RefTailBand (a factor 2: the p99 of
//     a second of requests jumps by more than that on shared cores); the
//     boundary is the later of the two. The median's MSER point sets the
//     class.
//  5. No steady state when what follows the boundary trends: the
//     Mann-Kendall test with Hamed & Rao's (1998) correction for
//     autocorrelation is significant at 5% and the Theil-Sen slope (Sen,
//     JASA 1968) moves the level by more than the band over that stretch.
//
// Why a 25% band: on 2 shared cores the median of 1-s blocks of a flat
// server wanders by +-15-25% in waves of 5-30 s (k6 and the server share the
// cores); the Theil-Sen change of such a run over 50 s reached 14-22% in our
// runs of flat and JIT servers, in both directions, so a narrower band calls
// a flat server "no steady state" or "warm-up until 13 s" on some runs and
// not on others (../shared/NOTES.md, "Measuring tag quality").
const (
	RefBlock    = 1.0  // seconds
	RefBlockMin = 10   // iterations
	RefBand     = 0.25 // relative (ln(1.25) on the log scale)
	RefTailBand = 1.0  // relative: a factor 2 on the p99
	refAlpha    = 0.05
)

// Reference is the offline verdict on one recorded series.
type Reference struct {
	// Steady is false when the run has no steady state (a trend after the
	// truncation point, or too few blocks to judge).
	Steady bool
	// Boundary is where the steady state starts, in seconds since the first
	// iteration started (iterations starting at or after it are steady).
	Boundary float64
	// Class: flat, warmup, slowdown or no-steady-state (by the median).
	Class string
	// MedianBoundary and TailBoundary are where each statistic settled;
	// Boundary is the later.
	MedianBoundary, TailBoundary float64
	// Trend is the Theil-Sen change of the level over the steady stretch
	// (relative), and TrendP the Mann-Kendall p value (Hamed-Rao).
	Trend, TrendP float64
	// Blocks is how many blocks were judged.
	Blocks int
	// Source says which reference this is: "single run" (this file) or
	// "consensus of N runs" (consensus.go); CaseWarmupEnd is the
	// consensus's warm-up end W (nil for a single run).
	Source        string
	CaseWarmupEnd *float64
}

// block is one time block of the series.
type block struct {
	start    float64 // seconds
	med, p99 float64
}

// timeBlocks splits iterations by start time into blocks of width seconds
// and returns the median of each block with at least minN iterations.
func timeBlocks(it []Iteration, width float64, minN int) []block {
	if len(it) == 0 {
		return nil
	}
	last := 0.0
	for _, x := range it {
		last = max(last, x.Start)
	}
	n := int(last/width) + 1
	vals := make([][]float64, n)
	for _, x := range it {
		k := int(x.Start / width)
		vals[k] = append(vals[k], x.Ms)
	}
	out := make([]block, 0, n)
	for k, v := range vals {
		if len(v) < minN {
			continue
		}
		out = append(out, block{start: float64(k) * width, med: median(v), p99: p99(v)})
	}
	return out
}

// median of v (reorders a copy).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// ComputeReference judges a whole recorded series.
func ComputeReference(it []Iteration) Reference {
	bl := timeBlocks(it, RefBlock, RefBlockMin)
	ref := Reference{Class: "no-steady-state", Blocks: len(bl), Source: "single run"}
	if len(bl) < 10 {
		return ref // too short to judge
	}
	y := make([]float64, len(bl))
	for i, b := range bl {
		y[i] = math.Log(b.med)
	}
	d := mser(y)
	after := y[d:]
	p, slope := mannKendallHamedRao(after)
	ref.TrendP = p
	ref.Trend = math.Expm1(slope * float64(len(after)-1))
	band := math.Log1p(RefBand)
	if p < refAlpha && math.Abs(slope*float64(len(after)-1)) > band {
		return ref
	}
	ref.Steady = true
	post := median(after)
	d = walkBack(y, d, post, band)
	switch {
	case d == 0:
		ref.Class = "flat"
	case median(y[:d]) > post:
		ref.Class = "warmup"
	default:
		ref.Class = "slowdown"
	}
	ref.MedianBoundary = bl[d].start
	u := make([]float64, len(bl))
	for i, b := range bl {
		u[i] = math.Log(b.p99)
	}
	dt := mser(u)
	dt = walkBack(u, dt, median(u[dt:]), math.Log1p(RefTailBand))
	ref.TailBoundary = bl[dt].start
	ref.Boundary = max(ref.MedianBoundary, ref.TailBoundary)
	return ref
}

// walkBack moves a truncation point d earlier over every block whose 3-block
// running median lies within band of level.
func walkBack(y []float64, d int, level, band float64) int {
	sm := smooth3(y)
	for d > 0 && math.Abs(sm[d-1]-level) <= band {
		d--
	}
	return d
}

// smooth3 is the 3-point running median of y (2 points at the ends).
func smooth3(y []float64) []float64 {
	out := make([]float64, len(y))
	for i := range y {
		out[i] = median(y[max(0, i-1):min(len(y), i+2)])
	}
	return out
}

// mser returns MSER's truncation point over the first half of y.
func mser(y []float64) int {
	n := len(y)
	// suffix sums, so that each candidate costs O(1)
	var s, q float64
	best, bestV := 0, math.Inf(1)
	sums := make([][2]float64, n+1)
	for i := n - 1; i >= 0; i-- {
		s += y[i]
		q += y[i] * y[i]
		sums[i] = [2]float64{s, q}
	}
	for d := 0; d <= n/2; d++ {
		m := float64(n - d)
		ss := sums[d][1] - sums[d][0]*sums[d][0]/m
		if v := ss / (m * m); v < bestV {
			best, bestV = d, v
		}
	}
	return best
}

// mannKendallHamedRao returns the two-sided p value of the Mann-Kendall trend
// test with Hamed & Rao's (J. Hydrology 204, 1998) variance correction for
// autocorrelation (ranks of the Theil-Sen-detrended series, lags whose
// autocorrelation is significant at 5%), and the Theil-Sen slope per step.
func mannKendallHamedRao(x []float64) (p, slope float64) {
	n := len(x)
	if n < 4 {
		return 1, 0
	}
	var s float64
	slopes := make([]float64, 0, n*(n-1)/2)
	for i := 0; i < n-1; i++ {
		for j := i + 1; j < n; j++ {
			d := x[j] - x[i]
			switch {
			case d > 0:
				s++
			case d < 0:
				s--
			}
			slopes = append(slopes, d/float64(j-i))
		}
	}
	slope = median(slopes)
	fn := float64(n)
	variance := fn * (fn - 1) * (2*fn + 5) / 18
	// ranks of the detrended series
	det := make([]float64, n)
	for i := range x {
		det[i] = x[i] - slope*float64(i)
	}
	r := ranks(det)
	mean := (fn + 1) / 2
	var den float64
	for i := range r {
		r[i] -= mean
		den += r[i] * r[i]
	}
	var corr float64
	if den > 0 {
		lim := 1.96 / math.Sqrt(fn)
		for k := 1; k < n-2; k++ {
			var num float64
			for i := 0; i+k < n; i++ {
				num += r[i] * r[i+k]
			}
			rk := num / den
			if math.Abs(rk) > lim {
				fk := float64(k)
				corr += (fn - fk) * (fn - fk - 1) * (fn - fk - 2) * rk
			}
		}
	}
	ratio := 1 + 2/(fn*(fn-1)*(fn-2))*corr
	variance *= max(ratio, 1e-3)
	if s == 0 {
		return 1, slope
	}
	z := (math.Abs(s) - 1) / math.Sqrt(variance)
	return math.Erfc(z / math.Sqrt2), slope
}

// ranks returns the 1-based ranks of x, ties given their mean rank.
func ranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] < x[idx[b]] })
	r := make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && x[idx[j+1]] == x[idx[i]] {
			j++
		}
		rank := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = rank
		}
		i = j + 1
	}
	return r
}

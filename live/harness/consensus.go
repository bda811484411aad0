package harness

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// The consensus reference: what the repeated runs of one case agree on, and
// what each run shows beyond the noise they share. It is the reference the
// harness judges the tags against when a case has ConsensusMinRuns runs or
// more; like the single-run reference (reference.go) it shares no code and
// no parameter with the online detector.
//
// Why: on 2 cores shared by k6 and the service, one run's change points are
// no reference. The 1-s block medians of a flat Go server wander by up to
// +50% in waves of 20-30 s at random times, and a single-run segmentation
// called the same server "warm-up", "slowdown" and "no steady state" on
// different runs (../shared/NOTES.md, "Measuring tag quality"). What repeats
// at the start of every run is warm-up; what does not is noise. Welch's
// procedure (Welch 1983; Law & Kelton, Simulation Modeling and Analysis,
// ch. 9) averages replications point by point so that the transient shows
// and the noise cancels.
//
//  1. Blocks of RefBlock (1 s) by iteration start, each block's median and
//     p99 on a log scale (as the single-run reference), the last partial
//     block left out; the runs are cut to the shortest.
//  2. Each run relative to its own level: the median of its block medians
//     (and p99s) over the second half of the run. Levels differ between
//     runs (the p99 by 30-90%); shapes are what the runs share.
//  3. Welch's curve, for the picture: the median over the runs of the
//     relative block medians, smoothed by a centred moving average of
//     2*welchHalf+1 blocks (narrower at the start, as Welch prescribes).
//  4. The case's warm-up end W: the end of what (nearly) every run shows
//     at its start. A block is warm-up for the case when, in their 3-block
//     running medians relative to their level, agreeShare of the runs (4 of
//  5. lie beyond the envelope (step 5) on the same side, or every run
//     lies beyond minBand on the same side (a small warm-up that repeats);
//     the same for the p99 (envelope, minTailBand). W is the block after
//     the initial stretch of such blocks (gaps of up to maxGap blocks
//     allowed: warm-ups come in stages). An average is not enough: on these
//     machines a settled Node or HotSpot server switches between two levels
//     40-45% apart at random times, and the median curve of 5 runs strays
//     by 15% for tens of seconds without any run showing a warm-up there.
//  5. The noise envelope: the 2.5th and 97.5th percentiles of the runs'
//     3-block running medians (relative), pooled, over the blocks after W
//     (first over their second halves, to find W; then W again with the
//     envelope after it); at least +-minBand (the tail: +-minTailBand).
//     This is how far a settled run of this service wanders on this
//     machine, its level switches included.
//  6. Per run, the boundary is the later of W and the run's own split: the
//     block d (from W on) that best separates blocks outside the envelope
//     of the other runs (so that one run's late excursion cannot widen the
//     envelope it is judged by) before it from blocks inside after it (fewest blocks misplaced: those
//     inside before d plus those outside after d; the earliest of equals),
//     for the median and for the p99 alike (the dual gate). A warm-up that
//     lasts longer in one run (V8: 2-20 s), or a late JIT step of one run,
//     moves that run's boundary; a wave in the middle of a run does not
//     (it costs fewer blocks than the steady blocks before it would).
//  7. No steady state for the case when agreeShare of the runs trend the
//     same way over their second halves beyond the envelope (and by more
//     than trendMin; the Theil-Sen change of the block medians, Sen 1968):
//     a drift or a slowdown repeats, a wave does not. A run is also without steady
//     state when its boundary leaves minSteadyBlocks blocks or fewer.
const (
	ConsensusMinRuns = 3
	welchHalf        = 2
	minBand          = 0.10 // relative
	minTailBand      = 0.25 // relative
	trendMin         = 0.10 // relative
	envelopeQ        = 0.025
	minSteadyBlocks  = 10
	// agreeShare: a block is warm-up for the case when at least this share
	// of the runs (4 of 5) lie beyond the envelope on the same side there
	agreeShare = 0.8
	// maxGap: blocks of a warm-up in stages on which the runs do not agree
	maxGap = 2
)

// Consensus is what the runs of one case agree on.
type Consensus struct {
	Runs   int `json:"runs"`
	Blocks int `json:"blocks"`
	// Curve and TailCurve are Welch's curves of the block medians and
	// p99s, relative to each run's level (0.1 = 10% slower), per block.
	Curve     []float64 `json:"curve"`
	TailCurve []float64 `json:"tail_curve"`
	// WarmupEnd is W, in seconds from the runs' first iteration; Band is
	// the band runs must lie beyond, on one side, to agree on a warm-up
	// (relative, the median's).
	WarmupEnd float64 `json:"warmup_end_s"`
	Band      float64 `json:"band"`
	// Envelope and TailEnvelope are how far one settled run's smoothed
	// block medians (p99s) wander around its level: [low, high], relative.
	Envelope     [2]float64 `json:"envelope"`
	TailEnvelope [2]float64 `json:"tail_envelope"`
	// Steady is false when agreeShare of the runs trend the same way over
	// their second halves beyond the envelope (TrendRuns: how many do);
	// Trend is the median of the runs' Theil-Sen changes there (relative).
	Steady    bool    `json:"steady"`
	Trend     float64 `json:"trend"`
	TrendRuns int     `json:"trend_runs"`

	// log-scale internals
	lo, hi, tlo, thi float64
	w                int
	others           [][4]float64 // per run: the envelope of the other runs
}

// runBlocks is one run cut into blocks: log medians and log p99s (NaN where
// a block has too few iterations), and the run's levels.
type runBlocks struct {
	y, u         []float64
	level, tlevl float64
}

func blocksOf(it []Iteration, k int) runBlocks {
	vals := make([][]float64, k)
	for _, x := range it {
		b := int(x.Start / RefBlock)
		if b >= 0 && b < k {
			vals[b] = append(vals[b], x.Ms)
		}
	}
	rb := runBlocks{y: make([]float64, k), u: make([]float64, k)}
	for b, v := range vals {
		if len(v) < RefBlockMin {
			rb.y[b], rb.u[b] = math.NaN(), math.NaN()
			continue
		}
		rb.y[b], rb.u[b] = math.Log(median(v)), math.Log(p99(v))
	}
	rb.level, rb.tlevl = nanMedian(rb.y[k/2:]), nanMedian(rb.u[k/2:])
	return rb
}

// fullBlocks is the number of whole blocks of a series (the last, partial
// one left out).
func fullBlocks(it []Iteration) int {
	last := 0.0
	for _, x := range it {
		last = max(last, x.Start)
	}
	return int(last / RefBlock)
}

func nanMedian(v []float64) float64 {
	var s []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	return median(s)
}

// smooth3NaN is the 3-point running median of y, NaN left out.
func smooth3NaN(y []float64) []float64 {
	out := make([]float64, len(y))
	for i := range y {
		out[i] = nanMedian(y[max(0, i-1):min(len(y), i+2)])
	}
	return out
}

// quantile of sorted s (linear interpolation).
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	p := q * float64(len(s)-1)
	i := int(p)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (p-float64(i))*(s[i+1]-s[i])
}

// ComputeConsensus computes what the runs of one case agree on; it needs at
// least ConsensusMinRuns runs of 2*minSteadyBlocks blocks or more.
func ComputeConsensus(runs [][]Iteration) (*Consensus, error) {
	if len(runs) < ConsensusMinRuns {
		return nil, fmt.Errorf("a consensus needs %d runs or more, got %d", ConsensusMinRuns, len(runs))
	}
	k := math.MaxInt
	for _, it := range runs {
		k = min(k, fullBlocks(it))
	}
	if k < 2*minSteadyBlocks {
		return nil, fmt.Errorf("a consensus needs runs of %d blocks or more, the shortest has %d", 2*minSteadyBlocks, k)
	}
	bl := make([]runBlocks, len(runs))
	for i, it := range runs {
		bl[i] = blocksOf(it, k)
	}
	c := &Consensus{Runs: len(runs), Blocks: k}
	raw := make([]float64, k)
	rawTail := make([]float64, k)
	col := make([]float64, 0, len(runs))
	tcol := make([]float64, 0, len(runs))
	for b := range k {
		col, tcol = col[:0], tcol[:0]
		for _, r := range bl {
			if !math.IsNaN(r.y[b]) {
				col = append(col, r.y[b]-r.level)
				tcol = append(tcol, r.u[b]-r.tlevl)
			}
		}
		raw[b], rawTail[b] = nanMedian(col), nanMedian(tcol)
	}
	c.Curve, c.TailCurve = expm1All(welchSmooth(raw)), expm1All(welchSmooth(rawTail))

	// each run's 3-block running medians relative to its level
	rels := make([][2][]float64, len(bl))
	for i, r := range bl {
		rel, trel := make([]float64, k), make([]float64, k)
		for b := range k {
			rel[b], trel[b] = r.y[b]-r.level, r.u[b]-r.tlevl
		}
		rels[i] = [2][]float64{smooth3NaN(rel), smooth3NaN(trel)}
	}
	// the envelope from the second halves, W, the envelope again from
	// everything after W (a run's level may switch within it), W again
	c.envelope(rels, k/2)
	c.w = c.warmupEnd(rels, k)
	c.envelope(rels, c.w)
	c.w = c.warmupEnd(rels, k)
	c.Band = minBand
	// each run is split against the envelope of the others
	c.others = make([][4]float64, len(rels))
	for i := range rels {
		c.others[i] = pooledEnvelope(rels, c.w, i)
	}
	c.WarmupEnd = float64(c.w) * RefBlock

	// a trend that (nearly) every run shows over its second half
	up, down := 0, 0
	var changes []float64
	for _, r := range bl {
		var half []float64
		for _, v := range r.y[k/2:] {
			if !math.IsNaN(v) {
				half = append(half, v)
			}
		}
		_, slope := mannKendallHamedRao(half)
		ch := slope * float64(len(half)-1)
		changes = append(changes, ch)
		switch {
		case ch > max(math.Log1p(trendMin), c.hi):
			up++
		case ch < min(-math.Log1p(trendMin), c.lo):
			down++
		}
	}
	c.Trend = math.Expm1(nanMedian(changes))
	c.TrendRuns = max(up, down)
	need := int(math.Ceil(agreeShare * float64(len(bl))))
	c.Steady = up < need && down < need
	return c, nil
}

// pooledEnvelope returns the 2.5th and 97.5th percentiles of the runs'
// relative running medians of blocks from.. (the runs but skip; -1: none),
// pooled, at least the floors: the median's low and high, the tail's.
func pooledEnvelope(rels [][2][]float64, from, skip int) [4]float64 {
	var pool, tpool []float64
	for i, r := range rels {
		if i == skip {
			continue
		}
		for _, v := range r[0][from:] {
			if !math.IsNaN(v) {
				pool = append(pool, v)
			}
		}
		for _, v := range r[1][from:] {
			if !math.IsNaN(v) {
				tpool = append(tpool, v)
			}
		}
	}
	sort.Float64s(pool)
	sort.Float64s(tpool)
	return [4]float64{
		min(quantile(pool, envelopeQ), -math.Log1p(minBand)), max(quantile(pool, 1-envelopeQ), math.Log1p(minBand)),
		min(quantile(tpool, envelopeQ), -math.Log1p(minTailBand)), max(quantile(tpool, 1-envelopeQ), math.Log1p(minTailBand)),
	}
}

// envelope sets the case's envelope from every run's blocks from..
func (c *Consensus) envelope(rels [][2][]float64, from int) {
	e := pooledEnvelope(rels, from, -1)
	c.lo, c.hi, c.tlo, c.thi = e[0], e[1], e[2], e[3]
	c.Envelope = [2]float64{math.Expm1(c.lo), math.Expm1(c.hi)}
	c.TailEnvelope = [2]float64{math.Expm1(c.tlo), math.Expm1(c.thi)}
}

// warmupEnd returns W: the block after the initial stretch of blocks on
// which (nearly) every run agrees it is not settled (step 4).
func (c *Consensus) warmupEnd(rels [][2][]float64, k int) int {
	need := int(math.Ceil(agreeShare * float64(len(rels))))
	// beyond counts the runs above hi and below lo at block b
	beyond := func(b, which int, lo, hi float64) (up, down int) {
		for _, r := range rels {
			switch v := r[which][b]; {
			case v > hi:
				up++
			case v < lo:
				down++
			}
		}
		return up, down
	}
	agreed := func(b int) bool {
		for which, e := range [2][3]float64{{c.lo, c.hi, math.Log1p(minBand)}, {c.tlo, c.thi, math.Log1p(minTailBand)}} {
			if up, down := beyond(b, which, e[0], e[1]); up >= need || down >= need {
				return true
			}
			if up, down := beyond(b, which, -e[2], e[2]); up == len(rels) || down == len(rels) {
				return true
			}
		}
		return false
	}
	w, gap := 0, 0
	for b := 0; b < k-minSteadyBlocks && gap <= maxGap; b++ {
		if agreed(b) {
			w, gap = b+1, 0
		} else {
			gap++
		}
	}
	return w
}

// welchSmooth is Welch's moving average: a centred window of 2*welchHalf+1
// points, of 2i+1 points for the first ones, NaN left out.
func welchSmooth(y []float64) []float64 {
	out := make([]float64, len(y))
	for i := range y {
		h := min(welchHalf, i)
		var s float64
		n := 0
		for j := i - h; j <= min(len(y)-1, i+h); j++ {
			if !math.IsNaN(y[j]) {
				s += y[j]
				n++
			}
		}
		out[i] = math.NaN()
		if n > 0 {
			out[i] = s / float64(n)
		}
	}
	return out
}

func expm1All(y []float64) []float64 {
	out := make([]float64, len(y))
	for i, v := range y {
		out[i] = math.Expm1(v)
	}
	return out
}

// split returns the block d in [from, to] that best separates the blocks
// beyond one side of [lo, hi] before it from those within after it: the
// least cost, where a block within the envelope before d costs
// agreeShare/(1-agreeShare) (4) and a block beyond that side after d costs
// 1, so that d moves over a stretch only when at least agreeShare of its
// blocks lie beyond; the earliest of equals, over both sides. NaN blocks
// count for nothing.
func split(x []float64, from, to int, lo, hi float64) int {
	weight := agreeShare / (1 - agreeShare)
	outside := 0.0
	for _, v := range x[from:] {
		if !math.IsNaN(v) && (v > hi || v < lo) {
			outside++
		}
	}
	best, bestCost := from, outside
	for _, beyond := range []func(float64) bool{
		func(v float64) bool { return v > hi },
		func(v float64) bool { return v < lo },
	} {
		cost := outside
		for d := from + 1; d <= to; d++ {
			if v := x[d-1]; !math.IsNaN(v) {
				if v > hi || v < lo {
					cost-- // no longer outside after d
				}
				if !beyond(v) {
					cost += weight // before d, but not on this side
				}
			}
			if cost < bestCost || (cost == bestCost && d < best) {
				best, bestCost = d, cost
			}
		}
	}
	return best
}

// Judge places a run against the consensus (with the envelope of all the
// runs: a run that is not one of them).
func (c *Consensus) Judge(it []Iteration) Reference {
	return c.judge(it, [4]float64{c.lo, c.hi, c.tlo, c.thi})
}

// JudgeRun places the i-th run of the consensus against it, with the
// envelope of the other runs: what this run shows beyond the noise the
// others share.
func (c *Consensus) JudgeRun(i int, it []Iteration) Reference {
	return c.judge(it, c.others[i])
}

func (c *Consensus) judge(it []Iteration, env [4]float64) Reference {
	k := c.Blocks
	r := blocksOf(it, min(k, fullBlocks(it)))
	n := len(r.y)
	ref := Reference{Class: "no-steady-state", Blocks: n, Source: fmt.Sprintf("consensus of %d runs", c.Runs),
		CaseWarmupEnd: ptr(c.WarmupEnd), Trend: c.Trend}
	if n < 2*minSteadyBlocks {
		return ref
	}
	rel, trel := make([]float64, n), make([]float64, n)
	for b := range n {
		rel[b], trel[b] = r.y[b]-r.level, r.u[b]-r.tlevl
	}
	last := n - minSteadyBlocks
	w := min(c.w, last)
	dm := split(smooth3NaN(rel), w, last, env[0], env[1])
	dt := split(smooth3NaN(trel), w, last, env[2], env[3])
	ref.MedianBoundary, ref.TailBoundary = float64(dm)*RefBlock, float64(dt)*RefBlock
	d := max(dm, dt)
	ref.Boundary = float64(d) * RefBlock
	if !c.Steady || d >= last {
		return ref
	}
	ref.Steady = true
	switch {
	case d == 0:
		ref.Class = "flat"
	case nanMedian(rel[:d]) >= 0:
		ref.Class = "warmup"
	default:
		ref.Class = "slowdown"
	}
	return ref
}

// RunSeries is one recorded run of a case, for the consensus.
type RunSeries struct {
	Run    int
	Series []Iteration
}

// CaseReferences computes the reference of every run of a case: the
// consensus of its runs when there are ConsensusMinRuns or more (nil
// consensus and each run's single-run reference otherwise).
func CaseReferences(runs []RunSeries) (*Consensus, map[int]Reference, error) {
	refs := map[int]Reference{}
	if len(runs) < ConsensusMinRuns {
		for _, r := range runs {
			refs[r.Run] = ComputeReference(r.Series)
		}
		return nil, refs, nil
	}
	series := make([][]Iteration, len(runs))
	for i, r := range runs {
		series[i] = r.Series
	}
	c, err := ComputeConsensus(series)
	if err != nil {
		return nil, nil, err
	}
	for i, r := range runs {
		refs[r.Run] = c.JudgeRun(i, r.Series)
	}
	return c, refs, nil
}

// LeaveOneOutMinRuns is the fewest runs of a case that give each run a
// leave-one-out reference: the consensus of the others needs
// ConsensusMinRuns.
const LeaveOneOutMinRuns = ConsensusMinRuns + 1

// LeaveOneOutReferences places each run against the consensus of the
// case's other runs (Judge: the others' envelope), keyed by run number; nil
// with fewer than LeaveOneOutMinRuns runs. The consensus of all the runs
// includes the run it judges, and a consensus moves with the runs it holds
// (jvm-mixed: its W was 19 s from b45's three runs, 2 s from those and
// b47's two); a check met against one and failed against the other depends
// on the reference, not only on the tags.
func LeaveOneOutReferences(runs []RunSeries) (map[int]Reference, error) {
	if len(runs) < LeaveOneOutMinRuns {
		return nil, nil
	}
	out := map[int]Reference{}
	others := make([][]Iteration, 0, len(runs)-1)
	for i, r := range runs {
		others = others[:0]
		for j, o := range runs {
			if j != i {
				others = append(others, o.Series)
			}
		}
		c, err := ComputeConsensus(others)
		if err != nil {
			return nil, fmt.Errorf("the consensus of the runs but run %d: %w", r.Run, err)
		}
		ref := c.Judge(r.Series)
		ref.Source = fmt.Sprintf("consensus of the %d other runs", c.Runs)
		out[r.Run] = ref
	}
	return out, nil
}

// sortedRuns returns the run numbers in order (for stable output).
func sortedRuns(refs map[int]Reference) []int {
	keys := make([]int, 0, len(refs))
	for k := range refs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

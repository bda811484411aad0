package detector

import (
	"math"
	"slices"
)

// Stages 2 and 3 of the settled view: the run's own envelope, and where the
// run entered it for good.
//
// The block statistics (log medians, then log tails) are first smoothed by
// Tukey's running median of 3 (Tukey 1977), so that one wild second (a GC
// pause, a compile) does not count on its own; the first block, the run's
// cold start, is kept as it is (smooth3). The level is the median of
// the smoothed blocks of the second half of the run (a steady state must
// span at least MinFraction of it, 0.5 by default, so the second half lies
// inside it), and the envelope is how far the smoothed blocks of that
// second half stray from the level: their envelopeQ and 1-envelopeQ
// quantiles widened by envelopeMargin, and at least the tolerance either
// way. This is how far a settled run of this service wanders on this
// machine, as the run itself shows it: on 2 cores shared by k6 and the
// service the 1-s medians of a settled service switch between levels
// 25-45% apart, at random times, and a fixed band either splits such a
// run or swallows a warm-up stage of a quiet one.
//
// The steady state starts after the initial stretch of blocks outside the
// envelope (slower, as a warm-up is, or faster, as a cold phase that
// serves from an empty structure can be), allowing gaps of up to
// envelopeGap blocks inside it: warm-ups come in stages (HotSpot's
// interpreter, C1 and C2), and a block of a stage can touch the envelope.
// On the tails, a block below the envelope counts only while no block of
// the stretch has been above it: a faster cold phase comes first (go-io's
// first seconds in the live harness show it in their tails only), while
// tails lower right after a slower warm-up than in the rest of the run
// are the machine getting busier later (TestSettleQuieterTailsAfterWarmup;
// replayed on the 160 recorded live runs of b45-b52: 4 runs' settled
// coverage rose, none's contamination moved).
// A block outside it later in the run is a wave, not the warm-up: the
// trend test (stage 4) catches a level that does not come back. This is
// the idea of Welch's procedure (Welch 1983), the end of what the start of
// the run shows beyond its own noise, read from one run: the live harness
// judges it against the same idea read from the repeated runs of a case
// (live/harness/consensus.go, which shares no code with it).

// envelopeQ is the share of the second half's smoothed blocks left out of
// the envelope on each side (the quantile interpolated between order
// statistics: 2 to 3 of the 45 blocks of a 90-s run).
const envelopeQ = 0.05

// envelopeMargin (log scale, about 5%) widens the quantiles: the level of
// a settled service on shared cores switches between two levels, the
// quantile then lies within the blocks of one of them, and without a
// margin a tenth of that level's blocks early in the run would lie
// outside by a hair and chain the warm-up on (TestSettleOwnEnvelope: 14 of
// 40 seeds without it, 0 with it). Replayed on the live harness's recorded
// runs, margins of 0-5% changed one run's verdict; 10% started 7 runs too
// early.
const envelopeMargin = 0.05

// envelopeGap is the most consecutive blocks inside the envelope that the
// initial stretch outside it may hold.
const envelopeGap = 2

// minSettleBlocks is the least min_blocks (the default is 10: a second half
// of 5 blocks is the least that has an envelope to speak of).
const minSettleBlocks = 4

// smooth3 returns the running median of 3 of y, its first block copied
// unchanged (Tukey's "copying on", Velleman & Hoaglin 1981, ch. 6) and its
// last the mean of the last 2. The first block is the run's cold start
// (new connections, a first request down every code path): averaged with
// the second, as it was before, a first second whose p99 was 2.4-2.6
// times the level's (CPython, two runs of b29) lay inside the envelope of
// its spiky tail and was called steady (one block early, contamination
// 1.1%, beyond the 0.5% the settled view aims at).
// The last block keeps the mean: one wild last second must not widen the
// envelope that the whole second half sets. The first block alone outside
// the envelope makes the boundary 1 s, and the class follows its median: a
// slow first second classes the run a warm-up, a fast one a slowdown (none
// of the 160 recorded runs; 5 flat runs became warm-ups), a tail alone
// leaves it flat from 1 s.
func smooth3(y []float64) []float64 {
	out := make([]float64, len(y))
	for i := range y {
		switch {
		case i == 0:
			out[i] = y[0]
		case i == len(y)-1:
			out[i] = (y[i-1] + y[i]) / 2
		default:
			a, b, c := y[i-1], y[i], y[i+1]
			out[i] = max(min(a, b), min(max(a, b), c))
		}
	}
	return out
}

// envelopeEnd returns the first block after the initial stretch of ys (log
// scale, smoothed) outside the envelope of its second half, and that
// envelope (log, around the second half's median): at least tol wide on
// either side (the quantiles widened by envelopeMargin).
// With fastFirstOnly a block below the envelope counts as outside it only
// while no block of the stretch has been above it (the tails: see Settle).
// A series that never stays inside its envelope ends its stretch at its
// last block (the caller's half-run rule then finds no steady state).
func envelopeEnd(ys []float64, tol float64, fastFirstOnly bool) (end int, lo, hi float64) {
	h := ys[len(ys)/2:]
	level := medianOf(h)
	d := make([]float64, len(h))
	for i, v := range h {
		d[i] = v - level
	}
	slices.Sort(d)
	lo = min(quantileSorted(d, envelopeQ)-envelopeMargin, -tol)
	hi = max(quantileSorted(d, 1-envelopeQ)+envelopeMargin, tol)
	gap, slow := 0, false
	for k, v := range ys {
		x := v - level
		if x > hi {
			slow = true
		}
		if x > hi || (x < lo && !(fastFirstOnly && slow)) {
			end, gap = k+1, 0
			continue
		}
		if gap++; gap > envelopeGap {
			break
		}
	}
	return min(end, len(ys)-1), lo, hi
}

// quantileSorted is the q quantile of sorted s, interpolated between order
// statistics (Hyndman & Fan 1996, type 7).
func quantileSorted(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	p := q * float64(len(s)-1)
	i := int(math.Floor(p))
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (p-float64(i))*(s[i+1]-s[i])
}

// medianOf is the median of v, which it leaves in order.
func medianOf(v []float64) float64 { return median(slices.Clone(v)) }

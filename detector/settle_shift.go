package detector

import "math"

// Stage 5 of the settled view: a level that moved for good. Stages 2-4 let
// a single switch of level through: the envelope of the second half's
// blocks holds a switch that fills more than envelopeQ of it, and a level
// that switched once is no trend (Kendall's tau stays below trendTau). On
// a service that settled and then regressed for good late in the run
// (a pool exhausted, a cache evicted, a leak crossing a threshold), the
// settled view then called the whole run one flat steady state (a tenfold
// slowdown at 50 s of a 60-s run: flat from 0 s, its p50 the first
// level's), while the online detector relapsed on it. So the stretch is
// split where a change in its mean is likeliest (binary segmentation's
// first split, the CUSUM statistic of Page 1954 / Vostrikova 1981, on the
// smoothed blocks), and the split counts when the level after it is at
// least shiftMin away from the level before (medians of the blocks) and
// stays there: shiftShare of the blocks after it, and the median of the
// last shiftMinAfter, beyond half that distance. shiftMin is a doubling:
// larger than the 25-45% switches and +50% waves of a settled service on
// 2 cores shared with k6 (stage 2), which come and go; the online relapse
// rule's fast path is 2.25 times. A move to a faster level must be
// fivefold (shiftMinFaster), as the online relapse rule's: a scenario's
// ramp-down that unloads a saturated service speeds its last seconds up
// by the schedule, not by the service; a warm-up that ended that late and
// that far is still said.

// shiftMin and shiftMinFaster are the least moves of the level, in log:
// twice slower, five times faster.
var (
	shiftMin       = math.Ln2
	shiftMinFaster = math.Log(5)
)

const (
	// shiftMinBefore and shiftMinAfter are the fewest blocks on each side
	// of the split.
	shiftMinBefore = 3
	shiftMinAfter  = 5
	// shiftShare is the least share of the blocks after the split that lie
	// beyond half of the move.
	shiftShare = 0.8
)

// lastShift finds a move of the level for good within ys[first:] (log
// scale, smoothed): the block k where the new level starts, and the move
// (log, positive: slower after).
func lastShift(ys []float64, first int) (k int, shift float64, ok bool) {
	n := len(ys)
	if n-first < shiftMinBefore+shiftMinAfter {
		return 0, 0, false
	}
	// prefix sums of the stretch
	ps := make([]float64, n-first+1)
	for i, v := range ys[first:] {
		ps[i+1] = ps[i] + v
	}
	m := float64(n - first)
	best, bestK := -1.0, 0
	for j := shiftMinBefore; j <= n-first-shiftMinAfter; j++ {
		a, b := float64(j), m-float64(j)
		d := ps[j]/a - (ps[len(ps)-1]-ps[j])/b
		if c := a * b / m * d * d; c > best {
			best, bestK = c, j
		}
	}
	k = first + bestK
	before, after := medianOf(ys[first:k]), medianOf(ys[k:])
	shift = after - before
	if (shift >= 0 && shift < shiftMin) || (shift < 0 && -shift < shiftMinFaster) {
		return 0, 0, false
	}
	half := math.Abs(shift) / 2
	beyond := func(v float64) bool { return math.Copysign(1, shift)*(v-before) > half }
	cnt := 0
	for _, v := range ys[k:] {
		if beyond(v) {
			cnt++
		}
	}
	if float64(cnt) < shiftShare*float64(n-k) || !beyond(medianOf(ys[n-shiftMinAfter:])) {
		return 0, 0, false
	}
	return k, shift, true
}

package detector

import (
	"math"
	"slices"
)

// Stage 2 of the settled view: segmentation. The block statistics (log
// medians, then log tails) are first smoothed by Tukey's running median of
// 3 (Tukey 1977), so that one wild second (a GC pause, a compile) is no
// segment of its own, then cut into segments of constant level by PELT
// (Killick, Fearnhead & Eckley, JASA 2012) with the squared-error cost of a
// change in mean and at least 2 blocks per segment.
//
// The penalty is 2·σ²·ln n (the BIC's) with σ half the tolerance: a step
// between segments smaller than the band is not worth a change point, and
// the machine's waves (±15-25% in 5-30 s on 2 shared cores) do not split
// the series into many short segments. Segments that still split a wave do
// no harm: stage 3 joins every segment at the final level.

// minSegment is the fewest blocks of a segment.
const minSegment = 2

// smooth3 returns the running median of 3 of y (the mean of 2 at the ends).
func smooth3(y []float64) []float64 {
	out := make([]float64, len(y))
	for i := range y {
		switch {
		case len(y) == 1:
			out[i] = y[0]
		case i == 0:
			out[i] = (y[0] + y[1]) / 2
		case i == len(y)-1:
			out[i] = (y[i-1] + y[i]) / 2
		default:
			a, b, c := y[i-1], y[i], y[i+1]
			out[i] = max(min(a, b), min(max(a, b), c))
		}
	}
	return out
}

// peltMean returns the starts of the segments of y (the first is 0) that
// minimise the squared-error cost plus pen per change point, with at least
// minSegment points per segment.
func peltMean(y []float64, pen float64) []int {
	n := len(y)
	if n < 2*minSegment {
		return []int{0}
	}
	s := make([]float64, n+1)
	q := make([]float64, n+1)
	for i, v := range y {
		s[i+1] = s[i] + v
		q[i+1] = q[i] + v*v
	}
	cost := func(a, b int) float64 {
		k := float64(b - a)
		d := s[b] - s[a]
		return q[b] - q[a] - d*d/k
	}
	f := make([]float64, n+1)
	last := make([]int, n+1)
	f[0] = -pen
	for i := 1; i < minSegment; i++ {
		f[i] = math.Inf(1)
	}
	cand := []int{0}
	vals := make([]float64, 0, n)
	for t := minSegment; t <= n; t++ {
		best, arg := math.Inf(1), 0
		vals = vals[:0]
		for _, c := range cand {
			v := math.Inf(1)
			if t-c >= minSegment {
				v = f[c] + cost(c, t)
				if v+pen < best {
					best, arg = v+pen, c
				}
			}
			vals = append(vals, v)
		}
		f[t], last[t] = best, arg
		// PELT's pruning: a start whose cost already exceeds the optimum
		// can never start the last segment again
		keep := cand[:0]
		for i, c := range cand {
			if t-c < minSegment || vals[i] <= best {
				keep = append(keep, c)
			}
		}
		cand = append(keep, t-minSegment+1)
	}
	var starts []int
	for t := last[n]; t > 0; t = last[t] {
		starts = append(starts, t)
	}
	starts = append(starts, 0)
	slices.Reverse(starts)
	return starts
}

// penaltyOf is 2·σ²·ln n with σ = tol/2.
func penaltyOf(n int, tol float64) float64 {
	return 2 * tol * tol / 4 * math.Log(float64(max(n, 2)))
}

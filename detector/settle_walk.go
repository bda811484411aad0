package detector

import (
	"math"
	"slices"
)

// Stage 3 of the settled view: the level. firstAtLevel returns the start
// of the earliest segment whose level (the median of its smoothed blocks)
// lies within the tolerance of the final level; trimLeading then skips the
// leading blocks of that segment that are themselves out of the band. A
// wave later in the run that comes back to the level does not cut the
// steady state short: wandering within a run is part of its steady state,
// and the trend test (stage 4) catches a level that does not come back.

// medianOf is the median of v, which it leaves in order.
func medianOf(v []float64) float64 { return median(slices.Clone(v)) }

// trimLeading moves first past the leading blocks of the steady stretch
// whose own (unsmoothed) value lies beyond tol of level: the running
// median spreads a one-block transient over its neighbour, and a segment
// of at least two blocks can begin with the last block of a transient.
func trimLeading(y []float64, first int, level, tol float64) int {
	for first < len(y)-1 && math.Abs(y[first]-level) > tol {
		first++
	}
	return first
}

// segmentEnd returns the end of segment j of starts in a series of n.
func segmentEnd(starts []int, j, n int) int {
	if j+1 < len(starts) {
		return starts[j+1]
	}
	return n
}

// firstAtLevel returns the start of the earliest segment whose level lies
// within tol of level.
func firstAtLevel(y []float64, starts []int, level, tol float64) int {
	for j, st := range starts {
		end := len(y)
		if j+1 < len(starts) {
			end = starts[j+1]
		}
		if math.Abs(medianOf(y[st:end])-level) <= tol {
			return st
		}
	}
	return starts[len(starts)-1]
}

package detector

import (
	"fmt"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// histogram is the detector's window histogram: HDR counts of the
// detector's scaled observations (x = value * scale, unit 1, so that a
// window's first observations land DynamicRange units up whatever the
// series' unit). Latencies in the run engine and the results folder are
// internal/latency's Histogram, not this.
//
// Record clamps x into [1, highest] and never allocates (the detector counts
// what it clamps itself); Mean is exact on the clamped values, Quantile has
// the precision of sigDigits significant digits and never leaves the
// recorded min and max. Not safe for concurrent use.
type histogram struct {
	h        *hdrhistogram.Histogram
	highest  float64
	hiInt    int64
	count    int64
	sum      float64
	min, max float64
	// top holds the largest recorded values (at most topK), ascending, for
	// MeanAbove
	top  [topK]float64
	nTop int
}

// topK is how many of a window's largest values the histogram keeps
// exactly: the mean above a quantile with at most that many values above it
// costs no scan of the counts.
const topK = 16

// newHistogram returns a window histogram of 1 .. highest (at least 2, at
// most 1e15) with sigDigits (1..5) significant decimal digits.
func newHistogram(highest float64, sigDigits int) (*histogram, error) {
	switch {
	case !(highest >= 2) || highest > 1e15:
		return nil, fmt.Errorf("window histogram: highest must be in 2..1e15, got %v", highest)
	case sigDigits < 1 || sigDigits > 5:
		return nil, fmt.Errorf("window histogram: significant digits must be in 1..5, got %d", sigDigits)
	}
	hi := int64(math.Ceil(highest))
	return &histogram{
		h: hdrhistogram.New(1, hi, sigDigits), highest: highest, hiInt: hi,
		min: math.Inf(1), max: math.Inf(-1),
	}, nil
}

// Record adds one scaled observation, clamped into [1, highest].
func (h *histogram) Record(x float64) {
	if !(x >= 1) { // below range (the detector never passes NaN)
		x = 1
	} else if x > h.highest {
		x = h.highest
	}
	i := int64(x + 0.5)
	if i > h.hiInt {
		i = h.hiInt
	}
	_ = h.h.RecordValue(i) // cannot fail: within [1, hiInt]
	h.count++
	h.sum += x
	if x < h.min { // plain comparisons: the builtin min and max handle NaN and -0, and cost more here
		h.min = x
	}
	if x > h.max {
		h.max = x
	}
	if h.nTop < topK {
		i := h.nTop
		for i > 0 && h.top[i-1] > x {
			h.top[i] = h.top[i-1]
			i--
		}
		h.top[i] = x
		h.nTop++
	} else if x > h.top[0] {
		i := 0
		for i+1 < topK && h.top[i+1] < x {
			h.top[i] = h.top[i+1]
			i++
		}
		h.top[i] = x
	}
}

// MeanAbove returns the mean of the recorded values above quantile q
// (0..100): the count-round(q% of count) largest, as ValueAtQuantile ranks
// them; 0 when empty, the maximum when none lies above. Exact on the
// clamped values when at most topK lie above q; beyond that, the mean of
// one quantile per value above q, or of meanAbovePoints quantiles at the
// midpoints of equal slices of (q, 100] when more lie above it.
func (h *histogram) MeanAbove(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	k := h.count - int64(q/100*float64(h.count)+0.5)
	switch {
	case k <= 0:
		return h.max
	case k <= int64(h.nTop):
		s := 0.0
		for _, x := range h.top[h.nTop-int(k) : h.nTop] {
			s += x
		}
		return s / float64(k)
	}
	s := 0.0
	if k <= meanAbovePoints {
		// one quantile per value above q, each at a quarter of a rank
		// below it (as ValueAtQuantile rounds, and clear of float error)
		for r := h.count - k + 1; r <= h.count; r++ {
			s += h.Quantile(100 * (float64(r) - 0.25) / float64(h.count))
		}
		return s / float64(k)
	}
	for i := range meanAbovePoints {
		s += h.Quantile(q + (100-q)*(float64(i)+0.5)/meanAbovePoints)
	}
	return s / meanAbovePoints
}

// meanAbovePoints is the most quantiles MeanAbove averages when more than
// topK values lie above q: each of them (to the histogram's precision) up
// to that many, then the midpoints of equal slices of (q, 100].
const meanAbovePoints = 64

// Quantile returns the value at quantile q (0..100), 0 when empty.
func (h *histogram) Quantile(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	// HDR answers with the highest value of a bucket; never report beyond
	// what was recorded.
	return min(max(float64(h.h.ValueAtQuantile(q)), h.min), h.max)
}

// Mean returns the mean of the recorded values, 0 when empty.
func (h *histogram) Mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count)
}

// Reset clears all values, keeping the allocated shape.
func (h *histogram) Reset() {
	h.h.Reset()
	h.count, h.sum = 0, 0
	h.min, h.max = math.Inf(1), math.Inf(-1)
	h.nTop = 0
}

package detector

import (
	"fmt"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// histogram is the detector's window histogram: HDR counts of the
// detector's scaled observations (x = value * scale, unit 1, so that the
// first observation lands unitsAtFirst units up whatever the series'
// unit). Latencies in the run engine and the results folder are
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
	// SmoothTail
	top  [topK]float64
	nTop int
}

// topK is how many of a window's largest values the histogram keeps
// exactly: a smoothed tail whose band of ranks lies within them (at most 11
// values above its quantile: ranks up to 5+11) costs no scan of the
// counts.
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

// SmoothTail returns the window's tail at quantile q (50..100) smoothed
// over the order statistics around it. With k values above q (count -
// round(q% of count)), the quantile is the value ranked k+1 from the top
// (ValueAtQuantile's rank); SmoothTail is the geometric mean of the k values
// ranked t+1 .. t+k from the top, t = floor(k/2): a band of ranks centred
// on rank k, next to the quantile's (ranks 3-7 for k = 5). 0 when empty,
// the maximum when no value lies above q. (Below q = 50 the band can run
// past the smallest value, which then stands for the ranks beyond it; the
// detector's tail quantiles are at least 50.)
//
// Why not the quantile itself: a slow path taken by about k requests of a
// window (1% at 500 a second and p99) puts the quantile on the edge between
// the two paths, and it flips between them from window to window on the
// count of slow requests alone; an average over a band of ranks moves with
// that count, a step at a time. Why not the mean of the k values above q
// (the expected shortfall, the dual gate's tail on 2026-11-26): one request
// 200 times slower than the rest (a retransmit, a pause) moves that mean
// 16-fold; the band leaves out the t largest values, so that it takes t+1
// such requests in one window for one of them to count, and then by the
// k-th root of its ratio to the value it displaces (a 200-ms request
// displacing a 3-ms one, k = 5: a factor 2.3). Why not a band centred on
// the quantile's rank (t = ceil((k+1)/2)), which leaves out one value
// more: a JIT's first second with 2% of its requests 40 times slower
// (about 10 of 500, k = 5) then needs 8 of them to count in full, and
// TestServiceTransientInTheTail's seed 1 was no transient.
//
// Exact on the clamped values for the ranks up to topK (k up to 11); each
// rank beyond is the histogram's quantile at that rank (the highest value
// of its bucket, to the histogram's precision, so that it can come out a
// little above an exact rank before it), and when k exceeds
// smoothTailPoints, that many ranks evenly spread over the band stand for
// it.
func (h *histogram) SmoothTail(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	k := h.count - int64(q/100*float64(h.count)+0.5)
	if k <= 0 {
		return h.max
	}
	t := k / 2
	s := 0.0
	if k <= smoothTailPoints {
		for j := t + 1; j <= t+k; j++ {
			s += math.Log(h.fromTop(float64(j)))
		}
		return math.Exp(s / float64(k))
	}
	for i := range smoothTailPoints {
		s += math.Log(h.fromTop(float64(t) + 0.5 + (float64(i)+0.5)*float64(k)/smoothTailPoints))
	}
	return math.Exp(s / smoothTailPoints)
}

// smoothTailPoints is the most ranks SmoothTail averages.
const smoothTailPoints = 64

// fromTop returns the value of rank j from the top (1: the maximum; j at
// most count, rounded to the nearest rank): exact while j <= the values
// the histogram keeps, the histogram's quantile at that rank beyond.
func (h *histogram) fromTop(j float64) float64 {
	r := min(max(int64(j+0.5), 1), h.count)
	if r <= int64(h.nTop) {
		return h.top[h.nTop-int(r)]
	}
	// ascending rank count-r+1, at a quarter of a rank below it (as
	// ValueAtQuantile rounds, and clear of float error)
	return h.Quantile(100 * (float64(h.count-r+1) - 0.25) / float64(h.count))
}

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

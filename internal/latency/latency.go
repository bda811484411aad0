// Package latency is the project's one latency histogram: durations in
// milliseconds, held as integer microseconds in an HDR histogram, with the
// exact count, sum, min and max beside it. The run engine records into it
// while k6 runs; the results folder (summary.json's distributions, the .hlog
// files, merge, compare) reads and merges the same type.
package latency

import (
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// UnitMs is the value, in milliseconds, of one integer step of a
// Histogram's HDR counts: a microsecond.
const UnitMs = 0.001

// Histogram is a latency distribution in milliseconds.
//
// Every value is recorded in HDR as round(ms / UnitMs), integer
// microseconds; Count, SumMs, MinMs and MaxMs are exact on the recorded
// values. RecordMs never allocates: values outside the histogram's range
// (and NaN) are clamped into it and recorded, never dropped. A Histogram
// is not safe for concurrent use; callers synchronize.
type Histogram struct {
	// HDR holds the values in integer microseconds; nil for a histogram
	// that no value or geometry has reached yet (a merge accumulator).
	// Recording into it directly bypasses Count, SumMs, MinMs and MaxMs.
	HDR   *hdrhistogram.Histogram
	Count int64
	SumMs float64
	MinMs float64 // +Inf when empty
	MaxMs float64 // -Inf when empty
	// FirstMs and LastMs (Unix ms) bound the span of the recorded values
	// (first start, last end); 0 when unknown. RecordMs leaves them alone.
	FirstMs, LastMs float64

	hiMs  float64 // highest recordable value (ms); 0 when HDR came from elsewhere
	hiInt int64   // the same in microseconds
}

// maxHighestMs bounds New's range: 1e15 integer steps.
const maxHighestMs = 1e12

// New returns an empty histogram covering UnitMs .. highestMs with sig
// (1..5) significant decimal digits. It panics when highestMs is not in
// 2 µs .. 1e12 ms or sig not in 1..5: the callers pass constants.
func New(highestMs float64, sig int) *Histogram {
	if !(highestMs >= 2*UnitMs && highestMs <= maxHighestMs) || sig < 1 || sig > 5 {
		panic("latency.New: highest must be in 2 µs .. 1e12 ms, significant digits in 1..5")
	}
	hi := int64(math.Ceil(highestMs / UnitMs))
	return &Histogram{
		HDR: hdrhistogram.New(1, hi, sig), MinMs: math.Inf(1), MaxMs: math.Inf(-1),
		hiMs: highestMs, hiInt: hi,
	}
}

// Empty returns a histogram with no values and no geometry yet, to merge
// into: the first Merge takes the geometry of what it adds.
func Empty() *Histogram { return &Histogram{MinMs: math.Inf(1), MaxMs: math.Inf(-1)} }

// FromHDR wraps an HDR histogram of integer microseconds (read back from an
// .hlog file) with the exact figures that were kept beside it. An empty one
// (count 0) gets the empty min and max.
func FromHDR(h *hdrhistogram.Histogram, count int64, sumMs, minMs, maxMs float64) *Histogram {
	out := &Histogram{HDR: h, Count: count, SumMs: sumMs, MinMs: minMs, MaxMs: maxMs}
	if count == 0 {
		out.MinMs, out.MaxMs = math.Inf(1), math.Inf(-1)
	}
	return out
}

// RecordMs adds one duration (ms). O(1), no allocation. Only a histogram
// made by New records; one read back with FromHDR or made by Empty holds a
// geometry it did not choose and panics here.
func (h *Histogram) RecordMs(v float64) {
	if h.hiInt == 0 {
		panic("latency: RecordMs on a histogram not made by New")
	}
	switch {
	case v >= UnitMs && v <= h.hiMs: // common case; false for NaN
	case v > h.hiMs:
		v = h.hiMs
	default: // below range, negative or NaN
		v = UnitMs
	}
	x := int64(v/UnitMs + 0.5)
	if x < 1 {
		x = 1
	} else if x > h.hiInt {
		x = h.hiInt
	}
	_ = h.HDR.RecordValue(x) // cannot fail: x is within [1, hiInt]
	h.Count++
	h.SumMs += v
	if v < h.MinMs {
		h.MinMs = v
	}
	if v > h.MaxMs {
		h.MaxMs = v
	}
}

// QuantileMs returns the value (ms) at quantile q (0..100), clamped to the
// exact min and max (HDR answers with the highest value of a bucket); 0
// when empty.
func (h *Histogram) QuantileMs(q float64) float64 {
	if h.Count == 0 || h.HDR == nil || h.HDR.TotalCount() == 0 {
		return 0
	}
	v := float64(h.HDR.ValueAtQuantile(q)) * UnitMs
	return math.Min(math.Max(v, h.MinMs), h.MaxMs)
}

// MeanMs returns the exact mean (ms); 0 when empty.
func (h *Histogram) MeanMs() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.SumMs / float64(h.Count)
}

// Clone returns a deep copy (the HDR counts copied, not shared).
func (h *Histogram) Clone() *Histogram {
	out := *h
	if h.HDR != nil {
		out.HDR = h.HDR.Clone()
	}
	return &out
}

// Merge adds o into h. HDR geometries may differ: o's values are
// re-recorded at their buckets' values, and h's range first widens to o's
// when o's reaches higher, so that no count is dropped. An accumulator with
// no geometry yet (Empty) takes o's geometry when o holds values.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.Count == 0 {
		return
	}
	if h.HDR == nil {
		h.TakeGeometry(o)
	}
	if hi := o.HDR.HighestTrackableValue(); hi > h.HDR.HighestTrackableValue() {
		wider := hdrhistogram.New(1, hi, int(h.HDR.SignificantFigures()))
		wider.Merge(h.HDR)
		h.HDR = wider
		if h.hiInt != 0 { // a histogram that records: it may now record up to hi
			h.hiInt, h.hiMs = hi, float64(hi)*UnitMs
		}
	}
	h.HDR.Merge(o.HDR)
	if h.Count == 0 {
		h.MinMs, h.MaxMs = o.MinMs, o.MaxMs
	} else {
		h.MinMs, h.MaxMs = math.Min(h.MinMs, o.MinMs), math.Max(h.MaxMs, o.MaxMs)
	}
	h.Count += o.Count
	h.SumMs += o.SumMs
	h.FirstMs = minNonZero(h.FirstMs, o.FirstMs)
	h.LastMs = math.Max(h.LastMs, o.LastMs)
}

// TakeGeometry gives a histogram with no geometry yet (Empty) the HDR
// geometry of o, with no values; it does nothing when h has one or o has
// none.
func (h *Histogram) TakeGeometry(o *Histogram) {
	if h.HDR == nil && o != nil && o.HDR != nil {
		h.HDR = hdrhistogram.New(1, o.HDR.HighestTrackableValue(), int(o.HDR.SignificantFigures()))
	}
}

func minNonZero(a, b float64) float64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return math.Min(a, b)
}

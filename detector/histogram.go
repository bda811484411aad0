package detector

import (
	"errors"
	"fmt"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram is a fixed-shape HDR histogram of positive float64 values.
//
// Values are scaled to integers with a fixed unit (the lowest discernible value
// passed to NewHistogram): value v is stored as round(v/lowest). The counts
// array is allocated once by NewHistogram; Record is index arithmetic and never
// allocates. Values outside [lowest, highest] are clamped into range, recorded,
// and counted in OutOfRange, never dropped silently.
//
// Min, Max and Mean are tracked exactly on the float64 inputs (after clamping);
// quantiles have the precision of the HDR geometry (sigDigits significant
// decimal digits).
//
// A Histogram is not safe for concurrent use; callers synchronize.
type Histogram struct {
	h          *hdrhistogram.Histogram
	unit       float64 // value of one integer step
	lowest     float64
	highest    float64
	hiInt      int64
	count      int64
	outOfRange int64
	sum        float64
	min, max   float64
}

// NewHistogram returns a histogram covering [lowest, highest] with sigDigits
// (1..5) significant decimal digits of precision. lowest is also the unit:
// the smallest distinguishable value.
func NewHistogram(lowest, highest float64, sigDigits int) (*Histogram, error) {
	switch {
	case !(lowest > 0) || math.IsInf(lowest, 0):
		return nil, fmt.Errorf("histogram lowest value must be a positive finite number, got %v", lowest)
	case !(highest >= 2*lowest) || math.IsInf(highest, 0):
		return nil, fmt.Errorf("histogram highest value must be finite and at least 2x lowest (%v), got %v", lowest, highest)
	case sigDigits < 1 || sigDigits > 5:
		return nil, fmt.Errorf("histogram significant digits must be in 1..5, got %d", sigDigits)
	}
	ratio := highest / lowest
	if ratio > 1e15 {
		return nil, errors.New("histogram range highest/lowest must be at most 1e15")
	}
	hi := int64(math.Ceil(ratio))
	return &Histogram{
		h:       hdrhistogram.New(1, hi, sigDigits),
		unit:    lowest,
		lowest:  lowest,
		highest: highest,
		hiInt:   hi,
		min:     math.Inf(1),
		max:     math.Inf(-1),
	}, nil
}

// Record adds one value. Values below lowest or above highest (and NaN) are
// clamped into range and counted in OutOfRange. O(1), no allocation.
func (h *Histogram) Record(v float64) {
	switch {
	case v >= h.lowest && v <= h.highest: // common case; false for NaN
	case v > h.highest:
		h.outOfRange++
		v = h.highest
	default: // below range, negative or NaN
		h.outOfRange++
		v = h.lowest
	}
	x := int64(v/h.unit + 0.5)
	if x < 1 {
		x = 1
	} else if x > h.hiInt {
		x = h.hiInt
	}
	_ = h.h.RecordValue(x) // cannot fail: x is within [1, hiInt]
	h.count++
	h.sum += v
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// Quantile returns the value at quantile q (0..100), 0 when empty.
func (h *Histogram) Quantile(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	v := float64(h.h.ValueAtQuantile(q)) * h.unit
	// The HDR value is the highest equivalent value of its bucket; never
	// report beyond what was recorded.
	if v > h.max {
		v = h.max
	}
	if v < h.min {
		v = h.min
	}
	return v
}

// Count returns the number of recorded values, out-of-range ones included.
func (h *Histogram) Count() int64 { return h.count }

// OutOfRange returns how many recorded values were clamped into range.
func (h *Histogram) OutOfRange() int64 { return h.outOfRange }

// Min returns the smallest recorded value (after clamping), 0 when empty.
func (h *Histogram) Min() float64 {
	if h.count == 0 {
		return 0
	}
	return h.min
}

// Max returns the largest recorded value (after clamping), 0 when empty.
func (h *Histogram) Max() float64 {
	if h.count == 0 {
		return 0
	}
	return h.max
}

// Mean returns the mean of recorded values (after clamping), 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count)
}

// Lowest returns the lowest trackable value (the unit).
func (h *Histogram) Lowest() float64 { return h.lowest }

// Highest returns the highest trackable value.
func (h *Histogram) Highest() float64 { return h.highest }

// Merge adds all values of other into h. Both histograms must have the same
// lowest/highest/significant digits; otherwise an error is returned and h is
// unchanged.
func (h *Histogram) Merge(other *Histogram) error {
	if other.unit != h.unit || other.hiInt != h.hiInt ||
		other.h.SignificantFigures() != h.h.SignificantFigures() {
		return errors.New("histogram merge: shapes differ")
	}
	if other.count == 0 {
		return nil
	}
	h.h.Merge(other.h)
	h.count += other.count
	h.outOfRange += other.outOfRange
	h.sum += other.sum
	h.min = math.Min(h.min, other.min)
	h.max = math.Max(h.max, other.max)
	return nil
}

// Reset clears all values, keeping the allocated shape.
func (h *Histogram) Reset() {
	h.h.Reset()
	h.count, h.outOfRange, h.sum = 0, 0, 0
	h.min, h.max = math.Inf(1), math.Inf(-1)
}

// HDR returns the underlying histogram, whose integer values are in units of
// Lowest() (for example to write .hlog files with a matching value scale).
// Recording into it directly bypasses Count/Min/Max/Mean/OutOfRange.
func (h *Histogram) HDR() *hdrhistogram.Histogram { return h.h }

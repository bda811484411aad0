// Package observation says which measurements the steady-state detector can
// learn from. The detector scales every series by its first value (so that
// value maps into the middle of its histograms): a first value so small that
// the scale overflows makes every later value out of range, and the series
// can never settle. Every way in from outside (regime.observe(), the CSV
// files of `k6 x regime detect`) checks values here, so that such input is
// refused with a message instead of silently spoiling a run.
package observation

import (
	"fmt"
	"math"
)

// Min is the smallest usable value: the detector's scale (100 *
// dynamic_range / first value, dynamic_range up to 1e6) stays finite above
// it.
const Min = 1e-300

// MaxTimeNs is the largest timestamp, in nanoseconds, that fits the
// detector's int64 time.
const MaxTimeNs = float64(math.MaxInt64)

// Check returns nil when v is a usable measurement: a finite number >= Min.
func Check(v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%v is not a finite number", v)
	case v <= 0:
		return fmt.Errorf("%v is not > 0 (durations and other measurements must be positive)", v)
	case v < Min:
		return fmt.Errorf("%v is below %g, the smallest value the detector can scale", v, Min)
	}
	return nil
}

// CheckTime returns nil when t (in nanoseconds) is a usable timestamp: a
// finite number >= 0 that fits in int64 nanoseconds (relative times from 0
// and Unix times alike).
func CheckTime(ns float64) error {
	switch {
	case math.IsNaN(ns) || math.IsInf(ns, 0):
		return fmt.Errorf("%v is not a finite number", ns)
	case ns < 0:
		return fmt.Errorf("%v is negative", ns)
	case ns >= MaxTimeNs:
		return fmt.Errorf("%v ns is beyond the largest time the detector holds (about year 2262 as Unix time)", ns)
	}
	return nil
}

package latency_test

import (
	"fmt"

	"github.com/xk6-regime/xk6-regime/internal/latency"
)

// A histogram takes durations in milliseconds and answers in milliseconds;
// it holds them as whole microseconds.
func Example() {
	h := latency.New(600_000, 2) // 1 µs .. 10 min, 2 significant digits
	for _, ms := range []float64{4.2, 4.4, 5.1, 38.0} {
		h.RecordMs(ms)
	}
	fmt.Printf("n=%d p50=%.1f ms max=%.1f ms mean=%.3f ms\n", h.Count, h.QuantileMs(50), h.MaxMs, h.MeanMs())
	fmt.Println("p50 in HDR:", h.HDR.ValueAtQuantile(50), "µs")
	// Output:
	// n=4 p50=4.4 ms max=38.0 ms mean=12.925 ms
	// p50 in HDR: 4415 µs
}

// Merging accumulates runs (k6 x regime merge): an empty accumulator takes
// the geometry of the first histogram with values.
func ExampleHistogram_Merge() {
	a, b := latency.New(600_000, 2), latency.New(600_000, 2)
	a.RecordMs(10)
	b.RecordMs(30)
	acc := latency.Empty()
	acc.Merge(a)
	acc.Merge(b)
	fmt.Printf("n=%d min=%.0f max=%.0f\n", acc.Count, acc.MinMs, acc.MaxMs)
	// Output: n=2 min=10 max=30
}

package detector

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// values is a fixed pool of lognormal values (k6-like latencies in ms).
func values(n int) []float64 {
	r := rand.New(rand.NewPCG(42, 42))
	out := make([]float64, n)
	for i := range out {
		out[i] = 80 * lognormal(r, 0.4)
	}
	return out
}

// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestObserveZeroAllocs(t *testing.T) {
	d, err := New(DefaultConfig())
	require.NoError(t, err)
	vs := values(1 << 12)
	i := 0
	allocs := testing.AllocsPerRun(100_000, func() {
		d.Observe(int64(i), vs[i&(len(vs)-1)])
		i++
	})
	require.Zero(t, allocs)
	// and through steady state, window closes and ring merges
	require.Positive(t, d.Snapshot().Windows)
}

func BenchmarkObserve(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  func() Config
	}{
		{"default", DefaultConfig},
		{"window_min=1000", func() Config { c := DefaultConfig(); c.WindowMin = 1000; return c }},
		// the k6 extension's: windows of at least 1 s, here at 10,000
		// observations a second
		{"service 10k/s", ServiceConfig},
		{"never-steady drift", DefaultConfig},
		{"never-steady bursts", DefaultConfig},
	} {
		b.Run(tc.name, func(b *testing.B) {
			d, err := New(tc.cfg())
			require.NoError(b, err)
			vs := values(1 << 12)
			switch {
			case strings.HasPrefix(tc.name, "never-steady drift"):
				// a sawtooth of slow ramps: the level never holds
				for i := range vs {
					vs[i] *= 1 + float64(i%1024)/256
				}
			case strings.HasPrefix(tc.name, "never-steady bursts"):
				// stable median, but every fourth window 20% of requests
				// take 10x: window means are overdispersed
				for i := range vs {
					if (i/50)%4 == 0 && i%5 == 0 {
						vs[i] *= 10
					}
				}
			}
			step := int64(1) // ns between observations
			if tc.name == "service 10k/s" {
				step = 100_000
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d.Observe(int64(i)*step, vs[i&(len(vs)-1)])
				i++
			}
		})
	}
}

func heapAfter(tb testing.TB, n int) uint64 {
	tb.Helper()
	d, err := New(DefaultConfig())
	require.NoError(tb, err)
	vs := values(1 << 12)
	for i := range n {
		d.Observe(int64(i)*1e6, vs[i&(len(vs)-1)])
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(d)
	return ms.HeapInuse
}

// TestMemoryFlat checks that the heap in use does not grow with the run
// length: 10M observations cost no more than 1M (within 256 KiB of noise).
// Not parallel: it measures the process heap.
func TestMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("10M observations; skipped with -short")
	}
	h1 := heapAfter(t, 1_000_000)
	h10 := heapAfter(t, 10_000_000)
	t.Logf("heap in use after 1M observations: %d KiB, after 10M: %d KiB", h1>>10, h10>>10)
	require.Less(t, int64(h10)-int64(h1), int64(256<<10))
}

func BenchmarkMemory10M(b *testing.B) {
	for b.Loop() {
		h1 := heapAfter(b, 1_000_000)
		h10 := heapAfter(b, 10_000_000)
		b.ReportMetric(float64(h1)/1024, "KiB-heap-1M")
		b.ReportMetric(float64(h10)/1024, "KiB-heap-10M")
	}
}

// BenchmarkSmoothTail: the service method's window tail, once per window
// close (about once a second), for windows whose band of ranks lies in the
// values kept exactly (k 5 and 10; up to 11 values above the quantile) and
// beyond (k 40: a quantile per rank; k 500: smoothTailPoints ranks).
func BenchmarkSmoothTail(b *testing.B) {
	for _, tc := range []struct {
		n int
		q float64
	}{{500, 99}, {10_000, 99.9}, {10_000, 99.6}, {50_000, 99}} {
		h, err := newHistogram(1e9, 2)
		require.NoError(b, err)
		for _, v := range values(tc.n) {
			h.Record(v * 1000)
		}
		k := int64(tc.n) - int64(tc.q/100*float64(tc.n)+0.5)
		b.Run(fmt.Sprintf("n=%d,k=%d", tc.n, k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = h.SmoothTail(tc.q)
			}
		})
	}
}

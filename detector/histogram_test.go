package detector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewHistogramRefusesBadShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		high          float64
		sig           int
		wantErrSubstr string
	}{
		{"highest too small", 1.5, 2, "highest"},
		{"nan highest", math.NaN(), 2, "highest"},
		{"inf highest", math.Inf(1), 2, "highest"},
		{"range too wide", 1e16, 2, "highest"},
		{"sig digits 0", 10, 0, "significant"},
		{"sig digits 6", 10, 6, "significant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := newHistogram(tc.high, tc.sig)
			require.ErrorContains(t, err, tc.wantErrSubstr)
		})
	}
}

func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		hi          float64
		sig         int
		scale       float64
		relAccuracy float64
	}{
		{"3 digits", 1e6, 3, 100, 0.002},
		{"2 digits, wide range", 1e12, 2, 1e6, 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := newHistogram(tc.hi, tc.sig)
			require.NoError(t, err)
			for i := 1; i <= 1000; i++ {
				h.Record(float64(i) * tc.scale)
			}
			require.EqualValues(t, 1000, h.count)
			require.InEpsilon(t, 500*tc.scale, h.Quantile(50), tc.relAccuracy)
			require.InEpsilon(t, 990*tc.scale, h.Quantile(99), tc.relAccuracy)
			require.Equal(t, 1*tc.scale, h.Quantile(0), "never below the recorded min")
			require.Equal(t, 1000*tc.scale, h.Quantile(100), "never above the recorded max")
			require.InEpsilon(t, 500.5*tc.scale, h.Mean(), 1e-9)
		})
	}
}

// TestHistogramClamps: values out of [1, highest] are recorded at the
// bound, not dropped (the detector counts them as out of range itself).
func TestHistogramClamps(t *testing.T) {
	t.Parallel()
	h, err := newHistogram(1000, 2)
	require.NoError(t, err)
	for _, x := range []float64{0.01, -5, 1e9, math.Inf(1), 10} {
		h.Record(x)
	}
	require.EqualValues(t, 5, h.h.TotalCount())
	require.Equal(t, 1.0, h.Quantile(0))
	require.Equal(t, 1000.0, h.Quantile(100))
	require.Equal(t, 1.0, h.min)
	require.Equal(t, 1000.0, h.max)
}

func TestHistogramReset(t *testing.T) {
	t.Parallel()
	a, _ := newHistogram(1e6, 3)
	for i := 1; i <= 100; i++ {
		a.Record(float64(i))
	}
	require.InEpsilon(t, 50, a.Quantile(50), 0.02)
	a.Reset()
	require.Zero(t, a.h.TotalCount())
	require.Zero(t, a.Quantile(50))
	require.Zero(t, a.Mean())
	a.Record(42)
	require.InEpsilon(t, 42, a.Quantile(50), 0.01)
}

// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestHistogramRecordAllocs(t *testing.T) {
	h, _ := newHistogram(1e9, 3)
	r := rand.New(rand.NewPCG(1, 2))
	allocs := testing.AllocsPerRun(1000, func() {
		h.Record(1e3 * r.ExpFloat64())
		h.Record(1e12) // the clamped path too
	})
	require.Zero(t, allocs)
}

func BenchmarkHistogramRecord(b *testing.B) {
	h, _ := newHistogram(1e9, 3)
	var v float64
	for i := 0; b.Loop(); i++ {
		v = float64(i%1000+1) * 1e3
		h.Record(v)
	}
}

func TestMedian5(t *testing.T) {
	t.Parallel()
	// every order of five distinct values, and ties
	vals := [][subBlock]float64{{1, 2, 3, 4, 5}, {2, 2, 1, 3, 3}, {7, 7, 7, 1, 9}}
	for _, v := range vals {
		want := slices.Clone(v[:])
		slices.Sort(want)
		var perm func(k int)
		perm = func(k int) {
			if k == len(v) {
				require.Equal(t, want[2], median5(&v), "%v", v)
				return
			}
			for i := k; i < len(v); i++ {
				v[k], v[i] = v[i], v[k]
				perm(k + 1)
				v[k], v[i] = v[i], v[k]
			}
		}
		perm(0)
	}
}

// TestHistogramSmoothTail: the geometric mean of the k values ranked
// t+1 .. t+k from the top, t = floor(k/2), k the count above the
// quantile; exact (on the recorded values) while those ranks lie within
// the topK kept, within the histogram's precision beyond (3 significant
// digits, and the detector's 2), and within 2% where smoothTailPoints
// ranks stand for the band; across a Reset, and for the edges.
func TestHistogramSmoothTail(t *testing.T) {
	t.Parallel()
	for _, digits := range []int{3, 2} {
		prec := map[int]float64{3: 2e-3, 2: 2e-2}[digits]
		h, err := newHistogram(1e9, digits)
		require.NoError(t, err)
		require.Zero(t, h.SmoothTail(99))
		r := rand.New(rand.NewPCG(7, 11))
		for round, n := range []int{20, 200, 500, 1500, 5000, 40_000} {
			h.Reset()
			vs := make([]float64, n)
			for i := range vs {
				vs[i] = float64(int64(1000*math.Exp(r.NormFloat64()) + 0.5)) // integers: no rounding in Record
				if r.Float64() < 0.01 {
					vs[i] *= 10
				}
				if r.Float64() < 0.001 {
					vs[i] *= 200
				}
				h.Record(vs[i])
			}
			slices.Sort(vs)
			for _, q := range []float64{75, 97.5, 99, 99.5, 99.9} {
				k := n - int(q/100*float64(n)+0.5)
				got := h.SmoothTail(q)
				if k <= 0 {
					require.Equal(t, vs[n-1], got)
					continue
				}
				tk := k / 2
				want := 0.0
				for _, v := range vs[n-tk-k : n-tk] {
					want += math.Log(v)
				}
				want = math.Exp(want / float64(k))
				name := fmt.Sprintf("%d digits, round %d, n %d, q %v, k %d", digits, round, n, q, k)
				switch {
				case tk+k <= topK:
					require.InEpsilon(t, want, got, 1e-12, name+": exact")
				case k <= smoothTailPoints:
					require.InEpsilon(t, want, got, prec, name)
				default:
					require.InEpsilon(t, want, got, 0.02, name)
				}
			}
		}
	}
	h, err := newHistogram(1e9, 2)
	require.NoError(t, err)
	h.Record(5)
	require.Equal(t, 5.0, h.SmoothTail(50))
	// a slow path 10 times the rest, taken by c of a 500-value window's
	// requests (k = 5 above the p99): the tail does not move while the
	// slow values stay above the band (c <= 2), then rises a step at a
	// time, each a factor 10^(1/5) (the quantile jumps 10-fold at once
	// when c reaches 6), and is the slow level from c = 7
	prev := 0.0
	for c := 0; c <= 10; c++ {
		h.Reset()
		for i := range 500 - c {
			h.Record(float64(1000 + i%7))
		}
		for i := range c {
			h.Record(float64(10_000 + i%7))
		}
		got := h.SmoothTail(99)
		name := fmt.Sprintf("%d slow values", c)
		switch {
		case c <= 2:
			require.InEpsilon(t, 1005, got, 0.01, name)
		case c >= 7:
			require.InEpsilon(t, 10_000, got, 0.01, name)
		default:
			require.InEpsilon(t, math.Pow(10, 0.2), got/prev, 0.01, name)
		}
		prev = got
	}
}

// TestSmoothMerge: merged windows keep the count-weighted geometric mean of
// their smoothed tails, not the larger one.
func TestSmoothMerge(t *testing.T) {
	t.Parallel()
	require.InEpsilon(t, math.Sqrt(2*8), smoothMerge(winSum{n: 500, stail: 2}, winSum{n: 500, stail: 8}), 1e-12)
	require.InEpsilon(t, math.Exp(0.75*math.Log(2)+0.25*math.Log(8)), smoothMerge(winSum{n: 300, stail: 2}, winSum{n: 100, stail: 8}), 1e-12)
	require.Zero(t, smoothMerge(winSum{n: 500}, winSum{n: 500}), "the benchmark method keeps no smoothed tail")
}

package detector

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewHistogramErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		lowest, high  float64
		sig           int
		wantErrSubstr string
	}{
		{"zero lowest", 0, 10, 2, "lowest"},
		{"negative lowest", -1, 10, 2, "lowest"},
		{"highest too small", 1, 1.5, 2, "highest"},
		{"inf highest", 1, math.Inf(1), 2, "highest"},
		{"sig digits 0", 1, 10, 0, "significant"},
		{"sig digits 6", 1, 10, 6, "significant"},
		{"range too wide", 1e-10, 1e10, 2, "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewHistogram(tc.lowest, tc.high, tc.sig)
			require.ErrorContains(t, err, tc.wantErrSubstr)
		})
	}
}

func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		lowest, hi  float64
		sig         int
		scale       float64
		relAccuracy float64
	}{
		{"milliseconds", 0.001, 60000, 3, 1, 0.002},
		{"nanosecond-scale seconds", 1e-10, 1e-3, 2, 1e-8, 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := NewHistogram(tc.lowest, tc.hi, tc.sig)
			require.NoError(t, err)
			for i := 1; i <= 1000; i++ {
				h.Record(float64(i) * tc.scale)
			}
			require.EqualValues(t, 1000, h.Count())
			require.Zero(t, h.OutOfRange())
			require.InEpsilon(t, 500*tc.scale, h.Quantile(50), tc.relAccuracy)
			require.InEpsilon(t, 990*tc.scale, h.Quantile(99), tc.relAccuracy)
			require.InEpsilon(t, 1*tc.scale, h.Min(), 1e-9)
			require.InEpsilon(t, 1000*tc.scale, h.Max(), 1e-9)
			require.InEpsilon(t, 500.5*tc.scale, h.Mean(), 1e-9)
			require.LessOrEqual(t, h.Quantile(100), h.Max())
		})
	}
}

func TestHistogramOutOfRangeCounted(t *testing.T) {
	t.Parallel()
	h, err := NewHistogram(1, 1000, 2)
	require.NoError(t, err)
	h.Record(0.01)
	h.Record(-5)
	h.Record(math.NaN())
	h.Record(1e9)
	h.Record(10)
	require.EqualValues(t, 5, h.Count())
	require.EqualValues(t, 4, h.OutOfRange())
	require.Equal(t, 1.0, h.Min())
	require.Equal(t, 1000.0, h.Max())
	require.EqualValues(t, 5, h.HDR().TotalCount())
}

func TestHistogramMergeReset(t *testing.T) {
	t.Parallel()
	a, _ := NewHistogram(1, 1e6, 3)
	b, _ := NewHistogram(1, 1e6, 3)
	for i := 1; i <= 100; i++ {
		a.Record(float64(i))
		b.Record(float64(i + 100))
	}
	b.Record(1e7) // out of range
	require.NoError(t, a.Merge(b))
	require.EqualValues(t, 201, a.Count())
	require.EqualValues(t, 1, a.OutOfRange())
	require.InEpsilon(t, 100, a.Quantile(50), 0.01)
	require.Equal(t, 1e6, a.Max())

	c, _ := NewHistogram(1, 1e5, 3)
	require.Error(t, a.Merge(c))

	a.Reset()
	require.Zero(t, a.Count())
	require.Zero(t, a.OutOfRange())
	require.Zero(t, a.Quantile(50))
	require.Zero(t, a.Mean())
	a.Record(42)
	require.InEpsilon(t, 42, a.Quantile(50), 0.01)
}

// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestHistogramRecordAllocs(t *testing.T) {
	h, _ := NewHistogram(1e-6, 1e3, 3)
	r := rand.New(rand.NewPCG(1, 2))
	allocs := testing.AllocsPerRun(1000, func() {
		h.Record(r.ExpFloat64())
		h.Record(1e9) // out of range path too
	})
	require.Zero(t, allocs)
}

func BenchmarkHistogramRecord(b *testing.B) {
	h, _ := NewHistogram(1e-6, 1e3, 3)
	b.ReportAllocs()
	v := 0.0
	for i := 0; b.Loop(); i++ {
		v = float64(i%1000+1) * 1e-3
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

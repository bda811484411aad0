package latency

import (
	"math"
	"math/rand/v2"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/require"
)

// TestRecordMsUnit: a value in ms lands in HDR as whole microseconds, so a
// histogram read back from an .hlog file (µs) gives the same quantiles.
func TestRecordMsUnit(t *testing.T) {
	t.Parallel()
	h := New(600_000, 2)
	h.RecordMs(12.5)
	h.RecordMs(0.0004) // below 1 µs: clamped to 1 µs
	require.InEpsilon(t, 12_500, h.HDR.Max(), 0.01, "12.5 ms is 12,500 µs (to HDR's 2 digits)")
	require.EqualValues(t, 1, h.HDR.Min())
	require.EqualValues(t, 2, h.Count)
	require.Equal(t, UnitMs, h.MinMs)
	require.Equal(t, 12.5, h.MaxMs)
	require.InDelta(t, 12.5+UnitMs, h.SumMs, 1e-12)
}

func TestRecordMsClamps(t *testing.T) {
	t.Parallel()
	h := New(1000, 3)
	for _, v := range []float64{-5, math.NaN(), 0, 1e9, math.Inf(1), 10} {
		h.RecordMs(v)
	}
	require.EqualValues(t, 6, h.Count)
	require.EqualValues(t, 6, h.HDR.TotalCount(), "clamped values are recorded, not dropped")
	require.Equal(t, UnitMs, h.MinMs)
	require.Equal(t, 1000.0, h.MaxMs)
	require.Equal(t, 1000.0, h.QuantileMs(100))
}

// TestQuantileMsWithinRecorded: HDR answers with the top of a bucket; the
// quantile never leaves [min, max] of what was recorded.
func TestQuantileMsWithinRecorded(t *testing.T) {
	t.Parallel()
	h := New(3_600_000, 2)
	require.Zero(t, h.QuantileMs(50), "empty")
	require.Zero(t, h.MeanMs(), "empty")
	h.RecordMs(101.3)
	require.Equal(t, 101.3, h.QuantileMs(50))
	require.Equal(t, 101.3, h.QuantileMs(99.9))
	r := rand.New(rand.NewPCG(3, 4))
	for range 10_000 {
		h.RecordMs(1 + 10*r.ExpFloat64())
	}
	for _, q := range []float64{0, 50, 90, 99, 99.9, 100} {
		v := h.QuantileMs(q)
		require.GreaterOrEqual(t, v, h.MinMs)
		require.LessOrEqual(t, v, h.MaxMs)
	}
	require.InEpsilon(t, 1+10*math.Ln2, h.QuantileMs(50), 0.05)
}

func TestCloneIsDeep(t *testing.T) {
	t.Parallel()
	h := New(600_000, 2)
	h.RecordMs(3)
	c := h.Clone()
	h.RecordMs(500)
	require.EqualValues(t, 1, c.Count)
	require.EqualValues(t, 1, c.HDR.TotalCount(), "the clone's counts are its own")
	require.Equal(t, 3.0, c.MaxMs)
	c.RecordMs(7) // a clone of a New histogram records with the same geometry
	require.EqualValues(t, 2, c.HDR.TotalCount())
	require.Equal(t, h.HDR.HighestTrackableValue(), c.HDR.HighestTrackableValue())
}

func TestMerge(t *testing.T) {
	t.Parallel()
	a, b := New(600_000, 2), New(3_600_000, 3) // different geometries
	for i := 1; i <= 100; i++ {
		a.RecordMs(float64(i))
		b.RecordMs(float64(i + 100))
	}
	a.FirstMs, a.LastMs = 2000, 3000
	b.FirstMs, b.LastMs = 1500, 2500

	acc := Empty()
	acc.Merge(New(600_000, 2)) // nothing recorded: no geometry taken
	require.Nil(t, acc.HDR)
	acc.Merge(a)
	acc.Merge(b)
	acc.Merge(nil)
	require.EqualValues(t, 200, acc.Count)
	require.EqualValues(t, 200, acc.HDR.TotalCount())
	require.Equal(t, 1.0, acc.MinMs)
	require.Equal(t, 200.0, acc.MaxMs)
	require.InDelta(t, 200*201/2, acc.SumMs, 1e-9)
	require.InEpsilon(t, 100, acc.QuantileMs(50), 0.02)
	require.Equal(t, 1500.0, acc.FirstMs)
	require.Equal(t, 3000.0, acc.LastMs)
	require.Equal(t, b.HDR.HighestTrackableValue(), acc.HDR.HighestTrackableValue(), "widened to the widest range merged in")
	require.Equal(t, a.HDR.SignificantFigures(), acc.HDR.SignificantFigures(), "the precision of the first merged in")

	g := Empty()
	g.TakeGeometry(b)
	require.Zero(t, g.HDR.TotalCount())
	require.Equal(t, b.HDR.HighestTrackableValue(), g.HDR.HighestTrackableValue())
}

func TestFromHDR(t *testing.T) {
	t.Parallel()
	raw := hdrhistogram.New(1, 600_000_000, 2)
	require.NoError(t, raw.RecordValue(2500))
	h := FromHDR(raw, 1, 2.5, 2.5, 2.5)
	require.Equal(t, 2.5, h.QuantileMs(50))
	require.PanicsWithValue(t, "latency: RecordMs on a histogram not made by New", func() { h.RecordMs(1) })
	e := FromHDR(hdrhistogram.New(1, 600_000_000, 2), 0, 0, 0, 0)
	require.True(t, math.IsInf(e.MinMs, 1))
	require.True(t, math.IsInf(e.MaxMs, -1))
	require.Zero(t, e.QuantileMs(50))
}

func TestNewRefusesBadGeometry(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { New(0.001, 2) })
	require.Panics(t, func() { New(math.Inf(1), 2) })
	require.Panics(t, func() { New(math.NaN(), 2) })
	require.Panics(t, func() { New(2e12, 2) })
	require.Panics(t, func() { New(1000, 0) })
	require.Panics(t, func() { New(1000, 6) })
}

// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestRecordMsAllocatesNothing(t *testing.T) {
	h := New(600_000, 2)
	r := rand.New(rand.NewPCG(1, 2))
	allocs := testing.AllocsPerRun(1000, func() {
		h.RecordMs(r.ExpFloat64())
		h.RecordMs(1e9) // the out-of-range path too
	})
	require.Zero(t, allocs)
}

func BenchmarkRecordMs(b *testing.B) {
	h := New(600_000, 2)
	r := rand.New(rand.NewPCG(1, 2))
	vs := make([]float64, 1024)
	for i := range vs {
		vs[i] = 1 + 20*r.ExpFloat64()
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.RecordMs(vs[i&1023])
	}
}

// TestMergeWidens: merging a histogram of a wider range into a narrower one
// keeps every count (HDR alone would drop the values beyond the narrower
// range).
func TestMergeWidens(t *testing.T) {
	t.Parallel()
	narrow, wide := New(1000, 2), New(3_600_000, 2)
	narrow.RecordMs(5)
	wide.RecordMs(60_000)
	narrow.Merge(wide)
	require.EqualValues(t, 2, narrow.Count)
	require.EqualValues(t, 2, narrow.HDR.TotalCount())
	require.InEpsilon(t, 60_000, narrow.QuantileMs(100), 0.01)
	require.InEpsilon(t, 5, narrow.QuantileMs(0), 0.01)
	narrow.RecordMs(90_000)
	require.Equal(t, 90_000.0, narrow.MaxMs, "a widened histogram records up to its new range, unclamped")
}

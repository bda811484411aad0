package detector

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Edge inputs found by a review (2026-11-27): each test fails on the code
// before its fix.

// A service that is not up yet gives invalid observations (a refused
// request's duration is 0) before the first valid one; however many, the
// cold tail is searched from that first valid one: found at the first
// observation that is not cold, its index and time those of the same
// observation. The buffer was indexed from observation 0, so after 254
// invalid ones the tail was never found and its end's index and time
// named different observations.
func TestColdTailAfterManyInvalid(t *testing.T) {
	for _, invalid := range []int{0, 250, 254, 255, 300, 1000} {
		d, err := New(ServiceConfig())
		if err != nil {
			t.Fatal(err)
		}
		ts := int64(0)
		obs := func(v float64) { d.Observe(ts, v); ts += 1e6 }
		for range invalid {
			obs(0)
		}
		obs(100)
		obs(100)
		for range 50 {
			obs(1)
		}
		ce := d.Snapshot().ColdEnd
		if ce == nil {
			t.Fatalf("%d invalid first: no cold end", invalid)
		}
		want := int64(invalid + 2)
		if ce.Index != want || ce.Time != want*1e6 {
			t.Errorf("%d invalid first: cold end at observation %d, time %d ms; want %d at %d ms", invalid, ce.Index, ce.Time/1e6, want, want)
		}
	}
}

// Sample times are wall-clock: a clock stepped back must not stop windows
// from closing until it catches up (they closed on duration only).
func TestWindowsCloseAfterClockStepsBack(t *testing.T) {
	d, err := New(ServiceConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	ts := int64(1e12)
	for i := range 12000 { // 120 s at 100 per second, flat
		if i == 3000 {
			ts -= 3600e9 // an hour back, at 30 s
		}
		d.Observe(ts, 10*math.Exp(0.1*r.NormFloat64()))
		ts += 1e7
	}
	s := d.Snapshot()
	if s.Windows < 100 {
		t.Errorf("%d windows closed in 120 s of 1-s windows with the clock stepped back an hour at 30 s", s.Windows)
	}
	if s.Regime != Steady {
		t.Errorf("flat series with a clock step: regime %v, want steady", s.Regime)
	}
}

// +Inf and durations beyond int64 microseconds are clamped to the top of
// the range (1 h), not stored as the bottom: converting them to an integer
// gave MinInt64 on amd64, recorded as 1 µs.
func TestTimeBucketsClampHuge(t *testing.T) {
	for _, ms := range []float64{math.Inf(1), 1e17, 1e30} {
		tb, err := NewTimeBuckets(0, 250e6, 256)
		if err != nil {
			t.Fatal(err)
		}
		tb.Record(1e6, 5)
		tb.Record(2e6, ms)
		tb.RecordN(3e6, ms, 2)
		b := tb.Bucket(0)
		if b.maxUs != bucketHighestUs || b.minUs != 5000 || tb.OutOfRange() != 3 {
			t.Errorf("%g ms: bucket min %d max %d µs, %d out of range; want 5000, %d, 3", ms, b.minUs, b.maxUs, tb.OutOfRange(), int64(bucketHighestUs))
		}
	}
	tb, _ := NewTimeBuckets(0, 250e6, 256)
	tb.Record(1e6, math.Inf(-1))
	tb.Record(1e6, math.NaN())
	if b := tb.Bucket(0); b.maxUs != 1 || tb.OutOfRange() != 2 {
		t.Errorf("-Inf and NaN: max %d µs, %d out of range; want 1, 2", b.maxUs, tb.OutOfRange())
	}
}

// One timestamp months in the future (a bogus clock) must not merge a whole
// run into one bucket and leave the settled view nothing to judge.
func TestTimeBucketsFarFuture(t *testing.T) {
	tb, err := NewTimeBuckets(0, 250e6, 256)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 12000 {
		ts := int64(i) * 1e7
		lvl := 10.0
		if ts < 20e9 {
			lvl = 50
		}
		tb.Record(ts, lvl*math.Exp(0.2*r.NormFloat64()))
	}
	before := Settle(tb, DefaultSettleConfig())
	width := tb.Width()
	tb.Count(1<<62, false)
	tb.Mark(1 << 62)
	tb.Record(1<<62, 10)
	tb.Record(120e9+2*24*3600e9, 10) // a wall clock stepped two days ahead
	after := Settle(tb, DefaultSettleConfig())
	if tb.Width() != width || tb.Late() != 2 {
		t.Errorf("after far-future timestamps: width %d (was %d), late %d (want 2 observations)", tb.Width(), width, tb.Late())
	}
	if before.Late != 0 || after.Late != 2 || after.Early != 0 || after.OutOfRange != 0 {
		t.Errorf("the settled view reports late %d -> %d (want 0 -> 2), early %d, out of range %d",
			before.Late, after.Late, after.Early, after.OutOfRange)
	}
	if !after.Steady || after.Class != before.Class || after.Boundary != before.Boundary {
		t.Errorf("settled view changed by three far-future timestamps: %+v, was %+v", after, before)
	}
}

// What counts as late is relative to the run: a first observation long
// after the origin (an endpoint first called two hours into its scenario)
// and a run of three days are not late.
func TestTimeBucketsLateIsRelative(t *testing.T) {
	tb, err := NewTimeBuckets(0, 250e6, 256)
	if err != nil {
		t.Fatal(err)
	}
	for ts := int64(2 * 3600e9); ts < 3*24*3600e9; ts += 600e9 {
		tb.Record(ts, 10)
	}
	if tb.Late() != 0 || tb.N() != 420 {
		t.Errorf("three days of records every 10 minutes from 2 h: %d late of %d", tb.Late(), tb.N())
	}
}

// A first request far slower than the rest (a connection pool or a lazy
// initialisation on the first request) must not coarsen the windows: with
// the first observation mapped to dynamic_range units, a first request
// 1,000 times slower left every window median of a flat 0.5-ms service at
// one value, and 8,000 times slower 20% off with a quarter of the
// observations out of range.
func TestSlowFirstObservationKeepsPrecision(t *testing.T) {
	for _, first := range []float64{0.5, 500, 4000} {
		var meds []float64
		cfg := ServiceConfig()
		cfg.OnWindow = func(w Window) { meds = append(meds, w.Median) }
		d, err := New(cfg)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(1, 2))
		d.Observe(0, first)
		for i := 1; i < 500*30; i++ {
			d.Observe(int64(i)*2e6, 0.5*math.Exp(0.3*r.NormFloat64()))
		}
		require.Zero(t, d.Snapshot().OutOfRange, "first %v", first)
		distinct := map[float64]bool{}
		for _, m := range meds[1:] {
			require.InEpsilon(t, 0.5, m, 0.06, "first %v", first)
			distinct[m] = true
		}
		require.Greater(t, len(distinct), 5, "first %v: window medians %v", first, meds)
	}
}

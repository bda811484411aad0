package detector_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/xk6-regime/xk6-regime/detector"
)

// A request stream judged online, as the k6 extension does per scenario:
// each observation gets the regime in force when it arrived, and every
// regime change is reported as it is decided. The series is a service that
// answers in about 30 ms for its first 10 s (a JIT still compiling), then
// in about 5 ms, with the noise of a shared machine. Online, a plateau that
// lasts longer than the evidence the detector asks for (stable_windows
// windows of at least a second) is steady as far as anyone can tell: it is
// declared, and the drop that follows is reported as a relapse, with the
// boundary where the new level began; the new steady state is declared
// once settle_windows windows after that transient agree. The settled
// view (ExampleSettle) judges the same run with all of it in hand.
func Example_service() {
	d, err := detector.New(detector.ServiceConfig())
	if err != nil {
		panic(err)
	}
	start := time.Unix(1_700_000_000, 0)
	sec := func(p detector.Point) float64 { return time.Duration(p.Time - start.UnixNano()).Seconds() }
	d.SetOnTransition(func(t detector.Transition) {
		fmt.Printf("%s -> %s (%s) decided at %.0f s, from %.0f s\n", t.From, t.To, t.Kind, sec(t.At), sec(t.Boundary))
	})
	rng := rand.New(rand.NewPCG(1, 2))
	tagged := map[detector.Regime]int{}
	for i := range 60 * 200 { // 60 s at 200 requests/s
		at := start.Add(time.Duration(i) * 5 * time.Millisecond)
		ms := 5 * math.Exp(0.15*rng.NormFloat64())
		if at.Sub(start) < 10*time.Second {
			ms *= 6
		}
		tagged[d.Observe(at.UnixNano(), ms)]++
	}
	s := d.Snapshot()
	fmt.Println("class:", s.Class, "relapses:", len(s.Relapses))
	fmt.Println("tagged cold, warmup, steady:", tagged[detector.Cold], tagged[detector.Warmup], tagged[detector.Steady])
	// Output:
	// cold -> warmup (cold_end) decided at 0 s, from 0 s
	// warmup -> steady (steady) decided at 9 s, from 0 s
	// steady -> warmup (relapse) decided at 17 s, from 10 s
	// warmup -> steady (steady) decided at 28 s, from 10 s
	// class: warmup relapses: 1
	// tagged cold, warmup, steady: 5 4015 7980
}

// The settled view of a finished run, with all of it in hand: the same
// series as Example_service (30 ms for 10 s, then 5 ms), kept as one HDR
// histogram per time bucket of 100 ms (never one observation at a time).
// Settle finds where steady state began, whether it held, and the figures
// of what followed: it starts one block (a second) after the plateau ended,
// the guard block after a warm-up (see Settled.Boundary).
func ExampleSettle() {
	start := time.Unix(1_700_000_000, 0)
	tb, err := detector.NewTimeBuckets(start.UnixNano(), int64(100*time.Millisecond), 1024)
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 60 * 200 {
		at := start.Add(time.Duration(i) * 5 * time.Millisecond)
		ms := 5 * math.Exp(0.15*rng.NormFloat64())
		if at.Sub(start) < 10*time.Second {
			ms *= 6
		}
		tb.Record(at.UnixNano(), ms)
	}
	v := detector.Settle(tb, detector.DefaultSettleConfig())
	fmt.Println("steady:", v.Steady, "class:", v.Class)
	fmt.Printf("from %.0f s (observation %d), level %.1f ms, p99 %.1f ms\n",
		time.Duration(v.Boundary.Time-start.UnixNano()).Seconds(), v.Boundary.Index, v.Level, v.Stats.P99)
	// Output:
	// steady: true class: warmup
	// from 11 s (observation 2200), level 5.0 ms, p99 7.1 ms
}

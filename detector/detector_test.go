package detector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func lognormal(r *rand.Rand, sigma float64) float64 {
	return math.Exp(sigma*r.NormFloat64() - sigma*sigma/2)
}

func series(n int, seed uint64, f func(r *rand.Rand, i int) float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]float64, n)
	for i := range out {
		out[i] = f(r, i)
	}
	return out
}

type runResult struct {
	snap        Snapshot
	hind        Snapshot
	transitions []Transition
	windows     []Window
}

// run feeds xs at 1 ms spacing (k6-like) and collects hooks.
func run(tb testing.TB, cfg Config, xs []float64) runResult {
	tb.Helper()
	return runWith(tb, cfg, xs, false)
}

// runHindsight is run plus the end-of-run refinement (seconds under -race
// for thousands of observations, so only the tests about it pay for it).
func runHindsight(tb testing.TB, cfg Config, xs []float64) runResult {
	tb.Helper()
	return runWith(tb, cfg, xs, true)
}

func runWith(tb testing.TB, cfg Config, xs []float64, withHindsight bool) runResult {
	tb.Helper()
	var res runResult
	cfg.OnTransition = func(tr Transition) { res.transitions = append(res.transitions, tr) }
	cfg.OnWindow = func(w Window) { res.windows = append(res.windows, w) }
	d, err := New(cfg)
	require.NoError(tb, err)
	for i, v := range xs {
		before := d.Regime()
		got := d.Observe(int64(i)*1e6, v)
		require.Equal(tb, before, got, "Observe must return the regime in force when the observation arrived")
	}
	res.snap = d.Snapshot()
	if withHindsight {
		var err error
		res.hind, err = d.Hindsight()
		require.NoError(tb, err)
		require.Equal(tb, res.snap, d.Snapshot(), "Hindsight must not change online state")
		checkHindsight(tb, res)
	}
	checkInvariants(tb, res, int64(len(xs)))
	return res
}

// checkInvariants: regimes only move forward except through a reported
// relapse; steady_start <= declared_at; counts sum to N.
func checkInvariants(tb testing.TB, res runResult, n int64) {
	tb.Helper()
	s := res.snap
	require.Equal(tb, n, s.N)
	require.Equal(tb, n, s.Counts[0]+s.Counts[1]+s.Counts[2])
	if s.SteadyStart != nil {
		require.NotNil(tb, s.DeclaredAt)
		require.LessOrEqual(tb, s.SteadyStart.Index, s.DeclaredAt.Index)
		require.Equal(tb, Steady, s.Regime)
	}
	if s.ColdEnd != nil && s.SteadyStart != nil {
		require.LessOrEqual(tb, s.ColdEnd.Index, s.SteadyStart.Index)
	}
	cur := Cold
	relapses := 0
	for _, tr := range res.transitions {
		require.Equal(tb, cur, tr.From, "transition from the regime in force")
		require.LessOrEqual(tb, tr.Boundary.Index, tr.At.Index)
		switch tr.Kind {
		case KindColdEnd:
			require.Equal(tb, Cold, tr.From)
			require.Equal(tb, Warmup, tr.To)
		case KindSteady:
			require.Equal(tb, Warmup, tr.From)
			require.Equal(tb, Steady, tr.To)
		case KindRelapse:
			require.Equal(tb, Steady, tr.From)
			require.Equal(tb, Warmup, tr.To)
			relapses++
		default:
			tb.Fatalf("unknown transition kind %q", tr.Kind)
		}
		cur = tr.To
	}
	require.Equal(tb, cur, s.Regime)
	require.Equal(tb, min(relapses, maxStoredRelapses), len(s.Relapses))
	require.Equal(tb, relapses, s.NRelapses, "every relapse counted, beyond the stored ones too")
	for i, w := range res.windows {
		require.Equal(tb, i, w.Seq)
		require.Positive(tb, w.N)
		require.LessOrEqual(tb, w.TailQuantile, 99.9)
		require.GreaterOrEqual(tb, w.Tail, w.Median)
	}
	require.Equal(tb, len(res.windows), s.Windows)
}

func TestDetectorSynthetic(t *testing.T) {
	t.Parallel()
	const n = 3000
	for _, tc := range []struct {
		name string
		xs   []float64
		// expectations; steady range is inclusive, -1 max = no steady state
		steadyMin, steadyMax int64
		class                Class
		coldMin, coldMax     int64
	}{
		{
			name: "flat", class: Flat, steadyMin: 0, steadyMax: 60, coldMin: 0, coldMax: 0,
			xs: series(n, 1, func(r *rand.Rand, i int) float64 { return 10 * lognormal(r, 0.05) }),
		},
		{
			name: "exponential cold tail", class: Flat, steadyMin: 3, steadyMax: 60, coldMin: 3, coldMax: 10,
			xs: series(n, 2, func(r *rand.Rand, i int) float64 {
				return (1 + 30*math.Exp(-float64(i)/1.5)) * lognormal(r, 0.03)
			}),
		},
		{
			name: "warm-up transient", class: ClassWarmup, steadyMin: 450, steadyMax: 800, coldMax: 5,
			xs: series(n, 3, func(r *rand.Rand, i int) float64 {
				return 1e-8 * (1 + math.Max(0, 1-float64(i)/600)) * lognormal(r, 0.05)
			}),
		},
		{
			name: "slowdown", class: Slowdown, steadyMin: 150, steadyMax: 300, coldMax: 5,
			xs: series(n, 4, func(r *rand.Rand, i int) float64 {
				l := 5000.0
				if i >= 150 {
					l = 7500
				}
				return l * lognormal(r, 0.05)
			}),
		},
		{
			name: "GC sawtooth is steady", class: Flat, steadyMin: 0, steadyMax: 150, coldMax: 5,
			xs: series(n, 5, func(r *rand.Rand, i int) float64 {
				return (1 + 0.6*float64(i%37)/37) * lognormal(r, 0.02)
			}),
		},
		{
			name: "heavy-tailed lognormal is steady", steadyMin: 0, steadyMax: 600,
			xs: series(n, 6, func(r *rand.Rand, i int) float64 { return 20 * lognormal(r, 0.6) }),
		},
		{
			name: "heavy-tailed pareto is steady", steadyMin: 0, steadyMax: 600,
			xs: series(n, 7, func(r *rand.Rand, i int) float64 {
				return 3 / math.Pow(1-r.Float64(), 1/2.5) // Pareto, alpha 2.5
			}),
		},
		{
			// 30% of requests take a slow path whose extra cost decays exponentially (30x to ~2x)
			// by ~1500 observations: the median is settled from the start,
			// the tail (p90 of 50-observation windows) only at ~1500.
			name: "bimodal slow path: tail settles after median", steadyMin: 1000, steadyMax: 1700,
			xs: series(n, 8, func(r *rand.Rand, i int) float64 {
				v := 1.0
				if r.Float64() < 0.3 {
					v = 2 + 30*math.Exp(-float64(i)/300)
				}
				return v * lognormal(r, 0.03)
			}),
		},
		{
			name: "slow drift never settles", class: NoSteadyState, steadyMin: -1, steadyMax: -1,
			xs: series(2*n, 9, func(r *rand.Rand, i int) float64 {
				return (1 + float64(i)/1000) * lognormal(r, 0.03)
			}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := run(t, DefaultConfig(), tc.xs)
			s := res.snap
			require.NotNil(t, s.ColdEnd)
			if tc.coldMax > 0 || tc.coldMin > 0 {
				require.GreaterOrEqual(t, s.ColdEnd.Index, tc.coldMin, "cold_end")
				require.LessOrEqual(t, s.ColdEnd.Index, tc.coldMax, "cold_end")
			}
			if tc.steadyMax < 0 {
				require.Nil(t, s.SteadyStart, "no steady state expected; got %+v", s.SteadyStart)
			} else {
				require.NotNil(t, s.SteadyStart, "steady state expected (windows: %d)", s.Windows)
				require.GreaterOrEqual(t, s.SteadyStart.Index, tc.steadyMin, "steady_start")
				require.LessOrEqual(t, s.SteadyStart.Index, tc.steadyMax, "steady_start")
				require.Empty(t, s.Relapses)
			}
			if tc.class != Undecided {
				require.Equal(t, tc.class.String(), s.Class.String())
			}
		})
	}
}

func TestDetectorShortSeries(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 5, 50, 120} {
		xs := series(n, uint64(n), func(r *rand.Rand, i int) float64 { return 1 + r.Float64() })
		res := run(t, DefaultConfig(), xs)
		require.Nil(t, res.snap.SteadyStart)
		require.Contains(t, []Class{Undecided}, res.snap.Class)
		if n >= 5 {
			require.NotNil(t, res.snap.ColdEnd)
		}
	}
}

func TestDetectorBadValuesCounted(t *testing.T) {
	t.Parallel()
	d, err := New(DefaultConfig())
	require.NoError(t, err)
	d.Observe(0, math.NaN())
	d.Observe(1, -1)
	d.Observe(2, 0)
	d.Observe(3, math.Inf(1))
	d.Observe(4, 1)
	d.Observe(5, 1e12) // beyond the dynamic range of the first value
	s := d.Snapshot()
	require.EqualValues(t, 6, s.N)
	require.EqualValues(t, 5, s.OutOfRange)
}

func TestDetectorRelapse(t *testing.T) {
	t.Parallel()
	// Steady at 1.0; a burst of 50 consistently slow observations (3x) at
	// 2000; one huge outlier (100x) at 3000; a lasting shift to 1.5 at 4000.
	xs := series(8000, 11, func(r *rand.Rand, i int) float64 {
		l := 1.0
		if i >= 2000 && i < 2050 {
			l = 3
		}
		if i == 3000 {
			l = 100
		}
		if i >= 4000 {
			l = 1.5
		}
		return l * lognormal(r, 0.03)
	})
	checkShift := func(t *testing.T, s Snapshot, rl Relapse) {
		require.InDelta(t, 4000, rl.Boundary.Index, 100)
		require.InEpsilon(t, 1.0, rl.From, 0.05)
		require.InEpsilon(t, 1.5, rl.To, 0.05)
		require.NotNil(t, s.SteadyStart)
		require.InDelta(t, 4000, s.SteadyStart.Index, 150)
		require.Equal(t, Slowdown, s.Class)
	}
	t.Run("benchmark: the burst ends the steady state, the outlier does not", func(t *testing.T) {
		s := run(t, DefaultConfig(), xs).snap
		require.Len(t, s.Relapses, 2)
		b := s.Relapses[0]
		require.InDelta(t, 2000, b.Boundary.Index, 50, "burst boundary")
		require.Less(t, b.At.Index, int64(2100), "a burst is a relapse at once")
		require.InEpsilon(t, 1.0, b.From, 0.05)
		checkShift(t, s, s.Relapses[1])
	})
	// the service method's relapses: TestServiceWaveIsNoRelapse, TestServiceLastingShift
}

// TestDetectorBurstNoFalseAlarms: the burst test must not fire on
// stationary heavy-tailed noise more than the detector does without it
// (multiple testing over ~120 windows per series; one huge outlier widens
// its own window's interval).
func TestDetectorBurstNoFalseAlarms(t *testing.T) {
	t.Parallel()
	dists := map[string]func(r *rand.Rand) float64{
		"lognormal 0.6": func(r *rand.Rand) float64 { return lognormal(r, 0.6) },
		"lognormal 1.0": func(r *rand.Rand) float64 { return lognormal(r, 1.0) },
		"pareto 2.5":    func(r *rand.Rand) float64 { return 3 / math.Pow(1-r.Float64(), 1/2.5) },
	}
	const seeds = 40
	for name, f := range dists {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			relapsed := [2]int{}
			for seed := range seeds {
				xs := series(6000, uint64(seed)+100, func(r *rand.Rand, _ int) float64 { return f(r) })
				for k, z := range []float64{0, DefaultConfig().BurstZ} {
					cfg := DefaultConfig()
					cfg.BurstZ = z
					d, err := New(cfg)
					require.NoError(t, err)
					for i, v := range xs {
						d.Observe(int64(i), v)
					}
					if len(d.Snapshot().Relapses) > 0 {
						relapsed[k]++
					}
				}
			}
			t.Logf("series with a relapse: %d/%d without the burst test, %d/%d with it", relapsed[0], seeds, relapsed[1], seeds)
			require.LessOrEqual(t, relapsed[1], relapsed[0]+2)
		})
	}
}

func TestDetectorWindowByDuration(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.WindowMinDuration = Duration(1e9) // 1 s
	var ws []Window
	cfg.OnWindow = func(w Window) { ws = append(ws, w) }
	d, err := New(cfg)
	require.NoError(t, err)
	// 1000 obs/s: windows must span 1 s = 1000 observations.
	for i := range 10_000 {
		d.Observe(int64(i)*1e6, 5)
	}
	require.Len(t, ws, 9)
	for _, w := range ws {
		require.GreaterOrEqual(t, w.Last.Time-w.First.Time, int64(1e9))
		// p99.9 is supported by ~1000 samples with 5 above... capped at 99.5.
		require.InDelta(t, 99.5, w.TailQuantile, 0.01)
	}
}

func TestDetectorTailQuantileCapped(t *testing.T) {
	t.Parallel()
	d, err := New(DefaultConfig())
	require.NoError(t, err)
	require.InDelta(t, 90, d.tailQuantile(50), 1e-9)    // 5 of 50 above
	require.InDelta(t, 99.9, d.tailQuantile(1e5), 1e-9) // plenty
	require.Equal(t, 50.0, d.tailQuantile(8))
}

func TestDetectorMemoryBoundedRing(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.MaxWindows = 32
	d, err := New(cfg)
	require.NoError(t, err)
	for i := range 200_000 {
		d.Observe(int64(i), 1+float64(i%7)/100)
	}
	require.LessOrEqual(t, len(d.ring), 32)
	require.Equal(t, 32, cap(d.ring))
	// the ring still covers the whole run after the cold tail, in order
	require.Equal(t, d.cold.end.Index, d.ring[0].first.Index)
	for j := 1; j < len(d.ring); j++ {
		require.Equal(t, d.ring[j-1].last.Index+1, d.ring[j].first.Index)
	}
}

// TestDetectorProperties drives random piecewise series and checks the
// invariants (run checks them for every series).
func TestDetectorProperties(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 99))
		n := 100 + r.IntN(6000)
		level := math.Exp(r.NormFloat64() * 5)
		sigma := r.Float64() * 0.8
		xs := make([]float64, n)
		for i := range xs {
			if r.Float64() < 0.002 {
				level *= math.Exp(r.NormFloat64() * 0.3)
			}
			xs[i] = level * lognormal(r, sigma)
		}
		cfg := DefaultConfig()
		cfg.WindowMin = 8 + r.IntN(100)
		cfg.MaxWindows = 32 + r.IntN(100)
		run(t, cfg, xs)
	}
}

func TestDetectorRelapseOnTail(t *testing.T) {
	t.Parallel()
	// The median stays put; from 4000 on, 30% of requests take a 3x slow
	// path, so the tail (p90) moves. The mean monitor is off to isolate
	// the tail monitor.
	xs := series(8000, 12, func(r *rand.Rand, i int) float64 {
		v := 1.0
		if i >= 4000 && r.Float64() < 0.3 {
			v = 3
		}
		return v * lognormal(r, 0.03)
	})
	for _, tc := range []struct {
		name     string
		onTail   bool
		relapses int
	}{
		{"tail monitor off", false, 0},
		{"tail monitor on", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.RelapseOnMean = false
			cfg.RelapseOnTail = tc.onTail
			res := run(t, cfg, xs)
			require.Len(t, res.snap.Relapses, tc.relapses)
			if tc.relapses > 0 {
				require.InDelta(t, 4000, res.snap.Relapses[0].Boundary.Index, 100)
			}
		})
	}
}

// TestDetectorBurstKeepsClass: after a burst the series settles back at the
// same level: a new steady segment after the burst, same class as before.
func TestDetectorBurstKeepsClass(t *testing.T) {
	t.Parallel()
	xs := series(4000, 12, func(r *rand.Rand, i int) float64 {
		l := 1.0
		if i >= 1500 && i < 1550 {
			l = 2
		}
		return l * lognormal(r, 0.03)
	})
	res := run(t, DefaultConfig(), xs)
	s := res.snap
	require.Len(t, s.Relapses, 1)
	require.NotNil(t, s.SteadyStart)
	require.GreaterOrEqual(t, s.SteadyStart.Index, int64(1550), "the steady segment starts after the burst")
	require.Less(t, s.SteadyStart.Index, int64(1700))
	require.Equal(t, Flat.String(), s.Class.String())
}

// TestDetectorStartInsideWindow: a warm-up (or slowdown) step that ends a
// few observations into a window. When the window's median already looks
// steady the segment includes that window; steady_start is nevertheless at
// most half a sub-block before the step (at most subBlock/2 transient
// observations counted as steady; without refineStart it is the window's
// first observation), and at most a window after it, for both presets.
func TestDetectorStartInsideWindow(t *testing.T) {
	t.Parallel()
	exact, total := 0, 0
	// (the service method's start: TestServicePlateau, TestServiceLastingShift)
	for _, preset := range []string{"benchmark"} {
		cfg := Presets[preset]()
		for _, b := range []int{302, 303, 304, 306, 308} {
			for _, tc := range []struct {
				class      Class
				pre, after float64
			}{{ClassWarmup, 2, 1}, {Slowdown, 1, 1.5}} {
				xs := series(3000, uint64(b), func(r *rand.Rand, i int) float64 {
					l := tc.after
					if i < b {
						l = tc.pre
					}
					return l * lognormal(r, 0.03)
				})
				s := run(t, cfg, xs).snap
				name := fmt.Sprintf("%s %s at %d", preset, tc.class, b)
				require.NotNil(t, s.SteadyStart, name)
				require.Equal(t, tc.class.String(), s.Class.String(), name)
				require.GreaterOrEqual(t, s.SteadyStart.Index, int64(b-subBlock/2), name)
				require.Less(t, s.SteadyStart.Index, int64(b+cfg.WindowMin+subBlock), name)
				total++
				if s.SteadyStart.Index < int64(b+subBlock) {
					exact++
				}
			}
		}
	}
	// The window with a few transient observations is mostly kept in the
	// segment (the mean gate drops it when they move its mean too much).
	require.GreaterOrEqual(t, 2*exact, total, "within a sub-block of the step: %d of %d", exact, total)
}

// TestDetectorShift: in a heavy-tailed series (window means scatter +-8%),
// the last 150 observations run 20% faster. Neither the window CUSUMs nor
// the burst test see it (both need a window mean far outside the noise);
// the shift test, which weighs the 150 observations against the whole
// steady segment, does: the run ends not steady, with the relapse at the
// shift. An excursion of the same size that ends resumes a steady state
// once, without flapping.
func TestDetectorShift(t *testing.T) {
	t.Parallel()
	on := DefaultConfig()
	on.ShiftZ = 1.64 // the opt-in setting the README reports
	unseen := 0      // seeds whose final shift only the shift test sees
	for seed := uint64(1); seed <= 5; seed++ {
		final := series(3000, 40+seed, func(r *rand.Rand, i int) float64 {
			l := 1.0
			if i >= 2850 {
				l = 0.8
			}
			return l * lognormal(r, 0.5)
		})
		res := run(t, on, final)
		require.Nil(t, res.snap.SteadyStart, "seed %d: a shift in the last 150 observations", seed)
		require.NotEmpty(t, res.snap.Relapses)
		require.InDelta(t, 2850, res.snap.Relapses[len(res.snap.Relapses)-1].Boundary.Index, 200, "seed %d", seed)

		if res = run(t, DefaultConfig(), final); res.snap.SteadyStart != nil {
			unseen++
		}

		exc := series(3000, 40+seed, func(r *rand.Rand, i int) float64 {
			l := 1.0
			if i >= 1500 && i < 1650 {
				l = 0.8
			}
			return l * lognormal(r, 0.5)
		})
		res = run(t, on, exc)
		s := res.snap
		require.NotNil(t, s.SteadyStart, "seed %d: the excursion ended", seed)
		require.LessOrEqual(t, len(s.Relapses), 2, "seed %d: no flapping: %v", seed, s.Relapses)
		if s.SteadyStart.Index >= 1500 {
			require.InDelta(t, 1650, s.SteadyStart.Index, 60, "seed %d: restarted after the excursion", seed)
		}
	}
	require.GreaterOrEqual(t, unseen, 3, "without the shift test, most final shifts go unseen")
}

// TestInvalidFirstObservations: observations with no value (0, NaN: a
// service not up yet) before the first valid one neither end the cold tail
// at the epoch nor count towards its length, and the prior's clock starts
// at the first observation. Before, their buffer slots kept time 0.
func TestInvalidFirstObservations(t *testing.T) {
	t.Parallel()
	const t0 = int64(1_800_000_000_000_000_000) // 2027, in ns
	for _, invalid := range []int{3, 60, 300} {
		d, err := New(ServiceConfig())
		require.NoError(t, err)
		ts := t0
		for range invalid {
			d.Observe(ts, 0)
			ts += int64(time.Millisecond)
		}
		// 2 cold observations (40 ms), then 2 ms for 30 s at 1,000/s
		for i := range 30_000 {
			v := 2.0
			if i < 2 {
				v = 40
			}
			d.Observe(ts, v*(1+0.05*float64(i%7)/7))
			ts += int64(time.Millisecond)
		}
		s := d.Snapshot()
		require.NotNil(t, s.ColdEnd, "%d invalid first", invalid)
		require.Greater(t, s.ColdEnd.Time, t0, "%d invalid first: the cold end has a real time", invalid)
		// the buffer starts at the first valid observation, however many
		// invalid ones came before (TestColdTailAfterManyInvalid)
		require.Equal(t, int64(invalid+2), s.ColdEnd.Index, "%d invalid first: the 2 slow ones are the cold tail", invalid)
		require.NotNil(t, s.SteadyStart, "%d invalid first", invalid)
	}
}

// TestWindowAfterColdKeepsItsDuration: a window closed while the cold tail
// was still open restarts at the cold end; what is left closes as a window
// only if it still spans window_min_duration. At 10 observations a second,
// 3 slow first ones and cold_confirm 16, the first 1-s window closed while
// cold, restarted at the 4th observation and closed at once with 8
// observations over 0.7 s.
func TestWindowAfterColdKeepsItsDuration(t *testing.T) {
	t.Parallel()
	cfg := ServiceConfig()
	cfg.WindowMin, cfg.ColdConfirm = 8, 16
	var short []Window
	cfg.OnWindow = func(w Window) {
		if w.Last.Time-w.First.Time < int64(cfg.WindowMinDuration) {
			short = append(short, w)
		}
	}
	d, err := New(cfg)
	require.NoError(t, err)
	ts := int64(1_800_000_000_000_000_000)
	for i := range 600 {
		v := 2.0
		if i < 3 {
			v = 40
		}
		d.Observe(ts, v*(1+0.05*float64(i%7)/7))
		ts += int64(time.Second) / 10
	}
	require.Equal(t, int64(3), d.Snapshot().ColdEnd.Index)
	require.Empty(t, short, "windows shorter than window_min_duration")
}

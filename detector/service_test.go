package detector

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stream is a request stream for the service method: rate observations per
// second for secs seconds, each level(t) times log-normal noise, with
// timestamps in nanoseconds.
type stream struct {
	rate, secs int
	sigma      float64
	level      func(t float64) float64
}

type svcRun struct {
	snap        Snapshot
	transitions []Transition
	windows     []Window
	times       []float64 // seconds, of each transition's At
}

// record makes a detector of cfg whose transitions and windows land in res.
func (res *svcRun) record(tb testing.TB, cfg Config) *Detector {
	tb.Helper()
	cfg.OnTransition = func(tr Transition) {
		res.transitions = append(res.transitions, tr)
		res.times = append(res.times, float64(tr.At.Time)/1e9)
	}
	cfg.OnWindow = func(w Window) { res.windows = append(res.windows, w) }
	d, err := New(cfg)
	require.NoError(tb, err)
	return d
}

func (s stream) run(tb testing.TB, seed uint64, cfg Config) svcRun {
	tb.Helper()
	var res svcRun
	d := res.record(tb, cfg)
	r := rand.New(rand.NewPCG(seed, 99))
	sigma := s.sigma
	if sigma == 0 {
		sigma = 0.3
	}
	for i := range s.rate * s.secs {
		t := float64(i) / float64(s.rate)
		d.Observe(int64(t*1e9), s.level(t)*math.Exp(sigma*r.NormFloat64()))
	}
	res.snap = d.Snapshot()
	checkInvariants(tb, runResult{snap: res.snap, transitions: res.transitions, windows: res.windows}, int64(s.rate*s.secs))
	return res
}

// declared returns the time of the first steady declaration (-1: none).
func (r svcRun) declared() float64 {
	for i, tr := range r.transitions {
		if tr.Kind == KindSteady {
			return r.times[i]
		}
	}
	return -1
}

// wander is the slow wave of a flat service on shared cores: +-15% with a
// 23 s period, from a phase that differs by seed.
func wander(phase float64) func(float64) float64 {
	return func(t float64) float64 { return 1 + 0.15*math.Sin(2*math.Pi*t/23+phase) }
}

func TestServiceFlatDeclaredWithinTenSeconds(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 6; seed++ {
		res := stream{rate: 500, secs: 60, level: wander(float64(seed))}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Equal(t, Flat, res.snap.Class, name)
		require.Empty(t, res.snap.Relapses, name)
		require.InDelta(t, 9.5, res.declared(), 0.6, name)
	}
}

func TestServiceWarmup(t *testing.T) {
	t.Parallel()
	// 3x at the start, decaying with a 3 s time constant: within 25% of the
	// final level from t = 3 ln 8 = 6.2 s
	for seed := uint64(1); seed <= 4; seed++ {
		w := wander(float64(seed))
		res := stream{rate: 500, secs: 60, level: func(t float64) float64 { return w(t) * (1 + 2*math.Exp(-t/3)) }}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Equal(t, ClassWarmup, res.snap.Class, name)
		require.Empty(t, res.snap.Relapses, name)
		require.GreaterOrEqual(t, res.declared(), 6.2, name)
		require.Less(t, res.declared(), 18.0, name)
	}
}

// TestServicePlateau: 40 ms for 8 s, then 5 ms. A plateau of 4,000
// requests from the first one is not believed as steady state.
func TestServicePlateau(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res := stream{rate: 500, secs: 40, sigma: 0.05, level: func(t float64) float64 {
			if t < 8 {
				return 40
			}
			return 5
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Greater(t, res.declared(), 8.0, name)
		require.Equal(t, ClassWarmup, res.snap.Class, name)
		require.Empty(t, res.snap.Relapses, name)
		require.GreaterOrEqual(t, float64(res.snap.SteadyStart.Time)/1e9, 8.0, name)
	}
}

// TestServiceDrift: a service that never settles (+2% a second for 90 s)
// is not steady for half of the run: either never declared, or lost.
func TestServiceDrift(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res := stream{rate: 500, secs: 90, sigma: 0.1, level: func(t float64) float64 { return math.Exp(0.02 * t) }}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		if res.snap.Regime == Steady {
			require.NotEmpty(t, res.snap.Relapses, name)
			require.Greater(t, float64(res.snap.DeclaredAt.Time)/1e9, 45.0, name)
		}
	}
}

// TestServiceSlowdownForGood: steady for 30 s, then 3% slower every second:
// declared, then lost, and not steady again for long.
func TestServiceSlowdownForGood(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		w := wander(float64(seed))
		res := stream{rate: 500, secs: 90, level: func(t float64) float64 { return w(t) * math.Exp(0.03*max(0, t-30)) }}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Less(t, res.declared(), 12.0, name)
		require.NotEmpty(t, res.snap.Relapses, name)
		rl := res.snap.Relapses[0]
		require.Greater(t, float64(rl.Boundary.Time)/1e9, 28.0, name)
		require.Greater(t, rl.To, rl.From, name)
		if res.snap.Regime == Steady {
			require.Greater(t, float64(res.snap.DeclaredAt.Time)/1e9, 45.0, name)
		}
	}
}

// TestServiceWaveIsNoRelapse: in steady state the level rises by 40% for
// 6 s and comes back: a wave, not a relapse.
func TestServiceWaveIsNoRelapse(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res := stream{rate: 500, secs: 60, level: func(t float64) float64 {
			if t >= 30 && t < 36 {
				return 1.4
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		require.Equal(t, Steady, res.snap.Regime)
		require.Empty(t, res.snap.Relapses, "seed %d", seed)
	}
}

// TestServiceSpellIsNoRelapse: in steady state the level rises by 90% for
// 8 s and comes back, a spell such as settled services on shared cores
// have (2-8 s on the live harness's recorded runs): no relapse, where the
// preset relapsed at relapse_windows 5.
func TestServiceSpellIsNoRelapse(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res := stream{rate: 500, secs: 70, level: func(t float64) float64 {
			if t >= 30 && t < 38 {
				return 1.9
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Empty(t, res.snap.Relapses, name)
		require.Equal(t, Flat, res.snap.Class, name)
	}
}

// TestServiceFarShiftRelapsesSooner: a level that triples for good is a
// relapse after relapseSpan closes, one that grows by 60% after
// relapse_windows; both with the boundary at the shift.
func TestServiceFarShiftRelapsesSooner(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		at := map[float64]float64{}
		for _, to := range []float64{3, 1.6} {
			res := stream{rate: 500, secs: 70, level: func(t float64) float64 {
				if t >= 30 {
					return to
				}
				return 1
			}}.run(t, seed, ServiceConfig())
			name := fmt.Sprintf("seed %d, x%.1f", seed, to)
			require.Len(t, res.snap.Relapses, 1, name)
			rl := res.snap.Relapses[0]
			require.InDelta(t, 30, float64(rl.Boundary.Time)/1e9, 1, name)
			at[to] = float64(rl.At.Time) / 1e9
		}
		require.Less(t, at[3], 39.0, "seed %d", seed)
		require.GreaterOrEqual(t, at[1.6]-at[3], float64(ServiceConfig().RelapseWindows-relapseSpan), "seed %d", seed)
	}
}

// TestServiceLastingShift: the level doubles at 40 s for good: one
// relapse, with its boundary near the shift, and steady again at the new
// level (a slowdown).
func TestServiceLastingShift(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res := stream{rate: 500, secs: 90, level: func(t float64) float64 {
			if t >= 40 {
				return 2
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Len(t, res.snap.Relapses, 1, name)
		rl := res.snap.Relapses[0]
		require.InDelta(t, 40, float64(rl.Boundary.Time)/1e9, 3, name)
		require.InEpsilon(t, 1, rl.From, 0.05, name)
		require.InEpsilon(t, 2, rl.To, 0.1, name)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Equal(t, Slowdown, res.snap.Class, name)
		require.GreaterOrEqual(t, float64(res.snap.SteadyStart.Time)/1e9, 39.0, name)
	}
}

// TestServiceLowRate: 20 observations a second with a heavy tail (sigma
// 0.6): the window medians are noisy, the bands widen with the measured
// noise, and a flat stream still settles.
func TestServiceLowRate(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res := stream{rate: 20, secs: 120, sigma: 0.6, level: func(float64) float64 { return 10 }}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Empty(t, res.snap.Relapses, name)
		require.Less(t, res.declared(), 30.0, name)
	}
}

func TestServiceObserveZeroAllocs(t *testing.T) {
	d, err := New(ServiceConfig())
	require.NoError(t, err)
	vs := values(1 << 12)
	i := 0
	allocs := testing.AllocsPerRun(200_000, func() {
		d.Observe(int64(i)*2_000_000, vs[i&(len(vs)-1)]) // 500 a second: a window closes every 500 calls
		i++
	})
	require.Zero(t, allocs)
	require.Equal(t, Steady, d.Regime())
}

// TestServiceExcursionResumes: a +90% excursion for 12 s in steady state
// (longer than a relapse takes) is a relapse, and the steady state resumes
// when the level comes back, keeping its start and first declaration.
func TestServiceExcursionResumes(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res := stream{rate: 500, secs: 60, level: func(t float64) float64 {
			if t >= 25 && t < 37 {
				return 1.9
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Len(t, res.snap.Relapses, 1, name)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Equal(t, Flat, res.snap.Class, name)
		require.Less(t, float64(res.snap.SteadyStart.Time)/1e9, 1.0, name)
		require.InDelta(t, 9.5, float64(res.snap.DeclaredAt.Time)/1e9, 0.6, name)
		last := res.transitions[len(res.transitions)-1]
		require.Equal(t, KindSteady, last.Kind)
		require.Less(t, res.times[len(res.times)-1], 48.0, name)
	}
}

// An excursion long enough for a steady state of its own (the demo on
// PostgreSQL, b50 run 4: 1.9 ms, then 3-5 ms for 27 s, then 1.9 ms again):
// when the level comes back, the excursion's steady state is lost and the
// one it interrupted resumes, with its start and its first declaration;
// the excursion's windows are no part of its level (no drift).
func TestServiceLongExcursionResumes(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res := stream{rate: 500, secs: 100, level: func(t float64) float64 {
			if t >= 40 && t < 70 {
				return 1.8
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Len(t, res.snap.Relapses, 2, name)
		back := res.snap.Relapses[1]
		require.InDelta(t, 70, float64(back.Boundary.Time)/1e9, 1.5, name)
		require.InDelta(t, 1.8, back.From, 0.15, name)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Less(t, float64(res.snap.SteadyStart.Time)/1e9, 1.0, name)
		require.InDelta(t, 9.5, float64(res.snap.DeclaredAt.Time)/1e9, 0.6, name)
		// the excursion had a steady state of its own before it ended
		steadies := 0
		for _, tr := range res.transitions {
			if tr.Kind == KindSteady {
				steadies++
			}
		}
		require.Equal(t, 3, steadies, name)
		require.Less(t, res.times[len(res.times)-1], 80.0, name)
	}
}

// What a review found in the first version of the rule above: a faster
// level that settled is no excursion, so a return to the slower level a
// steady state was first declared on is a slowdown (a cold plateau left for
// good, then a real slowdown; a faster spell that settled, then back); and
// each excursion a steady state came back from stays out of its level, the
// relapse boundary of a later one included.
func TestServiceExcursionEdges(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 3; seed++ {
		name := fmt.Sprintf("seed %d", seed)
		// 8 for 16 s (declared at 9 s), 1 until 70 s, 8 again
		res := stream{rate: 500, secs: 140, level: func(t float64) float64 {
			if t < 16 || t >= 70 {
				return 8
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		if res.snap.Regime == Steady {
			require.Greater(t, float64(res.snap.SteadyStart.Time)/1e9, 65.0, "plateau, then slowdown: %s", name)
			require.Equal(t, Slowdown, res.snap.Class, "plateau, then slowdown: %s", name)
		}
		// 0.35 from 30 s to 70 s, then back to 1
		res = stream{rate: 500, secs: 140, level: func(t float64) float64 {
			if t >= 30 && t < 70 {
				return 0.35
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		if res.snap.Regime == Steady {
			require.Greater(t, float64(res.snap.SteadyStart.Time)/1e9, 65.0, "faster spell, then back: %s", name)
		}
		// 1.8 from 40 s to 75 s and from 85 s to 99 s
		res = stream{rate: 500, secs: 140, level: func(t float64) float64 {
			if (t >= 40 && t < 75) || (t >= 85 && t < 99) {
				return 1.8
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		require.Equal(t, Steady, res.snap.Regime, "two excursions: %s", name)
		require.Less(t, float64(res.snap.SteadyStart.Time)/1e9, 1.0, "two excursions: %s", name)
		require.Len(t, res.snap.Relapses, 3, "two excursions: %s", name)
		require.InDelta(t, 85, float64(res.snap.Relapses[2].Boundary.Time)/1e9, 1.5, "two excursions: %s", name)
	}
}

// TestServiceImprovementIsNoRelapse: a settled level that switches to 1.6
// times faster for 20 s and back (what a settled HotSpot or Node server
// does on shared cores) is no relapse; a plateau left for a level 4 times
// faster for good is one.
func TestServiceImprovementIsNoRelapse(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		name := fmt.Sprintf("seed %d", seed)
		res := stream{rate: 500, secs: 70, level: func(t float64) float64 {
			if t >= 25 && t < 45 {
				return 1 / 1.6
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Empty(t, res.snap.Relapses, name)

		res = stream{rate: 500, secs: 70, level: func(t float64) float64 {
			if t >= 25 {
				return 0.25
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		require.Len(t, res.snap.Relapses, 1, name)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Equal(t, ClassWarmup, res.snap.Class, name)
		require.GreaterOrEqual(t, float64(res.snap.SteadyStart.Time)/1e9, 24.0, name)
	}
}

// TestServiceTransientInTheColdTail: a JIT service's first second, 1.7
// times slower than what follows with a cold tail of 80 times the level at
// its start, is a visible transient even when the cold tail ends inside it
// and its windows wander by +-10% from second to second (which widens the
// level band): the level after it needs settle_windows (11), not
// stable_windows (9).
func TestServiceTransientInTheColdTail(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		wob := make([]float64, 41)
		for i := range wob {
			wob[i] = math.Exp(0.1 * r.NormFloat64())
		}
		res := stream{rate: 500, secs: 40, sigma: 0.15, level: func(t float64) float64 {
			switch {
			case t < 0.05:
				return 80
			case t < 1:
				return 1.7
			}
			return wob[int(t)]
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.NotNil(t, res.snap.ColdEnd, name)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Equal(t, ClassWarmup, res.snap.Class, name)
		require.GreaterOrEqual(t, res.declared(), 12.0, name)
	}
}

// TestServiceTransientInTheTail: a first second only 1.4 times slower in
// median (within twice the level band) but with 2% of its requests 40
// times slower, as a JIT's first second (a tail about 30 times the
// settled one): a visible transient, the level after it needs
// settle_windows (11). The same first second with those requests 7 or 15
// times slower (a tail 5 or 11 times the settled one, as the first
// connections of a pool give: out of the segment, within four tail
// bands) is not: stable_windows (9).
func TestServiceTransientInTheTail(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		for _, slow := range []float64{40, 15, 7} {
			r := rand.New(rand.NewPCG(seed, 6))
			res := stream{rate: 500, secs: 40, sigma: 0.1, level: coldTailSecond(r, slow)}.run(t, seed, ServiceConfig())
			name := fmt.Sprintf("seed %d, first-second tail %gx", seed, slow)
			require.Equal(t, Steady, res.snap.Regime, name)
			require.Empty(t, res.snap.Relapses, name)
			if slow > 20 {
				require.GreaterOrEqual(t, res.declared(), 12.0, name)
			} else {
				require.Greater(t, res.declared(), 0.0, name)
				require.Less(t, res.declared(), 11.0, name)
			}
		}
	}
}

// coldTailSecond is a service whose first second is 1.4 times slower in
// median, with 2% of its requests slow times slower, and then level 1.
func coldTailSecond(r *rand.Rand, slow float64) func(float64) float64 {
	return func(t float64) float64 {
		if t < 1 {
			if r.IntN(50) == 0 {
				return slow
			}
			return 1.4
		}
		return 1
	}
}

// TestServiceTransientTailGateOff: without the tail gate (tail_tolerance
// 0) a tail is no transient: the same JIT-like first second is a first
// level (stable_windows), and nothing reads the tails it did not keep.
func TestServiceTransientTailGateOff(t *testing.T) {
	t.Parallel()
	cfg := ServiceConfig()
	cfg.TailTolerance = 0
	r := rand.New(rand.NewPCG(3, 6))
	res := stream{rate: 500, secs: 40, sigma: 0.1, level: coldTailSecond(r, 40)}.run(t, 3, cfg)
	require.Equal(t, Steady, res.snap.Regime)
	require.Empty(t, res.snap.Relapses)
	require.Greater(t, res.declared(), 0.0)
	require.Less(t, res.declared(), 11.0)
}

// TestServiceTransientTailInTheFirstWindow: as above, on a service whose
// window tails jump by a factor 2-3 from second to second (HotSpot's on 2
// shared cores): the walk's band for tails is then wide enough to take the
// first window, 2% of its requests 60 times slower, into the segment; it
// is left out, and the level needs settle_windows. Its class is warm-up,
// though that window's median is within the band.
func TestServiceTransientTailInTheFirstWindow(t *testing.T) {
	t.Parallel()
	afterFirst := 0
	for seed := uint64(1); seed <= 4; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		burst := make([]float64, 41)
		for i := range burst {
			burst[i] = 2 * math.Exp(0.9*r.NormFloat64())
		}
		res := stream{rate: 500, secs: 40, sigma: 0.1, level: func(t float64) float64 {
			switch {
			case t < 1 && r.IntN(50) == 0:
				return 60
			case t < 1:
				return 1.15
			case r.IntN(100) == 0:
				return burst[int(t)]
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Empty(t, res.snap.Relapses, name)
		require.NotNil(t, res.snap.SteadyStart, name)
		require.GreaterOrEqual(t, res.snap.SteadyStart.Time, int64(1e9), "%s: the first window is left out", name)
		require.GreaterOrEqual(t, res.declared(), 12.0, name)
		if res.snap.SteadyStart.Time < 2e9 {
			// the level starts right after the first window, whose
			// median lies within the band: the tail alone makes it a
			// warm-up
			afterFirst++
			require.Equal(t, ClassWarmup, res.snap.Class, "%s: a transient in the tail alone is a warm-up", name)
		}
	}
	require.GreaterOrEqual(t, afterFirst, 2, "levels that start right after the first window")
}

// TestServiceFirstWindowTailCountsTowardTheWait: a flat service whose
// first second (its first connections) has a tail 4-6 times the level's,
// its median within the band, leaves that window out of the level on its
// tail alone, below a transient (16 times): the steady state starts after
// it, and its second counts toward the first level's 9 windows, so the
// flat service is declared at 9 s as when that tail stays in the band (a
// CI run of the short live harness declared go-io at 10.04 s on such a
// first second, against 9.03 s in 27 other runs).
func TestServiceFirstWindowTailCountsTowardTheWait(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 6; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		res := stream{rate: 500, secs: 40, sigma: 0.1, level: func(t float64) float64 {
			if t < 1 && r.IntN(25) == 0 {
				return 6 // 4% of the first second
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("seed %d", seed)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.Empty(t, res.snap.Relapses, name)
		require.NotNil(t, res.snap.SteadyStart, name)
		require.GreaterOrEqual(t, res.snap.SteadyStart.Time, int64(1e9), "%s: the first window is left out", name)
		require.InDelta(t, 9.0, res.declared(), 0.15, "%s: declared after 9 windows, the first among them", name)
		require.Equal(t, Flat, res.snap.Class, name)
	}
	// not when the first window's median is out of the band too (a first
	// second 1.4 times slower: beyond the band's 1.25, within the 1.56 of a
	// visible transient): the level's 9 windows count after it
	for seed := uint64(1); seed <= 3; seed++ {
		r := rand.New(rand.NewPCG(seed, 12))
		res := stream{rate: 500, secs: 40, sigma: 0.1, level: func(t float64) float64 {
			switch {
			case t < 1 && r.IntN(25) == 0:
				return 6
			case t < 1:
				return 1.4
			}
			return 1
		}}.run(t, seed, ServiceConfig())
		name := fmt.Sprintf("median out, seed %d", seed)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.GreaterOrEqual(t, res.declared(), 9.9, "%s: 9 windows after the first", name)
	}
}

// TestServicePrior: with a prior (a profile of earlier runs) the detector
// declares nothing before prior_warmup, then needs only prior_windows at
// the prior level; a level outside the prior's band needs the usual
// evidence, counted from the prior warm-up end.
func TestServicePrior(t *testing.T) {
	t.Parallel()
	cfg := ServiceConfig()
	cfg.PriorWarmup = Duration(20 * time.Second)
	cfg.PriorLevel = 1
	cfg.PriorLevelLow, cfg.PriorLevelHigh = -0.2, 0.2
	for seed := uint64(1); seed <= 4; seed++ {
		name := fmt.Sprintf("seed %d", seed)
		flat := stream{rate: 500, secs: 60, level: wander(float64(seed))}
		res := flat.run(t, seed, cfg)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.InDelta(t, 22.5, res.declared(), 1.1, name)
		require.GreaterOrEqual(t, float64(res.snap.SteadyStart.Time)/1e9, 20.0, name)

		slower := stream{rate: 500, secs: 60, level: func(float64) float64 { return 2 }}
		res = slower.run(t, seed, cfg)
		require.Equal(t, Steady, res.snap.Regime, name)
		require.InDelta(t, 29, res.declared(), 1.1, name)
	}
	bad := ServiceConfig()
	bad.PriorLevelLow, bad.PriorLevelHigh, bad.PriorWarmup = 0.1, -1, Duration(-time.Second)
	errs := bad.Validate()
	require.Len(t, errs, 3, "%v", errs)
	bench := DefaultConfig()
	bench.PriorLevel = 1
	require.ErrorContains(t, errors.Join(bench.Validate()...), `prior_warmup and prior_level need method "service"`)
}

// TestServicePriorDrift: with prior_drift, a run on a machine slower or
// faster than the profile's runs' takes the prior at its own level when
// that level is one since the prior warm-up end and within the band
// widened by prior_drift; a warm-up still falling into the prior's end in a
// visible step does not, nor a new warm-up against a flat service's
// profile. A warm-up twice as long that falls smoothly is declared at the
// prior's end all the same: the limit that leaves it off in the preset.
func TestServicePriorDrift(t *testing.T) {
	t.Parallel()
	prior := func(warmup time.Duration, drift float64) Config {
		cfg := ServiceConfig()
		cfg.PriorWarmup = Duration(warmup)
		cfg.PriorLevel = 1
		cfg.PriorLevelLow, cfg.PriorLevelHigh = -0.15, 0.15
		cfg.PriorDrift = drift
		return cfg
	}
	require.Zero(t, ServiceConfig().PriorDrift, "off in the preset")
	level := func(v float64) func(float64) float64 { return func(float64) float64 { return v } }
	for seed := uint64(1); seed <= 3; seed++ {
		name := fmt.Sprintf("seed %d", seed)
		run := func(l func(float64) float64, cfg Config) float64 {
			res := stream{rate: 500, secs: 60, level: l}.run(t, seed, cfg)
			require.Equal(t, Steady, res.snap.Regime, name)
			return res.declared()
		}
		// 30% and 60% slower than the profile's runs, 30% faster
		require.InDelta(t, 12, run(level(1.3), prior(10*time.Second, 0.5)), 0.6, "%s: x1.3", name)
		require.InDelta(t, 12, run(level(1.6), prior(10*time.Second, 0.5)), 0.6, "%s: x1.6", name)
		require.InDelta(t, 12, run(level(0.7), prior(10*time.Second, 0.5)), 0.6, "%s: x0.7", name)
		require.InDelta(t, 19, run(level(1.3), prior(10*time.Second, 0)), 0.6, "%s: x1.3 without drift", name)
		// beyond the widened band (its top 1.15 x 1.5): its own evidence
		require.InDelta(t, 19, run(level(2), prior(10*time.Second, 0.5)), 0.6, "%s: x2", name)
		// a flat service's profile (no warm-up), the machine 30% slower
		require.InDelta(t, 2, run(level(1.3), prior(0, 0.5)), 0.6, "%s: flat profile, x1.3", name)
		// a flat service's profile, and the run has a warm-up of its own
		require.Greater(t, run(func(t float64) float64 { return 1 + 2*math.Exp(-t/3) }, prior(0, 0.5)), 8.0,
			"%s: a new warm-up", name)
		// a warm-up twice as long as the profile's, in steps: the step
		// before the prior's end is a visible transient
		steps := func(t float64) float64 {
			switch {
			case t < 10:
				return 3
			case t < 20:
				return 1.5
			}
			return 1
		}
		require.Greater(t, run(steps, prior(10*time.Second, 0.5)), 20.5, "%s: steps twice as long", name)
		// twice as long and smooth: declared at the prior's end, as the
		// comment on prior_drift says (19 s without the drift)
		smooth := func(t float64) float64 { return 1 + 2*math.Exp(-t/6) }
		require.InDelta(t, 12, run(smooth, prior(10*time.Second, 0.5)), 0.6, "%s: smooth, twice as long", name)
		require.InDelta(t, 19, run(smooth, prior(10*time.Second, 0)), 0.6, "%s: smooth, twice as long, without drift", name)
	}
	bad := ServiceConfig()
	bad.PriorDrift = -0.1
	require.ErrorContains(t, errors.Join(bad.Validate()...), "prior_drift")
}

// TestServiceDrift: at the end of a run, Drift compares the thirds of the
// final steady state and how monotone it is. A lasting shift of +35% in the
// middle of the run is no drift; a linear rise or a square root's is; a
// flat level with a slow wave holds; a detector that is not steady, or runs
// the benchmark method, measures nothing.
func TestServiceDriftAtEnd(t *testing.T) {
	t.Parallel()
	end := func(level func(float64) float64, cfg Config) *Detector {
		d, err := New(cfg)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(7, 99))
		for i := range 200 * 60 {
			tt := float64(i) / 200
			d.Observe(int64(tt*1e9), level(tt)*math.Exp(0.3*r.NormFloat64()))
		}
		return d
	}
	// a level that moved once (+35% at 32 s) and stayed: held, its change
	// reported (on shared cores a settled service's level steps like this
	// at random times)
	shift := end(func(t float64) float64 {
		if t < 32 {
			return 5
		}
		return 6.75
	}, ServiceConfig())
	require.Equal(t, Steady, shift.Snapshot().Regime, "a +35%% shift is no relapse")
	c, held, ok := shift.Drift()
	require.True(t, ok)
	require.True(t, held, "a step that stays is held")
	require.InDelta(t, 0.35, c, 0.08)

	// a level that keeps moving (+60% over the run, linearly): not held
	drift := end(func(t float64) float64 { return 5 * (1 + 0.6*t/60) }, ServiceConfig())
	require.Equal(t, Steady, drift.Snapshot().Regime, "too slow for a relapse")
	c, held, ok = drift.Drift()
	require.True(t, ok)
	require.False(t, held, "a drift is not held (change %.3f)", c)
	require.Greater(t, c, 0.25)

	// latency that grows like the square root of time, observations within
	// +-2% (the e2e test's server): monotone, not held
	r := rand.New(rand.NewPCG(3, 4))
	sqrt, err := New(ServiceConfig())
	require.NoError(t, err)
	for i := range 200 * 60 {
		tt := float64(i) / 200
		sqrt.Observe(int64(tt*1e9), 5*math.Sqrt(1+tt/30)*(1+0.02*r.Float64()))
	}
	require.Equal(t, Steady, sqrt.Snapshot().Regime, "too slow for a relapse")
	c, held, ok = sqrt.Drift()
	require.True(t, ok)
	require.False(t, held, "change %.3f", c)

	wave := end(func(t float64) float64 { return 5 * (1 + 0.08*math.Sin(t/3)) }, ServiceConfig())
	c, held, ok = wave.Drift()
	require.True(t, ok)
	require.True(t, held, "change %.3f", c)
	require.Less(t, math.Abs(c), 0.1)

	rising := end(func(t float64) float64 { return 5 * math.Pow(1.1, t) }, ServiceConfig())
	_, _, ok = rising.Drift()
	require.False(t, ok, "not steady: nothing to measure")

	bench := DefaultConfig()
	_, _, ok = end(func(float64) float64 { return 5 }, bench).Drift()
	require.False(t, ok, "the benchmark method")
}

// cacheStream is the live harness's cache service: 4 lookups per request
// of keys drawn from 10,000, a key not yet read costing 1 ms more, at 500
// requests/s on a base of 0.35 ms. The median settles when fewer than half
// the requests miss (about 9 s); the tail only when misses are rarer than
// its quantile, after half a minute.
func cacheStream(tb testing.TB, seed uint64, cfg Config) svcRun {
	tb.Helper()
	var res svcRun
	d := res.record(tb, cfg)
	r := rand.New(rand.NewPCG(seed, 7))
	cached := make([]bool, 10000)
	w := wander(float64(seed))
	const rate, secs = 500, 60
	for i := range rate * secs {
		t := float64(i) / rate
		v := 0.35 * w(t) * math.Exp(0.3*r.NormFloat64())
		for range 4 {
			if k := r.IntN(len(cached)); !cached[k] {
				cached[k] = true
				v++
			}
		}
		d.Observe(int64(t*1e9), v)
	}
	res.snap = d.Snapshot()
	checkInvariants(tb, runResult{snap: res.snap, transitions: res.transitions, windows: res.windows}, rate*secs)
	return res
}

// TestServiceTailStillFalling: a segment whose tail still falls is not
// declared steady yet (tail_trend_tolerance), though its median has
// settled: after a transient, and after slower windows that the windows
// just before the segment hide (the cache's median comes down in stages).
// When the tail's trend fails, the segment's later starts are tried (its
// tail band, a factor 2, lets it start on a tail that has halved since).
// Of 4 e^(-0.2 t) of the requests missing, 5% remain at 21.9 s and 1% at
// 30.0 s. On these 40 seeds the detector declares at 23.0-41.1 s (median
// 26.1 s, 37 by 30.1 s): after 5% misses in every seed, and late rather
// than early while they still fall; without the tail's trend at
// 20.0-26.1 s, 11 of 40 before 5%. The latest bound leaves one window
// (1.9 s) past the latest seed. A rule that the share of slow samples no longer
// halve between the segment's halves (dropped, docs/tag-quality.md, "The
// share of slow samples: dropped") held it to 29.1-46.1 s, 3 of 40 by
// 30.1 s: the count by then tells the two apart.
func TestServiceTailStillFalling(t *testing.T) {
	t.Parallel()
	const fivePct, onePct, last = 21.9, 30.1, 43.0
	off := ServiceConfig()
	off.TailTrendTolerance = 0
	early, byOnePct := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		name := fmt.Sprintf("seed %d", seed)
		with := cacheStream(t, seed, ServiceConfig())
		require.Equal(t, Steady, with.snap.Regime, name)
		require.Empty(t, with.snap.Relapses, name)
		d := with.declared()
		require.GreaterOrEqual(t, d, fivePct, name)
		require.LessOrEqual(t, d, last, name)
		if d <= onePct {
			byOnePct++
		}
		// the case is one the rule decides: without it seeds declare early
		without := cacheStream(t, seed, off)
		if w := without.declared(); w >= 0 && w < fivePct {
			early++
		}
	}
	require.GreaterOrEqual(t, byOnePct, 30, "declared by 1% misses")
	require.GreaterOrEqual(t, early, 6, "of 40 seeds without the rule, declared before 5% misses")
}

// slowPathStream is a settled service with a slow path: share of its
// requests (drawn independently) take 10 times as long, at rate requests/s
// on a median of 1 ms wandering by +-15%, for 90 s.
func slowPathStream(tb testing.TB, seed uint64, rate int, share float64) svcRun {
	tb.Helper()
	return flatService(tb, seed, 5, rate, 90, func(r *rand.Rand, v float64) float64 {
		if r.Float64() < share {
			v *= 10
		}
		return v
	})
}

// flatService is a settled service at rate requests/s for secs seconds: a
// median of 1 ms wandering by +-15%, log-normal noise, each request then
// passed through odd (a slow path, an outlier), with draws from the
// stream (seed, stream); checked for the invariants.
func flatService(tb testing.TB, seed, stream uint64, rate, secs int, odd func(r *rand.Rand, v float64) float64) svcRun {
	tb.Helper()
	var res svcRun
	d := res.record(tb, ServiceConfig())
	r := rand.New(rand.NewPCG(seed, stream))
	w := wander(float64(seed))
	for i := range rate * secs {
		t := float64(i) / float64(rate)
		d.Observe(int64(t*1e9), odd(r, w(t)*math.Exp(0.3*r.NormFloat64())))
	}
	res.snap = d.Snapshot()
	checkInvariants(tb, runResult{snap: res.snap, transitions: res.transitions, windows: res.windows}, int64(rate*secs))
	return res
}

// TestServiceSlowPathIsSteady: a slow path taken by about as many
// requests as a window's tail quantile has above it (1% of 500, 2% of
// 200) makes that quantile flip between the two modes from window to
// window by sampling alone. It is a settled service. The dual gate judges
// the quantile smoothed over the ranks around it (histogram.SmoothTail),
// which moves with the count of slow requests in the window instead of
// flipping; the tails' noise widens their band for what is left. Declared
// within 10 s in 38, 39, 40 and 37 of these 40 seeds; on the window
// quantile itself, as until 2026-11-26, in 31, 39, 40 and 33, and this
// test fails. (Over 40 seeds of 12 rates and shares, 451 of 480 within
// 10 s on the quantile, worst 30 s, 468 on the mean of the samples above
// it, worst 19 s, 469 on the smoothed tail, worst 15 s. A band capped at the sampling noise of a
// smooth Pareto tail of index 1.5, about a factor 2.4, tried the same day
// to hold HotSpot's compile pauses back, declared 1% of 500 requests/s at
// 30-34 s in 2 of 10 seeds.)
func TestServiceSlowPathIsSteady(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rate  int
		share float64
	}{{500, 0.01}, {500, 0.02}, {200, 0.01}, {200, 0.02}} {
		within10 := 0
		for seed := uint64(1); seed <= 40; seed++ {
			name := fmt.Sprintf("%d/s, %.0f%% slow, seed %d", c.rate, 100*c.share, seed)
			res := slowPathStream(t, seed, c.rate, c.share)
			require.Equal(t, Steady, res.snap.Regime, name)
			require.Empty(t, res.snap.Relapses, name)
			require.Less(t, res.declared(), 20.0, name)
			if res.declared() <= 10.1 {
				within10++
			}
		}
		t.Logf("%d/s, %.0f%% slow: declared within 10 s in %d of 40 seeds", c.rate, 100*c.share, within10)
		require.GreaterOrEqual(t, within10, 35, "%d/s, %.0f%% slow: declared within 10 s", c.rate, 100*c.share)
	}
}

// TestServicePeriodicStallsAreSteady: a settled service whose runtime
// stops the world for 10 or 20 ms every 1.3 to 5 s (a garbage collector's
// pauses): the requests that arrive during a stall wait for its end. At
// 500 requests/s the p99 of a window with a 20-ms stall is several times
// that of a window without, and with a 2-s period the windows alternate.
// The tails' noise widens their band to take that in. (The band capped at
// a factor 2.4 that was tried on 2026-11-26, above, failed this test: the
// 2-s, 20-ms stalls reached no steady state; replayed on the live
// harness's go-stall service, it exited 99 in 9 of 10 runs.)
func TestServicePeriodicStallsAreSteady(t *testing.T) {
	t.Parallel()
	const rate = 500
	for _, period := range []float64{1.3, 2, 3, 5} {
		for _, stall := range []float64{0.010, 0.020} {
			for seed := uint64(1); seed <= 8; seed++ {
				name := fmt.Sprintf("a %.0f-ms stall every %.1f s, seed %d", stall*1000, period, seed)
				var res svcRun
				d := res.record(t, ServiceConfig())
				r := rand.New(rand.NewPCG(seed, 5))
				w := wander(float64(seed))
				phase := r.Float64() * period
				for i := range rate * 90 {
					at := float64(i) / rate
					v := w(at) * math.Exp(0.3*r.NormFloat64()) // ms
					if x := math.Mod(at+phase, period); x < stall {
						v += (stall - x) * 1000 // waits for the stall's end
					}
					d.Observe(int64(at*1e9), v)
				}
				res.snap = d.Snapshot()
				checkInvariants(t, runResult{snap: res.snap, transitions: res.transitions, windows: res.windows}, rate*90)
				require.Equal(t, Steady, res.snap.Regime, name)
				require.Empty(t, res.snap.Relapses, name)
				require.LessOrEqual(t, res.declared(), 15.0, name)
			}
		}
	}
}

// TestServiceRareOutliersAreSteady: a settled service (1 ms, wandering by
// +-15%) where one request in 1,000, 3,000 or 10,000 takes 200 ms (a TCP
// retransmission, a page fault, a pause that catches one request): the
// window's tail must not be moved by one such request. On the mean of the
// samples above the tail quantile (the dual gate's tail for a session on
// 2026-11-26), one of them moved a 500-request window's tail about 16
// times; over 40 seeds, 2-18 of each case's were declared after 10 s (up
// to 54 s) and 0-7 classed as warm-ups. The smoothed tail leaves the
// largest values out: over the same 40 seeds, none declared after 10 s
// but 3 at 1,000 requests/s and one in 1,000 (up to 18.0 s). That case
// has one such request a window on average, and 3 in 8% of windows,
// enough for one to enter the band of ranks: it is held to 17 of 20, the
// others to 19.
func TestServiceRareOutliersAreSteady(t *testing.T) {
	t.Parallel()
	for _, rate := range []int{200, 500, 1000} {
		for _, every := range []int{1000, 3000, 10000} {
			within10, flat := 0, 0
			for seed := uint64(1); seed <= 20; seed++ {
				name := fmt.Sprintf("%d/s, 1 in %d at 200 ms, seed %d", rate, every, seed)
				res := flatService(t, seed, 7, rate, 60, func(r *rand.Rand, v float64) float64 {
					if r.IntN(every) == 0 {
						v = 200
					}
					return v
				})
				require.Equal(t, Steady, res.snap.Regime, name)
				require.Empty(t, res.snap.Relapses, name)
				require.Less(t, res.declared(), 20.0, name)
				if res.declared() <= 10.1 {
					within10++
				}
				if res.snap.Class == Flat {
					flat++
				}
			}
			c := fmt.Sprintf("%d/s, 1 in %d", rate, every)
			t.Logf("%s: declared within 10 s in %d of 20 seeds, flat in %d", c, within10, flat)
			least := 19
			if rate >= every {
				least = 17
			}
			require.GreaterOrEqual(t, within10, least, c+": declared within 10 s")
			require.GreaterOrEqual(t, flat, 19, c+": classed flat")
		}
	}
}

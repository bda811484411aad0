package results

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// profileRun makes a run of durS seconds: 1-s windows whose median decays
// from 20 ms to 5 ms until warmS, then 5 ms with a wave of +-amp (random
// phase per run), tails 1.5x; the settled boundary at warmS.
func profileRun(rng *rand.Rand, id string, start time.Time, durS int, warmS, amp float64) ProfileInput {
	t0 := float64(start.UnixMilli())
	phase := rng.Float64() * 2 * math.Pi
	var ws []WindowRow
	for k := range durS {
		m := 5 * (1 + amp*math.Sin(phase+float64(k)/4))
		if float64(k) < warmS {
			m = 5 + 15*(1-float64(k)/warmS)
		}
		ws = append(ws, WindowRow{Scenario: "load", Seq: k, FirstMs: t0 + float64(k)*1000, LastMs: t0 + float64(k+1)*1000 - 1,
			N: 100, Median: m, Tail: 1.5 * m, TailQuantile: 99.9})
	}
	ttss := warmS * 1000
	cold := 100 + 10*rng.Float64()
	s := &Summary{RunID: id, Started: start, End: &RunEnd{Status: EndCompleted},
		Scenarios: map[string]*Scenario{"load": {Iterations: int64(100 * durS), TTSSMs: &ttss, ColdStart: ColdStart{DurationMs: cold},
			Settled: &Settled{Steady: true, TTSSMs: &ttss, AtMs: t0 + ttss}}}}
	return ProfileInput{Summary: s, Windows: ws, Dir: "runs/" + id}
}

// TestBuildProfile: from five runs whose warm-up ends at 8-12 s and whose
// steady state wanders by +-10% at random phases, the profile's averaged
// curve starts at 20 ms and settles at 5 ms, the warm-up end is the runs'
// median with their spread, the envelope holds the waves (and not the
// warm-up), and the picture draws each run and the average.
func TestBuildProfile(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	var in []ProfileInput
	for i, w := range []float64{8, 9, 10, 11, 12} {
		in = append(in, profileRun(rng, string(rune('a'+i)), t0.Add(time.Duration(i)*time.Minute), 60, w, 0.1))
	}
	p, err := BuildProfile(in, ProfileOptions{RateTolerance: 0.2})
	require.NoError(t, err)
	require.Len(t, p.Runs, 5)
	// the load it was learnt at: 6,000 iterations over 60 s of windows
	require.InDelta(t, 100, p.RatesPerS["load"], 0.1)
	require.NoError(t, p.CheckLoad("load", 110, ProfileRateTolerance))
	require.EqualError(t, p.CheckLoad("load", 40, ProfileRateTolerance),
		"profile: scenario load ran 40.0 iterations/s, the profile's runs 100.0 (more than 20% apart): another load (or, with a fixed number of VUs, a service of another speed); "+
			"a profile judges runs of the script and load it was learnt from")
	require.NoError(t, p.CheckLoad("other", 40, ProfileRateTolerance), "a scenario the profile has no rate of")
	require.NoError(t, (&Profile{}).CheckLoad("load", 40, ProfileRateTolerance), "a profile of an older version, without rates")
	require.InDelta(t, 100, ScenarioRates(in[0].Summary, in[0].Windows)["load"], 0.1)
	require.Len(t, p.Scopes, 1)
	sc := p.Scopes[0]
	require.Len(t, sc.Median, 60)
	require.InDelta(t, 20, sc.Median[0].Mid, 0.01, "every run starts at 20 ms")
	require.Equal(t, 5, sc.Median[30].Runs)
	require.InDelta(t, 5, sc.Median[30].Mid, 0.6)
	require.Equal(t, ProfileDist{N: 5, Min: 8000, Median: 10000, P90: 11600, Max: 12000}, sc.WarmupEnd)
	require.InDelta(t, 5, sc.LevelMs, 0.5)
	require.Greater(t, sc.Envelope.Median.Hi, 0.05)
	require.Less(t, sc.Envelope.Median.Hi, 0.11, "the envelope is the waves, not the warm-up")
	require.Less(t, sc.Envelope.Median.Lo, -0.05)
	require.Greater(t, sc.Envelope.MedianMax.Lo, -0.13)
	require.InDelta(t, sc.Envelope.Median.Hi, sc.Envelope.Tail.Hi, 0.02, "tails are 1.5x the medians")
	require.Equal(t, 5, sc.TTSS.N)
	require.Equal(t, 10000.0, sc.TTSS.Median)
	require.Equal(t, 5, sc.ColdStart.N)

	svg := p.SVG()
	require.Equal(t, 5, strings.Count(svg, `class="run"`))
	require.Equal(t, 1, strings.Count(svg, `class="average"`))
	require.Contains(t, svg, `class="warmup-spread"`)
	require.Contains(t, svg, `class="envelope"`)
	require.Contains(t, p.Text(), "warm-up end (settled boundary): median 10.0 s, 8.0-12.0 s over 5 runs")

	js, err := json.Marshal(p.Rounded())
	require.NoError(t, err)
	var back Profile
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, ProfileSchema, back.Schema)
}

// TestProfileBounded: 20 runs of an hour at one window a second: blocks
// widen to keep at most 300 per scope, and profile.json stays under 1 MB.
func TestProfileBounded(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	var in []ProfileInput
	for i := range 20 {
		in = append(in, profileRun(rng, string(rune('a'+i)), t0.Add(time.Duration(i)*time.Hour), 3600, 30, 0.1))
	}
	p, err := BuildProfile(in, ProfileOptions{RateTolerance: 0.2})
	require.NoError(t, err)
	require.Equal(t, 16000.0, p.BlockMs)
	require.LessOrEqual(t, len(p.Scopes[0].Median), 300)
	js, err := json.Marshal(p.Rounded())
	require.NoError(t, err)
	t.Logf("profile.json of 20 one-hour runs: %d bytes", len(js))
	require.Less(t, len(js), 1<<20)
}

// TestProfileRefuses: too few runs, runs of another script or load, an
// incomplete run and a run without windows are refused, naming why.
func TestProfileRefuses(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	mk := func() []ProfileInput {
		var in []ProfileInput
		for i := range 4 {
			in = append(in, profileRun(rng, string(rune('a'+i)), t0.Add(time.Duration(i)*time.Minute), 30, 5, 0.05))
		}
		return in
	}
	_, err := BuildProfile(mk()[:2], ProfileOptions{})
	require.ErrorContains(t, err, "2 run(s); a profile needs at least 3")

	in := mk()
	in[2].Summary.Scenarios["browse"] = in[2].Summary.Scenarios["load"]
	_, err = BuildProfile(in, ProfileOptions{})
	require.ErrorContains(t, err, "runs/c has browse, load: the runs of a profile must come from one script")

	in = mk()
	in[1].Summary.Scenarios["load"].Iterations *= 2
	_, err = BuildProfile(in, ProfileOptions{RateTolerance: 0.2})
	require.ErrorContains(t, err, "runs/b: scenario load ran 200.0 iterations/s where the runs' median is 100.0 (more than 20% apart): another load")
	_, err = BuildProfile(in, ProfileOptions{})
	require.NoError(t, err, "no rate check with tolerance 0")

	in = mk()
	in[3].Summary.End = &RunEnd{Status: EndInterrupted}
	_, err = BuildProfile(in, ProfileOptions{})
	require.ErrorContains(t, err, "runs/d: the run did not complete")

	in = mk()
	in[0].Windows = nil
	_, err = BuildProfile(in, ProfileOptions{})
	require.ErrorContains(t, err, "runs/a has no windows.csv")

	in = mk()
	for i := range in {
		in[i].Summary.DurationS = 30
	}
	in[2].Summary.DurationS = 60
	dur := ProfileOptions{DurationTolerance: ProfileDurationTolerance}
	_, err = BuildProfile(in, dur)
	require.ErrorContains(t, err, "runs/a lasted 30 s and runs/c 60 s: runs of one script and load last as long (within 20%, --duration-tolerance)")
	_, err = BuildProfile(in, ProfileOptions{})
	require.NoError(t, err, "the check off (closed-model runs whose duration follows the service)")
	in[0].Summary.DurationS = 0 // a summary of an older version: left out of the check, which still judges the others
	_, err = BuildProfile(in, dur)
	require.ErrorContains(t, err, "runs/b lasted 30 s and runs/c 60 s")
	in[0].Summary.DurationS = 30
	in[2].Summary.DurationS = 33
	_, err = BuildProfile(in, dur)
	require.NoError(t, err, "seconds of graceful stop apart")
}

// agreedRuns makes n runs of nb 1-s blocks: level 1 with lognormal noise
// (sd 5%), a warm-up every run shares (warm(b): the factor at block b, on
// the median and, times tail, on the tail), and in each run one wave of
// +40% lasting 10 blocks at a random time after block 30.
func agreedRuns(rng *rand.Rand, n, nb int, warm func(b int) float64, tail float64) (med, tl [][]float64) {
	for range n {
		m, t := make([]float64, nb), make([]float64, nb)
		wave := 30 + rng.IntN(nb-45)
		for b := range nb {
			f := warm(b)
			if b >= wave && b < wave+10 {
				f *= 1.4
			}
			m[b] = f * math.Exp(0.05*rng.NormFloat64())
			t[b] = 3 * (1 + (f-1)*tail) * math.Exp(0.15*rng.NormFloat64())
		}
		med, tl = append(med, m), append(tl, t)
	}
	return med, tl
}

// TestAgreedEnd: the warm-up end a profile's runs agree on is where the
// warm-up every run shares ends, not one run's wave, nor 0 when only the
// tail warms up.
func TestAgreedEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 20 {
		// a 15-s warm-up, +60% at the start falling to +20% at its end
		warm := func(b int) float64 {
			if b < 15 {
				return 1.6 - 0.4*float64(b)/14
			}
			return 1
		}
		med, tl := agreedRuns(rng, 5, 90, warm, 1)
		end, ok := agreedEnd(med, tl)
		require.True(t, ok)
		require.InDelta(t, 15, end, 2, "a 15-s warm-up every run shares")

		// flat: one run's own slow start (its first 20 s at +40%) is not
		// what the runs agree on
		flat := func(int) float64 { return 1 }
		med, tl = agreedRuns(rng, 5, 90, flat, 1)
		for b := range 20 {
			med[0][b] *= 1.4
		}
		end, ok = agreedEnd(med, tl)
		require.True(t, ok)
		require.LessOrEqual(t, end, 2.0, "one run's slow start")

		// a warm-up in the tail alone: the median flat, the tail 4 times
		// its level for 12 s
		med, tl = agreedRuns(rng, 5, 90, flat, 1)
		for k := range tl {
			for b := range 12 {
				tl[k][b] *= 4
			}
		}
		end, ok = agreedEnd(med, tl)
		require.True(t, ok)
		require.InDelta(t, 12, end, 2, "a tail warm-up every run shares")
	}
	_, ok := agreedEnd([][]float64{{1, 1, 1, 1}, {1, 1, 1, 1}}, [][]float64{{1, 1, 1, 1}, {1, 1, 1, 1}})
	require.False(t, ok, "two runs agree on nothing")
}

// TestAgreedEndSparse: windows longer than a block leave blocks without a
// value, which are neither warm-up nor gaps; a scope that only 2 runs have
// gives no agreed end.
func TestAgreedEndSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	warm := func(b int) float64 {
		if b < 20 {
			return 1.8
		}
		return 1
	}
	med, tl := agreedRuns(rng, 5, 120, warm, 1)
	for k := range med {
		for b := range med[k] {
			if b%5 != 2 { // 5-s windows, each in the block of its middle
				med[k][b], tl[k][b] = 0, 0
			}
		}
	}
	end, ok := agreedEnd(med, tl)
	require.True(t, ok)
	require.InDelta(t, 20, end, 3, "a 20-s warm-up seen through 5-s windows")

	med, tl = agreedRuns(rng, 5, 60, warm, 1)
	for k := range 3 {
		clear(med[k])
		clear(tl[k])
	}
	_, ok = agreedEnd(med, tl)
	require.False(t, ok, "only 2 runs have the scope")
}

// TestWelchEndSparseBlocks: with windows longer than a block (a low rate),
// only some blocks have a value; the averaged curve's end is still given in
// blocks (it was given in points of the shortened curve: a 20-s warm-up
// read as 5 s with a value every 4 blocks).
func TestWelchEndSparseBlocks(t *testing.T) {
	t.Parallel()
	for _, every := range []int{1, 4} {
		var runs [][]float64
		for k := range 5 {
			r := make([]float64, 80)
			for b := range r {
				if b%every != 0 {
					continue // no window ends in this block
				}
				r[b] = 5 * (1 + 0.02*float64((b+k)%3))
				if b < 20 {
					r[b] = 10
				}
			}
			runs = append(runs, r)
		}
		end := welchEnd(runs, Interval{Lo: -0.05, Hi: 0.05})
		require.Greater(t, end, 20.0-float64(every), "a value every %d blocks", every)
		require.LessOrEqual(t, end, 20.0, "a value every %d blocks", every)
	}
}

// TestProfileEndpointOrigin: an endpoint first called 20 s into each run
// (a phase that starts later) and warming up over its own first 10 s has
// its curve, warm-up end and prior counted from its own first window, as
// its online detector counts its prior from its own first observation:
// timed from the scenario's first window, its prior would wait until 30 s
// of its own time.
func TestProfileEndpointOrigin(t *testing.T) {
	t.Parallel()
	in := profileRuns(3, 5, 8, func(_ int, r *ProfileInput, rng *rand.Rand) {
		base := float64(r.Summary.Started.UnixMilli())
		late := profileRun(rng, "x", r.Summary.Started, 40, 10, 0.05)
		for _, w := range late.Windows {
			w.Endpoint = "late"
			w.FirstMs += 20000
			w.LastMs += 20000
			r.Windows = append(r.Windows, w)
		}
		at := base + 30000 // settled 10 s after its first call
		r.Summary.Scenarios["load"].Settled.Endpoints = map[string]*Settled{"late": {Steady: true, AtMs: at}}
	})
	p, err := BuildProfile(in, ProfileOptions{RateTolerance: 0.2})
	require.NoError(t, err)
	sc := p.Scope("load", "late")
	require.NotNil(t, sc)
	require.Len(t, sc.Median, 40, "the endpoint's 40 s, from its own first window")
	require.InDelta(t, 20, sc.Median[0].Mid, 0.01, "its first block is its first window")
	require.Equal(t, 10000.0, sc.WarmupEnd.Median, "its warm-up end, from its own first window")
	pr := sc.Prior()
	require.True(t, pr.Ok)
	require.Less(t, pr.WarmupMs, 15000.0, "its prior, from its own first window")
	require.Equal(t, 8000.0, p.Scope("load", "").WarmupEnd.Median, "the scenario's, from the scenario's first window")
}

// TestProfileApproximateTails: a profile learnt only from merged folders
// (every settled view approximate, its tail understated) has no steady p99
// (not a distribution of no run), says so, and judges no run on its p99
// (profiled()'s p99 guard then fails, see regime_profile_checks).
func TestProfileApproximateTails(t *testing.T) {
	t.Parallel()
	in := profileRuns(5, 4, 8, func(i int, r *ProfileInput, _ *rand.Rand) {
		st := r.Summary.Scenarios["load"].Settled
		st.Stats = &SettledStats{Count: 5000, P50Ms: 5, P99Ms: 9}
		st.Approximate = i > 0 // one run with a true tail
	})
	p, err := BuildProfile(in, ProfileOptions{RateTolerance: 0.2})
	require.NoError(t, err)
	sc := p.Scope("load", "")
	require.Equal(t, 4, sc.SteadyP50.N)
	require.Equal(t, 1, sc.SteadyP99.N)
	require.Contains(t, p.Text(), "steady p99 (settled) of 1 of the 4 runs: the others' tails are approximate")

	in[0].Summary.Scenarios["load"].Settled.Approximate = true
	p, err = BuildProfile(in, ProfileOptions{RateTolerance: 0.2})
	require.NoError(t, err)
	sc = p.Scope("load", "")
	require.Nil(t, sc.SteadyP99, "no p99 learnt from no run")
	require.Contains(t, p.Text(), "steady p99 (settled): none: every run's tail is approximate")
	ttss := 8000.0
	for _, c := range p.CheckSettled("load", &Settled{Steady: true, TTSSMs: &ttss, Stats: &SettledStats{Count: 5000, P50Ms: 5, P99Ms: 30}}) {
		require.NotEqual(t, CheckP99, c.Figure, "no p99 check against a profile without one")
	}
}

// profileRuns makes n of profileRun's 60-s runs a minute apart (warm-up
// warmS, waves of 5%), from a generator seeded with seed, each changed by
// edit (given the same generator).
func profileRuns(seed uint64, n int, warmS float64, edit func(i int, r *ProfileInput, rng *rand.Rand)) []ProfileInput {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	in := make([]ProfileInput, 0, n)
	for i := range n {
		r := profileRun(rng, string(rune('a'+i)), t0.Add(time.Duration(i)*time.Minute), 60, warmS, 0.05)
		edit(i, &r, rng)
		in = append(in, r)
	}
	return in
}

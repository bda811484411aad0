package results

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fiveRunProfile is the profile of five runs like TestBuildProfile's, whose
// settled steady p50 is 5.0-5.4 ms and p99 20-24 ms.
func fiveRunProfile(t *testing.T) *Profile {
	t.Helper()
	p, _ := fiveRunProfileOf(t, 1, func(i int) (float64, float64) { return 5 + 0.1*float64(i), 20 + float64(i) })
	return p
}

// fiveRunProfileOf is the profile of five runs like TestBuildProfile's
// (random phases from seed) whose i-th run's settled steady p50 and p99 are
// stats(i), and the runs.
func fiveRunProfileOf(t *testing.T, seed uint64, stats func(i int) (p50, p99 float64)) (*Profile, []ProfileInput) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	var in []ProfileInput
	for i, w := range []float64{8, 9, 10, 11, 12} {
		r := profileRun(rng, string(rune('a'+i)), t0.Add(time.Duration(i)*time.Minute), 60, w, 0.1)
		p50, p99 := stats(i)
		r.Summary.Scenarios["load"].Settled.Stats = &SettledStats{Count: 5000, P50Ms: p50, P99Ms: p99}
		in = append(in, r)
	}
	p, err := BuildProfile(in, ProfileOptions{})
	require.NoError(t, err)
	return p, in
}

func writeProfile(t *testing.T, v any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.json")
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// TestLoadProfileRefuses: a missing, damaged or foreign file, a newer
// schema and an empty profile are errors that say which and why.
func TestLoadProfileRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := LoadProfile(filepath.Join(dir, "nope.json"))
	require.ErrorContains(t, err, "no such file")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"schema": 1, "scopes": [`), 0o600))
	_, err = LoadProfile(bad)
	require.ErrorContains(t, err, "is damaged or not JSON")

	_, err = LoadProfile(writeProfile(t, map[string]any{"scopes": []any{}}))
	require.ErrorContains(t, err, "has no schema field: not a profile.json")
	_, err = LoadProfile(writeProfile(t, map[string]any{"schema": ProfileSchema + 1, "scopes": []any{}}))
	require.ErrorContains(t, err, "written by a newer version; this k6 reads schema 1 or older")
	_, err = LoadProfile(writeProfile(t, map[string]any{"schema": 1, "scopes": []any{}}))
	require.ErrorContains(t, err, "holds no scenario")
	_, err = LoadProfile(writeProfile(t, map[string]any{"schema": 1, "scopes": []any{map[string]any{"scenario": "a", "level_ms": "fast"}}}))
	require.ErrorContains(t, err, "is damaged")

	p := fiveRunProfile(t)
	back, err := LoadProfile(writeProfile(t, p.Rounded()))
	require.NoError(t, err)
	require.Equal(t, []string{"load"}, back.Scenarios())
	require.NoError(t, back.MatchScenarios([]string{"load"}))
	// agreed_end_ms survives the file, and the prior read back is the same
	sc, bsc := p.Scope("load", ""), back.Scope("load", "")
	require.NotNil(t, bsc.AgreedEndMs)
	require.Equal(t, *sc.AgreedEndMs, *bsc.AgreedEndMs)
	require.Equal(t, sc.Prior(), bsc.Prior())
	// a file without it (an older version's) reads as none: the averaged
	// curve's end in the prior
	var raw map[string]any
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &raw))
	delete(raw["scopes"].([]any)[0].(map[string]any), "agreed_end_ms")
	old, err := LoadProfile(writeProfile(t, raw))
	require.NoError(t, err)
	require.Nil(t, old.Scope("load", "").AgreedEndMs)
	require.Equal(t, max(sc.WarmupEnd.Median, sc.WelchEndMs), old.Scope("load", "").Prior().WarmupMs)
	for _, v := range []any{-1000, "soon", 1e300} {
		raw["scopes"].([]any)[0].(map[string]any)["agreed_end_ms"] = v
		_, err = LoadProfile(writeProfile(t, raw))
		require.ErrorContains(t, err, "is damaged", "agreed_end_ms %v", v)
	}
	delete(raw["scopes"].([]any)[0].(map[string]any), "agreed_end_ms")
	for key, v := range map[string]any{"welch_end_ms": -1000, "level_ms": 1e300} {
		sc := raw["scopes"].([]any)[0].(map[string]any)
		was := sc[key]
		sc[key] = v
		_, err = LoadProfile(writeProfile(t, raw))
		require.ErrorContains(t, err, "is damaged", "%s %v", key, v)
		sc[key] = was
	}
	require.ErrorContains(t, back.MatchScenarios([]string{"browse", "load"}),
		"it was learnt from scenarios load, the script declares browse, load")
}

// TestProfilePrior: the prior is the warm-up end the runs agree on (not
// their median settled boundary), and their steady level, with
// a band of levels at least +-10% (from a profile of an older version,
// without the agreed end: the later of the median settled boundary and the
// averaged curve's); nothing without a settled steady state.
func TestProfilePrior(t *testing.T) {
	t.Parallel()
	p := fiveRunProfile(t)
	pr := p.Scope("load", "").Prior()
	require.True(t, pr.Ok)
	sc := p.Scope("load", "")
	require.InDelta(t, 10000, sc.WelchEndMs, 3000, "the averaged curve settles with the runs' warm-ups (8-12 s)")
	require.NotNil(t, sc.AgreedEndMs)
	require.InDelta(t, 10000, *sc.AgreedEndMs, 2000, "the runs' warm-ups end at 8-12 s")
	require.Equal(t, *sc.AgreedEndMs, pr.WarmupMs, "the agreed end")
	early := *sc
	early.AgreedEndMs = ptrFloat(0)
	early.WarmupEnd.Median = 6000
	require.Zero(t, early.Prior().WarmupMs, "a flat service's runs agree on no warm-up: one run's settled boundary on a wave of its own does not delay the prior")
	late := *sc
	late.AgreedEndMs = ptrFloat(14000)
	require.Equal(t, 14000.0, late.Prior().WarmupMs, "a later stage the runs agree on")
	old := *sc
	old.AgreedEndMs = nil
	require.Equal(t, max(10000, sc.WelchEndMs), old.Prior().WarmupMs, "an older profile: the later of the median settled boundary and the averaged curve's")
	require.InDelta(t, 5, pr.LevelMs, 0.5)
	require.LessOrEqual(t, pr.Low, -0.1)
	require.GreaterOrEqual(t, pr.High, 0.1)
	require.False(t, (&ProfileScope{}).Prior().Ok)
	require.False(t, (*ProfileScope)(nil).Prior().Ok)
	require.Nil(t, p.Scope("load", "nope"))
}

// TestProfileChecks: a run like the profile's is within it on every
// figure; one whose steady p50 is 20% higher and whose warm-up is twice as
// long is beyond it, and the text names the figure, the profile's value and
// the run's; a run without a settled steady state has no figure, which
// never passes.
func TestProfileChecks(t *testing.T) {
	t.Parallel()
	p := fiveRunProfile(t)
	ttss := func(v float64) *float64 { return &v }
	like := &Settled{Steady: true, TTSSMs: ttss(10500), Stats: &SettledStats{Count: 5000, P50Ms: 5.2, P99Ms: 22}}
	checks := p.CheckSettled("load", like)
	require.Len(t, checks, 3)
	for _, c := range checks {
		require.True(t, c.Within(), c.Text())
	}
	fails, err := ProfileFailures(checks, nil)
	require.NoError(t, err)
	require.Empty(t, fails)
	// a merged folder's approximate view understates its tail: its p99 is
	// no figure, and the check fails rather than pass
	approx := *like
	approx.Approximate = true
	for _, c := range p.CheckSettled("load", &approx) {
		if c.Figure == CheckP99 {
			require.Nil(t, c.RunMs, c.Text())
			require.False(t, c.Within())
		} else {
			require.True(t, c.Within(), c.Text())
		}
	}

	slower := &Settled{Steady: true, TTSSMs: ttss(21000), Stats: &SettledStats{Count: 5000, P50Ms: 6.24, P99Ms: 22}}
	checks = p.CheckSettled("load", slower)
	byFigure := map[string]ProfileCheck{}
	for _, c := range checks {
		byFigure[c.Figure] = c
	}
	require.False(t, byFigure[CheckTTSS].Within())
	require.Equal(t, "load: TTSS 21.00 s, the profile's p90 11.60 s: x1.81, beyond the profile's runs (their largest x1.03)", byFigure[CheckTTSS].Text())
	require.False(t, byFigure[CheckP50].Within())
	require.Equal(t, "load: steady p50 6.24 ms, the profile's median 5.2 ms: x1.20, beyond the profile's runs (their largest x1.04)", byFigure[CheckP50].Text())
	require.True(t, byFigure[CheckP99].Within())
	fails, err = ProfileFailures(checks, nil)
	require.NoError(t, err)
	require.Len(t, fails, 2)
	b, err := ParseBudgets("ttss=+100%,p50=+25%")
	require.NoError(t, err)
	fails, err = ProfileFailures(checks, b)
	require.NoError(t, err)
	require.Empty(t, fails, "within budgets that allow it")
	// a budget on one figure leaves the others judged by the runs' spread
	b, err = ParseBudgets("p99=+10%")
	require.NoError(t, err)
	fails, err = ProfileFailures(checks, b)
	require.NoError(t, err)
	require.Len(t, fails, 2, "ttss and p50 beyond the profile's runs: %v", fails)
	b, err = ParseBudgets("ttss=+1000,p50=+25%")
	require.NoError(t, err)
	fails, err = ProfileFailures(checks, b)
	require.NoError(t, err)
	require.Equal(t, []string{byFigure[CheckTTSS].Text() + "; over the budget ttss=+1000 ms"}, fails, "an absolute budget: 21 s > 11.6 s + 1 s")
	b, err = ParseBudgets("p95=+10%")
	require.NoError(t, err)
	_, err = ProfileFailures(checks, b)
	require.ErrorContains(t, err, "a profile judges ttss, p50 and p99 only")
	// a budget on a figure the profile has no check for fails
	var noTTSS []ProfileCheck
	for _, c := range checks {
		if c.Figure != CheckTTSS {
			noTTSS = append(noTTSS, c)
		}
	}
	b, err = ParseBudgets("ttss=+1000%,p50=+1000%,p99=+1000%")
	require.NoError(t, err)
	fails, err = ProfileFailures(noTTSS, b)
	require.NoError(t, err)
	require.Equal(t, []string{"the budget ttss=+1000% judged no figure: the profile has no ttss to set the run against"}, fails)

	none := p.CheckSettled("load", &Settled{Steady: false})
	require.Len(t, none, 3)
	for _, c := range none {
		require.Nil(t, c.RunMs)
		require.False(t, c.Within())
		require.Contains(t, c.Text(), "none in this run (no settled steady state)")
	}
	fails, err = ProfileFailures(none, b[:0])
	require.NoError(t, err)
	require.Len(t, fails, 3)

	_, err = p.CheckRun(&Summary{Scenarios: map[string]*Scenario{"other": {}}})
	require.ErrorContains(t, err, "learnt from scenarios load, the script declares other")
}

// TestProfileOwnRunsWithinWrittenProfile: each of a profile's own runs is
// within the profile read back from its file, though the file rounds to 4
// digits: the largest steady p50 (5.40049 ms) rounded to nearest (5.400)
// put its run beyond the profile's runs (e2e TestProfileGates failed so).
func TestProfileOwnRunsWithinWrittenProfile(t *testing.T) {
	t.Parallel()
	p, in := fiveRunProfileOf(t, 3, func(i int) (float64, float64) { return 5.00049 + 0.1*float64(i), 20.00049 - 0.5*float64(i) })
	sc := p.Scope("load", "")
	require.InDelta(t, 5.40049, sc.SteadyP50.Max, 1e-9)
	back, err := LoadProfile(writeProfile(t, p.Rounded()))
	require.NoError(t, err)
	bsc := back.Scope("load", "")
	require.Equal(t, 5.401, bsc.SteadyP50.Max, "an upper bound rounds up")
	require.Equal(t, 5.0, bsc.SteadyP50.Min, "a lower bound rounds down")
	require.Equal(t, 20.01, bsc.SteadyP99.Max)
	// the prior's band of levels, in ms, holds the unrounded one
	pr, bpr := sc.Prior(), bsc.Prior()
	require.LessOrEqual(t, bpr.LevelMs*(1+bpr.Low), pr.LevelMs*(1+pr.Low))
	require.GreaterOrEqual(t, bpr.LevelMs*(1+bpr.High), pr.LevelMs*(1+pr.High))
	for _, r := range in {
		for _, c := range back.CheckSettled("load", r.Summary.Scenarios["load"].Settled) {
			require.True(t, c.Within(), "run %s: %s", r.Summary.RunID, c.Text())
		}
	}
}

func TestRound4Out(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ v, up, down float64 }{
		{5.40049, 5.401, 5.4}, {5.4, 5.4, 5.4}, {21.5049, 21.51, 21.5}, {-0.12345, -0.1234, -0.1235},
		{0, 0, 0}, {123456, 123500, 123400}, {0.0009999, 0.0009999, 0.0009999},
		{9.9995, 10, 9.999}, {9.99941, 10, 9.999}, {-9.9996, -9.999, -10}, {12345.6, 12350, 12340}, {99996, 100000, 99990},
	} {
		require.Equal(t, c.up, round4Out(c.v, true), "up %v", c.v)
		require.Equal(t, c.down, round4Out(c.v, false), "down %v", c.v)
		require.GreaterOrEqual(t, round4Out(c.v, true), c.v)
		require.LessOrEqual(t, round4Out(c.v, false), c.v)
	}
}

// TestProfileChecksFlat: a profile of services that settle at once (every
// run's TTSS 0) judges TTSS at its block's resolution: a run settled at 0
// or within the first block is like them (the profile's p90 and largest
// were 0: the check said x1.00 beyond their largest x0.00, live harness),
// one settled after 3 s is not.
func TestProfileChecksFlat(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	var in []ProfileInput
	for i := range 5 {
		r := profileRun(rng, string(rune('a'+i)), t0.Add(time.Duration(i)*time.Minute), 60, 0, 0.05)
		r.Summary.Scenarios["load"].Settled.Stats = &SettledStats{Count: 5000, P50Ms: 5, P99Ms: 20}
		in = append(in, r)
	}
	p, err := BuildProfile(in, ProfileOptions{})
	require.NoError(t, err)
	at := func(ms float64) ProfileCheck {
		for _, c := range p.CheckSettled("load", &Settled{Steady: true, TTSSMs: &ms, Stats: &SettledStats{Count: 5000, P50Ms: 5, P99Ms: 20}}) {
			if c.Figure == CheckTTSS {
				return c
			}
		}
		t.Fatal("no TTSS check")
		return ProfileCheck{}
	}
	for _, ms := range []float64{0, 1000} {
		require.True(t, at(ms).Within(), at(ms).Text())
	}
	require.False(t, at(3000).Within())
	require.Equal(t, "load: TTSS 3.00 s, the profile's p90 1.00 s: x3.00, beyond the profile's runs (their largest x1.00)", at(3000).Text())
}

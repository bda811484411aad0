package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/xk6-regime/xk6-regime/detector"
)

// Using a profile: a run reads profile.json (regime.configure's profile
// setting, or K6_REGIME_PROFILE) and its detectors take the profile's
// warm-up end and steady level as a prior (Prior); at the end the run's
// settled figures are set against the profile's runs (Checks), and
// `k6 x regime compare --profile` does the same for a finished run.

// LoadProfile reads and checks a profile.json: a damaged file, one that is
// no profile, or one written by a newer version is an error that says so.
func LoadProfile(path string) (*Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	var head struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("profile: %s is damaged or not JSON: %w (write it again with k6 x regime profile)", path, err)
	}
	switch {
	case head.Schema == nil:
		return nil, fmt.Errorf("profile: %s has no schema field: not a profile.json of k6 x regime profile", path)
	case *head.Schema > ProfileSchema:
		return nil, fmt.Errorf("profile: %s has schema %d, written by a newer version; this k6 reads schema %d or older",
			path, *head.Schema, ProfileSchema)
	case *head.Schema < 1:
		return nil, fmt.Errorf("profile: %s has schema %d; valid schemas: 1..%d", path, *head.Schema, ProfileSchema)
	}
	var p Profile
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("profile: %s is damaged: %w (write it again with k6 x regime profile)", path, err)
	}
	if len(p.Scopes) == 0 {
		return nil, fmt.Errorf("profile: %s holds no scenario", path)
	}
	for _, sc := range p.Scopes {
		if sc.Scenario == "" {
			return nil, fmt.Errorf("profile: %s is damaged: a scope without a scenario", path)
		}
		for _, v := range []float64{sc.LevelMs, sc.LevelSpread.Lo, sc.LevelSpread.Hi, sc.Envelope.Median.Lo, sc.Envelope.Median.Hi} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < -1 || v > 1e6 {
				return nil, fmt.Errorf("profile: %s is damaged: scenario %s has a level or level band of %v", path, sc.Scenario, v)
			}
		}
		// times in ms: within a day (a prior of more is no run's warm-up)
		ends := []float64{sc.WarmupEnd.Median, sc.WelchEndMs}
		if sc.AgreedEndMs != nil {
			ends = append(ends, *sc.AgreedEndMs)
		}
		for _, v := range ends {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 86400e3 {
				return nil, fmt.Errorf("profile: %s is damaged: scenario %s has a warm-up end of %v ms", path, sc.Scenario, v)
			}
		}
	}
	return &p, nil
}

// Scenarios returns the profile's scenario names, sorted.
func (p *Profile) Scenarios() []string {
	set := map[string]bool{}
	for _, sc := range p.Scopes {
		set[sc.Scenario] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// MatchScenarios refuses a profile learnt from other scenarios than the
// script declares, naming both.
func (p *Profile) MatchScenarios(declared []string) error {
	got := p.Scenarios()
	want := slices.Sorted(slices.Values(declared))
	if !slices.Equal(got, want) {
		return fmt.Errorf("profile: it was learnt from scenarios %s, the script declares %s: a profile judges runs of the script it was learnt from",
			strings.Join(got, ", "), strings.Join(want, ", "))
	}
	return nil
}

// Scope returns the profile of a scenario (endpoint "") or of one of its
// endpoints, nil when it has none.
func (p *Profile) Scope(scenario, endpoint string) *ProfileScope {
	for _, sc := range p.Scopes {
		if sc.Scenario == scenario && sc.Endpoint == endpoint {
			return sc
		}
	}
	return nil
}

// minPriorBand: the prior's band of levels is at least +-10%.
const minPriorBand = 0.10

// Prior is what a profile scope tells a detector: no steady state before
// WarmupMs (where the profile's runs agree their warm-up ends,
// AgreedEndMs; without it (a profile of an older version, a scope too
// short or too sparse for it), the later of their median settled boundary
// and where their averaged curve settles, WelchEndMs), and a level within
// [LevelMs*(1+Low), LevelMs*(1+High)] is the steady state the runs settled
// at (on each side the largest of their levels' spread, how far their steady
// block medians wander and 10%). Ok is false when the profile's runs had no settled steady
// state there.
type Prior struct {
	WarmupMs, LevelMs, Low, High float64
	Ok                           bool
}

// Apply returns c with the prior set (no steady state before WarmupMs; a
// level in the band needs prior_windows): what a run's detector takes from
// its profile, and what the live harness's replay of such a run sets.
func (p Prior) Apply(c detector.Config) detector.Config {
	c.PriorWarmup = detector.Duration(time.Duration(p.WarmupMs * float64(time.Millisecond)))
	c.PriorLevel, c.PriorLevelLow, c.PriorLevelHigh = p.LevelMs, p.Low, p.High
	return c
}

// Prior returns the prior of a scope.
func (sc *ProfileScope) Prior() Prior {
	if sc == nil || sc.WarmupEnd.N == 0 || sc.LevelMs <= 0 {
		return Prior{}
	}
	warmup := max(sc.WarmupEnd.Median, sc.WelchEndMs)
	if sc.AgreedEndMs != nil {
		// what the runs agree on, not one run's settled boundary, which
		// falls on a wave of that run's own (flat services: 0-33 s):
		// replayed with profiles of the 4 other runs on 132 recorded runs
		// (b45 + b47, b48, b50, b52, b53), the agreed end alone met the
		// profile checks in 99 (the later of it and the median settled
		// boundary: 68), runs over 2% contaminated 14 (12)
		warmup = *sc.AgreedEndMs
	}
	return Prior{
		WarmupMs: warmup,
		LevelMs:  sc.LevelMs,
		Low:      max(min(sc.LevelSpread.Lo, sc.Envelope.Median.Lo, -minPriorBand), -0.9),
		High:     max(sc.LevelSpread.Hi, sc.Envelope.Median.Hi, minPriorBand),
		Ok:       true,
	}
}

// Profile check figures.
const (
	CheckTTSS = "ttss" // the settled TTSS against the profile runs' p90
	CheckP50  = "p50"  // the settled steady p50 against the profile runs' median
	CheckP99  = "p99"  // the settled steady p99 against the profile runs' median
)

// ProfileCheck is one figure of a run set against the profile's runs.
type ProfileCheck struct {
	Scenario string `json:"scenario"`
	Endpoint string `json:"endpoint,omitempty"`
	Figure   string `json:"figure"`
	// ProfileMs is what the profile's runs gave: the p90 of their TTSS, the
	// median of their steady p50 or p99; RunMs the run's (nil: the run has
	// no settled steady state, or no such figure).
	ProfileMs float64  `json:"profile_ms"`
	RunMs     *float64 `json:"run_ms"`
	// Ratio is RunMs / ProfileMs (nil without RunMs); Spread the largest
	// ratio one of the profile's own runs reached (its max / ProfileMs):
	// a run within it is like the profile's runs.
	Ratio  *float64 `json:"ratio"`
	Spread float64  `json:"spread"`
}

// Within reports whether the run's figure lies within the profile runs' own
// spread (false without a figure: never a pass on missing data).
func (c ProfileCheck) Within() bool { return c.Ratio != nil && *c.Ratio <= c.Spread }

// Text is the check in words: the figure, the profile's value, the run's.
func (c ProfileCheck) Text() string {
	name := map[string]string{CheckTTSS: "TTSS", CheckP50: "steady p50", CheckP99: "steady p99"}[c.Figure]
	ref := map[string]string{CheckTTSS: "the profile's p90", CheckP50: "the profile's median", CheckP99: "the profile's median"}[c.Figure]
	scope := c.Scenario
	if c.Endpoint != "" {
		scope += "[" + c.Endpoint + "]"
	}
	if c.RunMs == nil {
		return fmt.Sprintf("%s: %s: none in this run (no settled steady state); %s %s", scope, name, ref, fmtProfileMs(c.ProfileMs))
	}
	verdict := "within the profile's runs"
	if !c.Within() {
		verdict = fmt.Sprintf("beyond the profile's runs (their largest x%.2f)", c.Spread)
	}
	return fmt.Sprintf("%s: %s %s, %s %s: x%.2f, %s", scope, name, fmtProfileMs(*c.RunMs), ref, fmtProfileMs(c.ProfileMs), *c.Ratio, verdict)
}

func fmtProfileMs(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.3g ms", v)
}

// CheckSettled sets a scenario's settled view (and its endpoints') against
// the profile: TTSS, steady p50 and p99. A scope the profile has no figure
// for is left out; a figure the run lacks is a check with RunMs nil.
func (p *Profile) CheckSettled(scenario string, v *Settled) []ProfileCheck {
	var out []ProfileCheck
	out = p.checkScope(out, p.Scope(scenario, ""), scenario, "", v)
	for _, sc := range p.Scopes {
		if sc.Scenario != scenario || sc.Endpoint == "" {
			continue
		}
		var ev *Settled
		if v != nil {
			ev = v.Endpoints[sc.Endpoint]
		}
		out = p.checkScope(out, sc, scenario, sc.Endpoint, ev)
	}
	return out
}

// checkScope appends the checks of one scope (nil: none) against the
// settled view v of the same scope: the TTSS (the scenario's only) and
// the steady p50 and p99.
func (p *Profile) checkScope(out []ProfileCheck, sc *ProfileScope, scenario, endpoint string, v *Settled) []ProfileCheck {
	if sc == nil {
		return out
	}
	steady := v != nil && v.Steady
	// floor: figures below it count as it (a TTSS of 0 and one of a block
	// are the same settled boundary at the profile's resolution)
	one := func(figure string, d *ProfileDist, ref, floor float64, run func() (float64, bool)) {
		if d == nil || d.N == 0 {
			return
		}
		ref = max(ref, floor)
		if ref <= 0 {
			return
		}
		c := ProfileCheck{Scenario: scenario, Endpoint: endpoint, Figure: figure, ProfileMs: ref, Spread: max(d.Max, floor) / ref}
		if x, ok := run(); ok && steady {
			x = max(x, floor)
			r := x / ref
			c.RunMs, c.Ratio = &x, &r
		}
		out = append(out, c)
	}
	if endpoint == "" && sc.TTSS != nil {
		// the profile's TTSS p90: a run as slow to settle as one in ten of
		// the profile's is still like them; floored at one block: a flat
		// service's TTSS is 0 in one run and a block in the next
		one(CheckTTSS, sc.TTSS, sc.TTSS.P90, max(p.BlockMs, 1), func() (float64, bool) {
			if v == nil || v.TTSSMs == nil {
				return 0, false
			}
			return *v.TTSSMs, true
		})
	}
	stats := func(f func(*SettledStats) float64) func() (float64, bool) {
		return func() (float64, bool) {
			if v == nil || v.Stats == nil || v.Stats.Count == 0 {
				return 0, false
			}
			return f(v.Stats), true
		}
	}
	if sc.SteadyP50 != nil {
		one(CheckP50, sc.SteadyP50, sc.SteadyP50.Median, 0, stats(func(s *SettledStats) float64 { return s.P50Ms }))
	}
	if sc.SteadyP99 != nil {
		p99 := stats(func(s *SettledStats) float64 { return s.P99Ms })
		one(CheckP99, sc.SteadyP99, sc.SteadyP99.Median, 0, func() (float64, bool) {
			if v != nil && v.Approximate {
				return 0, false // an understated tail (a merged folder's): no figure, never a pass
			}
			return p99()
		})
	}
	return out
}

// ProfileUse names the profile that judged a run, and its checks
// (summary.json's profile).
type ProfileUse struct {
	Path    string         `json:"path"`
	Created time.Time      `json:"created"`
	Runs    []string       `json:"runs"`
	Checks  []ProfileCheck `json:"checks"`
}

// Use returns the record of a profile used by a run.
func (p *Profile) Use(path string) *ProfileUse {
	u := &ProfileUse{Path: path, Created: p.Created, Checks: []ProfileCheck{}}
	for _, r := range p.Runs {
		u.Runs = append(u.Runs, r.RunID)
	}
	return u
}

// CheckRun sets every scenario of a finished run against the profile
// (`compare --profile`). The run must be of the profile's scenarios.
func (p *Profile) CheckRun(s *Summary) ([]ProfileCheck, error) {
	names := slices.Sorted(maps.Keys(s.Scenarios))
	if err := p.MatchScenarios(names); err != nil {
		return nil, err
	}
	var out []ProfileCheck
	for _, n := range names {
		out = append(out, p.CheckSettled(n, s.Scenarios[n].Settled)...)
	}
	if len(out) == 0 {
		return nil, errors.New("profile: it holds no figure to compare with (its runs had no settled steady state)")
	}
	return out, nil
}

// ProfileFailures judges a run's profile checks: a figure with a budget
// (ttss, p50, p99; relative to the profile's figure, or absolute in ms)
// against it, any other against the profile runs' own spread. A figure the
// run lacks always fails. Budgets on other metrics are an error.
func ProfileFailures(checks []ProfileCheck, budgets []Budget) ([]string, error) {
	byFigure := map[string]Budget{}
	for _, b := range budgets {
		switch b.Metric {
		case CheckTTSS, CheckP50, CheckP99:
			byFigure[b.Metric] = b
		default:
			return nil, fmt.Errorf("--fail-on: %s: a profile judges ttss, p50 and p99 only", b.Metric)
		}
	}
	var out []string
	judged := map[string]int{}
	for _, c := range checks {
		judged[c.Figure]++
		switch b, ok := byFigure[c.Figure]; {
		case c.RunMs == nil:
			out = append(out, c.Text())
		case !ok && !c.Within():
			out = append(out, c.Text())
		case ok && b.Relative && *c.Ratio > 1+b.Value/100:
			out = append(out, fmt.Sprintf("%s; over the budget %s", c.Text(), b))
		case ok && !b.Relative && *c.RunMs > c.ProfileMs+b.Value:
			out = append(out, fmt.Sprintf("%s; over the budget %s ms", c.Text(), b))
		}
	}
	// a budget no check judged (the profile has no such figure) fails: it
	// must not pass on no data
	for _, f := range []string{CheckTTSS, CheckP50, CheckP99} {
		if b, ok := byFigure[f]; ok && judged[f] == 0 {
			out = append(out, fmt.Sprintf("the budget %s judged no figure: the profile has no %s to set the run against", b, f))
		}
	}
	return out, nil
}

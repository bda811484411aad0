package results

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A profile is what repeated runs of one script and load agree on: the
// warm-up repeats at the start of every run while the machine's waves come
// at random times, so the curve of time-based block summaries averaged
// over the runs shows the warm-up, and what remains after it, across runs,
// is the noise a steady state has to tolerate (Welch's graphical
// procedure, Welch 1983, on the detector's windows of at least a second).

// ProfileSchema is the version of profile.json's layout.
const ProfileSchema = 1

// Bounds of a profile: at least minProfileRuns runs; at most
// maxProfileBlocks blocks per scope (a longer run is seen in wider
// blocks), so that profile.json stays small whatever the run length.
const (
	minProfileRuns   = 3
	maxProfileBlocks = 300
	profileBlockMs   = 1000
)

// Profile is profile.json.
type Profile struct {
	Schema  int          `json:"schema"`
	Created time.Time    `json:"created"`
	Runs    []ProfileRun `json:"runs"`
	// BlockMs is the width of a block: 1 s, doubled as long as a run
	// would have more than 300.
	BlockMs float64 `json:"block_ms"`
	// RatesPerS is each scenario's iteration rate (per second), the median
	// over the runs (a run's: its iterations over the span of its windows):
	// the load the profile was learnt at. A run judged by the profile at
	// another rate fails compare --profile and is warned of (k6 run);
	// absent from profiles of older versions.
	RatesPerS map[string]float64 `json:"rates_per_s,omitempty"`
	Scopes    []*ProfileScope    `json:"scopes"`
}

// ProfileRun names a run the profile was learnt from.
type ProfileRun struct {
	RunID   string    `json:"run_id"`
	Dir     string    `json:"dir"`
	Started time.Time `json:"started"`
	Label   string    `json:"label,omitempty"`
}

// ProfileScope is the profile of a scenario (Endpoint "") or of one of its
// endpoints (scope 'endpoint').
type ProfileScope struct {
	Scenario string `json:"scenario"`
	Endpoint string `json:"endpoint,omitempty"`
	// TailQuantile is the detector windows' tail quantile (99.9: p99.9).
	TailQuantile float64 `json:"tail_quantile"`
	// Median and Tail are, per block from the scenario's first window, the
	// median over the runs of their block median (tail), with the least
	// and the greatest; Runs the number of runs with a window there.
	Median []ProfileBand `json:"median"`
	Tail   []ProfileBand `json:"tail"`
	// RunMedians are each run's block medians (ms; 0: no window there), in
	// the order of Profile.Runs, for the picture.
	RunMedians [][]float64 `json:"run_medians"`
	// WarmupEnd is the spread of the runs' settled boundaries (ms from the
	// scenario's start); NoSteady counts runs without a settled steady state.
	WarmupEnd ProfileDist `json:"warmup_end_ms"`
	NoSteady  int         `json:"no_steady"`
	// WelchEndMs is where the curve the runs share stops changing (ms from
	// the scenario's start): the first block after which the median over
	// the runs of their block medians, each relative to its run's level,
	// stays within the range it spans over its second half widened by half
	// its width either side (Welch's
	// procedure: the average keeps what every run shares). One run's settled
	// boundary can fall on the first plateau of a warm-up in stages; the
	// averaged curve still shows the later stages that every run went
	// through.
	WelchEndMs float64 `json:"welch_end_ms"`
	// AgreedEndMs is the end of what (nearly) every run shows at its start
	// (ms from the scenario's start): a block is warm-up when 80% of the
	// runs with a value there (all of them with 3 or 4 runs) lie beyond the
	// settled envelope on the same side, in median or in tail, or every
	// one lies beyond +-10% (tail +-25%) on the same side; the end is the
	// block after the stretch of such blocks that starts within the first
	// 3 blocks with a value in 3 runs (gaps of up to 2 blocks: warm-ups
	// come in stages; blocks where fewer than 3 runs have a value do not
	// count). The envelope is
	// the 2.5th-97.5th percentile of the runs' 3-block running medians
	// relative to their levels, at least +-10% (tail +-25%), first over the
	// runs' second halves, then over the blocks after the end found with
	// it. An average is not enough: a settled server that switches between
	// two levels 40% apart at random times moves the median curve of 5
	// runs by 15% for tens of seconds without any run warming up there.
	// Absent from profiles of older versions, from a scope with fewer
	// than 4 blocks, and where no block has a value in 3 runs (the prior
	// then takes WelchEndMs). (A k6 of an older version reading a profile with it
	// ignores it and takes its own prior.)
	AgreedEndMs *float64 `json:"agreed_end_ms,omitempty"`
	// Level is the median over the runs of their steady level (the median
	// of their block medians after their boundary); LevelSpread how far the
	// runs' levels are from it (relative: -0.05 is 5% lower).
	LevelMs     float64  `json:"level_ms"`
	LevelSpread Interval `json:"level_spread"`
	// Envelope is how far a steady block's median and tail wander from their
	// run's steady level and tail level, across runs: the 5th and 95th
	// percentiles of block / level - 1 (relative), and the extremes.
	Envelope ProfileEnvelope `json:"envelope"`
	// SteadyP50 and SteadyP99 are the distributions of the runs' settled
	// steady-state p50 and p99 (ms; iterations for a scenario, requests for
	// an endpoint): what a run judged against the profile is compared with.
	SteadyP50 *ProfileDist `json:"steady_p50_ms,omitempty"`
	SteadyP99 *ProfileDist `json:"steady_p99_ms,omitempty"`
	// TTSS, OnlineTTSS, ColdStart and ColdExcess are the runs'
	// distributions (scenario scopes; ms).
	TTSS       *ProfileDist `json:"ttss_ms,omitempty"`
	OnlineTTSS *ProfileDist `json:"online_ttss_ms,omitempty"`
	ColdStart  *ProfileDist `json:"cold_start_ms,omitempty"`
	ColdExcess *ProfileDist `json:"cold_excess_ms,omitempty"`
}

// ProfileBand is one block of an averaged curve.
type ProfileBand struct {
	Mid  float64 `json:"mid"`
	Lo   float64 `json:"lo"`
	Hi   float64 `json:"hi"`
	Runs int     `json:"runs"`
}

// ProfileDist summarises a figure over the runs that have it.
type ProfileDist struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	Max    float64 `json:"max"`
}

// Interval is a relative band.
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// ProfileEnvelope is the steady noise of block medians and tails.
type ProfileEnvelope struct {
	Median    Interval `json:"median"`
	MedianMax Interval `json:"median_extremes"`
	Tail      Interval `json:"tail"`
	TailMax   Interval `json:"tail_extremes"`
	Blocks    int      `json:"blocks"`
}

// ProfileInput is one run: its summary, its detector windows, its folder.
type ProfileInput struct {
	Summary *Summary
	Windows []WindowRow
	Dir     string
}

// ReadWindows reads a results folder's windows.csv (nil when it has none).
func ReadWindows(dir string) ([]WindowRow, error) {
	return readWindows(filepath.Join(dir, WindowsFile))
}

// ProfileRateTolerance is how far (relative) a scenario's iteration rate
// may lie from the profile runs' before a run counts as another load: the
// default of profile's --rate-tolerance, and what compare --profile and a
// k6 run judged by a profile use.
const ProfileRateTolerance = 0.2

// ProfileOptions set how runs are accepted.
type ProfileOptions struct {
	// LabelKey as in HistoryOptions.
	LabelKey string
	// RateTolerance: a scenario whose iteration rate differs from the
	// runs' median by more than this (relative) is refused as another
	// load; 0 turns the check off.
	RateTolerance float64
	// DurationTolerance: runs the longest of which lasted more than this
	// (relative) beyond the shortest are refused; 0 turns the check off
	// (closed-model runs of a fixed iteration count on a service whose
	// speed varies). The profile command's default is
	// ProfileDurationTolerance.
	DurationTolerance float64
}

// ProfileDurationTolerance is how much longer than the shortest run the
// longest may last by default (k6's graceful stops and a slow teardown
// move a run's end by seconds, not by a fifth).
const ProfileDurationTolerance = 0.2

// BuildProfile learns the profile of runs of one script and load.
func BuildProfile(in []ProfileInput, o ProfileOptions) (*Profile, error) {
	if len(in) < minProfileRuns {
		return nil, fmt.Errorf("profile: %d run(s); a profile needs at least %d: what repeats across runs is the warm-up, and one or two runs cannot tell it from the machine's waves",
			len(in), minProfileRuns)
	}
	sums := make([]*Summary, len(in))
	dirs := make([]string, len(in))
	for i, r := range in {
		sums[i], dirs[i] = r.Summary, r.Dir
	}
	if err := checkProfileInputs(in, sums, dirs, o.DurationTolerance); err != nil {
		return nil, err
	}
	order := make([]int, len(in))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return sums[a].Started.Compare(sums[b].Started) })
	p := &Profile{Schema: ProfileSchema, Created: time.Now().UTC(), BlockMs: profileBlockMs}
	for _, i := range order {
		p.Runs = append(p.Runs, ProfileRun{RunID: sums[i].RunID, Dir: dirs[i], Started: sums[i].Started, Label: runLabel(sums[i], o.LabelKey)})
	}
	wins, origin := profileWindows(in, order)
	rates, err := profileRates(in, dirs, order, o.RateTolerance)
	if err != nil {
		return nil, err
	}
	if len(rates) > 0 {
		p.RatesPerS = rates
	}
	// the block width: 1 s, doubled while the longest scope needs more blocks
	longest := 0.0
	for key, byRun := range wins {
		for k, ws := range byRun {
			for _, w := range ws {
				longest = max(longest, w.LastMs-origin[k][key])
			}
		}
	}
	for longest/p.BlockMs >= maxProfileBlocks {
		p.BlockMs *= 2
	}
	keys := slices.SortedFunc(maps.Keys(wins), func(a, b scopeKey) int {
		if c := strings.Compare(a.scenario, b.scenario); c != 0 {
			return c
		}
		return strings.Compare(a.endpoint, b.endpoint)
	})
	for _, key := range keys {
		sc := profileScope(p, key.scenario, key.endpoint, wins[key], origin, sums, order)
		p.Scopes = append(p.Scopes, sc)
	}
	if len(p.Scopes) == 0 {
		return nil, errors.New("profile: no detector windows in any run")
	}
	return p, nil
}

// checkProfileInputs refuses runs a profile cannot be learnt from: other
// scenarios, a run that did not complete, no windows, or thinned ones.
func checkProfileInputs(in []ProfileInput, sums []*Summary, dirs []string, tol float64) error {
	if err := sameScenarios(sums, dirs, "profile"); err != nil {
		return err
	}
	for i, r := range in {
		if !r.Summary.Completed() {
			return fmt.Errorf("profile: %s: the run did not complete (%s): a profile is learnt from whole runs", dirs[i], r.Summary.EndText())
		}
		if len(r.Windows) == 0 {
			return fmt.Errorf("profile: %s has no %s (detector windows): the profile's curves are made of them", dirs[i], WindowsFile)
		}
		if r.Summary.Series.WindowsStride > 1 {
			return fmt.Errorf("profile: %s: %s was thinned (stride %d): the run is too long for a profile of 1-s blocks",
				dirs[i], WindowsFile, r.Summary.Series.WindowsStride)
		}
	}
	// runs of one load last as long: a run much shorter than the others
	// has no second half where theirs is, so its level, and its part in
	// the curve the runs share, are not theirs
	// (a run without a duration, of an older version, is left out of it)
	if tol <= 0 {
		return nil
	}
	lo, hi := -1, -1
	for i, r := range in {
		if r.Summary.DurationS <= 0 {
			continue
		}
		if lo < 0 || r.Summary.DurationS < in[lo].Summary.DurationS {
			lo = i
		}
		if hi < 0 || r.Summary.DurationS > in[hi].Summary.DurationS {
			hi = i
		}
	}
	if lo < 0 {
		return nil
	}
	if a, b := in[lo].Summary.DurationS, in[hi].Summary.DurationS; b > (1+tol)*a {
		return fmt.Errorf("profile: %s lasted %.0f s and %s %.0f s: runs of one script and load last as long (within %.0f%%, --duration-tolerance); "+
			"learn a profile from runs of the same duration, or, for closed-model runs of a fixed iteration count whose "+
			"duration follows the service's speed, raise --duration-tolerance (0: no check)", dirs[lo], a, dirs[hi], b, 100*tol)
	}
	return nil
}

// scopeKey is a profile's scope: a scenario, or one of its endpoints.
type scopeKey struct{ scenario, endpoint string }

// profileWindows sorts the runs' windows by scope, each scope's per run in
// run order (the k-th slice is the run order[k]'s), and returns with them
// each run's origin per scope: the start of its first window. An
// endpoint's is its own, not its scenario's: online, an endpoint's detector
// starts at the endpoint's first observation and counts its prior warm-up
// end from there (an endpoint first called 20 s into the run would
// otherwise get a prior 20 s too late, and a warm-up curve shifted by 20 s).
func profileWindows(in []ProfileInput, order []int) (map[scopeKey][][]WindowRow, []map[scopeKey]float64) {
	wins := map[scopeKey][][]WindowRow{}
	origin := make([]map[scopeKey]float64, len(order))
	for k, i := range order {
		origin[k] = map[scopeKey]float64{}
		for _, w := range in[i].Windows {
			key := scopeKey{w.Scenario, w.Endpoint}
			if _, ok := in[i].Summary.Scenarios[w.Scenario]; !ok {
				continue
			}
			if wins[key] == nil {
				wins[key] = make([][]WindowRow, len(order))
			}
			wins[key][k] = append(wins[key][k], w)
			if o, ok := origin[k][key]; !ok || w.FirstMs < o {
				origin[k][key] = w.FirstMs
			}
		}
	}
	return wins, origin
}

// ScenarioRates returns each scenario's iteration rate (per second) in one
// run: its iterations over the span of its windows (first start to last
// end, any endpoint); a scenario without windows has none.
func ScenarioRates(s *Summary, windows []WindowRow) map[string]float64 {
	first, last := map[string]float64{}, map[string]float64{}
	for _, w := range windows {
		if _, ok := s.Scenarios[w.Scenario]; !ok {
			continue
		}
		if f, ok := first[w.Scenario]; !ok || w.FirstMs < f {
			first[w.Scenario] = w.FirstMs
		}
		last[w.Scenario] = max(last[w.Scenario], w.LastMs)
	}
	out := map[string]float64{}
	for name, f := range first {
		if span := last[name] - f; span > 0 {
			out[name] = float64(s.Scenarios[name].Iterations) / span * 1000
		}
	}
	return out
}

// profileRates returns the runs' median iteration rate per scenario, and
// refuses (tolerance > 0) a run whose scenario ran at another rate than
// that median (by more than tolerance, relative): another load.
func profileRates(in []ProfileInput, dirs []string, order []int, tolerance float64) (map[string]float64, error) {
	rates := make([]map[string]float64, len(order))
	for k, i := range order {
		rates[k] = ScenarioRates(in[i].Summary, in[i].Windows)
	}
	out := map[string]float64{}
	for _, name := range slices.Sorted(maps.Keys(in[order[0]].Summary.Scenarios)) {
		var rs []float64
		for k := range order {
			if r, ok := rates[k][name]; ok {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		med := median64(slices.Clone(rs))
		out[name] = med
		if tolerance <= 0 || med <= 0 {
			continue
		}
		for k, i := range order {
			if r, ok := rates[k][name]; ok && r > 0 && math.Abs(r/med-1) > tolerance {
				return nil, fmt.Errorf("profile: %s: scenario %s ran %.1f iterations/s where the runs' median is %.1f (more than %.0f%% apart): another load; a profile is learnt from runs of one script and load (--rate-tolerance)",
					dirs[i], name, r, med, tolerance*100)
			}
		}
	}
	return out, nil
}

// CheckLoad returns an error for a run of a scenario whose iteration rate
// differs from the profile runs' by more than tolerance (relative): the
// profile judges runs of the load it was learnt from. A profile without rates (an older
// version's), a scenario it has no rate of, or rate 0 (unknown) pass.
func (p *Profile) CheckLoad(scenario string, rate, tolerance float64) error {
	want, ok := p.RatesPerS[scenario]
	if !ok || want <= 0 || rate <= 0 || tolerance <= 0 {
		return nil
	}
	if math.Abs(rate/want-1) > tolerance {
		return fmt.Errorf("profile: scenario %s ran %.1f iterations/s, the profile's runs %.1f (more than %.0f%% apart): another load "+
			"(or, with a fixed number of VUs, a service of another speed); a profile judges runs of the script and load it was learnt from",
			scenario, rate, want, tolerance*100)
	}
	return nil
}

// sameScenarios refuses runs of different scripts, naming their scenarios.
func sameScenarios(sums []*Summary, dirs []string, what string) error {
	want := slices.Sorted(maps.Keys(sums[0].Scenarios))
	for i, s := range sums[1:] {
		if got := slices.Sorted(maps.Keys(s.Scenarios)); !slices.Equal(got, want) {
			return fmt.Errorf("%s: %s has scenarios %s, %s has %s: the runs of a %s must come from one script",
				what, dirs[0], strings.Join(want, ", "), dirs[i+1], strings.Join(got, ", "), what)
		}
	}
	return nil
}

func median64(v []float64) float64 {
	v = slices.DeleteFunc(v, func(x float64) bool { return x <= 0 || math.IsNaN(x) })
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// quantile64 of sorted v (linear interpolation).
func quantile64(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	h := q * float64(len(v)-1)
	i := int(h)
	if i+1 >= len(v) {
		return v[len(v)-1]
	}
	return v[i] + (h-float64(i))*(v[i+1]-v[i])
}

func distOf(v []float64) ProfileDist {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) == 0 {
		return ProfileDist{}
	}
	return ProfileDist{N: len(v), Min: v[0], Median: quantile64(v, 0.5), P90: quantile64(v, 0.9), Max: v[len(v)-1]}
}

// profileScope builds one scope's profile from its windows in each run.
func profileScope(p *Profile, scenario, endpoint string, byRun [][]WindowRow, origin []map[scopeKey]float64, sums []*Summary, order []int) *ProfileScope {
	sc := &ProfileScope{Scenario: scenario, Endpoint: endpoint}
	med, tail := sc.blocks(p.BlockMs, byRun, origin)
	sc.Median, sc.Tail = profileBand(med), profileBand(tail)
	sc.RunMedians = med
	devM, devT := sc.steadyLevels(p.BlockMs, med, tail, origin, sums, order)
	slices.Sort(devM)
	slices.Sort(devT)
	if len(devM) > 0 {
		sc.Envelope.Median = Interval{quantile64(devM, 0.05), quantile64(devM, 0.95)}
		sc.Envelope.MedianMax = Interval{devM[0], devM[len(devM)-1]}
	}
	if len(devT) > 0 {
		sc.Envelope.Tail = Interval{quantile64(devT, 0.05), quantile64(devT, 0.95)}
		sc.Envelope.TailMax = Interval{devT[0], devT[len(devT)-1]}
	}
	sc.Envelope.Blocks = len(devM)
	sc.WelchEndMs = welchEnd(med, sc.Envelope.Median) * p.BlockMs
	if end, ok := agreedEnd(med, tail); ok {
		sc.AgreedEndMs = ptrFloat(end * p.BlockMs)
	}
	if endpoint == "" {
		sc.runCosts(sums, order)
	}
	return sc
}

// blocks returns each run's block medians and tails (k-th: the run
// order[k]'s; 0 where a run has no window): each window is assigned to the
// block of its middle, and windows sharing a block give their
// count-weighted mean. It sets the scope's tail quantile.
func (sc *ProfileScope) blocks(blockMs float64, byRun [][]WindowRow, origin []map[scopeKey]float64) (med, tail [][]float64) {
	nb := 0
	for k, ws := range byRun {
		for _, w := range ws {
			sc.TailQuantile = w.TailQuantile
			b := int(((w.FirstMs+w.LastMs)/2 - origin[k][scopeKey{sc.Scenario, sc.Endpoint}]) / blockMs)
			nb = max(nb, b+1)
		}
	}
	med = make([][]float64, len(byRun))
	tail = make([][]float64, len(byRun))
	for k, ws := range byRun {
		med[k], tail[k] = make([]float64, nb), make([]float64, nb)
		cnt := make([]int, nb)
		for _, w := range ws {
			b := int(((w.FirstMs+w.LastMs)/2 - origin[k][scopeKey{sc.Scenario, sc.Endpoint}]) / blockMs)
			if b < 0 || b >= nb || w.N == 0 {
				continue
			}
			med[k][b] += w.Median * float64(w.N)
			tail[k][b] += w.Tail * float64(w.N)
			cnt[b] += w.N
		}
		for b := range nb {
			if cnt[b] > 0 {
				med[k][b] /= float64(cnt[b])
				tail[k][b] /= float64(cnt[b])
			}
		}
	}
	return med, tail
}

// profileBand is, per block, the median, least and greatest of the runs'
// curves where they have a value.
func profileBand(curves [][]float64) []ProfileBand {
	nb := 0
	if len(curves) > 0 {
		nb = len(curves[0])
	}
	out := make([]ProfileBand, nb)
	for b := range nb {
		var v []float64
		for _, c := range curves {
			if c[b] > 0 {
				v = append(v, c[b])
			}
		}
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		out[b] = ProfileBand{Mid: quantile64(v, 0.5), Lo: v[0], Hi: v[len(v)-1], Runs: len(v)}
	}
	return out
}

// steadyLevels sets, from each run's settled view, the warm-up end, the
// steady p50/p99 and level distributions (runs without a settled steady
// state are counted in NoSteady), and returns the relative deviations of
// the steady blocks' medians and tails from their run's level (the
// envelope's material).
func (sc *ProfileScope) steadyLevels(blockMs float64, med, tail [][]float64, origin []map[scopeKey]float64,
	sums []*Summary, order []int) (devM, devT []float64) {
	var ends, levels, p50s, p99s []float64
	for k, i := range order {
		st := sums[i].Scenarios[sc.Scenario].Settled
		if sc.Endpoint != "" && st != nil {
			st = st.Endpoints[sc.Endpoint]
		}
		if st == nil || !st.Steady || st.AtMs == 0 {
			sc.NoSteady++
			continue
		}
		if st.Stats != nil && st.Stats.Count > 0 {
			p50s = append(p50s, st.Stats.P50Ms)
			if !st.Approximate {
				// a merged folder whose series points held several
				// iterations understates its tail: no p99 to learn
				p99s = append(p99s, st.Stats.P99Ms)
			}
		}
		end := st.AtMs - origin[k][scopeKey{sc.Scenario, sc.Endpoint}]
		ends = append(ends, max(end, 0))
		var ms, ts []float64
		for b := max(int(math.Ceil(end/blockMs)), 0); b < len(med[k]); b++ {
			if med[k][b] > 0 {
				ms = append(ms, med[k][b])
				ts = append(ts, tail[k][b])
			}
		}
		if len(ms) == 0 {
			continue
		}
		lm, lt := median64(slices.Clone(ms)), median64(slices.Clone(ts))
		levels = append(levels, lm)
		for j := range ms {
			devM = append(devM, ms[j]/lm-1)
			if lt > 0 {
				devT = append(devT, ts[j]/lt-1)
			}
		}
	}
	sc.WarmupEnd = distOf(ends)
	if len(p50s) > 0 {
		d50 := distOf(p50s)
		sc.SteadyP50 = &d50
	}
	if len(p99s) > 0 {
		// none when every run's tail is approximate (merged folders):
		// no p99 check then, and profiled()'s p99 guard fails
		d99 := distOf(p99s)
		sc.SteadyP99 = &d99
	}
	if len(levels) > 0 {
		sc.LevelMs = median64(slices.Clone(levels))
		lo, hi := slices.Min(levels), slices.Max(levels)
		sc.LevelSpread = Interval{lo/sc.LevelMs - 1, hi/sc.LevelMs - 1}
	}
	return devM, devT
}

// runCosts sets the scenario's distributions over the runs of the settled
// and online TTSS and the cold-start cost and excess.
func (sc *ProfileScope) runCosts(sums []*Summary, order []int) {
	var tt, ot, cs, ce []float64
	for _, i := range order {
		s := sums[i].Scenarios[sc.Scenario]
		if s.Settled != nil && s.Settled.Steady && s.Settled.TTSSMs != nil {
			tt = append(tt, *s.Settled.TTSSMs)
		}
		if s.TTSSMs != nil {
			ot = append(ot, *s.TTSSMs)
		}
		cs = append(cs, s.ColdStart.DurationMs)
		if s.ColdStart.ExcessMs != nil {
			ce = append(ce, *s.ColdStart.ExcessMs)
		}
	}
	d1, d2, d3, d4 := distOf(tt), distOf(ot), distOf(cs), distOf(ce)
	sc.TTSS, sc.OnlineTTSS, sc.ColdStart, sc.ColdExcess = &d1, &d2, &d3, &d4
}

// welchEnd returns the block where the runs' averaged curve stops
// changing: each run's block medians (0: no window) relative to its level
// (the median of its second half), their median per block on a log scale,
// and the first block after which that curve stays within the range of its
// second half (or the runs' steady wander where wider), widened by half its
// width either side.
func welchEnd(runs [][]float64, wander Interval) float64 {
	if len(runs) == 0 {
		return 0
	}
	nb := len(runs[0])
	rel := relLogs(runs)
	// the curve's blocks with a value, and their block index: an empty
	// block (windows longer than a block at a low rate) is skipped, and the
	// end is given in blocks, not in points of the shortened curve (which
	// put a 20-s warm-up at 5 s with 4-s windows)
	var curve []float64
	var at []int
	for b := range nb {
		var col []float64
		for _, r := range rel {
			if b < len(r) && !math.IsNaN(r[b]) {
				col = append(col, r[b])
			}
		}
		if len(col) == 0 {
			continue
		}
		slices.Sort(col)
		curve = append(curve, quantile64(col, 0.5))
		at = append(at, b)
	}
	n := len(curve)
	if n < 4 {
		return 0
	}
	// the settled wander: the curve's range over its second half, and the
	// runs' steady blocks' (5th-95th percentile of their deviation from
	// their level) where wider; the warm-up ends after the last block of
	// the first half outside it (MSER's truncation point overshot by 4 s
	// of a 10 s warm-up on waves of +-10%: it picks the calmest stretch of
	// the wander)
	lo, hi := math.Inf(1), math.Inf(-1)
	if wander.Lo > -1 && wander.Hi > wander.Lo {
		lo, hi = math.Log1p(wander.Lo), math.Log1p(wander.Hi)
	}
	for _, v := range curve[n/2:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	// and half its width either side: the wander of the first half need not
	// stay within the second half's (a wave dipping 1.6% deeper in a test
	// put the end 13 s late); the prior takes the later of this and the
	// runs' median boundary (in a profile without the agreed end), so an
	// early end costs nothing
	m := (hi - lo) / 2
	lo, hi = lo-m, hi+m
	end := 0
	for i, v := range curve[:n/2] {
		if v < lo || v > hi {
			end = at[i] + 1
		}
	}
	return float64(end)
}

// round4 rounds v to 4 significant digits (profile.json's figures: the
// curves are noisy well beyond that, and it keeps the file small).
func round4(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// round4Out rounds v to 4 significant digits away from the inside of the
// bound it is: up for an upper bound (up true), down for a lower one. A
// bound rounded to nearest can fall inside the value it bounds: the largest
// steady p50 of a profile's runs, 21.5049 ms, written as 21.50, put that
// run "beyond the profile's runs" (e2e TestProfileGates, run locally on
// 815d613).
func round4Out(v float64, up bool) float64 {
	r := round4(v)
	if r == v || math.IsNaN(v) || math.IsInf(v, 0) {
		return r
	}
	p := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	switch {
	case up && r < v:
		return (math.Round(v*p) + 1) / p
	case !up && r > v:
		return (math.Round(v*p) - 1) / p
	}
	return r
}

// Rounded returns the profile with its curves and figures rounded to 4
// significant digits (in place).
func (p *Profile) Rounded() *Profile {
	r := func(vs ...*float64) {
		for _, v := range vs {
			*v = round4(*v)
		}
	}
	// bounds (a distribution's min and max, a band's ends) round outward:
	// a run at a bound stays within it once written
	out := func(lo, hi *float64) {
		*lo, *hi = round4Out(*lo, false), round4Out(*hi, true)
	}
	rd := func(d *ProfileDist) {
		if d != nil {
			r(&d.Median, &d.P90)
			out(&d.Min, &d.Max)
		}
	}
	for name, v := range p.RatesPerS {
		p.RatesPerS[name] = round4(v)
	}
	for _, sc := range p.Scopes {
		for i := range sc.Median {
			r(&sc.Median[i].Mid, &sc.Median[i].Lo, &sc.Median[i].Hi, &sc.Tail[i].Mid, &sc.Tail[i].Lo, &sc.Tail[i].Hi)
		}
		for _, run := range sc.RunMedians {
			for i := range run {
				r(&run[i])
			}
		}
		// the prior's band of levels is LevelMs*(1+Lo) .. LevelMs*(1+Hi):
		// its ends are taken relative to the level as written, so that
		// rounding the level does not move a run's level out of the band
		level := sc.LevelMs
		r(&sc.WelchEndMs, &sc.LevelMs)
		for _, b := range []*Interval{&sc.LevelSpread, &sc.Envelope.Median} {
			if level > 0 && sc.LevelMs > 0 {
				b.Lo, b.Hi = level*(1+b.Lo)/sc.LevelMs-1, level*(1+b.Hi)/sc.LevelMs-1
			}
		}
		for _, b := range []*Interval{&sc.LevelSpread, &sc.Envelope.Median, &sc.Envelope.MedianMax, &sc.Envelope.Tail, &sc.Envelope.TailMax} {
			out(&b.Lo, &b.Hi)
		}
		rd(&sc.WarmupEnd)
		rd(sc.SteadyP50)
		rd(sc.SteadyP99)
		rd(sc.TTSS)
		rd(sc.OnlineTTSS)
		rd(sc.ColdStart)
		rd(sc.ColdExcess)
	}
	return p
}

// Text is the profile in a few lines per scope.
func (p *Profile) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "profile of %d runs (%s .. %s), blocks of %.0f ms\n", len(p.Runs),
		p.Runs[0].Started.UTC().Format(time.RFC3339), p.Runs[len(p.Runs)-1].Started.UTC().Format(time.RFC3339), p.BlockMs)
	for _, sc := range p.Scopes {
		name := sc.Scenario
		if sc.Endpoint != "" {
			name += "[" + sc.Endpoint + "]"
		}
		fmt.Fprintf(&b, "%s:\n", name)
		fmt.Fprintf(&b, "  warm-up end (settled boundary): median %.1f s, %.1f-%.1f s over %d runs; %d without a settled steady state; the averaged curve settles at %.1f s\n",
			sc.WarmupEnd.Median/1000, sc.WarmupEnd.Min/1000, sc.WarmupEnd.Max/1000, sc.WarmupEnd.N, sc.NoSteady, sc.WelchEndMs/1000)
		if sc.AgreedEndMs != nil {
			fmt.Fprintf(&b, "  warm-up end the runs agree on: %.1f s", *sc.AgreedEndMs/1000)
			if pr := sc.Prior(); pr.Ok {
				fmt.Fprintf(&b, "; a run that uses this profile declares no steady state before %.1f s", pr.WarmupMs/1000)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "  steady level %.4g ms (runs %+.1f%% .. %+.1f%%); steady block medians %+.1f%% .. %+.1f%% (5th-95th pct; extremes %+.1f%% .. %+.1f%%), tails (p%.3g) %+.1f%% .. %+.1f%%, over %d blocks\n",
			sc.LevelMs, sc.LevelSpread.Lo*100, sc.LevelSpread.Hi*100, sc.Envelope.Median.Lo*100, sc.Envelope.Median.Hi*100,
			sc.Envelope.MedianMax.Lo*100, sc.Envelope.MedianMax.Hi*100, sc.TailQuantile, sc.Envelope.Tail.Lo*100, sc.Envelope.Tail.Hi*100, sc.Envelope.Blocks)
		for _, d := range []struct {
			name string
			d    *ProfileDist
		}{{"TTSS (settled)", sc.TTSS}, {"TTSS (online)", sc.OnlineTTSS}, {"cold-start cost", sc.ColdStart}, {"cold excess", sc.ColdExcess},
			{"steady p50 (settled)", sc.SteadyP50}, {"steady p99 (settled)", sc.SteadyP99}} {
			if d.d != nil && d.d.N > 0 {
				fmt.Fprintf(&b, "  %s: median %.4g ms, p90 %.4g ms, %.4g-%.4g ms (%d runs)\n", d.name, d.d.Median, d.d.P90, d.d.Min, d.d.Max, d.d.N)
			}
		}
		if sc.SteadyP50 != nil && sc.SteadyP50.N > 0 {
			n99 := 0
			if sc.SteadyP99 != nil {
				n99 = sc.SteadyP99.N
			}
			if n99 == 0 {
				b.WriteString("  steady p99 (settled): none: every run's tail is approximate (merged folders); no run is judged on its p99 against this profile\n")
			} else if n99 < sc.SteadyP50.N {
				fmt.Fprintf(&b, "  steady p99 (settled) of %d of the %d runs: the others' tails are approximate (merged folders)\n", n99, sc.SteadyP50.N)
			}
		}
	}
	return b.String()
}

func ptrFloat(v float64) *float64 { return &v }

// Bounds of agreedEnd: the share of runs that must agree on a warm-up
// block, the least bands beyond which they agree (relative: median, tail),
// the percentiles of the envelope and the longest gap within a warm-up.
const (
	agreeShare      = 0.8
	agreeMinBand    = 0.10
	agreeMinTail    = 0.25
	agreeEnvelopeQ  = 0.025
	agreeMaxGap     = 2
	agreeMinRunsSet = 3
)

// agreedEnd returns the block after the warm-up the runs agree on (see
// ProfileScope.AgreedEndMs), and false with fewer than 3 runs or no block
// where 3 runs have a value.
func agreedEnd(med, tail [][]float64) (float64, bool) {
	if len(med) < agreeMinRunsSet {
		return 0, false
	}
	rm, rt := relSmoothed(med), relSmoothed(tail)
	nb := len(rm[0])
	if nb < 4 {
		return 0, false
	}
	valued := 0
	for b := range nb {
		if valuedRuns(rm, b) >= agreeMinRunsSet {
			valued++
		}
	}
	if valued == 0 {
		return 0, false
	}
	end := agreedFrom(rm, rt, nb/2)
	if end < nb-3 {
		end = agreedFrom(rm, rt, end)
	}
	return float64(end), true
}

// valuedRuns counts the runs with a value at block b.
func valuedRuns(rel [][]float64, b int) int {
	n := 0
	for _, r := range rel {
		if !math.IsNaN(r[b]) {
			n++
		}
	}
	return n
}

// agreedFrom finds the end of the agreed warm-up with the envelopes of the
// blocks from block from on: the block after the last warm-up block of the
// stretch that starts within the first agreeMaxGap+1 blocks with a value,
// where gaps of up to agreeMaxGap blocks that are not warm-up are allowed.
// Blocks where fewer than 3 runs have a value (windows longer than a block,
// a scope some runs lack) are neither warm-up nor gaps.
func agreedFrom(rm, rt [][]float64, from int) int {
	loM, hiM := envelopeOf(rm, from, agreeMinBand)
	loT, hiT := envelopeOf(rt, from, agreeMinTail)
	nb := len(rm[0])
	last, gap := -1, 0
	for b := range nb {
		if valuedRuns(rm, b) < agreeMinRunsSet {
			continue
		}
		if warmBlock(rm, b, loM, hiM, agreeMinBand) || warmBlock(rt, b, loT, hiT, agreeMinTail) {
			last, gap = b, 0
			continue
		}
		if gap++; gap > agreeMaxGap {
			break
		}
	}
	return last + 1
}

// warmBlock reports whether the runs agree that block b is warm-up: 80% of
// those with a value beyond [lo, hi] on one side, or all of them beyond
// +-band on one side (logs).
func warmBlock(rel [][]float64, b int, lo, hi, band float64) bool {
	n, above, below, allAbove, allBelow := 0, 0, 0, true, true
	bl, bh := math.Log1p(-band), math.Log1p(band)
	for _, r := range rel {
		v := r[b]
		if math.IsNaN(v) {
			continue
		}
		n++
		if v > hi {
			above++
		}
		if v < lo {
			below++
		}
		allAbove = allAbove && v > bh
		allBelow = allBelow && v < bl
	}
	if n < agreeMinRunsSet {
		return false
	}
	need := int(math.Ceil(agreeShare * float64(n)))
	return above >= need || below >= need || allAbove || allBelow
}

// envelopeOf is the 2.5th and 97.5th percentiles of the runs' values from
// block from on, widened to at least +-band (logs).
func envelopeOf(rel [][]float64, from int, band float64) (float64, float64) {
	var v []float64
	for _, r := range rel {
		for _, x := range r[min(from, len(r)):] {
			if !math.IsNaN(x) {
				v = append(v, x)
			}
		}
	}
	lo, hi := math.Log1p(-band), math.Log1p(band)
	if len(v) == 0 {
		return lo, hi
	}
	slices.Sort(v)
	return min(quantile64(v, agreeEnvelopeQ), lo), max(quantile64(v, 1-agreeEnvelopeQ), hi)
}

// relLogs returns each run's block values as logs relative to the run's
// level, the median over its second half (NaN where a run has no value).
func relLogs(curves [][]float64) [][]float64 {
	out := make([][]float64, len(curves))
	for k, c := range curves {
		level := median64(slices.Clone(c[len(c)/2:]))
		out[k] = make([]float64, len(c))
		for b, v := range c {
			out[k][b] = math.NaN()
			if v > 0 && level > 0 {
				out[k][b] = math.Log(v / level)
			}
		}
	}
	return out
}

// relSmoothed returns relLogs smoothed by a running median of 3 blocks
// (over the neighbours with a value; NaN where a run has none).
func relSmoothed(curves [][]float64) [][]float64 {
	out := relLogs(curves)
	for k, rel := range out {
		sm := make([]float64, len(rel))
		for b := range rel {
			sm[b] = math.NaN()
			if math.IsNaN(rel[b]) {
				continue
			}
			var w []float64
			for j := max(b-1, 0); j <= min(b+1, len(rel)-1); j++ {
				if !math.IsNaN(rel[j]) {
					w = append(w, rel[j])
				}
			}
			slices.Sort(w)
			sm[b] = w[len(w)/2]
			if len(w) == 2 {
				sm[b] = (w[0] + w[1]) / 2
			}
		}
		out[k] = sm
	}
	return out
}

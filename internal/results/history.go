package results

import (
	"encoding/csv"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A run history: one row per run of the same script, one column per figure
// of each scenario (and each endpoint of its settled view), in the CSV
// layout that Apache Otava's CSV data source reads (a time column,
// attribute columns, one numeric column per metric; Otava finds the runs
// where a column's distribution changed, Fleming et al., ICPE 2023).

// HistoryOptions set what `history` writes.
type HistoryOptions struct {
	// LabelKey is the key of summary.json's extra whose value labels a run
	// (a commit, a build); a run without it is labelled by its testid.
	LabelKey string
	// KeepMissing writes the rows of runs that lack a figure, with empty
	// cells; by default such a run is left out and named in Skipped
	// (Otava's CSV reader refuses an empty cell).
	KeepMissing bool
	// KeepIncomplete keeps runs that did not reach their planned end.
	KeepIncomplete bool
}

// History is the table: Header, then Rows in run start order. Skipped
// names the runs left out and why.
type History struct {
	Header  []string
	Rows    [][]string
	Skipped []string
	// Dropped names the endpoint columns left out because fewer than half
	// of the runs kept have them (an endpoint most runs never settled, or
	// called, would otherwise leave every other run out).
	Dropped []string
}

// historyAttrs are the columns before the figures.
var historyAttrs = []string{"time", "label", "run_id", "dir"}

// historyFigure is one column of a scenario or endpoint: its name and how
// it is read (false: the run has no such figure).
type historyFigure struct {
	name string
	get  func(sc *Scenario, st *Settled) (float64, bool)
}

func settledStat(f func(*SettledStats) float64) func(*Scenario, *Settled) (float64, bool) {
	return func(_ *Scenario, st *Settled) (float64, bool) {
		if st == nil || !st.Steady || st.Stats == nil || st.Stats.Count <= 0 {
			return 0, false
		}
		return f(st.Stats), true
	}
}

// settledTail is settledStat for a tail percentile: none from a merged
// folder's approximate view (its series points held several iterations,
// recorded at their median, so its tail is understated: Otava would see a
// drop that is not there).
func settledTail(f func(*SettledStats) float64) func(*Scenario, *Settled) (float64, bool) {
	get := settledStat(f)
	return func(sc *Scenario, st *Settled) (float64, bool) {
		if st != nil && st.Approximate {
			return 0, false
		}
		return get(sc, st)
	}
}

func settledErrorRate(_ *Scenario, st *Settled) (float64, bool) {
	if st == nil || !st.Steady || st.Stats == nil || st.Stats.ErrorRate == nil {
		return 0, false
	}
	return *st.Stats.ErrorRate, true
}

func settledTTSS(_ *Scenario, st *Settled) (float64, bool) {
	if st == nil || !st.Steady || st.TTSSMs == nil {
		return 0, false
	}
	return *st.TTSSMs, true
}

func optional(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// The figures of a scenario: the settled view's steady percentiles, error
// rate and TTSS (the whole run judged at its end), the online TTSS, the
// cold-start cost (what the cold iterations took, and what the cold and
// warm-up ones took beyond the steady mean) and the relapses.
var scenarioFigures = []historyFigure{
	{"steady_p50_ms", settledStat(func(s *SettledStats) float64 { return s.P50Ms })},
	{"steady_p95_ms", settledTail(func(s *SettledStats) float64 { return s.P95Ms })},
	{"steady_p99_ms", settledTail(func(s *SettledStats) float64 { return s.P99Ms })},
	{"steady_error_rate", settledErrorRate},
	{"ttss_ms", settledTTSS},
	{"online_ttss_ms", func(sc *Scenario, _ *Settled) (float64, bool) { return optional(sc.TTSSMs) }},
	{"cold_start_ms", func(sc *Scenario, _ *Settled) (float64, bool) { return sc.ColdStart.DurationMs, true }},
	{"cold_excess_ms", func(sc *Scenario, _ *Settled) (float64, bool) { return optional(sc.ColdStart.ExcessMs) }},
	{"relapses", func(sc *Scenario, _ *Settled) (float64, bool) { return float64(sc.Relapses), true }},
}

// The figures of an endpoint's settled view (scope 'endpoint').
var endpointFigures = []historyFigure{
	scenarioFigures[0], scenarioFigures[1], scenarioFigures[2], scenarioFigures[3], scenarioFigures[4],
}

// historyScope is a scenario or one of its endpoints: the column prefix
// (S. or S[E].) and its figures.
type historyScope struct {
	scenario, endpoint string
}

func (h historyScope) prefix() string {
	if h.endpoint == "" {
		return h.scenario + "."
	}
	return h.scenario + "[" + h.endpoint + "]."
}

func (h historyScope) figures() []historyFigure {
	if h.endpoint == "" {
		return scenarioFigures
	}
	return endpointFigures
}

// BuildHistory makes the history of the runs sums (read from dirs). The
// runs must be of one script: the same scenarios, named in the error
// otherwise. The columns are those of the runs kept (complete, unless
// KeepIncomplete): one no kept run has a value for is left out, and so is
// an endpoint's that fewer than half of them have (named in Dropped).
func BuildHistory(sums []*Summary, dirs []string, o HistoryOptions) (*History, error) {
	if len(sums) == 0 {
		return nil, fmt.Errorf("history: no results folders")
	}
	if len(sums) != len(dirs) {
		return nil, fmt.Errorf("history: %d summaries for %d folders", len(sums), len(dirs))
	}
	if err := sameScenarios(sums, dirs, "history"); err != nil {
		return nil, err
	}
	order := make([]int, len(sums))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return sums[a].Started.Compare(sums[b].Started) })
	h := &History{}
	// the columns are those of the runs kept: a run left out must not add
	// a column that every kept run then lacks
	kept := order[:0:0]
	for _, i := range order {
		if s := sums[i]; !s.Completed() && !o.KeepIncomplete {
			h.Skipped = append(h.Skipped, fmt.Sprintf("%s: the run did not complete (%s)", dirs[i], s.EndText()))
			continue
		}
		kept = append(kept, i)
	}
	keptSums := make([]*Summary, len(kept))
	for k, i := range kept {
		keptSums[k] = sums[i]
	}
	var header []string
	var cols [][]historyCell
	if len(kept) > 0 {
		var present []int
		var unseen []string
		header, cols, present, unseen = historyColumns(historyScopes(keptSums), sums, kept)
		h.Dropped = append(h.Dropped, unseen...)
		for c := 0; c < len(header); c++ {
			// an endpoint fewer than half the runs call (not: fewer than half
			// have a figure of: an endpoint that stopped settling keeps its
			// column, and its runs are skipped or, with KeepMissing, kept
			// with empty cells, as a scenario's are)
			if present[c] >= 0 && 2*present[c] < len(kept) {
				h.Dropped = append(h.Dropped, fmt.Sprintf("%s: only %d of %d runs call the endpoint", header[c], present[c], len(kept)))
				header, cols, present = slices.Delete(header, c, c+1), slices.Delete(cols, c, c+1), slices.Delete(present, c, c+1)
				c--
			}
		}
	}
	h.Header = append(slices.Clone(historyAttrs), header...)
	for k, i := range kept {
		s := sums[i]
		row := []string{s.Started.UTC().Format(time.RFC3339Nano), runLabel(s, o.LabelKey), s.RunID, dirs[i]}
		var missing []string
		for c, col := range cols {
			if !col[k].ok {
				missing = append(missing, header[c])
				row = append(row, "")
				continue
			}
			row = append(row, strconv.FormatFloat(col[k].v, 'g', 6, 64))
		}
		if len(missing) > 0 && !o.KeepMissing {
			h.Skipped = append(h.Skipped, fmt.Sprintf("%s: no %s%s", dirs[i], strings.Join(missing, ", "), missingWhy(s, missing)))
			continue
		}
		h.Rows = append(h.Rows, row)
	}
	return h, nil
}

// historyScopes lists the scopes of a history: every scenario, and every
// endpoint any run's settled view has, in name order.
func historyScopes(sums []*Summary) []historyScope {
	var scopes []historyScope
	for _, name := range slices.Sorted(maps.Keys(sums[0].Scenarios)) {
		scopes = append(scopes, historyScope{scenario: name})
		eps := map[string]bool{}
		for _, s := range sums {
			if st := s.Scenarios[name].Settled; st != nil {
				for ep := range st.Endpoints {
					eps[ep] = true
				}
			}
		}
		for _, ep := range slices.Sorted(maps.Keys(eps)) {
			scopes = append(scopes, historyScope{scenario: name, endpoint: ep})
		}
	}
	return scopes
}

// historyCell is one run's figure: ok when the run has it (finite).
type historyCell struct {
	v  float64
	ok bool
}

// historyColumns returns the columns of the scopes' figures that at least
// one run has: their names, per column each run's cell (k-th: the run
// order[k]'s) and, for an endpoint's column, how many runs call the
// endpoint (-1 for a scenario's); and, named with why, the columns no run
// has a figure for.
func historyColumns(scopes []historyScope, sums []*Summary, order []int) ([]string, [][]historyCell, []int, []string) {
	var header []string
	var cols [][]historyCell
	var present []int
	var unseen []string
	for _, sc := range scopes {
		calls := -1
		if sc.endpoint != "" {
			calls = 0
			for _, i := range order {
				if st := sums[i].Scenarios[sc.scenario].Settled; st != nil && st.Endpoints[sc.endpoint] != nil {
					calls++
				}
			}
		}
		for _, f := range sc.figures() {
			col := make([]historyCell, len(order))
			seen := false
			approximate := 0
			for k, i := range order {
				s := sums[i].Scenarios[sc.scenario]
				st := s.Settled
				if sc.endpoint != "" {
					st = nil
					if s.Settled != nil {
						st = s.Settled.Endpoints[sc.endpoint]
					}
				}
				if st != nil && st.Approximate {
					approximate++
				}
				v, ok := f.get(s, st)
				ok = ok && !math.IsNaN(v) && !math.IsInf(v, 0)
				col[k] = historyCell{v, ok}
				seen = seen || ok
			}
			if seen {
				header = append(header, sc.prefix()+f.name)
				cols = append(cols, col)
				present = append(present, calls)
			} else if (f.name == "steady_p95_ms" || f.name == "steady_p99_ms") && approximate == len(order) {
				unseen = append(unseen, fmt.Sprintf("%s%s: every run's settled view is a merged folder's approximate one, whose tail is understated "+
					"(raise seriesLimit, or write each instance's folder)", sc.prefix(), f.name))
			}
		}
	}
	return header, cols, present, unseen
}

// missingWhy gives the settled views' reasons for no steady state, of the
// scenarios whose columns (S. or S[E].) are among those missing.
func missingWhy(s *Summary, missing []string) string {
	var why []string
	// a column's scenario: the longest name it starts with (S. or S[),
	// so that api.v2's columns are not api's
	owner := func(col string) string {
		best := ""
		for name := range s.Scenarios {
			if len(name) > len(best) && (strings.HasPrefix(col, name+".") || strings.HasPrefix(col, name+"[")) {
				best = name
			}
		}
		return best
	}
	lacking := map[string]bool{}
	for _, col := range missing {
		lacking[owner(col)] = true
	}
	for _, name := range slices.Sorted(maps.Keys(s.Scenarios)) {
		if !lacking[name] {
			continue
		}
		if st := s.Scenarios[name].Settled; st != nil && !st.Steady && st.Reason != "" {
			why = append(why, name+": "+st.Reason)
		} else if st != nil && st.Approximate {
			why = append(why, name+": a merged folder's approximate view, whose tail is understated (raise seriesLimit, or write each instance's folder)")
		}
	}
	if len(why) == 0 {
		return ""
	}
	return " (" + strings.Join(why, "; ") + ")"
}

func runLabel(s *Summary, key string) string {
	if key != "" {
		if v, ok := s.Extra[key]; ok && v != nil {
			switch x := v.(type) {
			case string:
				return x
			case float64:
				// a commit or build number read from JSON: digits, not 2.0261129e+07
				return strconv.FormatFloat(x, 'f', -1, 64)
			}
			return fmt.Sprint(v)
		}
	}
	return s.TestID
}

// CSV writes the table.
func (h *History) CSV() ([]byte, error) {
	var b strings.Builder
	w := csv.NewWriter(&b)
	if err := w.Write(h.Header); err != nil {
		return nil, err
	}
	if err := w.WriteAll(h.Rows); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

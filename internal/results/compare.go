package results

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Budget is one --fail-on limit: the candidate may exceed the base by at
// most Value (percent of the base when Relative, else absolute: ms for
// latencies, TTSS and cold start, a fraction for the error rate).
type Budget struct {
	Metric   string
	Value    float64
	Relative bool
}

func (b Budget) String() string {
	if b.Relative {
		return fmt.Sprintf("%s=+%g%%", b.Metric, b.Value)
	}
	return fmt.Sprintf("%s=+%g", b.Metric, b.Value)
}

// BudgetMetrics are the metrics a budget can name.
var BudgetMetrics = []string{"p50", "p90", "p95", "p99", "p99_9", "errors", "ttss", "cold_start", "cold_excess",
	"settled_p50", "settled_p95", "settled_p99", "settled_ttss"}

const budgetForms = "valid forms: METRIC=+N% (relative to the base) or METRIC=+N (absolute: ms, or a fraction for errors), " +
	"comma-separated, e.g. p95=+10%,errors=+0.01,ttss=+20%; metrics: "

// ParseBudgets parses a --fail-on value; it reports every bad item at once.
func ParseBudgets(spec string) ([]Budget, error) {
	var out []Budget
	var errs []error
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	valid := map[string]bool{}
	for _, m := range BudgetMetrics {
		valid[m] = true
	}
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			errs = append(errs, fmt.Errorf("--fail-on: %q is not METRIC=LIMIT", item))
			continue
		}
		if k == "p99.9" {
			k = "p99_9"
		}
		if !valid[k] {
			errs = append(errs, fmt.Errorf("--fail-on: unknown metric %q in %q", k, item))
			continue
		}
		if seen[k] {
			errs = append(errs, fmt.Errorf("--fail-on: %s is given twice; give one budget per metric", k))
			continue
		}
		seen[k] = true
		b := Budget{Metric: k}
		num := strings.TrimPrefix(v, "+")
		if strings.HasSuffix(num, "%") {
			b.Relative = true
			num = strings.TrimSuffix(num, "%")
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || strings.HasPrefix(num, "-") {
			errs = append(errs, fmt.Errorf("--fail-on: %q: limit %q must be a non-negative number, optionally with + and %%", item, v))
			continue
		}
		b.Value = f
		out = append(out, b)
	}
	if len(errs) > 0 {
		errs = append(errs, errors.New(budgetForms+strings.Join(BudgetMetrics, ", ")))
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// CompareRow is one figure of the comparison.
type CompareRow struct {
	What   string // "request", "iteration" or "scenario"
	Scope  string // scenario / phase / endpoint / protocol
	Metric string
	Base   *float64
	Cand   *float64
	Budget string
	Fail   bool
	Note   string
}

// Delta is Cand - Base, NaN when either is missing.
func (r CompareRow) Delta() float64 {
	if r.Base == nil || r.Cand == nil {
		return math.NaN()
	}
	return *r.Cand - *r.Base
}

// Comparison is the result of Compare.
type Comparison struct {
	Rows     []CompareRow
	Failures []string
	// Notes are facts about the runs a reader must know (an early end).
	Notes []string
}

// Failed says whether a budget was exceeded or could not be judged.
func (c *Comparison) Failed() bool { return len(c.Failures) > 0 }

func fp(v float64) *float64 { return &v }

// CheckBaseline returns an error when base cannot serve as a baseline: a
// run that ended before its planned end (interrupted, aborted, timed out)
// holds figures of a part of the test only. Gates refuse such a baseline
// unless the user allows it.
func CheckBaseline(base *Summary) error {
	if base.Completed() {
		return nil
	}
	return fmt.Errorf("the base run did not complete: %s", base.EndText())
}

// Compare compares the steady-state figures of cand against base: per
// phase x endpoint p95 / p99 / error rate of steady requests, per scenario
// steady iteration p95 / p99, TTSS and cold-start cost. A budget never
// passes on missing data: a budgeted figure the base has and the candidate
// lacks (a scenario or endpoint missing, no steady state) fails, one that
// neither run has fails, and a budget that judged no figure at all fails. A
// figure only the candidate has is shown, not judged.
func Compare(base, cand *Summary, budgets []Budget) *Comparison {
	k := newComparer(base, cand, budgets)
	k.requests()
	k.scenarios()
	for _, b := range budgets {
		if k.judged[b.Metric] == 0 && !k.c.failedOn(b.Metric) {
			k.c.Failures = append(k.c.Failures, fmt.Sprintf("budget %s judged no figure: no %s is in both runs; it cannot pass on no data",
				b, b.Metric))
		}
	}
	return k.c
}

// latencyFigures are the percentiles a comparison can show, in the order
// of its rows.
var latencyFigures = []string{"p50", "p90", "p95", "p99", "p99_9"}

// comparer builds a Comparison row by row.
type comparer struct {
	c          *Comparison
	base, cand *Summary
	budgets    map[string]Budget // by metric
	judged     map[string]int    // figures judged, by metric
	shown      map[string]bool   // metrics shown: p95, p99 and the budgeted ones
}

func newComparer(base, cand *Summary, budgets []Budget) *comparer {
	k := &comparer{c: &Comparison{}, base: base, cand: cand, budgets: map[string]Budget{},
		judged: map[string]int{}, shown: map[string]bool{"p95": true, "p99": true}}
	if !cand.Completed() {
		k.c.Notes = append(k.c.Notes, "the candidate run did not complete: "+cand.EndText())
	}
	if !base.Completed() {
		k.c.Notes = append(k.c.Notes, "the base run did not complete: "+base.EndText())
	}
	for _, b := range budgets {
		k.budgets[b.Metric] = b
		k.shown[b.Metric] = true
	}
	return k
}

// missing says why the candidate lacks a figure of scenario sc.
func (k *comparer) missing(sc, metric string) string {
	x := k.cand.Scenarios[sc]
	settled := strings.HasPrefix(metric, "settled_")
	switch {
	case sc == "":
		return "missing in candidate"
	case x == nil:
		return "scenario " + sc + " missing in candidate"
	case settled && x.Settled == nil:
		return "candidate has no settled view (written before it existed)"
	case settled && !x.Settled.Steady:
		return "candidate has no settled steady state in " + sc + ": " + x.Settled.Reason
	case !settled && x.TTSSMs == nil:
		return "candidate never reached steady state in " + sc
	}
	return "missing in candidate"
}

// approximateTail names the run ("base", "candidate") whose settled view
// of scenario sc is merge's approximate one, when metric is a tail figure
// of that view; "" otherwise.
func (k *comparer) approximateTail(sc, metric string) string {
	if metric != "settled_p95" && metric != "settled_p99" {
		return ""
	}
	for _, r := range []struct {
		name string
		s    *Summary
	}{{"base", k.base}, {"candidate", k.cand}} {
		if x := r.s.Scenarios[sc]; x != nil && x.Settled != nil && x.Settled.Approximate {
			return r.name
		}
	}
	return ""
}

// add appends the row of one figure (b: the base's, x: the candidate's, nil
// when missing) and judges it against its budget, if it has one.
func (k *comparer) add(what, scope, scenario, metric string, b, x *float64) {
	row := CompareRow{What: what, Scope: scope, Metric: metric, Base: b, Cand: x}
	bud, budgeted := k.budgets[metric]
	switch {
	case budgeted:
		row.Budget = bud.String()
		k.judge(&row, bud, scenario)
	case b != nil && x == nil:
		row.Note = k.missing(scenario, metric)
	case b == nil && x != nil:
		row.Note = "new in candidate"
	}
	k.c.Rows = append(k.c.Rows, row)
}

// unheld says why the candidate's online steady figures of scenario sc
// cannot be judged: its steady state was reached but not held (a relapse
// put the later iterations back in warmup, or its level drifted), so a
// budget on them would judge what was left of it. "" when they can, or the
// metric is not an online steady figure (the settled view's, the cold
// start's).
func (k *comparer) unheld(sc, metric string) string {
	if strings.HasPrefix(metric, "settled_") || metric == "cold_start" || metric == "cold_excess" || sc == "" {
		return ""
	}
	x := k.cand.Scenarios[sc]
	if x == nil || x.GateVerdict() != "not-held" {
		return "" // held, or never reached (no figure: judged as missing)
	}
	how := "not held to the end: its level drifted, or its final steady state was too short a part of the run"
	if x.Relapses > 0 {
		how = fmt.Sprintf("relapses: %d", x.Relapses)
	}
	return fmt.Sprintf("the candidate's steady state was reached but not held in %s (%s)", sc, how)
}

// judge judges a budgeted row; a budget never passes on missing data.
func (k *comparer) judge(row *CompareRow, bud Budget, scenario string) {
	b, x := row.Base, row.Cand
	what, scope, metric := row.What, row.Scope, row.Metric
	if which := k.approximateTail(scenario, metric); which != "" && b != nil && x != nil {
		row.Fail, row.Note = true, which+"'s settled view is approximate (merged)"
		k.c.Failures = append(k.c.Failures, fmt.Sprintf("%s %s %s: the %s's settled view was re-settled by merge from series "+
			"whose points held several iterations, so its %s understates the tail: budget %s cannot be judged on it "+
			"(compare the instances' folders, or raise seriesLimit)", what, scope, metric, which, metric, bud))
		return
	}
	if why := k.unheld(scenario, metric); why != "" && x != nil {
		row.Fail, row.Note = true, why
		of := "its steady-tagged figures are no steady state's"
		if metric == "ttss" {
			of = "its TTSS is the start of a steady state that did not last"
		}
		k.c.Failures = append(k.c.Failures, fmt.Sprintf("%s %s %s: %s: %s, "+
			"so budget %s cannot pass on it (a settled_* budget judges the steady state the whole run shows)",
			what, scope, metric, why, of, bud))
		return
	}
	switch {
	case b != nil && x != nil:
		k.judged[metric]++
		limit := bud.Value
		if bud.Relative {
			limit = math.Abs(*b) * bud.Value / 100
		}
		if *x-*b > limit+1e-12 {
			row.Fail = true
			hint := ""
			if bud.Relative && *b == 0 {
				hint = fmt.Sprintf(" (a share of a base of 0 allows no increase: give an absolute limit, %s=+N)", metric)
			}
			k.c.Failures = append(k.c.Failures, fmt.Sprintf("%s %s %s: base %s, candidate %s exceeds budget %s%s",
				what, scope, metric, fmtOpt(b), fmtOpt(x), bud, hint))
		}
	case b != nil:
		row.Fail, row.Note = true, k.missing(scenario, metric)
		k.c.Failures = append(k.c.Failures, fmt.Sprintf("%s %s %s: base %s, %s: budget %s cannot pass on missing data",
			what, scope, metric, fmtOpt(b), row.Note, bud))
	case x == nil:
		row.Fail, row.Note = true, "missing in both runs"
		k.c.Failures = append(k.c.Failures, fmt.Sprintf("%s %s %s: no figure in either run: budget %s cannot pass on missing data",
			what, scope, metric, bud))
	default:
		row.Note = "new in candidate: not judged"
	}
}

// distFigure is one latency percentile of d (nil: no distribution, or an
// empty one).
func distFigure(d *Dist, m string) *float64 {
	if d == nil || d.Count == 0 {
		return nil
	}
	switch m {
	case "p50":
		return fp(d.P50)
	case "p90":
		return fp(d.P90)
	case "p95":
		return fp(d.P95)
	case "p99":
		return fp(d.P99)
	case "p99_9":
		return fp(d.P999)
	}
	return nil
}

// steadyRequests pairs the steady request rows of the two runs, keyed by
// phase x endpoint x scenario x protocol (the regime left empty), in the
// order of the tables printed by phase (compareTableKeys).
func (k *comparer) steadyRequests() ([]tableKey, map[tableKey][2]*RequestRow) {
	rows := map[tableKey][2]*RequestRow{}
	for i, s := range []*Summary{k.base, k.cand} {
		for _, r := range s.Requests {
			if r.Regime != "steady" {
				continue
			}
			key := r.tableKey()
			key.regime = ""
			v := rows[key]
			v[i] = r
			rows[key] = v
		}
	}
	keys := slices.SortedFunc(maps.Keys(rows), compareTableKeys)
	return keys, rows
}

// requests adds the rows of the steady requests: the latency percentiles
// shown and the error rate, per phase x endpoint x scenario x protocol.
func (k *comparer) requests() {
	keys, rows := k.steadyRequests()
	for _, key := range keys {
		v := rows[key]
		scope := fmt.Sprintf("%s/%s/%s/%s", orDash(key.phase), orDash(key.endpoint), key.scenario, key.proto)
		var bd, cd *Dist
		var be, ce *float64
		// a row of no request has no error rate (its 0 is no data): the
		// budget must not pass on it
		if v[0] != nil {
			bd = &v[0].Dist
			if v[0].Count > 0 {
				be = fp(v[0].ErrorRate)
			}
		}
		if v[1] != nil {
			cd = &v[1].Dist
			if v[1].Count > 0 {
				ce = fp(v[1].ErrorRate)
			}
		}
		for _, m := range latencyFigures {
			if k.shown[m] {
				k.add("request", scope, key.scenario, m, distFigure(bd, m), distFigure(cd, m))
			}
		}
		k.add("request", scope, key.scenario, "errors", be, ce)
	}
}

// scenarioFigure is one per-scenario figure of s (nil: s missing, or the
// figure is): "ttss", "cold_start", "cold_excess", or settled_<figure> of
// the settled view's steady state.
func scenarioFigure(s *Scenario, metric string) *float64 {
	if s == nil {
		return nil
	}
	switch metric {
	case "ttss":
		return s.TTSSMs
	case "cold_start":
		return fp(s.ColdStart.DurationMs)
	case "cold_excess":
		return s.ColdStart.ExcessMs
	}
	if s.Settled == nil || !s.Settled.Steady || s.Settled.Stats == nil {
		return nil
	}
	return settledFigure(s.Settled, strings.TrimPrefix(metric, "settled_"))
}

// scenarios adds the rows of each scenario of either run, by name: its
// steady iterations' latency percentiles shown, TTSS, the cold-start cost,
// and the settled view's steady p95 / p99 (p50 and TTSS when budgeted).
func (k *comparer) scenarios() {
	names := map[string]bool{}
	for n := range k.base.Scenarios {
		names[n] = true
	}
	for n := range k.cand.Scenarios {
		names[n] = true
	}
	steady := func(s *Scenario) *Dist {
		if s == nil {
			return nil
		}
		return s.Regimes["steady"]
	}
	for _, n := range sortedKeys(names) {
		b, x := k.base.Scenarios[n], k.cand.Scenarios[n]
		for _, m := range latencyFigures {
			if k.shown[m] {
				k.add("iteration", n, n, m, distFigure(steady(b), m), distFigure(steady(x), m))
			}
		}
		for _, m := range []string{"ttss", "cold_start", "cold_excess"} {
			k.add("scenario", n, n, m, scenarioFigure(b, m), scenarioFigure(x, m))
		}
		for _, m := range []string{"settled_p50", "settled_p95", "settled_p99", "settled_ttss"} {
			if m == "settled_p95" || m == "settled_p99" || k.shown[m] {
				k.add("settled", n, n, m, scenarioFigure(b, m), scenarioFigure(x, m))
			}
		}
	}
}

// failedOn says whether a row of metric failed already.
func (c *Comparison) failedOn(metric string) bool {
	for _, r := range c.Rows {
		if r.Fail && r.Metric == metric {
			return true
		}
	}
	return false
}

func fmtOpt(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 4, 64)
}

// Text renders the comparison as a before/after table and the verdict.
func (c *Comparison) Text(baseName, candName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "base: %s\ncandidate: %s\n(latencies in ms on steady samples; errors is the error rate)\n\n", baseName, candName)
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "what\tphase/endpoint/scenario/proto\tmetric\tbase\tcandidate\tdelta\tdelta %\tbudget\tverdict\t")
	for _, r := range c.Rows {
		d := r.Delta()
		ds, pct := "-", "-"
		if !math.IsNaN(d) {
			ds = strconv.FormatFloat(d, 'f', 4, 64)
			if *r.Base != 0 {
				pct = fmt.Sprintf("%+.1f%%", 100*d / *r.Base)
			}
		}
		verdict := ""
		if r.Budget != "" {
			verdict = "ok"
		}
		if r.Fail {
			verdict = "FAIL"
		}
		if r.Note != "" {
			verdict = strings.TrimSpace(verdict + " " + r.Note)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.What, r.Scope, r.Metric, fmtOpt(r.Base), fmtOpt(r.Cand), ds, pct, orDash(r.Budget), verdict)
	}
	_ = tw.Flush()
	b.WriteString("\n")
	for _, n := range c.Notes {
		b.WriteString("NOTE: " + n + "\n")
	}
	if c.Failed() {
		fmt.Fprintf(&b, "%d budget check(s) failed:\n", len(c.Failures))
		for _, f := range c.Failures {
			b.WriteString("  " + f + "\n")
		}
	} else {
		b.WriteString("no budget exceeded\n")
	}
	return b.String()
}

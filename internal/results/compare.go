package results

import (
	"errors"
	"fmt"
	"math"
	"sort"
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
	c := &Comparison{}
	if !cand.Completed() {
		c.Notes = append(c.Notes, "the candidate run did not complete: "+cand.EndText())
	}
	if !base.Completed() {
		c.Notes = append(c.Notes, "the base run did not complete: "+base.EndText())
	}
	byMetric := map[string]Budget{}
	for _, b := range budgets {
		byMetric[b.Metric] = b
	}
	judged := map[string]int{}
	latency := []string{"p50", "p90", "p95", "p99", "p99_9"}
	shown := map[string]bool{"p95": true, "p99": true}
	for _, b := range budgets {
		shown[b.Metric] = true
	}
	// why reports why the candidate lacks a figure of scenario sc
	why := func(sc, metric string) string {
		x := cand.Scenarios[sc]
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
	add := func(what, scope, scenario, metric string, b, x *float64) {
		row := CompareRow{What: what, Scope: scope, Metric: metric, Base: b, Cand: x}
		if bud, ok := byMetric[metric]; ok {
			row.Budget = bud.String()
			switch {
			case b != nil && x != nil:
				judged[metric]++
				limit := bud.Value
				if bud.Relative {
					limit = math.Abs(*b) * bud.Value / 100
				}
				if *x-*b > limit+1e-12 {
					row.Fail = true
					c.Failures = append(c.Failures, fmt.Sprintf("%s %s %s: base %s, candidate %s exceeds budget %s",
						what, scope, metric, fmtOpt(b), fmtOpt(x), bud))
				}
			case b != nil:
				row.Fail, row.Note = true, why(scenario, metric)
				c.Failures = append(c.Failures, fmt.Sprintf("%s %s %s: base %s, %s: budget %s cannot pass on missing data",
					what, scope, metric, fmtOpt(b), row.Note, bud))
			case x == nil:
				row.Fail, row.Note = true, "missing in both runs"
				c.Failures = append(c.Failures, fmt.Sprintf("%s %s %s: no figure in either run: budget %s cannot pass on missing data",
					what, scope, metric, bud))
			default:
				row.Note = "new in candidate: not judged"
			}
		} else if b != nil && x == nil {
			row.Note = why(scenario, metric)
		} else if b == nil && x != nil {
			row.Note = "new in candidate"
		}
		c.Rows = append(c.Rows, row)
	}
	dist := func(d *Dist, m string) *float64 {
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
	// requests, steady only
	type rk struct{ scenario, phase, endpoint, proto string }
	rows := map[rk][2]*RequestRow{}
	collect := func(s *Summary, i int) {
		for _, r := range s.Requests {
			if r.Regime != "steady" {
				continue
			}
			k := rk{r.Scenario, r.Phase, r.Endpoint, r.Protocol}
			v := rows[k]
			v[i] = r
			rows[k] = v
		}
	}
	collect(base, 0)
	collect(cand, 1)
	keys := make([]rk, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.phase != b.phase {
			return a.phase < b.phase
		}
		if a.endpoint != b.endpoint {
			return a.endpoint < b.endpoint
		}
		if a.scenario != b.scenario {
			return a.scenario < b.scenario
		}
		return a.proto < b.proto
	})
	for _, k := range keys {
		v := rows[k]
		scope := fmt.Sprintf("%s/%s/%s/%s", orDash(k.phase), orDash(k.endpoint), k.scenario, k.proto)
		var bd, cd *Dist
		var be, ce *float64
		if v[0] != nil {
			bd, be = &v[0].Dist, fp(v[0].ErrorRate)
		}
		if v[1] != nil {
			cd, ce = &v[1].Dist, fp(v[1].ErrorRate)
		}
		for _, m := range latency {
			if shown[m] {
				add("request", scope, k.scenario, m, dist(bd, m), dist(cd, m))
			}
		}
		add("request", scope, k.scenario, "errors", be, ce)
	}
	names := map[string]bool{}
	for n := range base.Scenarios {
		names[n] = true
	}
	for n := range cand.Scenarios {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		b, x := base.Scenarios[n], cand.Scenarios[n]
		reg := func(s *Scenario) *Dist {
			if s == nil {
				return nil
			}
			return s.Regimes["steady"]
		}
		for _, m := range latency {
			if shown[m] {
				add("iteration", n, n, m, dist(reg(b), m), dist(reg(x), m))
			}
		}
		ttss := func(s *Scenario) *float64 {
			if s == nil {
				return nil
			}
			return s.TTSSMs
		}
		cold := func(s *Scenario) *float64 {
			if s == nil {
				return nil
			}
			return fp(s.ColdStart.DurationMs)
		}
		excess := func(s *Scenario) *float64 {
			if s == nil {
				return nil
			}
			return s.ColdStart.ExcessMs
		}
		add("scenario", n, n, "ttss", ttss(b), ttss(x))
		add("scenario", n, n, "cold_start", cold(b), cold(x))
		add("scenario", n, n, "cold_excess", excess(b), excess(x))
		// the settled view (whole run): its steady iteration percentiles and TTSS
		settled := func(s *Scenario, m string) *float64 {
			if s == nil || s.Settled == nil || !s.Settled.Steady || s.Settled.Stats == nil {
				return nil
			}
			return settledFigure(s.Settled, strings.TrimPrefix(m, "settled_"))
		}
		for _, m := range []string{"settled_p50", "settled_p95", "settled_p99", "settled_ttss"} {
			if m == "settled_p95" || m == "settled_p99" || shown[m] {
				add("settled", n, n, m, settled(b, m), settled(x, m))
			}
		}
	}
	for _, b := range budgets {
		if judged[b.Metric] == 0 && !c.failedOn(b.Metric) {
			c.Failures = append(c.Failures, fmt.Sprintf("budget %s judged no figure: no %s is in both runs; it cannot pass on no data",
				b, b.Metric))
		}
	}
	return c
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

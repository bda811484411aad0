package results

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A LimitRule is one budget of `k6 x regime gate`: a figure of the settled
// view against a limit (ms for durations, a fraction for the error rate).
type LimitRule struct {
	Text   string // as given
	Metric string
	Op     string
	Limit  float64
}

// LimitMetrics are the settled figures a gate budget can name.
var LimitMetrics = []string{"p50", "p90", "p95", "p99", "max", "mean", "error_rate", "ttss"}

const limitGrammar = "budgets are METRIC OP VALUE separated by commas, OP one of < <= > >=, " +
	"durations with a unit (ns, us, µs, ms, s, m; a bare number is ms), error_rate as a fraction (0.01) or a percentage (1%), " +
	"e.g. 'p95<300ms,p99<1s,error_rate<1%,ttss<20s'; metrics: "

var limitRe = regexp.MustCompile(`^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*(.+?)\s*$`)

// ParseLimits parses a --budget value; it reports every bad item at once.
func ParseLimits(spec string) ([]LimitRule, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, errors.New("--budget: no budget given; " + limitGrammar + strings.Join(LimitMetrics, ", "))
	}
	valid := map[string]bool{}
	for _, m := range LimitMetrics {
		valid[m] = true
	}
	var out []LimitRule
	var errs []error
	for _, item := range strings.Split(spec, ",") {
		m := limitRe.FindStringSubmatch(item)
		if m == nil {
			errs = append(errs, fmt.Errorf("--budget: %q is not METRIC OP VALUE", strings.TrimSpace(item)))
			continue
		}
		r := LimitRule{Text: strings.TrimSpace(item), Metric: m[1], Op: m[2]}
		if !valid[r.Metric] {
			errs = append(errs, fmt.Errorf("--budget: unknown metric %q in %q", r.Metric, r.Text))
			continue
		}
		v, err := parseLimitValue(r.Metric, m[3])
		if err != nil {
			errs = append(errs, fmt.Errorf("--budget: %q: %w", r.Text, err))
			continue
		}
		r.Limit = v
		out = append(out, r)
	}
	if len(errs) > 0 {
		errs = append(errs, errors.New(limitGrammar+strings.Join(LimitMetrics, ", ")))
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func parseLimitValue(metric, v string) (float64, error) {
	if metric == "error_rate" {
		num, pct := strings.CutSuffix(v, "%")
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return 0, fmt.Errorf("error_rate limit %q must be a non-negative fraction or percentage", v)
		}
		if pct {
			f /= 100
		}
		if f > 1 {
			// a rate is at most 1: error_rate<150% (or <2) holds for every run
			return 0, fmt.Errorf("error_rate limit %q is beyond 100%%: a fraction from 0 to 1 or a percentage from 0%% to 100%%", v)
		}
		return f, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 {
		return f, nil // ms
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s limit %q must be a non-negative duration (e.g. 300ms, 1.5s) or a number of ms", metric, v)
	}
	return float64(d) / float64(time.Millisecond), nil
}

// LimitVerdict is one budget judged on one settled view.
type LimitVerdict struct {
	View  string // scenario, or scenario/endpoint
	Rule  LimitRule
	Value *float64 // nil: no figure
	OK    bool
	Note  string
}

// GateResult is the verdict of `k6 x regime gate`.
type GateResult struct {
	Verdicts []LimitVerdict
	// Unsettled lists the judged views without a settled steady state, with
	// the reason: each fails the gate.
	Unsettled []string
	// Partial lists the judged views that the settled view marked partial
	// (the run seen cut short at handleSummary): a note.
	Partial []string
	// Incomplete says how the run ended when it did not complete (summary
	// .json's end, as compare and history read it): the gate fails unless
	// AllowPartial (a run cut short did not run the whole load).
	Incomplete   string
	AllowPartial bool
}

// Passed says whether every budget held on every judged view and each had
// a settled steady state.
func (g *GateResult) Passed() bool {
	if len(g.Unsettled) > 0 || len(g.Verdicts) == 0 || (g.Incomplete != "" && !g.AllowPartial) {
		return false
	}
	for _, v := range g.Verdicts {
		if !v.OK {
			return false
		}
	}
	return true
}

// JudgeSettled judges rules on the settled views of s: every scenario's, or
// scenario's alone, or its endpoint's. Bad selections are errors (the
// caller's exit status 2), as is a summary written before the settled view
// existed.
func JudgeSettled(s *Summary, rules []LimitRule, scenarios []string, endpoint string) (*GateResult, error) {
	names := s.SortedScenarios()
	if len(names) == 0 {
		return nil, errors.New("the summary has no scenario")
	}
	if len(scenarios) > 0 {
		for _, sc := range scenarios {
			if s.Scenarios[sc] == nil {
				return nil, fmt.Errorf("--scenario: no scenario %q; scenarios: %s", sc, strings.Join(names, ", "))
			}
		}
		if endpoint != "" && len(scenarios) > 1 {
			return nil, errors.New("--endpoint needs exactly one --scenario")
		}
		names = slices.Compact(slices.Sorted(slices.Values(scenarios)))
	} else if endpoint != "" {
		return nil, errors.New("--endpoint needs --scenario")
	}
	res := &GateResult{}
	if !s.Completed() {
		res.Incomplete = s.EndText()
	}
	for _, name := range names {
		sc := s.Scenarios[name]
		v := sc.Settled
		if v == nil {
			for _, w := range s.Warnings {
				if strings.HasPrefix(w, "scenario "+name+": the settled view cannot be written") {
					return nil, fmt.Errorf("scenario %s has no settled view: the run could not write it (summary.json's warning: %s)", name, w)
				}
			}
			return nil, fmt.Errorf("scenario %s has no settled view: the folder was written before the settled view existed (summary.json field scenarios.%s.settled)", name, name)
		}
		label := name
		if endpoint != "" {
			eps := make([]string, 0, len(v.Endpoints))
			for e := range v.Endpoints {
				eps = append(eps, e)
			}
			sort.Strings(eps)
			if len(eps) == 0 && v.FromSeries {
				return nil, fmt.Errorf("--endpoint: scenario %s was re-settled by merge from its instances' iteration series, "+
					"which keep no endpoint views: gate each instance's folder", name)
			}
			if len(eps) == 0 {
				return nil, fmt.Errorf("--endpoint: scenario %s has no endpoint views (they need scope: 'endpoint' in regime.configure())", name)
			}
			ev := v.Endpoints[endpoint]
			if ev == nil {
				return nil, fmt.Errorf("--endpoint: scenario %s has no endpoint %q; endpoints: %s", name, endpoint, strings.Join(eps, ", "))
			}
			v, label = ev, name+"/"+endpoint
		}
		if v.Partial {
			res.Partial = append(res.Partial, label)
		}
		if !v.Steady || v.Stats == nil {
			res.Unsettled = append(res.Unsettled, fmt.Sprintf("%s: no settled steady state (%s)", label, v.Reason))
			continue
		}
		if v.Stats.Count <= 0 && v.Stats.Requests <= 0 {
			// a steady state of nothing: a damaged file, never a pass (a
			// view steady on requests whose iterations all started before
			// it, one long loop per VU, has no iteration figure to judge:
			// settledFigure gives none, and the budget fails)
			return nil, fmt.Errorf("%s: the settled steady state counts %d iterations and %d requests (settled.stats): a damaged summary",
				label, v.Stats.Count, v.Stats.Requests)
		}
		for _, r := range rules {
			if err := mergedCanJudge(v, label, r.Metric); err != nil {
				return nil, err
			}
			val := settledFigure(v, r.Metric)
			if val != nil && !(*val >= 0) {
				return nil, fmt.Errorf("%s: %s is %g in the settled view: a damaged summary", label, r.Metric, *val)
			}
			lv := LimitVerdict{View: label, Rule: r, Value: val}
			switch {
			case val == nil:
				what := "iterations"
				if r.Metric == "error_rate" {
					what = "requests"
				}
				lv.Note = "no figure (" + r.Metric + " needs " + what + " that started in the steady state)"
			default:
				lv.OK = compareLimit(*val, r.Op, r.Limit)
			}
			res.Verdicts = append(res.Verdicts, lv)
		}
	}
	return res, nil
}

// mergedCanJudge refuses a budget that a settled view re-settled by merge
// cannot judge honestly: the error rate (the series carry no requests),
// and, when points held several iterations, the tail (their medians
// understate it: a budget would pass on a tail it never saw).
func mergedCanJudge(v *Settled, label, metric string) error {
	if !v.FromSeries {
		return nil
	}
	switch metric {
	case "error_rate":
		return fmt.Errorf("%s: error_rate: the settled view of a merged folder has no error rate "+
			"(merge re-settles from the instances' iteration series, which carry no request counts): gate each instance's folder", label)
	case "p90", "p95", "p99", "max":
		if v.Approximate {
			return fmt.Errorf("%s: %s: the settled view of this merged folder is approximate (points of its series held several "+
				"iterations, recorded at their median, so its %s understates the tail): gate each instance's folder, "+
				"or raise seriesLimit in regime.configure() so that every point is one iteration", label, metric, metric)
		}
	}
	return nil
}

func settledFigure(v *Settled, metric string) *float64 {
	st := v.Stats
	if st == nil {
		return nil
	}
	switch metric {
	case "p50", "p90", "p95", "p99", "max", "mean":
		if st.Count <= 0 {
			return nil // no iteration started within the steady state: no figure, never a 0
		}
	}
	switch metric {
	case "p50":
		return fp(st.P50Ms)
	case "p90":
		return fp(st.P90Ms)
	case "p95":
		return fp(st.P95Ms)
	case "p99":
		return fp(st.P99Ms)
	case "max":
		return fp(st.MaxMs)
	case "mean":
		return fp(st.MeanMs)
	case "error_rate":
		return st.ErrorRate
	case "ttss":
		return v.TTSSMs
	}
	return nil
}

func compareLimit(v float64, op string, limit float64) bool {
	switch op {
	case "<":
		return v < limit
	case "<=":
		return v <= limit
	case ">":
		return v > limit
	}
	return v >= limit
}

// Text is the gate's report: one line per view and budget, then the verdict.
func (g *GateResult) Text() string {
	var b strings.Builder
	if g.Incomplete != "" {
		if g.AllowPartial {
			fmt.Fprintf(&b, "NOTE the run did not complete (%s): judged on what it ran\n", g.Incomplete)
		} else {
			fmt.Fprintf(&b, "FAIL the run did not complete (%s): a run cut short did not run the whole load; --allow-incomplete judges what it ran\n", g.Incomplete)
		}
	}
	for _, p := range g.Partial {
		fmt.Fprintf(&b, "NOTE %s: partial (run interrupted): the settled view of what the run saw\n", p)
	}
	for _, u := range g.Unsettled {
		fmt.Fprintf(&b, "FAIL %s\n", u)
	}
	for _, v := range g.Verdicts {
		status := "ok  "
		if !v.OK {
			status = "FAIL"
		}
		val := "-"
		if v.Value != nil {
			if v.Rule.Metric == "error_rate" {
				val = fmt.Sprintf("%.4g%%", 100**v.Value)
			} else {
				val = fmt.Sprintf("%.3f ms", *v.Value)
			}
		}
		fmt.Fprintf(&b, "%s %s settled %s = %s (budget %s)", status, v.View, v.Rule.Metric, val, v.Rule.Text)
		if v.Note != "" {
			fmt.Fprintf(&b, ": %s", v.Note)
		}
		b.WriteString("\n")
	}
	if g.Passed() {
		b.WriteString("PASS: every budget held on the settled steady state\n")
	} else {
		b.WriteString("FAIL: the settled gate did not pass\n")
	}
	return b.String()
}

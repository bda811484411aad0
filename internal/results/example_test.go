package results_test

import (
	"fmt"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// Judging a run's settled view against budgets, as `k6 x regime gate`
// does with a results folder (results.LoadDir reads its summary.json): a
// scenario whose settled steady state meets p95 and the error rate but not
// its TTSS, and one that never settled, which fails whatever the budgets.
func ExampleJudgeSettled() {
	ttss, errRate := 18_500.0, 21/42_000.0
	s := &results.Summary{Scenarios: map[string]*results.Scenario{
		"gameplay": {Settled: &results.Settled{Steady: true, Class: "warmup", TTSSMs: &ttss,
			Stats: &results.SettledStats{Count: 42_000, Requests: 42_000, Failed: 21, ErrorRate: &errRate, P95Ms: 212, P99Ms: 390}}},
		"login": {Settled: &results.Settled{Class: "no-steady-state", Reason: "the level kept rising to the end"}},
	}}
	rules, err := results.ParseLimits("p95<300ms,error_rate<1%,ttss<15s")
	if err != nil {
		panic(err)
	}
	g, err := results.JudgeSettled(s, rules, nil, "")
	if err != nil {
		panic(err)
	}
	for _, v := range g.Verdicts {
		fmt.Printf("%s %s: %g, ok %v\n", v.View, v.Rule.Text, *v.Value, v.OK)
	}
	fmt.Println(g.Unsettled)
	fmt.Println("passed:", g.Passed())
	// Output:
	// gameplay p95<300ms: 212, ok true
	// gameplay error_rate<1%: 0.0005, ok true
	// gameplay ttss<15s: 18500, ok false
	// [login: no settled steady state (the level kept rising to the end)]
	// passed: false
}

// Budgets are checked whole: every bad item is reported at once, naming
// the valid metrics.
func ExampleParseLimits() {
	_, err := results.ParseLimits("p95<300ms,p97<1s,ttss=20s")
	fmt.Println(err)
	// Output:
	// --budget: unknown metric "p97" in "p97<1s"
	// --budget: "ttss=20s" is not METRIC OP VALUE
	// budgets are METRIC OP VALUE separated by commas, OP one of < <= > >=, durations with a unit (ns, us, µs, ms, s, m; a bare number is ms), error_rate as a fraction (0.01) or a percentage (1%), e.g. 'p95<300ms,p99<1s,error_rate<1%,ttss<20s'; metrics: p50, p90, p95, p99, max, mean, error_rate, ttss
}

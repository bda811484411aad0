package regimecli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

func withSettled(steady, partial bool) func(s *results.Summary) {
	return func(s *results.Summary) {
		ttss, er := 8000.0, 0.002
		v := &results.Settled{Steady: steady, Class: "warmup", Partial: partial, TTSSMs: &ttss,
			Boundary: &results.Point{Index: 800, ElapsedMs: ttss},
			Stats:    &results.SettledStats{Count: 1000, Requests: 1000, Failed: 2, ErrorRate: &er, P50Ms: 5, P90Ms: 7, P95Ms: 8, P99Ms: 12, MaxMs: 40, MeanMs: 5.5},
			Endpoints: map[string]*results.Settled{"get": {Steady: true, Class: "flat", TTSSMs: &ttss,
				Stats: &results.SettledStats{Count: 1000, P95Ms: 30}}}}
		if !steady {
			v = &results.Settled{Class: "no-steady-state", Reason: "the level drifts by +60%"}
		}
		s.Scenarios["load"].Settled = v
		if partial {
			s.End = &results.RunEnd{Status: results.EndInterrupted, Signal: "SIGINT"}
		}
	}
}

// TestGateCommand: k6 x regime gate exits 0 when the settled figures meet
// the budgets, 99 when one does not or there is no settled steady state,
// and 2 on bad input, naming it.
func TestGateCommand(t *testing.T) {
	ok := summaryDir(t, withSettled(true, false))
	unsettled := summaryDir(t, withSettled(false, false))
	partial := summaryDir(t, withSettled(true, true))
	old := summaryDir(t, nil)
	// merge's re-settled views: from the series, exact or not
	mergedView := func(approximate bool) func(s *results.Summary) {
		return func(s *results.Summary) {
			withSettled(true, false)(s)
			v := s.Scenarios["load"].Settled
			v.FromSeries, v.Approximate, v.Endpoints = true, approximate, nil
			v.Stats.Requests, v.Stats.Failed, v.Stats.ErrorRate = 0, 0, nil
		}
	}
	merged, mergedApprox := summaryDir(t, mergedView(false)), summaryDir(t, mergedView(true))

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"met", []string{"gate", ok, "--budget", "p95<10ms,p99<=12,error_rate<1%,ttss<9s"}, 0, []string{"ok   load settled p95 = 8.000 ms (budget p95<10ms)", "PASS"}},
		{"exceeded", []string{"gate", ok, "--budget", "p95<10ms,p99<11ms"}, 99, []string{"FAIL load settled p99 = 12.000 ms (budget p99<11ms)", "FAIL: the settled gate"}},
		{"error rate", []string{"gate", ok, "--budget", "error_rate<0.1%"}, 99, []string{"FAIL load settled error_rate = 0.2%"}},
		{"endpoint", []string{"gate", ok, "--scenario", "load", "--endpoint", "get", "--budget", "p95<20ms"}, 99, []string{"FAIL load/get settled p95 = 30.000 ms"}},
		{"no steady state", []string{"gate", unsettled, "--budget", "p95<1s"}, 99, []string{"FAIL load: no settled steady state (the level drifts by +60%)"}},
		{"partial", []string{"gate", partial, "--budget", "p95<1s"}, 99, []string{"FAIL the run did not complete (interrupted by signal SIGINT", "--allow-incomplete"}},
		{"partial allowed", []string{"gate", partial, "--budget", "p95<1s", "--allow-incomplete"}, 0, []string{"NOTE the run did not complete", "NOTE load: partial (run interrupted)"}},
		{"missing folder", []string{"gate", filepath.Join(t.TempDir(), "nope"), "--budget", "p95<1s"}, 2, []string{"nope"}},
		{"old summary", []string{"gate", old, "--budget", "p95<1s"}, 2, []string{"written before the settled view existed", "scenarios.load.settled"}},
		{"unknown metric", []string{"gate", ok, "--budget", "p97<1s"}, 2, []string{`unknown metric "p97"`, "metrics: p50, p90"}},
		{"malformed", []string{"gate", ok, "--budget", "p95=300"}, 2, []string{`"p95=300" is not METRIC OP VALUE`}},
		{"bad value", []string{"gate", ok, "--budget", "p95<fast"}, 2, []string{`p95 limit "fast"`}},
		{"no budget", []string{"gate", ok}, 2, []string{"no budget given"}},
		{"unknown scenario", []string{"gate", ok, "--scenario", "x", "--budget", "p95<1s"}, 2, []string{`no scenario "x"; scenarios: load`}},
		{"error rate beyond 100%", []string{"gate", ok, "--budget", "error_rate<150%"}, 2, []string{`error_rate limit "150%" is beyond 100%`}},
		{"unknown endpoint", []string{"gate", ok, "--scenario", "load", "--endpoint", "x", "--budget", "p95<1s"}, 2, []string{`no endpoint "x"; endpoints: get`}},
		{"merged exact", []string{"gate", merged, "--budget", "p99<=12,ttss<9s"}, 0, []string{"PASS"}},
		{"merged error rate", []string{"gate", merged, "--budget", "p95<10ms,error_rate<1%"}, 2, []string{"load: error_rate: the settled view of a merged folder has no error rate", "gate each instance's folder"}},
		{"merged approximate tail", []string{"gate", mergedApprox, "--budget", "p50<10ms,p99<1s"}, 2, []string{"load: p99: the settled view of this merged folder is approximate", "seriesLimit"}},
		{"merged approximate median", []string{"gate", mergedApprox, "--budget", "p50<10ms,ttss<9s"}, 0, []string{"PASS"}},
		{"merged endpoint", []string{"gate", merged, "--scenario", "load", "--endpoint", "get", "--budget", "p95<1s"}, 2, []string{"re-settled by merge", "keep no endpoint views"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runRegime(t, tc.args...)
			require.Equal(t, tc.code, code, out)
			for _, w := range tc.want {
				require.Contains(t, out, w)
			}
		})
	}
	// a summary of a newer schema is refused, not misread
	newer := summaryDir(t, withSettled(true, false))
	b, err := os.ReadFile(filepath.Join(newer, results.SummaryFile))
	require.NoError(t, err)
	b = []byte(strings.Replace(string(b), fmt.Sprintf(`"schema":%d,`, results.SchemaVersion), `"schema":99,`, 1))
	require.Contains(t, string(b), `"schema":99,`)
	require.NoError(t, os.WriteFile(filepath.Join(newer, results.SummaryFile), b, 0o600))
	code, out := runRegime(t, "gate", newer, "--budget", "p95<1s")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "schema version 99")
}

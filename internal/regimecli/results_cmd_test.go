package regimecli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/cmd/state"
	"go.k6.io/k6/v2/errext"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// runRegime runs `k6 x regime ARGS` in process and returns the exit status
// k6 would exit with (255 for an error without a code) and the output.
func runRegime(t *testing.T, args ...string) (int, string) {
	t.Helper()
	gs := state.NewGlobalState(context.Background())
	var out bytes.Buffer
	gs.Stdout.Writer, gs.Stderr.Writer = &out, &out
	// mounted as k6 mounts it, under `k6 x` (cobra gives a root command
	// behaviours a subcommand lacks: its own help command, unknown
	// command errors)
	root := &cobra.Command{Use: "k6", SilenceUsage: true, SilenceErrors: true}
	x := &cobra.Command{Use: "x"}
	root.AddCommand(x)
	x.AddCommand(NewCommand(gs))
	root.SetArgs(append([]string{"x", "regime"}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	if err == nil {
		return 0, out.String()
	}
	var ec errext.HasExitCode
	if errors.As(err, &ec) {
		return int(ec.ExitCode()), out.String() + err.Error()
	}
	return 255, out.String() + err.Error()
}

var summaryDirs atomic.Int64

// summaryDir writes a results folder holding only summary.json (all that
// compare reads): scenario load with steady iterations and one request row.
func summaryDir(t *testing.T, edit func(s *results.Summary)) string {
	t.Helper()
	ttss := 1000.0
	// each folder a run of its own (profile and history refuse one run twice)
	s := &results.Summary{Schema: results.SchemaVersion, RunID: fmt.Sprint("run-", summaryDirs.Add(1)), Instances: 1,
		End: &results.RunEnd{Status: results.EndCompleted},
		Scenarios: map[string]*results.Scenario{"load": {Class: "warmup", Regime: "steady", Steady: true, TTSSMs: &ttss,
			Regimes: map[string]*results.Dist{"steady": {Count: 100, P50: 5, P95: 8, P99: 9}}}},
		Requests: []*results.RequestRow{{Scenario: "load", Phase: "main", Regime: "steady", Endpoint: "get", Protocol: "http",
			Dist: results.Dist{Count: 100, P50: 4, P95: 7, P99: 8}}},
	}
	if edit != nil {
		edit(s)
	}
	dir := t.TempDir()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, results.SummaryFile), b, 0o600))
	return dir
}

// TestResultsCommandsExitStatus: compare exits 1 on a failed budget (it
// exited 255) and on missing data (it passed), 2 on trouble; merge and
// report refuse what would overwrite or double-count, with 2.
func TestResultsCommandsExitStatus(t *testing.T) {
	t.Parallel()
	base := summaryDir(t, nil)
	slower := summaryDir(t, func(s *results.Summary) { s.Requests[0].P95 = 20 })
	empty := summaryDir(t, func(s *results.Summary) { s.Scenarios, s.Requests = map[string]*results.Scenario{}, nil })
	neverSteady := summaryDir(t, func(s *results.Summary) {
		s.Scenarios["load"].TTSSMs, s.Scenarios["load"].Steady = nil, false
		s.Scenarios["load"].Regimes = map[string]*results.Dist{}
		s.Requests[0].Regime = "warmup"
	})
	interrupted := summaryDir(t, func(s *results.Summary) {
		s.End = &results.RunEnd{Status: results.EndInterrupted, Signal: "SIGINT"}
	})
	out := filepath.Join(t.TempDir(), "merged")
	budgets := "p95=+10%,errors=+0.01,ttss=+20%"
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"within budget", []string{"compare", base, base, "--fail-on", budgets}, 0, "no budget exceeded"},
		{"over budget", []string{"compare", base, slower, "--fail-on", budgets}, 1, "exceeds budget p95=+10%"},
		{"candidate without scenarios", []string{"compare", base, empty, "--fail-on", budgets}, 1, "scenario load missing in candidate"},
		{"candidate never steady", []string{"compare", base, neverSteady, "--fail-on", budgets}, 1, "candidate never reached steady state in load"},
		{"interrupted base refused", []string{"compare", interrupted, base, "--fail-on", budgets}, 2, "the base run did not complete: interrupted by signal SIGINT"},
		{"interrupted base allowed", []string{"compare", interrupted, base, "--fail-on", budgets, "--allow-incomplete-base"}, 0, "NOTE: the base run did not complete"},
		{"bad budget", []string{"compare", base, base, "--fail-on", "p95=ten"}, 2, "valid forms"},
		{"one folder", []string{"compare", base}, 2, "compare takes BASE_DIR CANDIDATE_DIR (or --profile profile.json RUN_DIR), got 1 folder(s)"},
		{"unknown flag", []string{"compare", base, base, "--bogus"}, 2, "unknown flag: --bogus"},
		{"missing folder", []string{"compare", base, filepath.Join(base, "nope")}, 2, "no such file"},
		{"merge an input twice", []string{"merge", base, base + "/.", "--out", out}, 2, "is the same folder as input"},
		{"merge into an input", []string{"merge", base, slower, "--out", slower}, 2, "merge never overwrites its inputs"},
		{"merge without --out", []string{"merge", base}, 2, "--out DIR is required"},
		{"report of a folder that is not one", []string{"report", t.TempDir()}, 2, "summary.json"},
		{"report over summary.json", []string{"report", base, "--out", filepath.Join(base, "summary.json")}, 2, "would replace a results folder's data file"},
		{"detect usage error", []string{"detect", "--max-groups", "0", "x.csv"}, 2, "--max-groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, txt := runRegime(t, tc.args...)
			require.Equal(t, tc.code, code, txt)
			require.Contains(t, txt, tc.want)
		})
	}
	_, err := os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist, "no merge output was written")
}

// TestCompareWarnsOfMixedSchemas: compare and history read a folder of the
// older summary.json version and say that its figures are not all the same
// quantity as the newer folder's; folders of one version get no such note.
func TestCompareWarnsOfMixedSchemas(t *testing.T) {
	t.Parallel()
	base := summaryDir(t, func(s *results.Summary) { s.Schema = 1 })
	cand := summaryDir(t, nil)
	code, out := runRegime(t, "compare", base, cand)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "compare: these folders mix summary.json versions")
	require.Contains(t, out, "schema 1: "+base)
	require.Contains(t, out, results.SchemaChanges[2])
	code, out = runRegime(t, "history", base, cand)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "history: these folders mix summary.json versions")
	code, out = runRegime(t, "compare", cand, summaryDir(t, nil))
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, "mix summary.json versions")
}

// TestUnknownCommandAndRepeatedFlags: a mistyped command and a flag given
// twice are usage errors (exit 2) naming them, never a silent success;
// --budget and --fail-on may be repeated and every budget counts.
func TestUnknownCommandAndRepeatedFlags(t *testing.T) {
	code, out := runRegime(t, "histroy", "results/")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `unknown command "histroy"`)
	require.Contains(t, out, "did you mean history?")
	code, out = runRegime(t)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Available Commands")
	code, out = runRegime(t, "help")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Available Commands")
	code, out = runRegime(t, "help", "gate")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "--budget")
	code, out = runRegime(t, "help", "gaet")
	require.Equal(t, 2, code, out)

	ok := summaryDir(t, withSettled(true, false))
	code, out = runRegime(t, "gate", ok, "--budget", "p95<1s", "--budget", "p95<1ms")
	require.Equal(t, 99, code, "the first --budget is judged too: %s", out)
	require.Contains(t, out, "FAIL load settled p95 = 8.000 ms (budget p95<1ms)")
	require.Contains(t, out, "ok   load settled p95 = 8.000 ms (budget p95<1s)")
	code, out = runRegime(t, "gate", ok, "--scenario", "load", "--endpoint", "a", "--endpoint", "b", "--budget", "p95<1s")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `"--endpoint" flag: given twice ("a", then "b")`)
	// --scenario is repeatable: every scenario named is judged, an unknown one refused
	code, out = runRegime(t, "gate", ok, "--scenario", "load", "--scenario", "load", "--budget", "p95<1s")
	require.Equal(t, 0, code, out)
	code, out = runRegime(t, "gate", ok, "--scenario", "load", "--scenario", "other", "--budget", "p95<1s")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `--scenario: no scenario "other"; scenarios: load`)

	base, cand := summaryDir(t, nil), summaryDir(t, func(s *results.Summary) { s.Requests[0].P95 = 70 })
	code, out = runRegime(t, "compare", base, cand, "--fail-on", "p99=+50%", "--fail-on", "p95=+10%")
	require.Equal(t, 1, code, "the first --fail-on is judged too: %s", out)
	code, out = runRegime(t, "compare", "--profile", "a.json", "--profile", "b.json", cand)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "given twice")
	code, out = runRegime(t, "detect", "--preset", "service", "--preset", "benchmark", "x.csv")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `"--preset" flag: given twice`)
}

// TestNoPassOnEmptyFigures: a row of no request has no error rate to pass
// a budget, and a settled steady state of no iteration (or a negative
// figure) is a damaged summary, not a pass.
func TestNoPassOnEmptyFigures(t *testing.T) {
	base := summaryDir(t, nil)
	empty := summaryDir(t, func(s *results.Summary) { s.Requests[0].Dist = results.Dist{} })
	code, out := runRegime(t, "compare", base, empty, "--fail-on", "errors=+0.01")
	require.Equal(t, 1, code, out)
	require.NotContains(t, out, "PASS", out)

	zero := summaryDir(t, func(s *results.Summary) {
		withSettled(true, false)(s)
		s.Scenarios["load"].Settled.Stats = &results.SettledStats{}
	})
	code, out = runRegime(t, "gate", zero, "--budget", "p95<1s")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "counts 0 iterations and 0 requests (settled.stats): a damaged summary")
	// steady on requests, no iteration started in it (one long loop per
	// VU): the iteration figures fail, the error rate is judged
	noIter := summaryDir(t, func(s *results.Summary) {
		withSettled(true, false)(s)
		er := 0.0
		s.Scenarios["load"].Settled.Stats = &results.SettledStats{Requests: 500, ErrorRate: &er}
	})
	code, out = runRegime(t, "gate", noIter, "--budget", "p95<1s,error_rate<1%")
	require.Equal(t, 99, code, out)
	require.Contains(t, out, "no figure (p95 needs iterations that started in the steady state)")
	require.Contains(t, out, "ok   load settled error_rate = 0% (budget error_rate<1%)")
	negative := summaryDir(t, func(s *results.Summary) {
		withSettled(true, false)(s)
		s.Scenarios["load"].Settled.Stats.P95Ms = -5
	})
	code, out = runRegime(t, "gate", negative, "--budget", "p95<1s")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "p95 is -5 in the settled view")
}

// TestSameRunTwice: profile and history refuse a run given twice under
// another name (a copied folder, a link), as merge does.
func TestSameRunTwice(t *testing.T) {
	same := func(s *results.Summary) { withSettled(true, false)(s); s.RunID = "r" }
	a := summaryDir(t, same)
	b := summaryDir(t, withSettled(true, false))
	copyDir := summaryDir(t, same) // a copy of a
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(a, link))
	out := filepath.Join(t.TempDir(), "h.csv")
	for _, args := range [][]string{
		{"history", "--out", out, a, b, copyDir},
		{"history", "--out", out, a, b, link},
		{"profile", "--out", filepath.Join(t.TempDir(), "p.json"), a, b, copyDir},
	} {
		code, txt := runRegime(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, txt)
		require.Contains(t, txt, "hold the same run (run_id r)", "%v", args)
	}
	require.NoFileExists(t, out)
}

// TestCompareScenarios: a probe scenario that never settles (the kit's
// 1-request/s scrape) fails a ttss budget of two identical runs; --scenario
// judges the load's scenarios only, and refuses one neither run has.
func TestCompareScenarios(t *testing.T) {
	t.Parallel()
	withProbe := func(s *results.Summary) {
		s.Scenarios["probe"] = &results.Scenario{Class: "no-steady-state", Regime: "warmup",
			Regimes: map[string]*results.Dist{"warmup": {Count: 90, P50: 1, P95: 2, P99: 3}}}
		s.Requests = append(s.Requests, &results.RequestRow{Scenario: "probe", Phase: "probe", Regime: "warmup", Endpoint: "metrics", Protocol: "http",
			Dist: results.Dist{Count: 90, P50: 1, P95: 2, P99: 3}})
	}
	base, cand := summaryDir(t, withProbe), summaryDir(t, withProbe)
	code, out := runRegime(t, "compare", base, cand, "--fail-on", "ttss=+20%")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "probe")
	code, out = runRegime(t, "compare", base, cand, "--fail-on", "ttss=+20%", "--scenario", "load")
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, "probe")
	code, out = runRegime(t, "compare", base, cand, "--fail-on", "ttss=+20%", "--scenario", "lod")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `--scenario: no scenario "lod" in either run; scenarios: load, probe`)
}

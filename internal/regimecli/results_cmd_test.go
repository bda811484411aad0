package regimecli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

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
	cmd := NewCommand(gs)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	if err == nil {
		return 0, out.String()
	}
	var ec errext.HasExitCode
	if errors.As(err, &ec) {
		return int(ec.ExitCode()), out.String() + err.Error()
	}
	return 255, out.String() + err.Error()
}

// summaryDir writes a results folder holding only summary.json (all that
// compare reads): scenario load with steady iterations and one request row.
func summaryDir(t *testing.T, edit func(s *results.Summary)) string {
	t.Helper()
	ttss := 1000.0
	s := &results.Summary{Schema: results.SchemaVersion, RunID: "r", Instances: 1,
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
		{"one folder", []string{"compare", base}, 2, "accepts 2 arg(s)"},
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

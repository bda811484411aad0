package extension

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/errext"
	"go.k6.io/k6/v2/errext/exitcodes"
	"go.k6.io/k6/v2/js/modulestest"
	"go.k6.io/k6/v2/lib"
	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// k6Err builds an error as k6 ends a run with: an exit code and an abort reason.
func k6Err(msg string, code exitcodes.ExitCode, reason errext.AbortReason) error {
	return errext.WithAbortReasonIfNone(errext.WithExitCodeIfNone(errors.New(msg), code), reason)
}

func TestDecideEnd(t *testing.T) {
	t.Parallel()
	ip := func(v int) *int { return &v }
	for _, tc := range []struct {
		name string
		f    endFacts
		want results.RunEnd
	}{
		{"completed", endFacts{haveExec: true, execStatus: lib.ExecutionStatusEnded}, results.RunEnd{Status: results.EndCompleted}},
		{"marked failed is still the planned end", endFacts{haveExec: true, execStatus: lib.ExecutionStatusMarkedAsFailed},
			results.RunEnd{Status: results.EndCompleted}},
		{"signal", endFacts{signal: "SIGINT", haveExec: true, execStatus: lib.ExecutionStatusInterrupted},
			results.RunEnd{Status: results.EndInterrupted, Signal: "SIGINT"}},
		{"threshold", endFacts{haveExec: true, execStatus: lib.ExecutionStatusInterrupted, thresholds: []string{"http_req_failed: rate<0.01"}},
			results.RunEnd{Status: results.EndAbortedByThreshold, Thresholds: []string{"http_req_failed: rate<0.01"}}},
		{"a failed abortOnFail threshold on a completed run did not abort it", endFacts{haveExec: true, execStatus: lib.ExecutionStatusEnded, thresholds: []string{"x: y"}},
			results.RunEnd{Status: results.EndCompleted}},
		{"interrupted for a reason k6 gives at exit", endFacts{haveExec: true, execStatus: lib.ExecutionStatusInterrupted},
			results.RunEnd{Status: results.EndAborted, Detail: "stopped before its end; k6 gives the reason when it exits"}},
		{"exit: no error", endFacts{haveExit: true}, results.RunEnd{Status: results.EndCompleted, ExitCode: ip(0)}},
		{"exit: SIGTERM named by k6's message", endFacts{haveExit: true,
			exitErr: k6Err("test run was aborted because k6 received a 'terminated' signal", exitcodes.ExternalAbort, errext.AbortedByUser)},
			results.RunEnd{Status: results.EndInterrupted, Signal: "SIGTERM", ExitCode: ip(105),
				Detail: "test run was aborted because k6 received a 'terminated' signal"}},
		{"exit: threshold", endFacts{haveExit: true, thresholds: []string{"a: b"},
			exitErr: k6Err("thresholds on metrics 'a' were crossed", exitcodes.ThresholdsHaveFailed, errext.AbortedByThreshold)},
			results.RunEnd{Status: results.EndAbortedByThreshold, Thresholds: []string{"a: b"}, ExitCode: ip(99),
				Detail: "thresholds on metrics 'a' were crossed"}},
		{"exit: thresholds failed at the end of a completed run", endFacts{haveExit: true,
			exitErr: k6Err("thresholds on metrics 'a' have been crossed", exitcodes.ThresholdsHaveFailed, errext.AbortedByThresholdsAfterTestEnd)},
			results.RunEnd{Status: results.EndCompleted, ExitCode: ip(99), Detail: "thresholds on metrics 'a' have been crossed"}},
		{"exit: test.abort()", endFacts{haveExit: true, exitErr: k6Err("test aborted", exitcodes.ScriptAborted, errext.AbortedByScriptAbort)},
			results.RunEnd{Status: results.EndAbortedByScript, ExitCode: ip(108), Detail: "test aborted"}},
		{"exit: setup timeout", endFacts{haveExit: true, exitErr: k6Err("setup() execution timed out after 1 seconds", exitcodes.SetupTimeout, errext.AbortedByTimeout)},
			results.RunEnd{Status: results.EndTimedOut, ExitCode: ip(100), Detail: "setup() execution timed out after 1 seconds"}},
		{"exit: an error without code or reason", endFacts{haveExit: true, haveExec: true, execStatus: lib.ExecutionStatusInterrupted, exitErr: errors.New("boom")},
			results.RunEnd{Status: results.EndAborted, ExitCode: ip(255), Detail: "boom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, *decideEnd(tc.f))
		})
	}
}

func TestExitError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	require.Equal(t, boom, exitError(&struct{ Error error }{boom}), "k6's *event.ExitData")
	require.NoError(t, exitError(&struct{ Error error }{}))
	require.NoError(t, exitError(nil))
	require.NoError(t, exitError(42))
	require.NoError(t, exitError(&struct{ Error string }{"not an error"}))
}

// initVU is a module instance in an init context, with a registry.
func initVU(t *testing.T, root *RootModule) (*modulestest.Runtime, *metrics.Registry) {
	t.Helper()
	registry := metrics.NewRegistry()
	metrics.RegisterBuiltinMetrics(registry)
	rt := modulestest.NewRuntime(t)
	rt.VU.InitEnvField.Registry = registry
	mi := root.NewModuleInstance(rt.VU).(*moduleInstance)
	require.NoError(t, rt.VU.Runtime().Set("regime", mi.Exports().Default))
	return rt, registry
}

// handleSummaryVU is a module instance in a VU context outside any scenario,
// as handleSummary, setup() and teardown() run.
func handleSummaryVU(t *testing.T, root *RootModule) *modulestest.Runtime {
	t.Helper()
	rt, registry := initVU(t, root)
	rt.MoveToVUContext(&lib.State{Tags: lib.NewVUStateTags(registry.RootTagSet())})
	return rt
}

// scenarioVU is a module instance configured with settings (a JS object
// literal), then in a VU context of scenario "load" with no regime tag yet.
func scenarioVU(t *testing.T, root *RootModule, settings string) *modulestest.Runtime {
	t.Helper()
	rt, registry := initVU(t, root)
	_, err := rt.VU.Runtime().RunString(`regime.configure({scenarios: {load: {}}}, ` + settings + `)`)
	require.NoError(t, err)
	rt.VU.CtxField = lib.WithScenarioState(rt.VU.CtxField, &lib.ScenarioState{Name: "load", StartTime: time.Now()})
	rt.MoveToVUContext(&lib.State{Tags: lib.NewVUStateTags(registry.RootTagSet().With("scenario", "load"))})
	return rt
}

// TestSaveResultsOnlyAfterTheTest: saveResults in setup(), the default
// function or teardown() (before k6's TestEnd) is an error, as in the init
// context; current() outside a scenario iteration is an error, never "".
func TestSaveResultsOnlyAfterTheTest(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	rt := handleSummaryVU(t, root)
	dir := t.TempDir()
	_, err := rt.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q})`, dir))
	require.ErrorContains(t, err, "saveResults() must be called from handleSummary")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)

	_, err = rt.VU.Runtime().RunString(`regime.current()`)
	require.ErrorContains(t, err, "no regime outside a scenario iteration")

	root.rs.testEnd()
	v, err := rt.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q})`, dir))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(v.String(), results.SummaryFile))
}

// TestCurrentWithoutTag: with tagging 'off' an iteration has no regime tag;
// current() gives its scenario's regime.
func TestCurrentWithoutTag(t *testing.T) {
	t.Parallel()
	rt := scenarioVU(t, NewRootModule(), `{tagging: 'off'}`)
	v, err := rt.VU.Runtime().RunString(`regime.current()`)
	require.NoError(t, err)
	require.Equal(t, "cold", v.String())
}

// TestSaveResultsReservedNames: extra files may not replace the folder's own.
func TestSaveResultsReservedNames(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	rt := handleSummaryVU(t, root)
	root.rs.testEnd()
	dir := t.TempDir()
	for _, name := range []string{"summary.json", "REPORT.html", "hdr", "series", "windows.csv", "requests.hlog", ".hidden", "../x", ""} {
		_, err := rt.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q, files: {%q: 'x'}})`, dir, name))
		require.ErrorContains(t, err, "option 'files'", name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// TestSaveResultsSameSecondSameTestID: saves in the same second with the
// same testid get two complete folders.
func TestSaveResultsSameSecondSameTestID(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	rt := handleSummaryVU(t, root)
	root.rs.testEnd()
	dir := t.TempDir()
	var paths []string
	for range 3 {
		v, err := rt.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q, testid: 'ci/run 1', files: {'note.txt': 'n'}})`, dir))
		require.NoError(t, err)
		paths = append(paths, v.String())
	}
	require.Len(t, map[string]bool{paths[0]: true, paths[1]: true, paths[2]: true}, 3)
	for _, p := range paths {
		require.Regexp(t, `/\d{8}T\d{6}Z-ci_run_1-[0-9a-f]{8}$`, p)
		s, err := results.ReadSummary(p)
		require.NoError(t, err)
		require.Equal(t, filepath.Base(p), s.RunID)
		require.Equal(t, results.EndCompleted, s.End.Status)
		require.FileExists(t, filepath.Join(p, "note.txt"))
		require.FileExists(t, filepath.Join(p, results.ReportFile))
	}
}

// TestRunEndSignalAndExit: a SIGINT during the test marks the folder
// interrupted at saveResults; k6's Exit event adds its exit status.
func TestRunEndSignalAndExit(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	var ch chan<- os.Signal
	root.rs.end.notify = func(c chan<- os.Signal, _ ...os.Signal) { ch = c }
	stopped := false
	root.rs.end.stop = func(chan<- os.Signal) { stopped = true }
	rt := handleSummaryVU(t, root)
	root.rs.end.testStart()
	ch <- syscall.SIGINT
	root.rs.testEnd()
	v, err := rt.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q})`, t.TempDir()))
	require.NoError(t, err)
	s, err := results.ReadSummary(v.String())
	require.NoError(t, err)
	require.Equal(t, &results.RunEnd{Status: results.EndInterrupted, Signal: "SIGINT"}, s.End)
	require.True(t, s.Aborted)

	root.rs.end.onExit(k6Err("test run was aborted because k6 received a 'interrupt' signal", exitcodes.ExternalAbort, errext.AbortedByUser))
	require.True(t, stopped, "the signal listener stops at exit")
	s, err = results.ReadSummary(v.String())
	require.NoError(t, err)
	require.Equal(t, results.EndInterrupted, s.End.Status)
	require.Equal(t, 105, *s.End.ExitCode)
	html, err := os.ReadFile(filepath.Join(v.String(), results.ReportFile))
	require.NoError(t, err)
	require.Contains(t, string(html), "interrupted by signal SIGINT")
	require.Contains(t, string(html), "k6 exit status 105")
}

// TestRequiredSaveFailureExits: a required saveResults that failed makes
// k6 exit 111 when it would exit 0; without required it exits as k6 says.
func TestRequiredSaveFailureExits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		required bool
		runErr   error
		want     int // -1: no exit call
	}{
		{"required, k6 exits 0", true, nil, exitResultsNotSaved},
		{"required, k6 exits 99 anyway", true, k6Err("thresholds", exitcodes.ThresholdsHaveFailed, errext.AbortedByThresholdsAfterTestEnd), -1},
		{"not required", false, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := NewRootModule()
			got := -1
			root.rs.end.exit = func(c int) { got = c }
			rt := handleSummaryVU(t, root)
			root.rs.testEnd()
			notDir := filepath.Join(t.TempDir(), "file")
			require.NoError(t, os.WriteFile(notDir, nil, 0o600))
			_, err := rt.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q, required: %v})`, notDir, tc.required))
			require.ErrorContains(t, err, "saveResults")
			root.rs.end.onExit(tc.runErr)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestObserveRefusesUnscalableValues: a first observe(5e-324) made the
// detector's scale infinite, so no later value could ever be steady.
func TestObserveRefusesUnscalableValues(t *testing.T) {
	t.Parallel()
	rt := scenarioVU(t, NewRootModule(), `{input: 'observe', detector: {method: 'benchmark'}}`)
	_, err := rt.VU.Runtime().RunString(`regime.observe(5e-324)`)
	require.ErrorContains(t, err, "5e-324 is below 1e-300")
	_, err = rt.VU.Runtime().RunString(`for (let i = 0; i < 2000; i++) regime.observe(10 + (i % 7) / 10)`)
	require.NoError(t, err)
	v, err := rt.VU.Runtime().RunString(`regime.current()`)
	require.NoError(t, err)
	require.Equal(t, "steady", v.String(), "values after the refused one settle")
}

// TestScriptAbortedMarkSurvivesExit: saveResults({aborted: true}) on a run
// k6 saw complete keeps the script's mark when k6's exit status is added.
func TestScriptAbortedMarkSurvivesExit(t *testing.T) {
	t.Parallel()
	root := NewRootModule()
	rt := handleSummaryVU(t, root)
	root.rs.testEnd()
	v, err := rt.VU.Runtime().RunString(fmt.Sprintf(`regime.saveResults({dir: %q, aborted: true})`, t.TempDir()))
	require.NoError(t, err)
	root.rs.end.onExit(nil)
	s, err := results.ReadSummary(v.String())
	require.NoError(t, err)
	require.Equal(t, results.EndAborted, s.End.Status)
	require.Contains(t, s.End.Detail, "marked aborted by the script")
	require.Equal(t, 0, *s.End.ExitCode)
}

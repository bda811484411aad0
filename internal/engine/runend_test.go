package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/errext"
	"go.k6.io/k6/v2/errext/exitcodes"
	"go.k6.io/k6/v2/lib"

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

// endedRun is a run state whose test has ended (k6's TestEnd), as
// handleSummary finds it.
func endedRun(t *testing.T) *RunState {
	t.Helper()
	rs := NewRunState()
	rs.testEnd()
	return rs
}

// saveJSON is saveResults' options as the JS module hands them over.
func saveJSON(format string, args ...any) []byte { return []byte(fmt.Sprintf(format, args...)) }

// TestSaveResultsAfterTheTest: SaveResults before k6's TestEnd (in setup(),
// the default function or teardown()) is an error that writes nothing,
// whatever its options; after it, it writes the folder.
func TestSaveResultsAfterTheTest(t *testing.T) {
	t.Parallel()
	rs := NewRunState()
	dir := t.TempDir()
	_, err := rs.SaveResults(saveJSON(`{"dir": %q}`, dir))
	require.ErrorIs(t, err, ErrNotAfterTest)
	_, err = rs.SaveResults([]byte(`{"nosuchkey": 1}`))
	require.ErrorIs(t, err, ErrNotAfterTest, "before the options are read")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
	require.False(t, rs.Ended())

	rs.testEnd()
	require.True(t, rs.Ended())
	_, err = rs.SaveResults([]byte(`{"nosuchkey": 1}`))
	require.ErrorContains(t, err, `saveResults: options: unknown key "nosuchkey"; valid keys: aborted, dir, extra, files, report, required, testid, thresholds`)
	path, err := rs.SaveResults(saveJSON(`{"dir": %q}`, dir))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(path, results.SummaryFile))
}

// TestSaveResultsReservedNames: extra files may not replace the folder's own.
func TestSaveResultsReservedNames(t *testing.T) {
	t.Parallel()
	rs := endedRun(t)
	dir := t.TempDir()
	for _, name := range []string{"summary.json", "REPORT.html", "hdr", "series", "windows.csv", "requests.hlog", ".hidden", "../x", ""} {
		_, err := rs.SaveResults(saveJSON(`{"dir": %q, "files": {%q: "x"}}`, dir, name))
		require.ErrorContains(t, err, "option 'files'", name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// TestSaveResultsLongTestID: a testid too long for the folder's name is
// refused up front, naming the option and its limit; the longest allowed
// saves.
func TestSaveResultsLongTestID(t *testing.T) {
	t.Parallel()
	rs := endedRun(t)
	dir := t.TempDir()
	_, err := rs.SaveResults(saveJSON(`{"dir": %q, "testid": %q}`, dir, strings.Repeat("t", 201)))
	require.ErrorContains(t, err, "option 'testid' is 201 characters long; at most 200")
	// each non-ASCII character is one '_' in the folder's name: 150 of them fit
	got, err := rs.SaveResults(saveJSON(`{"dir": %q, "testid": %q}`, dir, strings.Repeat("é", 150)))
	require.NoError(t, err)
	require.DirExists(t, got)
	got, err = rs.SaveResults(saveJSON(`{"dir": %q, "testid": %q}`, dir, strings.Repeat("t", 200)))
	require.NoError(t, err)
	require.DirExists(t, got)
}

// TestSaveResultsSameSecondSameTestID: saves in the same second with the
// same testid get two complete folders.
func TestSaveResultsSameSecondSameTestID(t *testing.T) {
	t.Parallel()
	rs := endedRun(t)
	dir := t.TempDir()
	var paths []string
	for range 3 {
		p, err := rs.SaveResults(saveJSON(`{"dir": %q, "testid": "ci/run 1", "files": {"note.txt": "n"}}`, dir))
		require.NoError(t, err)
		paths = append(paths, p)
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
	rs := NewRunState()
	var ch chan<- os.Signal
	rs.end.notify = func(c chan<- os.Signal, _ ...os.Signal) { ch = c }
	stopped := false
	rs.end.stop = func(chan<- os.Signal) { stopped = true }
	rs.end.testStart()
	ch <- syscall.SIGINT
	rs.testEnd()
	path, err := rs.SaveResults(saveJSON(`{"dir": %q}`, t.TempDir()))
	require.NoError(t, err)
	s, err := results.ReadSummary(path)
	require.NoError(t, err)
	require.Equal(t, &results.RunEnd{Status: results.EndInterrupted, Signal: "SIGINT"}, s.End)
	require.True(t, s.Aborted)

	rs.end.onExit(k6Err("test run was aborted because k6 received a 'interrupt' signal", exitcodes.ExternalAbort, errext.AbortedByUser))
	require.True(t, stopped, "the signal listener stops at exit")
	s, err = results.ReadSummary(path)
	require.NoError(t, err)
	require.Equal(t, results.EndInterrupted, s.End.Status)
	require.Equal(t, 105, *s.End.ExitCode)
	html, err := os.ReadFile(filepath.Join(path, results.ReportFile))
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
			rs := endedRun(t)
			got := -1
			rs.end.exit = func(c int) { got = c }
			notDir := filepath.Join(t.TempDir(), "file")
			require.NoError(t, os.WriteFile(notDir, nil, 0o600))
			_, err := rs.SaveResults(saveJSON(`{"dir": %q, "required": %v}`, notDir, tc.required))
			require.ErrorContains(t, err, "saveResults")
			rs.end.onExit(tc.runErr)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestScriptAbortedMarkSurvivesExit: saveResults({aborted: true}) on a run
// k6 saw complete keeps the script's mark when k6's exit status is added.
func TestScriptAbortedMarkSurvivesExit(t *testing.T) {
	t.Parallel()
	rs := endedRun(t)
	path, err := rs.SaveResults(saveJSON(`{"dir": %q, "aborted": true}`, t.TempDir()))
	require.NoError(t, err)
	rs.end.onExit(nil)
	s, err := results.ReadSummary(path)
	require.NoError(t, err)
	require.Equal(t, results.EndAborted, s.End.Status)
	require.Contains(t, s.End.Detail, "marked aborted by the script")
	require.Equal(t, 0, *s.End.ExitCode)
}

// TestCutShort: at TestEnd a run is cut short after a signal, not without
// one (no execution state: a run whose end is not known to be early).
func TestCutShort(t *testing.T) {
	t.Parallel()
	rs := NewRunState()
	var ch chan<- os.Signal
	rs.end.notify = func(c chan<- os.Signal, _ ...os.Signal) { ch = c }
	rs.end.stop = func(chan<- os.Signal) {}
	rs.end.testStart()
	require.False(t, rs.end.cutShort())
	ch <- syscall.SIGTERM
	require.True(t, rs.end.cutShort())
}

// TestTextSummaryOfAnInterruptedRun: textSummary() without saveResults()
// says that the run was cut short, as the saved text does (its figures read
// as a whole run's otherwise).
func TestTextSummaryOfAnInterruptedRun(t *testing.T) {
	rs := goldenRunState(t)
	txt, err := rs.TextSummary()
	require.NoError(t, err)
	require.NotContains(t, txt, "RUN ENDED EARLY")
	rs.end.mu.Lock()
	rs.end.signal = "SIGINT"
	rs.end.mu.Unlock()
	txt, err = rs.TextSummary()
	require.NoError(t, err)
	require.Contains(t, txt, "RUN ENDED EARLY")
	require.Contains(t, txt, "SIGINT")
	// summary() says so too; Report() (InfluxDB, summary.json) reads no
	// threshold and leaves it to them
	end := rs.SummaryReport().End
	require.NotNil(t, end)
	require.Equal(t, "SIGINT", end.Signal)
	require.Nil(t, rs.Report().End)
}

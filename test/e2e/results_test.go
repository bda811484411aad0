package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// resultsScript runs a constant arrival rate against URL and saves the
// results folder under OUT from handleSummary.
const resultsScript = `
import http from 'k6/http';
import regime from 'k6/x/regime';
export const options = {
  scenarios: { load: { executor: 'constant-arrival-rate', rate: 300, timeUnit: '1s', duration: __ENV.DURATION || '8s',
    preAllocatedVUs: 20, maxVUs: 40, tags: { phase: 'main' } } },
};
// windows of 250 ms, so that steady state is reached within 8 s (the
// service method needs 9 windows of a first level, 5 after a warm-up)
regime.configure(options, { detector: { window_min_duration: '250ms' } });
export default function () { http.get(__ENV.URL, { tags: { endpoint: 'get' } }); }
export function handleSummary(data) {
  const dir = regime.saveResults({ dir: __ENV.OUT, testid: __ENV.TESTID || '' });
  return { stdout: 'RESULTS=' + dir + '\n' + regime.textSummary() };
}
`

// runDir is the one run folder k6 wrote under out.
func runDir(t *testing.T, out string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(out, "*", results.SummaryFile))
	require.NoError(t, err)
	require.Len(t, m, 1, "one run folder under %s", out)
	return filepath.Dir(m[0])
}

// regimeCmd runs `k6 x regime ARGS...`.
func regimeCmd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k6Binary(t), append([]string{"x", "regime"}, args...)...)
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err)
	return 0, string(out)
}

// TestResultsSegmentsMergeCompareReport: two k6 processes run complementary
// execution segments of one test; their folders merged hold per-regime
// counts equal to the sum of theirs and the whole test's iteration count,
// with percentiles close to one process running the whole; compare passes
// a run against itself and fails a seeded p95 regression; report rebuilds
// report.html.
func TestResultsSegmentsMergeCompareReport(t *testing.T) {
	srv := newScheduleServer(t, coldWarmSteady(150, 400, 3*time.Millisecond))
	env := func(out string) map[string]string { return map[string]string{"URL": srv.URL, "OUT": out} }
	seq := "--execution-segment-sequence=0,1/2,1"
	outs := []string{t.TempDir(), t.TempDir()}
	done := make(chan k6Result, 2)
	for i, seg := range []string{"0:1/2", "1/2:1"} {
		go func() { done <- runK6(t, resultsScript, env(outs[i]), "--execution-segment="+seg, seq) }()
	}
	for range 2 {
		r := <-done
		require.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		require.Contains(t, r.Stdout, "Regimes per scenario")
	}
	srv.n.Store(0)
	wholeOut := t.TempDir()
	wr := runK6(t, resultsScript, env(wholeOut))
	require.Equal(t, 0, wr.ExitCode, wr.Stderr)
	whole := runDir(t, wholeOut)

	merged := filepath.Join(t.TempDir(), "merged")
	code, out := regimeCmd(t, "merge", runDir(t, outs[0]), runDir(t, outs[1]), "--out", merged)
	require.Equal(t, 0, code, out)

	var segs [2]*results.Summary
	for i := range outs {
		var err error
		segs[i], err = results.ReadSummary(runDir(t, outs[i]))
		require.NoError(t, err)
	}
	m, err := results.ReadSummary(merged)
	require.NoError(t, err)
	w, err := results.ReadSummary(whole)
	require.NoError(t, err)
	require.Equal(t, 2, m.Instances)
	var mTotal, wTotal int64
	for _, rg := range results.Regimes {
		sum := segs[0].Scenarios["load"].Regimes[rg].Count + segs[1].Scenarios["load"].Regimes[rg].Count
		require.Equal(t, sum, m.Scenarios["load"].Regimes[rg].Count, "regime %s: merged count is the sum", rg)
		mTotal += m.Scenarios["load"].Regimes[rg].Count
		wTotal += w.Scenarios["load"].Regimes[rg].Count
	}
	ms, ws := m.Scenarios["load"].Regimes["steady"], w.Scenarios["load"].Regimes["steady"]
	t.Logf("steady p50/p95/p99 merged %.3f/%.3f/%.3f whole %.3f/%.3f/%.3f (ms); steady counts merged %d whole %d; iterations merged %d whole %d",
		ms.P50, ms.P95, ms.P99, ws.P50, ws.P95, ws.P99, ms.Count, ws.Count, mTotal, wTotal)
	require.InDelta(t, wTotal, mTotal, 3, "the segments ran the whole test's iterations (arrival-rate edges: +-1 per process)")
	require.Positive(t, ms.Count)
	require.InEpsilon(t, ws.P50, ms.P50, 0.25, "steady median of the merged segments vs the whole run")
	var reqCount int64
	for _, r := range m.Requests {
		reqCount += r.Count
	}
	require.Equal(t, mTotal, reqCount, "one request per iteration")

	// compare: itself passes; a seeded p95 regression fails; bad budgets are named
	code, out = regimeCmd(t, "compare", whole, whole, "--fail-on", "p95=+10%,errors=+0.01,ttss=+20%")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "no budget exceeded")
	slow := t.TempDir()
	b, err := os.ReadFile(filepath.Join(whole, results.SummaryFile))
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	for _, r := range raw["requests"].([]any) {
		row := r.(map[string]any)
		row["p95"] = row["p95"].(float64) * 1.5
	}
	b, err = json.Marshal(raw)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(slow, results.SummaryFile), b, 0o600))
	code, out = regimeCmd(t, "compare", whole, slow, "--fail-on", "p95=+10%")
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "FAIL")
	code, out = regimeCmd(t, "compare", whole, slow, "--fail-on", "p95=10 percent")
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "--fail-on")
	require.Contains(t, out, "valid forms")

	// report rebuilds report.html from the merged folder
	require.NoError(t, os.Remove(filepath.Join(merged, results.ReportFile)))
	code, out = regimeCmd(t, "report", merged)
	require.Equal(t, 0, code, out)
	html, err := os.ReadFile(filepath.Join(merged, results.ReportFile))
	require.NoError(t, err)
	require.Contains(t, string(html), "merged from 2 k6 instances")
}

// TestResultsWrittenOnSIGINT: k6 interrupted with SIGINT still runs
// handleSummary, and the results folder is written.
func TestResultsWrittenOnSIGINT(t *testing.T) {
	srv := newScheduleServer(t, coldWarmSteady(50, 100, 2*time.Millisecond))
	dir := t.TempDir()
	out := filepath.Join(dir, "results")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(resultsScript), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k6Binary(t), "run", "--no-usage-report", "--quiet", "--log-format", "raw", "script.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true", "URL="+srv.URL, "OUT="+out, "DURATION=60s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(30 * time.Second)
	for srv.n.Load() < 600 { // about 2 s of load
		require.True(t, time.Now().Before(deadline), "no load reached the server")
		time.Sleep(20 * time.Millisecond) // polling an external process's progress
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	_ = cmd.Wait()
	require.NoError(t, ctx.Err())
	run := runDir(t, out)
	s, err := results.ReadSummary(run)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	var n int64
	for _, d := range s.Scenarios["load"].Regimes {
		n += d.Count
	}
	require.GreaterOrEqual(t, n, int64(500))
	require.Less(t, s.DurationS, 30.0)
	require.FileExists(t, filepath.Join(run, results.ReportFile))
	t.Logf("interrupted after %.1f s: %d iterations saved in %s (exit code %d)", s.DurationS, n, run, cmd.ProcessState.ExitCode())
}

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// runK6File runs `k6 run` on a script of the repository (path relative to
// the repository root, run from there, so its relative imports resolve),
// bounded in time.
func runK6File(tb testing.TB, path string, env map[string]string, args ...string) k6Result {
	tb.Helper()
	res, err := runK6Script(k6Binary(tb), repoRoot(tb), path, env, args...)
	require.NoError(tb, err)
	return res
}

// runK6Script is runK6File without a testing.TB, for goroutines other than
// the test's: an error running k6 (it timed out, or did not start) is
// returned, with k6's output so far.
func runK6Script(bin, root, path string, env map[string]string, args ...string) (k6Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append([]string{"run", "--no-usage-report", "--log-format", "raw"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(full, path)...)
	cmd.Dir = root
	// killed with the test binary, should it die first (a package timeout)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := k6Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("k6 run %s timed out; stderr:\n%s", path, res.Stderr)
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case err != nil:
		return res, fmt.Errorf("k6 run %s: %w", path, err)
	}
	return res, nil
}

// crossedRe is k6's log line naming the metrics whose thresholds failed.
var crossedRe = regexp.MustCompile(`thresholds on metrics '([^']*)' (?:have|has) been crossed`)

// steadyCount matches a count of steady iterations or requests, the
// no-data guards (iterations{regime:steady,...}, http_reqs{...,regime:steady},
// or a custom counter of either).
var steadyCount = regexp.MustCompile(`^[a-z_]*(iterations|_reqs)\{.*regime:steady`)

// requireOnlySteadyGates accepts exit 0, or exit 99 when every metric whose
// threshold failed is a steady gate (regime_steady{...}, or a count of
// steady iterations) and the extension logged why (never reached, or not
// held). For runs made shorter than a steady gate can judge (6 s of
// scenarios/schedule-vs-measured.js, whose table is what its test checks):
// a latency budget, a check or an error rate that fails, or any other exit
// code, fails the test. It returns whether the gates passed.
func requireOnlySteadyGates(t *testing.T, what string, res k6Result) bool {
	t.Helper()
	if res.ExitCode == 0 {
		return true
	}
	require.Equal(t, 99, res.ExitCode, "%s\nstdout:\n%s\nstderr:\n%s", what, res.Stdout, res.Stderr)
	m := crossedRe.FindStringSubmatch(res.Stderr)
	require.NotNil(t, m, "%s: exit 99 without k6's threshold line:\n%s", what, res.Stderr)
	for _, metric := range strings.Split(m[1], ", ") {
		gate := strings.HasPrefix(metric, "regime_steady{") || steadyCount.MatchString(metric)
		require.True(t, gate, "%s: a threshold other than a steady gate failed: %s\nstderr:\n%s", what, metric, res.Stderr)
	}
	require.Regexp(t, `steady state was (never reached|reached but not held to the end) in `, res.Stderr, what)
	return false
}

// TestExamples runs every script of examples/ (one per feature of the JS
// API, 30 s each) against a server with a cold start, a warm-up and a
// steady state (latency by arrival order) and requires each to pass all its
// thresholds, its steady gates included: an example whose gates cannot pass
// with the default detector (a run too short for 9 one-second windows of a
// level) is a broken example. The list of examples is checked too, so that
// one cannot silently disappear. The six run at once: the server only
// sleeps, and six k6 processes at 150 iterations/s leave the 2 cores
// half idle.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "examples", "*.js"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".js"))
	}
	require.ElementsMatch(t, []string{"tagging", "wrap", "observe", "phases", "thresholds", "results"}, names,
		"one example per feature of the JS API; update this list with the examples")
	type run struct {
		srv *scheduleServer
		out string
		res k6Result
		err error
	}
	runs := make([]run, len(names))
	for i := range names {
		runs[i] = run{srv: newScheduleServer(t, coldWarmSteady(40, 200, 10*time.Millisecond)), out: t.TempDir()}
	}
	bin, root := k6Binary(t), repoRoot(t)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i].res, runs[i].err = runK6Script(bin, root, "examples/"+name+".js",
				map[string]string{"BASE_URL": runs[i].srv.URL, "RESULTS_DIR": runs[i].out})
		}()
	}
	wg.Wait()
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			r := runs[i]
			require.NoError(t, r.err)
			require.Equal(t, 0, r.res.ExitCode, "examples/%s.js\nstdout:\n%s\nstderr:\n%s", name, r.res.Stdout, r.res.Stderr)
			require.Positive(t, r.srv.n.Load())
			if name == "results" {
				require.Regexp(t, `steady: true, time to steady state: `, r.res.Stdout)
				dir := runDir(t, r.out)
				s, err := results.ReadSummary(dir)
				require.NoError(t, err)
				var n, steady int64
				for reg, d := range s.Scenarios["api"].Regimes {
					n += d.Count
					if reg == "steady" {
						steady = d.Count
					}
				}
				require.Positive(t, steady, "steady iterations of %d", n)
				require.True(t, s.Thresholds["iterations{regime:steady}"]["count>0"], "k6's verdicts kept: %v", s.Thresholds)
				require.FileExists(t, filepath.Join(dir, results.ReportFile))
			}
		})
	}
}

// TestScheduleVsMeasuredScript runs scenarios/schedule-vs-measured.js (the
// comparison behind `make compare-schedule`) briefly against a scripted
// server: it passes its gates (the steady gates excepted, as above) and
// prints both distributions and the schedule x regime table, whose cells
// add up to the iterations.
func TestScheduleVsMeasuredScript(t *testing.T) {
	srv := newScheduleServer(t, coldWarmSteady(40, 200, 10*time.Millisecond))
	res := runK6File(t, "scenarios/schedule-vs-measured.js",
		map[string]string{"BASE_URL": srv.URL, "DURATION": "6s", "CUT": "2s", "RATE": "150"}, "--quiet")
	requireOnlySteadyGates(t, "scenarios/schedule-vs-measured.js", res)
	require.Contains(t, res.Stdout, "the schedule (after the cut)")
	require.Contains(t, res.Stdout, "the detector (regime:steady)")
	m := regexp.MustCompile(`(?m)^  before the cut +(\d+) +(\d+) +(\d+)\n  after the cut +(\d+) +(\d+) +(\d+)$`).FindStringSubmatch(res.Stdout)
	require.NotNil(t, m, res.Stdout)
	var sum int
	for _, c := range m[1:] {
		n, err := strconv.Atoi(c)
		require.NoError(t, err)
		sum += n
	}
	// every iteration in exactly one cell: the cells add up to k6's count
	k6n := regexp.MustCompile(`(?m)^  iterations \(k6\) +(\d+)$`).FindStringSubmatch(res.Stdout)
	require.NotNil(t, k6n, res.Stdout)
	n, err := strconv.Atoi(k6n[1])
	require.NoError(t, err)
	require.Positive(t, n)
	require.Equal(t, n, sum, "the table's cells are the iterations: %s", res.Stdout)
	t.Logf("\n%s", res.Stdout)
}

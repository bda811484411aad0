package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// k6Grace is how long k6 may run beyond its scenario's limit (start-up,
// the end-of-run summary and results) before the harness stops it.
const k6Grace = 90 * time.Second

// Load is the load model of a case.
type Load struct {
	// Model is "open" (constant-arrival-rate) or "closed" (shared-iterations).
	Model string
	// Rate (open) is iterations per second; Duration how long.
	Rate     int
	Duration time.Duration
	// VUs (closed) run Iterations in all, for at most MaxDuration.
	VUs         int
	Iterations  int
	MaxDuration time.Duration
}

func (l Load) String() string {
	if l.Model == "open" {
		return fmt.Sprintf("open %d/s %s", l.Rate, l.Duration)
	}
	return fmt.Sprintf("closed %d VU %d it", l.VUs, l.Iterations)
}

// limit is the longest the scenario may run.
func (l Load) limit() time.Duration {
	if l.Model == "open" {
		return l.Duration
	}
	return l.MaxDuration
}

// RunOutput is what one k6 run left behind.
type RunOutput struct {
	ExitCode int
	Stdout   string
	Stderr   string
	Dir      string // the results folder saveResults wrote
	Run      *results.Run
	// SteadyGate is the value of the regime_steady Rate for the scenario
	// (nil when k6 reported none).
	SteadyGate *float64
	// FailedChecks is the share of k6's checks (the script checks every
	// response's status) that failed; nil when k6 reported no checks.
	FailedChecks *float64
	// Dropped counts the iterations k6's open model did not start for want
	// of a free VU (dropped_iterations; 0 when k6 reported none).
	Dropped int64
	// Series is the scenario's iterations in arrival order, exact.
	Series []Iteration
}

// Iteration is one iteration of the scenario as the results folder records it.
type Iteration struct {
	Start  float64 // seconds since the scenario's first iteration started
	Ms     float64 // duration
	Regime string  // its tag: cold, warmup, steady or untagged
}

const scenarioName = "live"

// runK6 drives a started service with the project's k6 for one case and
// reads back what the run wrote. An error means the run gave nothing to
// judge (k6 failed to start, wrote no results, or its series was bucketed).
func (e *Env) runK6(ctx context.Context, c Case, addr, outDir, testid string) (*RunOutput, error) {
	env := map[string]string{
		"TARGET":      "http://" + addr,
		"MODEL":       c.Load.Model,
		"RESULTS_DIR": outDir,
		"TESTID":      testid,
		"WORKLOAD":    c.Service.Workload,
	}
	if env["WORKLOAD"] == "" {
		env["WORKLOAD"] = "get"
	}
	if c.Load.Model == "open" {
		env["RATE"] = strconv.Itoa(c.Load.Rate)
		env["DURATION"] = c.Load.Duration.String()
		env["VUS"] = "50"
	} else {
		env["VUS"] = strconv.Itoa(c.Load.VUs)
		env["ITERATIONS"] = strconv.Itoa(c.Load.Iterations)
		env["MAX_DURATION"] = c.Load.MaxDuration.String()
	}
	// every iteration kept one by one (the reference needs them)
	env["SETTINGS"] = `{"seriesLimit":1000000}`
	if c.Settings != "" {
		env["SETTINGS"] = c.Settings
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	timeout := c.Load.limit() + k6Grace
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, e.K6, "run", "--no-usage-report", "--quiet", "--log-format", "raw",
		filepath.Join(e.Repo, "live", "script.js"))
	cmd.Dir = outDir
	cmd.Env = append(baseEnv(), "K6_NO_USAGE_REPORT=true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // not left running if the harness dies
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := &RunOutput{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil: // the harness was stopped (Ctrl+C), not k6 late
		return out, fmt.Errorf("k6 stopped: %w", ctx.Err())
	case cctx.Err() != nil:
		return out, fmt.Errorf("k6 did not finish within %s; stderr:\n%s", timeout, tail(out.Stderr, 3000))
	case errors.As(err, &exitErr):
		out.ExitCode = exitErr.ExitCode()
	case err != nil:
		return out, fmt.Errorf("running %s: %w", e.K6, err)
	}
	if out.ExitCode != 0 && out.ExitCode != 99 {
		return out, fmt.Errorf("k6 exited with %d (expected 0, or 99 for a failed gate); stderr:\n%s", out.ExitCode, tail(out.Stderr, 3000))
	}
	// <UTC start>-<testid>-<8 hex digits>; a hidden .partial-* folder is no
	// results folder
	found, _ := filepath.Glob(filepath.Join(outDir, "*-"+testid+"-????????"))
	var dirs []string
	for _, d := range found {
		if !strings.HasPrefix(filepath.Base(d), ".") {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) != 1 {
		return out, fmt.Errorf("k6 (exit %d) wrote %d results folders matching %s in %s, want 1; stderr:\n%s",
			out.ExitCode, len(dirs), testid, outDir, tail(out.Stderr, 3000))
	}
	out.Dir = dirs[0]
	if err := out.load(); err != nil {
		return out, fmt.Errorf("k6 exited with %d: %w", out.ExitCode, err)
	}
	return out, nil
}

// load reads the results folder: the series, the summary, k6's metrics.
func (out *RunOutput) load() error {
	var err error
	if out.Run, err = results.LoadDir(out.Dir); err != nil {
		return fmt.Errorf("reading the results: %w", err)
	}
	sd := out.Run.Series[scenarioName]
	if sd == nil || len(sd.Points) == 0 {
		return fmt.Errorf("the results in %s hold no iteration of scenario %s", out.Dir, scenarioName)
	}
	if sd.Info.Aggregated {
		return fmt.Errorf("the series of %s was bucketed (%d iterations): every iteration must be kept to be judged (seriesLimit)",
			out.Dir, sd.Info.Iterations)
	}
	first := sd.Points[0].EndMs - float64(sd.Points[0].Med)
	for _, p := range sd.Points {
		if s := p.EndMs - float64(p.Med); s < first {
			first = s
		}
	}
	out.Series = make([]Iteration, len(sd.Points))
	for i, p := range sd.Points {
		ms := float64(p.Med)
		out.Series[i] = Iteration{Start: (p.EndMs - ms - first) / 1000, Ms: ms, Regime: regimeOf(p.Regime)}
	}
	out.SteadyGate, out.FailedChecks, out.Dropped, err = readK6Metrics(out.Dir)
	return err
}

func regimeOf(r uint8) string {
	if int(r) < len(results.Regimes) {
		return results.Regimes[r]
	}
	return "untagged"
}

// readK6Metrics reads from k6's end-of-test metrics (k6-metrics.json,
// written by the script) regime_steady{scenario:live} and the share of
// failed checks (nil for either that k6 did not report), and the count of
// dropped iterations.
func readK6Metrics(dir string) (steadyGate, failedChecks *float64, dropped int64, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "k6-metrics.json"))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("k6's metrics: %w", err)
	}
	var m map[string]struct {
		Values map[string]float64 `json:"values"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, 0, fmt.Errorf("%s: %w", filepath.Join(dir, "k6-metrics.json"), err)
	}
	if v, ok := m["regime_steady{scenario:"+scenarioName+"}"]; ok {
		if r, ok := v.Values["rate"]; ok {
			steadyGate = &r
		}
	}
	if v, ok := m["checks"]; ok {
		if n := v.Values["passes"] + v.Values["fails"]; n > 0 {
			failedChecks = ptr(v.Values["fails"] / n)
		}
	}
	if v, ok := m["dropped_iterations"]; ok {
		dropped = int64(v.Values["count"])
	}
	return steadyGate, failedChecks, dropped, nil
}

// verdictLines returns k6's log lines about the steady gate of the scenario.
func verdictLines(stderr string) (neverReached, notHeld bool) {
	for _, l := range bufferedLines(stderr) {
		switch {
		case strings.Contains(l, "steady state was never reached in "+scenarioName):
			neverReached = true
		case strings.Contains(l, "steady state was reached but not held to the end in "+scenarioName):
			notHeld = true
		}
	}
	return neverReached, notHeld
}

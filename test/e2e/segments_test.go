package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/latency"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// segmentsScript is the distributed test: a constant arrival rate on one
// endpoint of the demo service, gated on steady state, its results folder
// written from handleSummary with k6's threshold verdicts.
const segmentsScript = `
import http from 'k6/http';
import { check } from 'k6';
import regime from 'k6/x/regime';
export const options = {
  scenarios: { load: { executor: 'constant-arrival-rate', rate: 200, timeUnit: '1s', duration: '14s',
    preAllocatedVUs: 12, maxVUs: 60, tags: { phase: 'main' } } },
  thresholds: {
    'regime_steady{scenario:load}': ['rate==1'],
    'iterations{regime:steady,scenario:load}': ['count>0'],
    checks: ['rate>0.99'],
  },
};
regime.configure(options);
export default function () {
  const r = http.get(__ENV.BASE_URL + '/api/challenges', { tags: { endpoint: 'challenges' } });
  check(r, { 'status 200': (x) => x.status === 200 });
}
export function handleSummary(data) {
  const thresholds = {};
  for (const [name, m] of Object.entries(data.metrics)) {
    if (m.thresholds) thresholds[name] = Object.fromEntries(Object.entries(m.thresholds).map(([e, t]) => [e, t.ok]));
  }
  const count = (name) => (data.metrics[name] ? data.metrics[name].values.count : 0);
  regime.saveResults({ dir: __ENV.OUT, testid: __ENV.TESTID, thresholds, report: false,
    extra: { k6_iterations: count('iterations'), k6_dropped_iterations: count('dropped_iterations') } });
  return {};
}
`

// k6Status polls a paused k6's REST API until its execution status is
// PausedBeforeRun (lib.ExecutionStatusPausedBeforeRun = 4): VUs
// initialised, waiting to be started, as k6-operator's starter expects.
func waitPausedBeforeRun(t *testing.T, addr string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v1/status") //nolint:noctx
		if err == nil {
			var st struct {
				Data struct {
					Attributes struct {
						Status int `json:"status"`
					} `json:"attributes"`
				} `json:"data"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&st)
			_ = resp.Body.Close()
			if derr == nil && st.Data.Attributes.Status == 4 {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "k6 at %s never reached PausedBeforeRun", addr)
		select {
		case <-exited:
			t.Fatalf("k6 at %s exited before it was started", addr)
		case <-time.After(50 * time.Millisecond): // polling another process's REST API
		}
	}
}

// resume starts a paused k6, as k6-operator's starter does for each runner.
func resume(t *testing.T, addr string) {
	t.Helper()
	body := `{"data":{"type":"status","id":"default","attributes":{"paused":false}}}`
	req, err := http.NewRequest(http.MethodPatch, "http://"+addr+"/v1/status", strings.NewReader(body)) //nolint:noctx
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// runSegments runs script as n k6 processes, instance i (1-based) on the
// execution segment (i-1)/n:i/n of the sequence 0,1/n,...,1, each started
// paused with its REST API on, then resumed together: the commands
// k6-operator gives its runner pods (pkg/segmentation, pkg/resources/jobs
// of grafana/k6-operator). It returns each instance's results folder.
func runSegments(t *testing.T, n int, script string, env map[string]string) []string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(script), 0o600))
	point := func(i int) string {
		switch i {
		case 0:
			return "0"
		case n:
			return "1"
		}
		return fmt.Sprintf("%d/%d", i, n)
	}
	seq := make([]string, n+1)
	for i := range seq {
		seq[i] = point(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type proc struct {
		cmd            *exec.Cmd
		addr, out      string
		stdout, stderr bytes.Buffer
		exited         chan struct{}
		err            error
	}
	procs := make([]*proc, n)
	for i := range procs {
		p := &proc{addr: freeAddr(t), out: filepath.Join(dir, fmt.Sprintf("out-%d", i+1)), exited: make(chan struct{})}
		p.cmd = exec.CommandContext(ctx, k6Binary(t), "run", "--no-usage-report", "--quiet", "--log-format", "raw",
			"--execution-segment="+point(i)+":"+point(i+1), "--execution-segment-sequence="+strings.Join(seq, ","),
			"--address", p.addr, "--paused", "--tag", fmt.Sprintf("instance_id=%d", i+1), "script.js")
		p.cmd.Dir = dir
		p.cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true", "OUT="+p.out)
		for k, v := range env {
			p.cmd.Env = append(p.cmd.Env, k+"="+v)
		}
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		require.NoError(t, p.cmd.Start())
		go func() { p.err = p.cmd.Wait(); close(p.exited) }()
		procs[i] = p
	}
	for _, p := range procs {
		waitPausedBeforeRun(t, p.addr, p.exited)
	}
	for _, p := range procs {
		resume(t, p.addr)
	}
	outs := make([]string, n)
	for i, p := range procs {
		<-p.exited
		require.NoError(t, ctx.Err(), "instance %d timed out", i+1)
		var ee *exec.ExitError
		if p.err != nil && !errors.As(p.err, &ee) {
			require.NoError(t, p.err)
		}
		code := p.cmd.ProcessState.ExitCode()
		require.Contains(t, []int{0, 99}, code, "instance %d exit code\nstdout:\n%s\nstderr:\n%s", i+1, p.stdout.String(), p.stderr.String())
		outs[i] = runDir(t, p.out)
	}
	return outs
}

// bars is an HDR histogram's non-empty buckets: lowest value -> count.
func bars(h *hdrhistogram.Histogram) map[int64]int64 {
	out := map[int64]int64{}
	if h == nil {
		return out
	}
	for _, b := range h.Distribution() {
		if b.Count > 0 {
			out[b.From] += b.Count
		}
	}
	return out
}

// sumBars adds histograms bucket by bucket.
func sumBars(hs ...*latency.Histogram) map[int64]int64 {
	out := map[int64]int64{}
	for _, h := range hs {
		if h == nil {
			continue
		}
		for k, v := range bars(h.HDR) {
			out[k] += v
		}
	}
	return out
}

// windowSpanMs is the median time span of a run's detector windows.
func windowSpanMs(t *testing.T, r *results.Run) float64 {
	t.Helper()
	var spans []float64
	for _, w := range r.Windows {
		spans = append(spans, w.LastMs-w.FirstMs)
	}
	require.NotEmpty(t, spans, "no detector window in %s", r.Summary.RunID)
	slices.Sort(spans)
	return spans[len(spans)/2]
}

// gate is k6's own verdict on the steady gate of scenario load.
func gate(t *testing.T, s *results.Summary) bool {
	t.Helper()
	ok, found := s.Thresholds["regime_steady{scenario:load}"]["rate==1"]
	require.True(t, found, "the steady gate's verdict is in summary.json: %v", s.Thresholds)
	return ok
}

// TestSegmentsMergeAgainstSingle proves on one machine what a k6-operator
// run with parallelism 4 means for xk6-regime. The same test runs against
// the demo service as 4 k6 instances on execution segments (started paused
// and resumed together, as the operator does) and as one k6 instance with
// the whole load; `k6 x regime merge` merges the 4 results folders.
//
// Asserted exactly:
//   - the merged folder's counts per regime and its HdrHistograms (every
//     bucket, iterations per regime and requests per row) are the sums of
//     the instances' folders, read back from disk;
//   - every run's regime counts are k6's own iteration count;
//   - (to 2%) the segments' started and dropped iterations together make
//     the arrival-rate schedule, as the single run's do: the same load;
//   - the verdicts follow the merge's rule: merged steady iff every
//     instance was steady, class the worst, TTSS the latest (none if any
//     instance has none), relapses summed;
//   - in every run, k6's own steady gate (the per-pod online gate) says
//     what that run's detector said.
//
// Measured and logged, not asserted: whether each instance's verdict agrees
// with one detector over the whole load, (a) the same run's merged series
// replayed offline (same samples and moments: only the 4-way split
// differs) and (b) the separate single run. Tolerance for TTSS: two
// windows of each side (a window spans 50 iterations, 4x as long in time
// on an instance, which sees a quarter of the rate; a start is located to
// within a window). Not asserted because on 2 shared cores it does not
// hold reliably: a run 1 minute later is another machine state (NOTES: one
// binary, two verdicts the same day), and with the current detector one
// instance put its retroactive start at 4.9 s where the single run put
// 0.26 s. The log lines are the measurement to assert once the detector
// redesign makes them stable. The demo service runs with a 10 ms simulated
// query and no cache, so the level stands well above scheduling noise.
func TestSegmentsMergeAgainstSingle(t *testing.T) {
	d := startDemo(t, nil, "-cache-ttl", "0", "-query-time", "10ms", "-row-time", "0s")
	env := map[string]string{"BASE_URL": "http://" + d.httpAddr, "TESTID": "seg"}
	const n = 4
	outs := runSegments(t, n, segmentsScript, env)

	singleOut := t.TempDir()
	env["OUT"] = singleOut
	sr := runK6(t, segmentsScript, env)
	require.Contains(t, []int{0, 99}, sr.ExitCode, "single run\nstderr:\n%s", sr.Stderr)

	merged := filepath.Join(t.TempDir(), "merged")
	code, out := regimeCmd(t, append(append([]string{"merge"}, outs...), "--out", merged, "--no-report")...)
	require.Equal(t, 0, code, out)

	inst := make([]*results.Run, n)
	for i, o := range outs {
		var err error
		inst[i], err = results.LoadDir(o)
		require.NoError(t, err)
	}
	m, err := results.LoadDir(merged)
	require.NoError(t, err)
	single, err := results.LoadDir(runDir(t, singleOut))
	require.NoError(t, err)
	require.Equal(t, n, m.Summary.Instances)

	// exact: counts and histograms
	var mTotal int64
	for ri, rg := range results.Regimes {
		var sum int64
		var hs []*latency.Histogram
		for _, r := range inst {
			if d := r.Summary.Scenarios["load"].Regimes[rg]; d != nil {
				sum += d.Count
			}
			hs = append(hs, r.Iter["load"][ri])
		}
		md := m.Summary.Scenarios["load"].Regimes[rg]
		require.Equal(t, sum, md.Count, "regime %s: merged count", rg)
		mTotal += md.Count
		var mh *hdrhistogram.Histogram
		if m.Iter["load"][ri] != nil {
			mh = m.Iter["load"][ri].HDR
		}
		require.Equal(t, sumBars(hs...), bars(mh), "regime %s: merged histogram, bucket by bucket", rg)
	}
	require.Positive(t, mTotal)
	var reqRows int
	for key, mh := range m.Req {
		var hs []*latency.Histogram
		for _, r := range inst {
			hs = append(hs, r.Req[key])
		}
		require.Equal(t, sumBars(hs...), bars(mh.HDR), "request row %q: merged histogram", key)
		reqRows++
	}
	require.Positive(t, reqRows)
	for _, row := range m.Summary.Requests {
		var count, errs int64
		for _, r := range inst {
			for _, ir := range r.Summary.Requests {
				if ir.Key() == row.Key() {
					count += ir.Count
					errs += ir.Errors
				}
			}
		}
		require.Equal(t, count, row.Count, "request row %s/%s/%s: count", row.Phase, row.Regime, row.Endpoint)
		require.Equal(t, errs, row.Errors)
	}
	// the same load: k6's own counts of started and dropped iterations (an
	// overloaded generator drops some) add up to the arrival-rate schedule
	// in every run, so the 4 segments together scheduled what the single
	// run did (+-1 per instance for the iteration at the schedule's edge)
	const schedule = 200 * 14
	var segScheduled float64
	for i, r := range inst {
		it, dropped := extraCount(t, r.Summary, "k6_iterations"), extraCount(t, r.Summary, "k6_dropped_iterations")
		var tagged int64
		for _, dd := range r.Summary.Scenarios["load"].Regimes {
			tagged += dd.Count
		}
		require.Equal(t, int64(it), tagged, "instance %d: the regime counts are k6's iteration count", i+1)
		segScheduled += it + dropped
	}
	// k6 accounts (started or dropped) every scheduled iteration on a quiet
	// machine; starved of CPU (load average 9 on 2 cores) 19 of 2800 went
	// unaccounted once, hence 2% below; never more than the schedule
	inSchedule := func(what string, v float64) {
		require.LessOrEqual(t, v, float64(schedule+n), what)
		require.GreaterOrEqual(t, v, 0.98*schedule, what)
	}
	inSchedule("the segments' started and dropped iterations", segScheduled)
	var sTotal int64
	for _, dd := range single.Summary.Scenarios["load"].Regimes {
		sTotal += dd.Count
	}
	require.Equal(t, int64(extraCount(t, single.Summary, "k6_iterations")), sTotal)
	inSchedule("the single run's started and dropped iterations", extraCount(t, single.Summary, "k6_iterations")+extraCount(t, single.Summary, "k6_dropped_iterations"))
	t.Logf("iterations: segments %d (+%.0f dropped), single %d (+%.0f dropped), schedule %d", mTotal, segScheduled-float64(mTotal),
		sTotal, extraCount(t, single.Summary, "k6_dropped_iterations"), schedule)

	// exact: the merge's verdict rule and each run's gate against its detector
	ms := m.Summary.Scenarios["load"]
	allSteady, worst, relapses := true, "flat", int64(0)
	rank := map[string]int{"flat": 0, "warmup": 1, "slowdown": 2, "undecided": 3, "no-steady-state": 4}
	var latest *float64
	anyNone := false
	for i, r := range inst {
		sc := r.Summary.Scenarios["load"]
		require.Equal(t, sc.Steady, gate(t, r.Summary), "instance %d: k6's steady gate vs its detector", i+1)
		allSteady = allSteady && sc.Steady
		if rank[sc.Class] > rank[worst] {
			worst = sc.Class
		}
		relapses += sc.Relapses
		if sc.TTSSMs == nil {
			anyNone = true
		} else if latest == nil || *sc.TTSSMs > *latest {
			latest = sc.TTSSMs
		}
	}
	require.Equal(t, allSteady, ms.Steady, "merged steady iff every instance was")
	require.Equal(t, worst, ms.Class, "merged class is the worst")
	require.Equal(t, relapses, ms.Relapses)
	if anyNone {
		require.Nil(t, ms.TTSSMs, "no merged TTSS while an instance has none")
	} else {
		require.NotNil(t, ms.TTSSMs)
		require.Equal(t, *latest, *ms.TTSSMs, "merged TTSS is the latest")
	}
	require.Equal(t, single.Summary.Scenarios["load"].Steady, gate(t, single.Summary), "single run: k6's steady gate vs its detector")

	// agreement, measured and logged (see the doc comment for why it is
	// not asserted): each instance against one detector over the whole
	// load of the same run (the merged series, replayed by k6 x regime
	// detect with the service preset: same samples, same moments, so only
	// the 4-way split differs) and against the separate single run
	whole := wholeLoadDetection(t, m)
	wSingle := windowSpanMs(t, single)
	ss := single.Summary.Scenarios["load"]
	for i, r := range inst {
		sc := r.Summary.Scenarios["load"]
		w := windowSpanMs(t, r)
		t.Logf("instance %d: %d iterations, steady %v, class %s, TTSS %s, relapses %d, window %.0f ms; TTSS vs whole load %s, vs single run %s (tolerance: two windows of each)",
			i+1, sc.Iterations, sc.Steady, sc.Class, fmtMs(sc.TTSSMs), sc.Relapses, w,
			within(sc.TTSSMs, whole.ttss, 2*(w+whole.windowMs)), within(sc.TTSSMs, ss.TTSSMs, 2*(w+wSingle)))
	}
	t.Logf("whole load of the 4-instance run (offline): steady %v, class %s, TTSS %s, window %.0f ms", whole.steady, whole.class, fmtMs(whole.ttss), whole.windowMs)
	t.Logf("single run: %d iterations, steady %v, class %s, TTSS %s, window %.0f ms; merged: steady %v (all instances), class %s, TTSS %s",
		sTotal, ss.Steady, ss.Class, fmtMs(ss.TTSSMs), wSingle, ms.Steady, ms.Class, fmtMs(ms.TTSSMs))
}

// detection is one detector's verdict over a whole series.
type detection struct {
	steady   bool
	class    string
	ttss     *float64
	windowMs float64
}

// wholeLoadDetection replays the merged iteration series (every
// iteration of the 4 instances, in order of end time) through
// `k6 x regime detect --preset service`, the extension's detector
// defaults: what one detector would have decided over the whole load of
// that run. TTSS is the time from the first iteration's end to the steady
// start's.
func wholeLoadDetection(t *testing.T, m *results.Run) detection {
	t.Helper()
	sd := m.Series["load"]
	require.NotNil(t, sd)
	require.False(t, sd.Info.Aggregated, "every iteration is in the series")
	var b strings.Builder
	b.WriteString("end_ms,ms\n")
	for _, p := range sd.Points {
		fmt.Fprintf(&b, "%.3f,%g\n", p.EndMs, p.Med)
	}
	csv := filepath.Join(t.TempDir(), "whole.csv")
	require.NoError(t, os.WriteFile(csv, []byte(b.String()), 0o600))
	code, out := regimeCmd(t, "detect", "--preset", "service", "--column", "ms", "--time", "end_ms", "--time-unit", "ms", csv)
	require.Equal(t, 0, code, out)
	var res struct {
		SteadyStart *int64 `json:"steady_start"`
		Regime      string `json:"regime"`
		Class       string `json:"class"`
		Windows     int    `json:"windows"`
	}
	line := out[strings.Index(out, "{"):]
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(line)), &res), out)
	d := detection{steady: res.Regime == "steady", class: res.Class}
	pts := sd.Points
	if res.SteadyStart != nil {
		v := pts[*res.SteadyStart].EndMs - pts[0].EndMs
		d.ttss = &v
	}
	if res.Windows > 0 {
		d.windowMs = (pts[len(pts)-1].EndMs - pts[0].EndMs) / float64(res.Windows)
	}
	return d
}

// within says whether a and b are within tol of each other.
func within(a, b *float64, tol float64) string {
	if a == nil || b == nil {
		return "n/a (no steady state in one)"
	}
	if math.Abs(*a-*b) <= tol {
		return fmt.Sprintf("within %.0f ms", tol)
	}
	return fmt.Sprintf("OUTSIDE %.0f ms (%.0f apart)", tol, math.Abs(*a-*b))
}

// extraCount reads a count the script kept in summary.json's extra.
func extraCount(t *testing.T, s *results.Summary, key string) float64 {
	t.Helper()
	v, ok := s.Extra[key].(float64)
	require.True(t, ok, "summary.json extra.%s: %v", key, s.Extra)
	return v
}

func fmtMs(v *float64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("%.0f ms", math.Round(*v))
}

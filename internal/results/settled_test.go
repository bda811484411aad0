package results

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMergeResettles: merging two instances' folders re-settles the merged
// series, and finds what one instance that ran all the load finds.
func TestMergeResettles(t *testing.T) {
	t.Parallel()
	const n = 30000
	rng := rand.New(rand.NewPCG(5, 6))
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	whole, parts := newSynth(DefaultSeriesLimit, start), [2]*synthBuilder{newSynth(DefaultSeriesLimit, start), newSynth(DefaultSeriesLimit, start)}
	t0 := float64(start.UnixMilli())
	for i := range n {
		v, r := synthLatency(i, n, rng)
		end := t0 + 60000*float64(i+1)/n
		whole.add(int64(i), v, r, end)
		parts[i%2].add(int64(i/2), v, r, end)
	}
	runs := make([]*Run, 2)
	dirs := []string{t.TempDir(), t.TempDir()}
	for i, p := range parts {
		run := p.finish()
		run.Summary.RunID = fmt.Sprintf("synth-%d", i)
		// each instance's own view (of half the load) must not survive the merge
		run.Summary.Scenarios["load"].Settled = &Settled{Steady: false, Class: "no-steady-state", Reason: "instance view"}
		// the test started a minute before this scenario (a phase chained
		// with startTime): TTSS counts from the scenario's start
		run.Summary.Started = start.Add(-time.Minute)
		require.NoError(t, run.WriteDir(dirs[i], WriteOptions{}))
		var err error
		runs[i], err = LoadDir(dirs[i])
		require.NoError(t, err)
	}
	merged, err := Merge(runs, dirs)
	require.NoError(t, err)
	require.Equal(t, t0, merged.Summary.Scenarios["load"].StartedMs, "the scenario's start, from which TTSS counts")
	got := merged.Summary.Scenarios["load"].Settled
	require.NotNil(t, got)
	require.True(t, got.FromSeries, "merge's view, from the series")
	require.False(t, got.Approximate, "every point of the series is one iteration")
	require.True(t, got.Steady, "reason: %s", got.Reason)
	require.Equal(t, "warmup", got.Class)
	// the ramp from 10 to 5 ms ends at 12 s; within the 25% band from ~8 s
	require.NotNil(t, got.TTSSMs)
	require.GreaterOrEqual(t, *got.TTSSMs, 6000.0)
	require.LessOrEqual(t, *got.TTSSMs, 13000.0)
	w := whole.finish()
	one := settleSeries(w.Series["load"].Points, start.UnixNano(), false)
	require.Equal(t, one.Boundary.Index, got.Boundary.Index)
	require.InDelta(t, *one.TTSSMs, *got.TTSSMs, 1e-6)
	require.Equal(t, one.Stats.Count, got.Stats.Count)
	require.Equal(t, int64(n)-got.Boundary.Index, got.Stats.Count)
	require.InDelta(t, one.Stats.P99Ms, got.Stats.P99Ms, 1e-9)
	// every steady-tagged iteration of the synthetic run starts after 12 s:
	// none before the settled boundary
	require.NotNil(t, got.Online)
	require.Zero(t, got.Online.Contamination)
	require.Less(t, got.Online.Coverage, 1.0, "the settled boundary is earlier than the online one")
}

// TestCompareSettled: the settled rows are shown and judged like the
// online ones, and a candidate without a settled steady state fails a
// settled budget instead of passing it.
func TestCompareSettled(t *testing.T) {
	t.Parallel()
	mk := func(p95 float64, steady bool) *Summary {
		ttss := 8000.0
		v := &Settled{Steady: steady, Class: "warmup", TTSSMs: &ttss, Stats: &SettledStats{Count: 100, P50Ms: 5, P95Ms: p95, P99Ms: 2 * p95}}
		if !steady {
			v = &Settled{Class: "no-steady-state", Reason: "the level drifts by +40%"}
		}
		return &Summary{Scenarios: map[string]*Scenario{"load": {Class: "warmup", Settled: v}}}
	}
	b, err := ParseBudgets("settled_p95=+10%")
	require.NoError(t, err)
	c := Compare(mk(10, true), mk(10.5, true), b)
	require.False(t, c.Failed(), "%v", c.Failures)
	c = Compare(mk(10, true), mk(12, true), b)
	require.True(t, c.Failed())
	require.Contains(t, strings.Join(c.Failures, "\n"), "settled_p95")
	c = Compare(mk(10, true), mk(10, false), b)
	require.True(t, c.Failed())
	require.Contains(t, strings.Join(c.Failures, "\n"), "no settled steady state in load: the level drifts by +40%")
}

// TestReportDrawsSettled: the report has the settled table and draws the
// settled boundary beside the online transitions.
func TestReportDrawsSettled(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := newSynth(DefaultSeriesLimit, start)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 3000 {
		v, r := synthLatency(i, 3000, rng)
		b.add(int64(i), v, r, float64(start.UnixMilli())+60000*float64(i+1)/3000)
	}
	run := b.finish()
	run.Summary.Scenarios["load"].Settled = settleSeries(run.Series["load"].Points, start.UnixNano(), false)
	require.True(t, run.Summary.Scenarios["load"].Settled.Steady)
	var sb strings.Builder
	require.NoError(t, run.Report(&sb))
	html := sb.String()
	require.Contains(t, html, `<table id="settled">`)
	require.Contains(t, html, `"kind":"settled"`)
	require.Contains(t, html, "settled steady-state start")
	require.Contains(t, html, `class="gate-held">held</td>`)

	// a steady state reached and lost: the table says so beside its figures
	sc := run.Summary.Scenarios["load"]
	sc.Steady, sc.Relapses = false, 2
	sb.Reset()
	require.NoError(t, run.Report(&sb))
	html = sb.String()
	require.Contains(t, html, `class="gate-not-held">not-held</td>`)
	require.Contains(t, html, `<td class="steady">steady (not held)</td>`)

	// an endpoint's settled view has a row of its own, in the report and
	// the text table
	ttss := 1500.0
	sc.Settled.Endpoints = map[string]*Settled{"/items": {Steady: true, Class: "warmup", TTSSMs: &ttss,
		Stats: &SettledStats{Count: 1234, P50Ms: 4.25, P90Ms: 5, P95Ms: 6, P99Ms: 7.5, MaxMs: 9}}}
	sb.Reset()
	require.NoError(t, run.Report(&sb))
	require.Contains(t, sb.String(), "<tr><td>&nbsp;&nbsp;load /items</td><td>warmup</td><td>1500</td>")
	txt := TextTable(run.Summary)
	require.Regexp(t, `\n    /items\s+warmup\s+1500\s+1234\s+4\.25`, txt)
}

// TestWindowsSettledColumn: windows.csv places each window against the
// settled view of its scope (the endpoint's where there is one), and reads
// back with the 15-column files of earlier versions.
func TestWindowsSettledColumn(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := newSynth(DefaultSeriesLimit, start)
	rng := rand.New(rand.NewPCG(9, 10))
	t0 := float64(start.UnixMilli())
	for i := range 3000 {
		v, r := synthLatency(i, 3000, rng)
		b.add(int64(i), v, r, t0+60000*float64(i+1)/3000)
	}
	run := b.finish()
	v := settleSeries(run.Series["load"].Points, start.UnixNano(), false)
	require.True(t, v.Steady, v.Reason)
	require.InDelta(t, t0+*v.TTSSMs, v.AtMs, 1e-3, "at_ms is the boundary on the Unix clock")
	v.Endpoints = map[string]*Settled{"/never": {Class: "no-steady-state", Reason: "drift"}}
	run.Summary.Scenarios["load"].Settled = v
	run.Summary.Scenarios["other"] = &Scenario{}
	run.Windows = []WindowRow{
		{Scenario: "load", Seq: 0, FirstMs: v.AtMs - 1000, LastMs: v.AtMs - 1},
		{Scenario: "load", Seq: 1, FirstMs: v.AtMs, LastMs: v.AtMs + 1000},
		{Scenario: "load", Endpoint: "/held", Seq: 0, FirstMs: v.AtMs + 5, LastMs: v.AtMs + 900},
		{Scenario: "load", Endpoint: "/never", Seq: 0, FirstMs: v.AtMs + 5, LastMs: v.AtMs + 900},
		{Scenario: "other", Seq: 0, FirstMs: t0, LastMs: t0 + 1000},
	}
	dir := t.TempDir()
	require.NoError(t, run.WriteDir(dir, WriteOptions{}))
	got, err := readWindows(filepath.Join(dir, WindowsFile))
	require.NoError(t, err)
	var places []string
	for _, w := range got {
		places = append(places, w.Settled)
	}
	require.Equal(t, []string{"transient", "steady", "steady", "none", ""}, places)

	// a 15-column file of an earlier version reads, without the column
	raw, err := os.ReadFile(filepath.Join(dir, WindowsFile))
	require.NoError(t, err)
	var old []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		old = append(old, l[:strings.LastIndexByte(l, ',')])
	}
	p := filepath.Join(t.TempDir(), WindowsFile)
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(old, "\n")+"\n"), 0o600))
	got, err = readWindows(p)
	require.NoError(t, err)
	require.Len(t, got, 5)
	require.Empty(t, got[1].Settled)

	// a row of another width is an error that names the file and line
	require.NoError(t, os.WriteFile(p, []byte(windowsHeader+"\nload,,0,1,2\n"), 0o600))
	_, err = readWindows(p)
	require.ErrorContains(t, err, "line 2: 5 fields, want 16")
}

// TestMergeApproximate: a merged settled view from series whose points hold
// several iterations says so (its tail understates), and gate refuses to
// judge its tail on it.
func TestMergeApproximate(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 8))
	parts := [2]*synthBuilder{newSynth(1000, start), newSynth(1000, start)}
	const n = 20000
	t0 := float64(start.UnixMilli())
	for i := range n {
		v, r := synthLatency(i, n, rng)
		parts[i%2].add(int64(i/2), v, r, t0+60000*float64(i+1)/n)
	}
	runs := make([]*Run, 2)
	for i, p := range parts {
		dir := t.TempDir()
		run := p.finish()
		run.Summary.RunID = fmt.Sprintf("synth-%d", i)
		require.NoError(t, run.WriteDir(dir, WriteOptions{}))
		var err error
		runs[i], err = LoadDir(dir)
		require.NoError(t, err)
	}
	merged, err := Merge(runs, []string{"a", "b"})
	require.NoError(t, err)
	got := merged.Summary.Scenarios["load"].Settled
	require.True(t, got.FromSeries)
	require.True(t, got.Approximate, "10,000 iterations an instance in 1,000 points")
	rules, err := ParseLimits("p50<100")
	require.NoError(t, err)
	_, err = JudgeSettled(merged.Summary, rules, nil, "")
	require.NoError(t, err, "the median is judged")
	rules, err = ParseLimits("p99<100")
	require.NoError(t, err)
	_, err = JudgeSettled(merged.Summary, rules, nil, "")
	require.ErrorContains(t, err, "approximate")

	// the same run twice is refused, not counted twice: a copy, or a merged
	// folder (it keeps its first instance's run id) with its sources
	_, err = Merge([]*Run{runs[0], runs[1], runs[0]}, []string{"a", "b", "a-copy"})
	require.ErrorContains(t, err, "merge: a and a-copy hold the same run (run_id synth-0)")
	_, err = Merge([]*Run{merged, runs[0]}, []string{"merged", "a"})
	require.ErrorContains(t, err, "merge: merged and a hold the same run")
}

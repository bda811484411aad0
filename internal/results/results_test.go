package results

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/latency"
)

// synthLatency is the duration (ms) of iteration i of n: a cold tail, a
// warm-up ramp, then steady with noise.
func synthLatency(i, n int, rng *rand.Rand) (float64, uint8) {
	switch {
	case i < n/50:
		return 40*math.Exp(-float64(i)/float64(n/150+1)) + 5 + rng.Float64(), 0
	case i < n/5:
		f := float64(i-n/50) / float64(n/5-n/50)
		return 5*(2-f) + rng.Float64(), 1
	}
	return 5 + rng.ExpFloat64()*0.5, 2
}

// synthBuilder accumulates iterations like the k6 glue does.
type synthBuilder struct {
	run    *Run
	series *IterSeries
	hs     [3]*latency.Histogram
	req    [3]*latency.Histogram
	start  time.Time
}

func newSynth(limit int, start time.Time) *synthBuilder {
	b := &synthBuilder{run: NewRun(), series: NewIterSeries(limit), start: start}
	for i := range b.hs {
		b.hs[i] = latency.New(3_600_000, 3)
		b.req[i] = latency.New(600_000, 2)
	}
	return b
}

func record(h *latency.Histogram, v, startMs, endMs float64) {
	h.RecordMs(v)
	if h.FirstMs == 0 || startMs < h.FirstMs {
		h.FirstMs = startMs
	}
	h.LastMs = math.Max(h.LastMs, endMs)
}

func (b *synthBuilder) add(i int64, v float64, r uint8, endMs float64) {
	b.series.Add(i, r, endMs, v)
	record(b.hs[r], v, endMs-v, endMs)
	record(b.req[r], v*0.8, endMs-v, endMs)
}

func (b *synthBuilder) finish() *Run {
	run := b.run
	s := run.Summary
	s.Started = b.start
	s.Ended = b.start.Add(time.Minute)
	s.RunID = "synth"
	ttss, ce, ss := 12000.0, 1200.0, 12000.0
	s.Scenarios["load"] = &Scenario{Scope: "scenario", Input: "iteration", Class: "warmup", Regime: "steady", Steady: true,
		StartedMs: float64(b.start.UnixMilli()), TTSSMs: &ttss, ColdEnd: &Point{Index: 1, ElapsedMs: ce}, SteadyStart: &Point{Index: 2, ElapsedMs: ss},
		Transitions: []Transition{
			{Kind: "cold_end", From: "cold", To: "warmup", AtMs: float64(b.start.UnixMilli()) + ce, ElapsedMs: ce},
			{Kind: "steady", From: "warmup", To: "steady", AtMs: float64(b.start.UnixMilli()) + ss, ElapsedMs: ss},
		}}
	hs := b.hs
	run.Iter["load"] = &hs
	for r := range 3 {
		row := &RequestRow{Scenario: "load", Phase: "main", Regime: Regimes[r], Endpoint: "get /x", Protocol: "http"}
		row.Errors = int64(r)
		s.Requests = append(s.Requests, row)
		run.Req[row.Key()] = b.req[r]
	}
	errs := int64(3)
	s.ConnectionColdStart["main"] = &ConnPhase{Requests: 10, NewConnections: 4, Errors: errs,
		NewConnectionsByRegime: map[string]int64{"cold": 4}, ErrorsByRegime: map[string]int64{"warmup": 1, "steady": 2}}
	s.Environment = Environment{K6Version: "v2.2.0", CPUs: 2, Governor: "unknown", Cgroup: "none", CPULimit: "max",
		Warnings: []string{"the load generator was saturated: test warning"}}
	run.Series["load"] = &SeriesData{Points: b.series.Points(), Info: b.series.Info("")}
	run.Finalize()
	return run
}

// synthRun builds a run of n iterations over one minute.
func synthRun(n, limit int, seed uint64) *Run {
	rng := rand.New(rand.NewPCG(seed, 7))
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := newSynth(limit, start)
	t0 := float64(start.UnixMilli())
	for i := range n {
		v, r := synthLatency(i, n, rng)
		end := t0 + 60000*float64(i+1)/float64(n)
		b.add(int64(i), v, r, end)
		if i%50 == 49 {
			b.run.Windows = append(b.run.Windows, WindowRow{Scenario: "load", Seq: i / 50, FirstIndex: int64(i - 49), LastIndex: int64(i),
				FirstMs: end - 1, LastMs: end, N: 50, Median: v, Tail: v * 1.3, Regime: Regimes[r]})
		}
	}
	run := b.finish()
	run.Summary.RunID = fmt.Sprintf("synth-%d", seed)
	return run
}

func TestHLogReadBackGivesThePercentiles(t *testing.T) {
	t.Parallel()
	run := synthRun(20000, DefaultSeriesLimit, 1)
	dir := t.TempDir()
	require.NoError(t, run.WriteDir(dir, WriteOptions{}))
	sc := run.Summary.Scenarios["load"]
	for _, rg := range Regimes {
		d := sc.Regimes[rg]
		require.Positive(t, d.Count, rg)
		f, err := os.Open(filepath.Join(dir, d.HLog))
		require.NoError(t, err)
		h, err := hdrhistogram.NewHistogramLogReader(f).NextIntervalHistogram()
		require.NoError(t, f.Close())
		require.NoError(t, err)
		require.NotNil(t, h, rg)
		require.Equal(t, d.Count, h.TotalCount(), rg)
		for _, q := range []struct {
			q    float64
			want float64
		}{{50, d.P50}, {95, d.P95}, {99, d.P99}, {99.9, d.P999}} {
			got := float64(h.ValueAtQuantile(q.q)) * latency.UnitMs
			require.InEpsilon(t, q.want, got, 0.002, "%s p%v", rg, q.q) // 3 significant digits
		}
	}
	// the request log holds one tagged histogram per row
	all, err := readHLog(filepath.Join(dir, RequestsHLogFile))
	require.NoError(t, err)
	require.Len(t, all, 3)

	back, err := LoadDir(dir)
	require.NoError(t, err)
	back.Finalize()
	require.Equal(t, run.Summary.Scenarios["load"].Regimes["steady"].P99, back.Summary.Scenarios["load"].Regimes["steady"].P99)
	require.Equal(t, run.Summary.Requests[2].P95, back.Summary.Requests[2].P95)
	require.Len(t, back.Series["load"].Points, 20000)
	require.Len(t, back.Windows, 400)
}

func TestIterSeriesStaysBounded(t *testing.T) { //nolint:paralleltest // AllocsPerRun
	s := NewIterSeries(1000)
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range 100_000 {
		v := float64(i%977) + 1
		lo, hi = math.Min(lo, v), math.Max(hi, v)
		s.Add(int64(i), uint8(i*3/100_000), float64(i), v)
	}
	pts := s.Points()
	require.LessOrEqual(t, len(pts), 1001)
	var n int64
	mn, mx := float32(math.Inf(1)), float32(math.Inf(-1))
	for i, p := range pts {
		n += int64(p.N)
		mn, mx = min(mn, p.Min), max(mx, p.Max)
		if i > 0 {
			require.Equal(t, pts[i-1].Index+int64(pts[i-1].N), p.Index, "buckets are contiguous")
		}
	}
	require.Equal(t, int64(100_000), n)
	require.Equal(t, float32(lo), mn)
	require.Equal(t, float32(hi), mx)
	info := s.Info("f")
	require.True(t, info.Aggregated)
	require.Equal(t, 128, info.BucketWidth)
	require.Contains(t, info.Note, "aggregated")
	regions := Regions(pts)
	require.Len(t, regions, 3)
	require.Equal(t, []string{"cold", "warmup", "steady"}, []string{regions[0].Regime, regions[1].Regime, regions[2].Regime})
	require.Zero(t, testing.AllocsPerRun(1000, func() { s.Add(1, 2, 3, 4) }))
}

func TestParseBudgets(t *testing.T) {
	t.Parallel()
	b, err := ParseBudgets("p95=+10%, errors=+0.01,ttss=20%,p99.9=5")
	require.NoError(t, err)
	require.Equal(t, []Budget{{"p95", 10, true}, {"errors", 0.01, false}, {"ttss", 20, true}, {"p99_9", 5, false}}, b)
	for _, bad := range []string{"p95", "p95=", "p96=+10%", "p95=-10%", "p95=ten", "=5"} {
		_, err := ParseBudgets(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "--fail-on", bad)
		require.Contains(t, err.Error(), "valid forms", bad)
	}
}

func TestCompareSelfPassesInflatedFails(t *testing.T) {
	t.Parallel()
	run := synthRun(5000, DefaultSeriesLimit, 2)
	budgets, err := ParseBudgets("p95=+10%,errors=+0.01,ttss=+20%")
	require.NoError(t, err)
	c := Compare(run.Summary, run.Summary, budgets)
	require.False(t, c.Failed(), c.Text("a", "a"))

	cand := synthRun(5000, DefaultSeriesLimit, 2).Summary
	for _, r := range cand.Requests {
		r.P95 *= 1.2
	}
	c = Compare(run.Summary, cand, budgets)
	require.True(t, c.Failed())
	txt := c.Text("base", "cand")
	require.Contains(t, txt, "FAIL")
	require.Contains(t, txt, "p95")

	cand = synthRun(5000, DefaultSeriesLimit, 2).Summary
	cand.Scenarios["load"].TTSSMs = nil
	require.True(t, Compare(run.Summary, cand, budgets).Failed(), "never steady fails a ttss budget")
}

func TestMergeIsExact(t *testing.T) {
	t.Parallel()
	const n = 30000
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	whole, parts := newSynth(DefaultSeriesLimit, start), [2]*synthBuilder{newSynth(DefaultSeriesLimit, start), newSynth(DefaultSeriesLimit, start)}
	t0 := float64(start.UnixMilli())
	for i := range n {
		v, r := synthLatency(i, n, rng)
		end := t0 + 60000*float64(i+1)/n
		whole.add(int64(i), v, r, end)
		parts[i%2].add(int64(i/2), v, r, end)
	}
	dirs := []string{t.TempDir(), t.TempDir()}
	runs := make([]*Run, 2)
	for i, p := range parts {
		run := p.finish()
		run.Summary.RunID = fmt.Sprintf("synth-%d", i) // two instances: two runs
		require.NoError(t, run.WriteDir(dirs[i], WriteOptions{}))
		var err error
		runs[i], err = LoadDir(dirs[i])
		require.NoError(t, err)
	}
	merged, err := Merge(runs, dirs)
	require.NoError(t, err)
	out := t.TempDir()
	require.NoError(t, merged.WriteDir(out, WriteOptions{Report: true}))
	m, err := ReadSummary(out)
	require.NoError(t, err)
	w := whole.finish().Summary
	require.Equal(t, 2, m.Instances)
	for _, rg := range Regimes {
		a, b := w.Scenarios["load"].Regimes[rg], m.Scenarios["load"].Regimes[rg]
		require.Equal(t, a.Count, b.Count, rg)
		require.InDelta(t, a.SumMs, b.SumMs, 1e-6*a.SumMs)
		require.Equal(t, a.P50, b.P50, rg)
		require.Equal(t, a.P99, b.P99, rg)
		require.Equal(t, a.Max, b.Max, rg)
	}
	for i := range w.Requests {
		require.Equal(t, w.Requests[i].Count, m.Requests[i].Count)
		require.Equal(t, w.Requests[i].P95, m.Requests[i].P95)
		require.Equal(t, 2*w.Requests[i].Errors, m.Requests[i].Errors)
	}
	require.Equal(t, int64(n), m.Series.Iterations["load"].Iterations)
	require.Equal(t, int64(6), m.ConnectionColdStart["main"].Errors)
}

func TestTextTable(t *testing.T) {
	t.Parallel()
	txt := TextTable(synthRun(2000, DefaultSeriesLimit, 5).Summary)
	require.Contains(t, txt, "load")
	require.Contains(t, txt, "12000")
	require.Contains(t, txt, "WARNING")
	require.Equal(t, 4, strings.Count(txt, "\n"))
}

func TestProbe(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"/proc/self/cgroup":                                     "0::/k6\n",
		"/sys/fs/cgroup/k6/cpu.max":                             "150000 100000\n",
		"/sys/fs/cgroup/k6/cpu.stat":                            "nr_periods 10\nnr_throttled 0\nthrottled_usec 0\n",
		"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "powersave\n",
	}
	clock := time.Unix(100, 0)
	cpu := time.Duration(0)
	p := &Probe{NumCPU: 4, Now: func() time.Time { return clock }, CPUTime: func() time.Duration { return cpu },
		ReadFile: func(n string) ([]byte, error) {
			if v, ok := files[n]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}}
	p.Start()
	clock = clock.Add(10 * time.Second)
	cpu = 14 * time.Second // 1.4 of 1.5 cores
	files["/sys/fs/cgroup/k6/cpu.stat"] = "nr_periods 110\nnr_throttled 7\nthrottled_usec 35000\n"
	e := p.Finish()
	require.Equal(t, "v2", e.Cgroup)
	require.InDelta(t, 1.5, *e.CPULimitCores, 1e-9)
	require.Equal(t, int64(7), e.ThrottledPeriods)
	require.InDelta(t, 35.0, e.ThrottledMs, 1e-9)
	require.InDelta(t, 14.0/10/1.5, e.CPUUtilization, 1e-9)
	require.Equal(t, "powersave", e.Governor)
	require.Len(t, e.Warnings, 3) // throttled, saturated, governor

	files = map[string]string{}
	e = (&Probe{NumCPU: 2, Now: time.Now, CPUTime: func() time.Duration { return 0 },
		ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }}).Finish()
	require.Equal(t, "unknown", e.Governor)
	require.Equal(t, "none", e.Cgroup)
	require.Empty(t, e.Warnings)
}

// BenchmarkSummaryAndReport: one million iterations recorded (series and
// histograms), then the whole results folder with report.html written.
func BenchmarkSummaryAndReport(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		run := synthRun(1_000_000, DefaultSeriesLimit, 9)
		if err := run.WriteDir(b.TempDir(), WriteOptions{Report: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMedian32MatchesSort: the selection gives the median a sort gives, on
// distinct, tied and ordered values, odd and even counts.
func TestMedian32MatchesSort(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	sorted := func(v []float32) float32 {
		s := slices.Clone(v)
		slices.Sort(s)
		n := len(s)
		if n%2 == 1 {
			return s[n/2]
		}
		return (s[n/2-1] + s[n/2]) / 2
	}
	for n := 1; n <= 300; n++ {
		for _, gen := range []func(int) float32{
			func(int) float32 { return float32(rng.Float64() * 100) },
			func(int) float32 { return float32(rng.IntN(3)) }, // ties
			func(i int) float32 { return float32(i) },         // ascending
			func(i int) float32 { return float32(n - i) },     // descending
			func(int) float32 { return 7 },                    // all equal
		} {
			v := make([]float32, n)
			for i := range v {
				v[i] = gen(i)
			}
			want := sorted(v)
			require.Equal(t, want, median32(v), "n %d %v", n, v)
		}
	}
	require.Zero(t, median32(nil))
}

// TestTableOrder: the tables printed by phase (report.html's sections,
// compare's table) list rows by phase, endpoint, scenario, protocol, then
// regime in the regimes' order, unknown names last and by name.
func TestTableOrder(t *testing.T) {
	t.Parallel()
	rows := []*RequestRow{
		{Phase: "b", Endpoint: "a", Scenario: "a", Protocol: "http", Regime: "cold"},
		{Phase: "a", Endpoint: "b", Scenario: "a", Protocol: "http", Regime: "cold"},
		{Phase: "a", Endpoint: "a", Scenario: "b", Protocol: "http", Regime: "cold"},
		{Phase: "a", Endpoint: "a", Scenario: "a", Protocol: "http", Regime: "zz"},
		{Phase: "a", Endpoint: "a", Scenario: "a", Protocol: "http", Regime: ""},
		{Phase: "a", Endpoint: "a", Scenario: "a", Protocol: "http", Regime: "steady"},
		{Phase: "a", Endpoint: "a", Scenario: "a", Protocol: "grpc", Regime: "steady"},
		{Phase: "a", Endpoint: "a", Scenario: "a", Protocol: "http", Regime: "cold"},
		{Phase: "a", Endpoint: "a", Scenario: "a", Protocol: "http", Regime: "warmup"},
	}
	slices.SortStableFunc(rows, func(a, b *RequestRow) int { return compareTableKeys(a.tableKey(), b.tableKey()) })
	var got []string
	for _, r := range rows {
		got = append(got, strings.Join([]string{r.Phase, r.Endpoint, r.Scenario, r.Protocol, r.Regime}, "/"))
	}
	require.Equal(t, []string{
		"a/a/a/grpc/steady",
		"a/a/a/http/cold", "a/a/a/http/warmup", "a/a/a/http/steady", "a/a/a/http/", "a/a/a/http/zz",
		"a/a/b/http/cold",
		"a/b/a/http/cold",
		"b/a/a/http/cold",
	}, got)
}

// TestColdExcessAgainstTheSteadyMean: cold and warm-up iterations drawn from
// the steady distribution itself (a service with no cold start, a skewed
// latency) cost nothing beyond it. Against the steady median they cost
// their count times the mean-median gap: 1,000 iterations of a lognormal
// with median 5 ms and mean 6.8 ms, about 1.8 s of cost never paid.
func TestColdExcessAgainstTheSteadyMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	draw := func(h *latency.Histogram, n int) {
		for range n {
			h.RecordMs(5 * math.Exp(0.8*rng.NormFloat64()))
		}
	}
	var hs [3]*latency.Histogram
	for i := range hs {
		hs[i] = latency.New(600_000, 3)
	}
	draw(hs[0], 200)
	draw(hs[1], 800)
	draw(hs[2], 200_000)
	sc := &Scenario{Regimes: map[string]*Dist{}}
	finalizeScenario("load", sc, &hs)
	require.NotNil(t, sc.ColdStart.ExcessMs)
	// the draws' own mean differs from the steady one by sampling noise:
	// sd 5*sqrt(e^0.64-1)*sqrt(1000) ≈ 150 ms over 1,000 iterations
	require.InDelta(t, 0, *sc.ColdStart.ExcessMs, 600, "excess %.0f ms", *sc.ColdStart.ExcessMs)
}

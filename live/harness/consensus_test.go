package harness

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// waveAt is a +-amp wave of the given period whose phase differs by run:
// the machine's wander, which does not repeat from run to run.
func waveAt(run int, amp, period float64) func(float64) float64 {
	phase := float64(run) * 2.1
	return func(t float64) float64 { return 1 + amp*math.Sin(2*math.Pi*t/period+phase) }
}

func runsOf(n, secs int, level func(run int, t float64) float64) [][]Iteration {
	out := make([][]Iteration, n)
	for r := range n {
		out[r] = synth(uint64(r+1), 200, secs, func(t float64) float64 { return level(r, t) })
	}
	return out
}

func TestConsensusFlatWithWaves(t *testing.T) {
	t.Parallel()
	// +-20% waves at random phases: no warm-up repeats, so none is found,
	// and every run is flat (a wave at the start of one run stays inside the
	// envelope the runs share)
	runs := runsOf(5, 60, func(r int, t float64) float64 { return waveAt(r, 0.2, 23)(t) })
	c, err := ComputeConsensus(runs)
	require.NoError(t, err)
	require.True(t, c.Steady)
	require.Zero(t, c.WarmupEnd)
	require.Greater(t, c.Envelope[1], 0.1, "the envelope holds the waves")
	for i, it := range runs {
		ref := c.Judge(it)
		require.True(t, ref.Steady, "run %d", i)
		require.LessOrEqual(t, ref.Boundary, 3.0, "run %d: %+v", i, ref)
	}
}

func TestConsensusRepeatedWarmup(t *testing.T) {
	t.Parallel()
	// a warm-up that repeats in every run (3x, decaying over ~6 s), under
	// waves of +-15%
	runs := runsOf(5, 60, func(r int, t float64) float64 {
		return waveAt(r, 0.15, 23)(t) * (1 + 2*math.Exp(-t/2))
	})
	c, err := ComputeConsensus(runs)
	require.NoError(t, err)
	require.True(t, c.Steady)
	require.InDelta(t, 6, c.WarmupEnd, 3)
	require.Greater(t, c.Curve[0], 1.0, "Welch's curve starts 2-3x slower")
	for i, it := range runs {
		ref := c.Judge(it)
		require.True(t, ref.Steady, "run %d", i)
		require.Equal(t, "warmup", ref.Class, "run %d", i)
		require.GreaterOrEqual(t, ref.Boundary, c.WarmupEnd, "run %d", i)
		require.LessOrEqual(t, ref.Boundary, 12.0, "run %d: %+v", i, ref)
	}
}

func TestConsensusLateStepOfOneRun(t *testing.T) {
	t.Parallel()
	// quiet runs (+-5%) that warm up for 4 s; run 2 also improves by 25% at
	// 30 s (a late recompilation): that run's boundary moves to the step,
	// the others' do not
	runs := runsOf(5, 90, func(r int, t float64) float64 {
		v := waveAt(r, 0.05, 17)(t) * (1 + 3*math.Exp(-t))
		if r == 2 && t < 30 {
			v *= 1.25
		}
		return v
	})
	c, err := ComputeConsensus(runs)
	require.NoError(t, err)
	require.True(t, c.Steady)
	require.LessOrEqual(t, c.WarmupEnd, 8.0)
	for i, it := range runs {
		ref := c.JudgeRun(i, it)
		require.True(t, ref.Steady, "run %d", i)
		if i == 2 {
			require.InDelta(t, 30, ref.Boundary, 2, "the late step: %+v", ref)
			continue
		}
		require.LessOrEqual(t, ref.Boundary, 8.0, "run %d: %+v", i, ref)
	}
}

func TestConsensusDriftAndSlowdown(t *testing.T) {
	t.Parallel()
	drift := runsOf(5, 60, func(r int, t float64) float64 { return waveAt(r, 0.1, 23)(t) * math.Exp(0.02*t) })
	c, err := ComputeConsensus(drift)
	require.NoError(t, err)
	require.False(t, c.Steady, "drift: %+v", c)
	require.Greater(t, c.Trend, 0.5)
	for _, it := range drift {
		require.False(t, c.Judge(it).Steady)
		require.Equal(t, "no-steady-state", c.Judge(it).Class)
	}
	slow := runsOf(5, 60, func(r int, t float64) float64 { return waveAt(r, 0.1, 23)(t) * (1 + max(0, t-25)*0.08) })
	c, err = ComputeConsensus(slow)
	require.NoError(t, err)
	require.False(t, c.Steady, "slowdown for good: %+v", c)
}

func TestConsensusStep(t *testing.T) {
	t.Parallel()
	// 40 ms for 8 s, then 5 ms: every run's boundary at the drop
	runs := runsOf(5, 60, func(r int, t float64) float64 {
		if t < 8 {
			return 40
		}
		return 5 * waveAt(r, 0.1, 23)(t)
	})
	c, err := ComputeConsensus(runs)
	require.NoError(t, err)
	for i, it := range runs {
		ref := c.Judge(it)
		require.True(t, ref.Steady)
		require.Equal(t, "warmup", ref.Class)
		require.Equal(t, 8.0, ref.Boundary, "run %d", i)
	}
}

func TestConsensusBadInput(t *testing.T) {
	t.Parallel()
	_, err := ComputeConsensus(runsOf(2, 60, func(int, float64) float64 { return 1 }))
	require.ErrorContains(t, err, "needs 3 runs or more, got 2")
	_, err = ComputeConsensus(runsOf(3, 12, func(int, float64) float64 { return 1 }))
	require.ErrorContains(t, err, "runs of 20 blocks or more")
	// fewer runs than a consensus needs: each run its own reference
	cons, refs, err := CaseReferences([]RunSeries{{Run: 1, Series: synth(1, 200, 60, wave)}})
	require.NoError(t, err)
	require.Nil(t, cons)
	require.Equal(t, "single run", refs[1].Source)
}

func TestSplit(t *testing.T) {
	t.Parallel()
	out, in, below := 1.0, 0.0, -1.0
	// outside for 5 blocks, then inside with one outside block (a wave)
	x := []float64{out, out, out, out, out, in, in, in, out, in, in, in}
	require.Equal(t, 5, split(x, 0, len(x)-3, -0.5, 0.5))
	// all inside: no prefix
	require.Equal(t, 0, split([]float64{in, in, in, out, in}, 0, 4, -0.5, 0.5))
	// from: never earlier
	require.Equal(t, 2, split([]float64{in, in, in, in}, 2, 3, -0.5, 0.5))
	// NaN blocks count for nothing
	require.Equal(t, 1, split([]float64{out, math.NaN(), in, in}, 0, 3, -0.5, 0.5))
	// a faster start is a prefix too
	require.Equal(t, 3, split([]float64{below, below, below, in, in, in}, 0, 5, -0.5, 0.5))
	// a stretch with 2 blocks of 5 outside is no prefix (a level switch,
	// not a warm-up); with 9 of 10 it is
	require.Equal(t, 0, split([]float64{in, out, in, out, in, in, in, in, in}, 0, 6, -0.5, 0.5))
	require.Equal(t, 10, split([]float64{out, out, out, in, out, out, out, out, out, out, in, in, in}, 0, 11, -0.5, 0.5))
	// blocks beyond both sides do not add up to a prefix (the first block
	// alone is one)
	require.Equal(t, 1, split([]float64{out, below, out, below, in, in, in}, 0, 5, -0.5, 0.5))
}

// TestLeaveOneOutReferences: with LeaveOneOutMinRuns runs or more, each
// run gets a reference from the consensus of the others, keyed by its run
// number (not its place), its source saying so; a warm-up four runs of five
// share is the case's W, but the consensus of a warm run's four others (one
// of them flat) has no four runs agreeing, so its W is far earlier.
func TestLeaveOneOutReferences(t *testing.T) {
	t.Parallel()
	runs := runsOf(5, 60, func(r int, t float64) float64 {
		if r == 4 {
			return waveAt(r, 0.05, 23)(t)
		}
		return waveAt(r, 0.05, 23)(t) * (1 + 1.5*math.Max(0, 1-t/20))
	})
	var rs []RunSeries
	for i, it := range runs {
		rs = append(rs, RunSeries{Run: 10 + i, Series: it})
	}
	none, err := LeaveOneOutReferences(rs[:LeaveOneOutMinRuns-1])
	require.NoError(t, err)
	require.Nil(t, none, "too few runs for a consensus of the others")
	all, err := ComputeConsensus(runs)
	require.NoError(t, err)
	require.InDelta(t, 17, all.WarmupEnd, 4, "four of five runs warm up for 20 s")
	held, err := LeaveOneOutReferences(rs)
	require.NoError(t, err)
	require.Len(t, held, 5)
	for i := range runs {
		ref, ok := held[10+i]
		require.True(t, ok, "run %d is keyed by its number", 10+i)
		require.Equal(t, "consensus of the 4 other runs", ref.Source)
		require.NotNil(t, ref.CaseWarmupEnd)
		if i < 4 {
			require.Less(t, *ref.CaseWarmupEnd, all.WarmupEnd-5, "run %d: its others are 3 warm and 1 flat: %+v", 10+i, ref)
		} else {
			require.InDelta(t, all.WarmupEnd, *ref.CaseWarmupEnd, 3, "the flat run's others are the 4 warm ones")
		}
	}
	_, err = LeaveOneOutReferences(append(rs, RunSeries{Run: 99, Series: runs[0][:1000]}))
	require.ErrorContains(t, err, "the consensus of the runs but run")
}

// TestJudgeCaseLeaveOneOut: JudgeCase gives each run of a case, by run
// number, its judgement against the consensus of the case's other runs.
func TestJudgeCaseLeaveOneOut(t *testing.T) {
	t.Parallel()
	runs := runsOf(5, 60, func(r int, t float64) float64 {
		return waveAt(r, 0.05, 23)(t) * (1 + 2*math.Exp(-t/2))
	})
	outs := map[int]*RunOutput{}
	var rs []RunSeries
	for i, it := range runs {
		for k := range it {
			it[k].Regime = "warmup"
			if it[k].Start >= 12 {
				it[k].Regime = "steady"
			}
		}
		n := []int{3, 4, 7, 8, 9}[i]
		outs[n] = &RunOutput{Series: it, Dir: t.TempDir(), Run: &results.Run{Summary: &results.Summary{Scenarios: map[string]*results.Scenario{}}}}
		rs = append(rs, RunSeries{Run: i, Series: it})
	}
	held, err := LeaveOneOutReferences(rs)
	require.NoError(t, err)
	_, figs, err := JudgeCase(Case{Name: "svc/open", Kind: KindWarmup}, outs)
	require.NoError(t, err)
	require.Len(t, figs, 5)
	for i, f := range figs {
		require.Equal(t, []int{3, 4, 7, 8, 9}[i], f.Run)
		require.NotNil(t, f.LeaveOneOut, "run %d", f.Run)
		require.Equal(t, held[i].Boundary, f.LeaveOneOut.Ref.Boundary, "run %d", f.Run)
		require.Equal(t, "consensus of the 4 other runs", f.LeaveOneOut.Ref.Source)
		require.NotNil(t, f.LeaveOneOut.Online.Coverage)
	}
}

// TestJudgeLeaveOneOut: the online checks of a run against a held-out
// reference, and the table that sets them beside those against the
// consensus of all the runs, naming the runs whose verdict differs.
func TestJudgeLeaveOneOut(t *testing.T) {
	t.Parallel()
	it := synth(1, 200, 60, func(float64) float64 { return 1 })
	for i := range it {
		it[i].Regime = "warmup"
		if it[i].Start >= 10 {
			it[i].Regime = "steady"
		}
	}
	steady := func(j int) bool { return it[j].Regime == "steady" }
	c := Case{Name: "svc/open", Kind: KindWarmup}
	f := Figures{Case: c.Name, Run: 1, ExitCode: 0, Verdict: "held", Duration: 60, DeclaredAfter: ptr(10.0), TTSS: ptr(10.0)}
	early := Reference{Steady: true, Class: "warmup", Boundary: 8}
	late := Reference{Steady: true, Class: "warmup", Boundary: 14}
	f.Ref, f.Online = early, quality(it, early, steady)
	f.Checks = checks(c, &f)
	require.True(t, f.OnlineMet())
	h := judgeLeaveOneOut(c, f, late, quality(it, late, steady))
	require.Len(t, h.Failed, 1, "%v", h.Failed)
	require.Contains(t, h.Failed[0], "contamination <= 2%")
	require.InDelta(t, 4.0/50, *h.Online.Contamination, 0.01, "4 of the 50 steady seconds precede the leave-one-out boundary")
	f.LeaveOneOut = h
	same := f
	same.Run = 2
	same.LeaveOneOut = judgeLeaveOneOut(c, f, early, f.Online)
	require.Empty(t, same.LeaveOneOut.Failed)
	var b strings.Builder
	WriteLeaveOneOut(&b, Summarize([]Case{c}, []*Figures{&f, &same}))
	require.Contains(t, b.String(), "| svc/open | 2 of 2 | 2/2 | 1/2 | 1 | none | 3.0 / 6.0 |")
	require.Contains(t, RunLine(&f), "against the other runs' consensus: warmup from 14 s, contamination 8.0%")
}

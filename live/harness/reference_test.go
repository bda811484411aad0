package harness

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// synth returns an open-model series: rate iterations per second for secs
// seconds, each taking level(t) times log-normal noise (sigma 0.3).
func synth(seed uint64, rate, secs int, level func(t float64) float64) []Iteration {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]Iteration, 0, rate*secs)
	for i := range rate * secs {
		t := float64(i) / float64(rate)
		out = append(out, Iteration{Start: t, Ms: level(t) * math.Exp(0.3*r.NormFloat64()), Regime: "warmup"})
	}
	return out
}

// wave is a slow +-15% wave with a period of 23 s, the wander of a flat
// service on shared cores.
func wave(t float64) float64 { return 1 + 0.15*math.Sin(2*math.Pi*t/23) }

func TestReferenceShapes(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 3; seed++ {
		flat := ComputeReference(synth(seed, 200, 60, wave))
		require.True(t, flat.Steady, "flat")
		require.Equal(t, "flat", flat.Class)
		require.Zero(t, flat.Boundary)

		warm := ComputeReference(synth(seed, 200, 60, func(t float64) float64 {
			return wave(t) * (1 + 2*math.Exp(-t/3)) // 3x at the start, within 25% after ~6 s
		}))
		require.True(t, warm.Steady, "warm-up")
		require.Equal(t, "warmup", warm.Class)
		require.InDelta(t, 6, warm.Boundary, 4)

		step := ComputeReference(synth(seed, 200, 60, func(t float64) float64 {
			if t < 8 {
				return 40
			}
			return 5
		}))
		require.True(t, step.Steady, "step")
		require.Equal(t, "warmup", step.Class)
		require.Equal(t, 8.0, step.Boundary)

		drift := ComputeReference(synth(seed, 200, 60, func(t float64) float64 { return math.Exp(0.02 * t) }))
		require.False(t, drift.Steady, "drift: %+v", drift)
		require.Equal(t, "no-steady-state", drift.Class)
		require.Greater(t, drift.Trend, 0.5)

		slow := ComputeReference(synth(seed, 200, 60, func(t float64) float64 { return 1 + max(0, t-25)*0.08 }))
		require.False(t, slow.Steady, "slowdown for good: %+v", slow)
	}
}

func TestReferenceTooShort(t *testing.T) {
	t.Parallel()
	ref := ComputeReference(synth(1, 100, 5, wave))
	require.False(t, ref.Steady)
	require.Equal(t, 5, ref.Blocks)
}

func TestMSER(t *testing.T) {
	t.Parallel()
	y := []float64{10, 10, 1, 1.1, 0.9, 1, 1.05, 0.95, 1, 1, 1.1, 0.9}
	require.Equal(t, 2, mser(y))
	// never past the first half
	rising := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	require.LessOrEqual(t, mser(rising), 4)
}

func TestMannKendallHamedRao(t *testing.T) {
	t.Parallel()
	// white noise: the test rejects at 5% about 5% of the time
	r := rand.New(rand.NewPCG(3, 3))
	rejected := 0
	for range 200 {
		x := make([]float64, 50)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		if p, _ := mannKendallHamedRao(x); p < 0.05 {
			rejected++
		}
	}
	require.Less(t, rejected, 25, "false rejections of 200")
	// a clear trend is found, with its Theil-Sen slope
	x := make([]float64, 50)
	for i := range x {
		x[i] = 0.1*float64(i) + 0.3*r.NormFloat64()
	}
	p, slope := mannKendallHamedRao(x)
	require.Less(t, p, 0.001)
	require.InDelta(t, 0.1, slope, 0.02)
	// ties and a constant series
	p, slope = mannKendallHamedRao([]float64{1, 1, 1, 1, 1})
	require.Equal(t, 1.0, p)
	require.Zero(t, slope)
}

func TestRanksTies(t *testing.T) {
	t.Parallel()
	require.Equal(t, []float64{1, 2.5, 2.5, 4}, ranks([]float64{1, 5, 5, 9}))
}

func TestQuality(t *testing.T) {
	t.Parallel()
	// 100 iterations per second for 10 s; the reference is steady from 4 s
	var it []Iteration
	for i := range 1000 {
		ms := 1.0
		if i%100 == 0 {
			ms = 10 // one slow iteration per second: the p99
		}
		it = append(it, Iteration{Start: float64(i) / 100, Ms: ms})
	}
	ref := Reference{Steady: true, Boundary: 4}
	// tagged steady from 3 s: 100 of 700 tagged precede the boundary
	q := quality(it, ref, func(i int) bool { return it[i].Start >= 3 })
	require.InDelta(t, 100.0/700, *q.Contamination, 1e-9)
	require.InDelta(t, 1.0, *q.Coverage, 1e-9)
	// tagged from 5 s: no contamination, 500 of 600 covered
	q = quality(it, ref, func(i int) bool { return it[i].Start >= 5 })
	require.Zero(t, *q.Contamination)
	require.InDelta(t, 500.0/600, *q.Coverage, 1e-9)
	require.NotNil(t, q.P99Distortion)
	// nothing tagged: coverage 0, no p99
	q = quality(it, ref, func(int) bool { return false })
	require.Zero(t, *q.Coverage)
	require.Nil(t, q.P99Distortion)
	// no steady state in the reference: every steady tag is contamination
	q = quality(it, Reference{}, func(i int) bool { return i >= 500 })
	require.Equal(t, 1.0, *q.Contamination)
	require.Nil(t, q.Coverage)
}

func TestTextRow(t *testing.T) {
	t.Parallel()
	out := "results: /x\nRegimes per scenario (iteration duration, ms; steady figures exclude cold and warm-up):\n" +
		"  scenario         class            steady-state     cold  warmup   steady   TTSS ms warm-up ms cold cost ms steady p50       p95       p99 relapses\n" +
		"  live             warmup           not-held           24   29977        0         -          -           24          -         -         -        2\n"
	gate, rel, err := textRow(out)
	require.NoError(t, err)
	require.Equal(t, "not-held", gate)
	require.EqualValues(t, 2, rel)
	_, _, err = textRow("no table here")
	require.Error(t, err)
}

// TestConsistency: the run's accounts of the steady gate that agree give
// no inconsistency; each that disagrees is named.
func TestConsistency(t *testing.T) {
	t.Parallel()
	row := func(gate string, relapses int) string {
		return "  scenario         class            steady-state     cold  warmup   steady relapses\n" +
			fmt.Sprintf("  live             flat             %-16s   24   29977  1000 %d\n", gate, relapses)
	}
	mk := func(t *testing.T, exit int, gate float64, jsSteady bool, jsRelapses int, text string) *RunOutput {
		dir := t.TempDir()
		js := fmt.Sprintf(`{"scenarios": {"live": {"steady": %v, "relapses": %d}}}`, jsSteady, jsRelapses)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "regime-summary.json"), []byte(js), 0o600))
		return &RunOutput{ExitCode: exit, SteadyGate: &gate, Dir: dir, Stdout: text}
	}
	held := &results.Scenario{Steady: true, Relapses: 0}
	require.Empty(t, consistency(mk(t, 0, 1, true, 0, row("held", 0)), held, false, false))
	notHeld := &results.Scenario{Steady: false, Relapses: 1}
	require.Empty(t, consistency(mk(t, 99, 0, false, 1, row("not-held", 1)), notHeld, false, true))

	for _, tc := range []struct {
		name string
		out  *RunOutput
		sc   *results.Scenario
		want string
	}{
		{"exit 0, summary.json not steady", mk(t, 0, 1, false, 0, row("held", 0)), &results.Scenario{Steady: false}, "exit code 0 but summary.json steady=false"},
		{"metric", mk(t, 0, 0, true, 0, row("held", 0)), held, "exit code 0 but regime_steady rate 0"},
		{"summary()", mk(t, 0, 1, false, 0, row("held", 0)), held, "summary() steady=false but summary.json steady=true"},
		{"summary() relapses", mk(t, 0, 1, true, 55, row("held", 0)), held, "summary() relapses=55 but summary.json 0"},
		{"text gate", mk(t, 0, 1, true, 0, row("not-held", 0)), held, `exit code 0 but the text summary says "not-held"`},
		{"text relapses", mk(t, 0, 1, true, 0, row("held", 3)), held, "text summary relapses=3 but summary.json 0"},
		{"no text row", mk(t, 0, 1, true, 0, "no table"), held, "text summary: no row for scenario live"},
	} {
		bad := consistency(tc.out, tc.sc, false, false)
		require.NotEmpty(t, bad, tc.name)
		require.Contains(t, strings.Join(bad, "; "), tc.want, tc.name)
	}
	// a failed gate without its log line, and a held one with it
	bad := consistency(mk(t, 99, 0, false, 1, row("not-held", 1)), notHeld, false, false)
	require.Contains(t, strings.Join(bad, "; "), "exit code 99 without a 'never reached' or 'not held' log line")
	bad = consistency(mk(t, 0, 1, true, 0, row("held", 0)), held, true, false)
	require.Contains(t, strings.Join(bad, "; "), "exit code 0 with a failed-gate log line")
	require.Equal(t, []string{"summary.json has no scenario live"}, consistency(mk(t, 0, 1, true, 0, row("held", 0)), nil, false, false))
}

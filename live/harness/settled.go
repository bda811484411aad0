package harness

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/xk6-regime/xk6-regime/internal/results"

	"github.com/xk6-regime/xk6-regime/detector"
)

// LoadSeries reads the iterations of the harness scenario from a results
// folder (no k6 output needed).
func LoadSeries(dir string) ([]Iteration, error) {
	out := &RunOutput{Dir: dir}
	if err := out.load(); err != nil {
		return nil, err
	}
	return out.Series, nil
}

// ReplaySettled computes the settled view of a recorded series the way the
// extension does at the end of a run: each iteration recorded in the time
// bucket of its start, then detector.Settle.
func ReplaySettled(it []Iteration, cfg detector.SettleConfig) detector.Settled {
	tb, _ := detector.NewTimeBuckets(0, detector.DefaultBucketWidth, detector.DefaultMaxBuckets)
	for _, x := range it {
		tb.Record(int64(math.Round(x.Start*1e9)), x.Ms)
	}
	return detector.Settle(tb, cfg)
}

// SettledQuality judges a settled view (boundary in seconds from the
// series' first start, as Iteration.Start) against the reference.
func SettledQuality(it []Iteration, ref Reference, s detector.Settled) Quality {
	b := float64(s.Boundary.Time-s.Origin) / 1e9
	return quality(it, ref, func(i int) bool { return s.Steady && it[i].Start >= b })
}

// judgeSettled judges the settled view of a run: the extension's (its
// boundary is the number of iterations that started before it), or a
// replay of the series for runs recorded before it existed.
func (f *Figures) judgeSettled(it []Iteration, sc *results.Scenario) {
	if sc == nil || sc.Settled == nil {
		s := ReplaySettled(it, detector.DefaultSettleConfig())
		f.Settled, f.SettledClass, f.SettledSource = SettledQuality(it, f.Ref, s), s.Class.String(), "replay"
		return
	}
	v := sc.Settled
	f.SettledClass, f.SettledSource = v.Class, "extension"
	if !v.Steady || v.Boundary == nil {
		f.Settled = quality(it, f.Ref, func(int) bool { return false })
		return
	}
	starts := make([]float64, len(it))
	for i, x := range it {
		starts[i] = x.Start
	}
	sort.Float64s(starts)
	from := math.Inf(1)
	if k := int(v.Boundary.Index); k < len(starts) {
		from = starts[k]
	}
	f.Settled = quality(it, f.Ref, func(i int) bool { return it[i].Start >= from })
}

// WriteSettledTable writes the settled view's figures per case (worst run
// in each cell, as WriteTable).
func WriteSettledTable(w io.Writer, sums []*Summary) {
	fmt.Fprintln(w, "| case | runs | settled class | contamination % | coverage % | p99 distortion % | source |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, s := range sums {
		var con, cov, p9 stat
		classes := map[string]int{}
		sources := map[string]bool{}
		for _, f := range s.Runs {
			con.add(f.Settled.Contamination)
			cov.add(f.Settled.Coverage)
			p9.add(f.Settled.P99Distortion)
			classes[f.SettledClass]++
			sources[f.SettledSource] = true
		}
		var cl, src []string
		for c, n := range classes {
			cl = append(cl, fmt.Sprintf("%s %d", c, n))
		}
		for x := range sources {
			src = append(src, x)
		}
		sort.Strings(cl)
		sort.Strings(src)
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s |\n", s.Case.Name, len(s.Runs), strings.Join(cl, ", "),
			con.cell(100, 1, highest), cov.cell(100, 1, lowest), p9.cell(100, 1, largestMagnitude), strings.Join(src, ", "))
	}
}

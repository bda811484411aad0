package harness

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Summary aggregates the runs of one case: the median and the worst run of
// each figure, and how many runs passed each must-show check.
type Summary struct {
	Case   Case
	Runs   []*Figures
	Checks map[string][2]int // name -> passed, judged
	order  []string
}

// Summarize groups figures by case, in the order of cases.
func Summarize(cases []Case, figs []*Figures) []*Summary {
	var out []*Summary
	for _, c := range cases {
		s := &Summary{Case: c, Checks: map[string][2]int{}}
		for _, f := range figs {
			if f.Case != c.Name {
				continue
			}
			s.Runs = append(s.Runs, f)
			for _, ch := range f.Checks {
				v, seen := s.Checks[ch.Name]
				if !seen {
					s.order = append(s.order, ch.Name)
				}
				v[1]++
				if ch.OK {
					v[0]++
				}
				s.Checks[ch.Name] = v
			}
		}
		if len(s.Runs) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Passed reports whether every check passed on every run.
func (s *Summary) Passed() bool {
	for _, v := range s.Checks {
		if v[0] != v[1] {
			return false
		}
	}
	return true
}

// Failures lists the checks that failed, with the runs' values.
func (s *Summary) Failures() []string {
	var out []string
	for _, name := range s.order {
		v := s.Checks[name]
		if v[0] == v[1] {
			continue
		}
		var got []string
		for _, f := range s.Runs {
			for _, ch := range f.Checks {
				if ch.Name == name && !ch.OK {
					got = append(got, fmt.Sprintf("run %d: %s", f.Run, ch.Got))
				}
			}
		}
		out = append(out, fmt.Sprintf("%s: %s %d/%d (%s)", s.Case.Name, name, v[0], v[1], strings.Join(got, "; ")))
	}
	return out
}

// stat is the median and the worst of one figure over the runs; worst is
// the largest when worseHigh, else the smallest, or the largest magnitude
// for signed figures.
type stat struct {
	vals []float64
}

func (s *stat) add(v *float64) {
	if v != nil {
		s.vals = append(s.vals, *v)
	}
}

func (s *stat) cell(scale float64, digits int, worst func([]float64) float64) string {
	if len(s.vals) == 0 {
		return "-"
	}
	v := append([]float64(nil), s.vals...)
	sort.Float64s(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	f := func(x float64) string { return fmt.Sprintf("%.*f", digits, x*scale) }
	return f(med) + " / " + f(worst(v))
}

func highest(v []float64) float64 { return v[len(v)-1] }
func lowest(v []float64) float64  { return v[0] }
func largestMagnitude(v []float64) float64 {
	w := v[0]
	for _, x := range v {
		if math.Abs(x) > math.Abs(w) {
			w = x
		}
	}
	return w
}

// WriteTable writes the tag-quality table (the README's is abridged from
// it): per case the median and worst run of each figure, online beside the
// schedule-cut baseline, and the runs that met every check of their case,
// online and settled.
func WriteTable(w io.Writer, sums []*Summary) {
	fmt.Fprintln(w, "| case | runs | exit 0 | relapses | declared s | contamination % | coverage % | p50 distortion % | p99 distortion % | TTSS err s | reference | baseline contamination % | baseline coverage % | baseline p99 % | checks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range sums {
		var rel, decl, con, cov, p5, p9, te, bcon, bcov, bp9 stat
		exit0 := 0
		classes := map[string]int{}
		var bounds []float64
		for _, f := range s.Runs {
			if f.ExitCode == 0 {
				exit0++
			}
			r := float64(f.Relapses)
			rel.add(&r)
			decl.add(f.DeclaredAfter)
			con.add(f.Online.Contamination)
			cov.add(f.Online.Coverage)
			p5.add(f.Online.P50Distortion)
			p9.add(f.Online.P99Distortion)
			te.add(f.Online.TTSSError)
			bcon.add(f.Baseline.Contamination)
			bcov.add(f.Baseline.Coverage)
			bp9.add(f.Baseline.P99Distortion)
			classes[f.Ref.Class]++
			if f.Ref.Steady {
				bounds = append(bounds, f.Ref.Boundary)
			}
		}
		var refs []string
		for c, n := range classes {
			refs = append(refs, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(refs)
		ref := strings.Join(refs, ", ")
		if len(bounds) > 0 {
			sort.Float64s(bounds)
			ref += fmt.Sprintf(" (from %g-%g s)", bounds[0], bounds[len(bounds)-1])
		}
		passed := 0
		for _, f := range s.Runs {
			ok := true
			for _, ch := range f.Checks {
				ok = ok && ch.OK
			}
			if ok {
				passed++
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d |\n",
			s.Case.Name, len(s.Runs), exit0, rel.cell(1, 0, highest), decl.cell(1, 1, highest),
			con.cell(100, 1, highest), cov.cell(100, 1, lowest), p5.cell(100, 1, largestMagnitude), p9.cell(100, 1, largestMagnitude), te.cell(1, 1, largestMagnitude),
			ref, bcon.cell(100, 1, highest), bcov.cell(100, 1, lowest), bp9.cell(100, 1, largestMagnitude), passed, len(s.Runs))
	}
}

// WriteLeaveOneOut writes, per case whose runs have leave-one-out
// references, how many runs met every online check against the consensus
// of all the runs and against the consensus of the others, which runs'
// verdicts differ, which runs only one reference calls steady, and how far
// the two references' boundaries lie apart: a miss (or a pass) that holds
// against one reference only is the reference's as much as the tags'. It
// reports whether it wrote anything.
func WriteLeaveOneOut(w io.Writer, sums []*Summary) bool {
	header := false
	for _, s := range sums {
		var met, heldMet, judged int
		var differ, oneSteady []string
		var shifts []float64
		for _, f := range s.Runs {
			if f.LeaveOneOut == nil {
				continue
			}
			judged++
			a, b := f.OnlineMet(), len(f.LeaveOneOut.Failed) == 0
			if a {
				met++
			}
			if b {
				heldMet++
			}
			if a != b {
				differ = append(differ, strconv.Itoa(f.Run))
			}
			switch {
			case f.Ref.Steady && f.LeaveOneOut.Ref.Steady:
				shifts = append(shifts, f.LeaveOneOut.Ref.Boundary-f.Ref.Boundary)
			case f.Ref.Steady != f.LeaveOneOut.Ref.Steady:
				oneSteady = append(oneSteady, strconv.Itoa(f.Run))
			}
		}
		if judged == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "| case | runs judged | online checks met (consensus of all runs) | online checks met (consensus of the other runs) | runs whose verdict differs | runs steady by one reference only | boundary shift s (leave-one-out - all; median / largest) |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
			header = true
		}
		var st stat
		for i := range shifts {
			st.add(&shifts[i])
		}
		list := func(v []string) string {
			if len(v) == 0 {
				return "none"
			}
			return strings.Join(v, ", ")
		}
		fmt.Fprintf(w, "| %s | %d of %d | %d/%d | %d/%d | %s | %s | %s |\n", s.Case.Name, judged, len(s.Runs), met, judged, heldMet, judged,
			list(differ), list(oneSteady), st.cell(1, 1, largestMagnitude))
	}
	return header
}

// RunLine is one line per run for the progress log.
func RunLine(f *Figures) string {
	var failed []string
	for _, ch := range f.Checks {
		if !ch.OK {
			failed = append(failed, ch.Name+" ("+ch.Got+")")
		}
	}
	status := "ok"
	if len(failed) > 0 {
		status = "FAILED: " + strings.Join(failed, ", ")
	}
	dropped := ""
	if f.Dropped > 0 {
		dropped = fmt.Sprintf(" (%d iterations dropped: no free VU)", f.Dropped)
	}
	held := ""
	if h := f.LeaveOneOut; h != nil {
		verdict := "online checks met"
		if len(h.Failed) > 0 {
			verdict = "would miss: " + strings.Join(h.Failed, ", ")
		}
		held = fmt.Sprintf("; against the other runs' consensus: %s from %.0f s, contamination %s, coverage %s, p99 %s -> %s",
			h.Ref.Class, h.Ref.Boundary, fmtPct(h.Online.Contamination), fmtPct(h.Online.Coverage), fmtPct(h.Online.P99Distortion), verdict)
	}
	return fmt.Sprintf("%s run %d: exit %d (%s), relapses %d, declared %s, reference %s from %.0f s; contamination %s, coverage %s, p99 %s (baseline %s, %s, %s)%s -> %s%s",
		f.Case, f.Run, f.ExitCode, f.Verdict, f.Relapses, fmtS(f.DeclaredAfter), f.Ref.Class, f.Ref.Boundary,
		fmtPct(f.Online.Contamination), fmtPct(f.Online.Coverage), fmtPct(f.Online.P99Distortion),
		fmtPct(f.Baseline.Contamination), fmtPct(f.Baseline.Coverage), fmtPct(f.Baseline.P99Distortion), dropped, status, held)
}

// WriteConsensus writes what the runs of each case agree on: the warm-up
// end of Welch's curve, its band, the envelope one settled run wanders in,
// and the trend after the warm-up.
func WriteConsensus(w io.Writer, cases []Case, cons map[string]*Consensus) {
	fmt.Fprintln(w, "| case | runs | warm-up end W s | envelope % (median) | envelope % (p99) | trend of second halves % (runs beyond 10%) | steady |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, c := range cases {
		cn := cons[c.Name]
		if cn == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %+.1f / %+.1f | %+.1f / %+.1f | %+.1f (%d) | %v |\n",
			c.Name, cn.Runs, cn.WarmupEnd, 100*cn.Envelope[0], 100*cn.Envelope[1],
			100*cn.TailEnvelope[0], 100*cn.TailEnvelope[1], 100*cn.Trend, cn.TrendRuns, cn.Steady)
	}
}

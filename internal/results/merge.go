package results

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/xk6-regime/xk6-regime/internal/latency"
)

// Merge combines the results of several k6 instances of one test (execution
// segments, or the pods of a distributed run) into one run. Histograms are
// merged and counts summed, so per-regime counts and percentiles are exact
// (within HDR precision). The detectors ran per instance: TTSS, warm-up
// and the boundaries are the latest over the instances (the whole test is
// steady when the last instance is), classes the worst, relapses summed.
// Iteration series are interleaved by end time and re-bounded; their index
// is renumbered in that order.
func Merge(runs []*Run, names []string) (*Run, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("merge: no results to merge")
	}
	// the same run twice would be counted twice: a copied folder, or a
	// merged folder (it keeps its first instance's run id) with its sources
	seen := map[string]string{}
	for i, r := range runs {
		id := r.Summary.RunID
		if id == "" {
			continue
		}
		name := fmt.Sprintf("input %d", i+1)
		if i < len(names) {
			name = names[i]
		}
		if first, ok := seen[id]; ok {
			return nil, fmt.Errorf("merge: %s and %s hold the same run (run_id %s): a copy of a folder, or a merged folder "+
				"given with one of its sources; give each instance's folder once", first, name, id)
		}
		seen[id] = name
	}
	if err := shareScenarios(runs, names); err != nil {
		return nil, err
	}
	m := &merger{out: NewRun(), reqRows: map[string]*RequestRow{}, series: map[string][]SeriesPoint{}, starts: map[string]float64{}}
	unknownStart := map[string]bool{}
	s := m.out.Summary
	s.Instances = 0
	s.MergedFrom = names
	for i, r := range runs {
		m.header(r.Summary, i)
		for name, sc := range r.Summary.Scenarios {
			mergeScenario(s, m.out, name, sc, r.Iter[name], i)
			switch st, ok := m.starts[name]; {
			case sc.StartedMs <= 0 || unknownStart[name]:
				unknownStart[name] = true
				delete(m.starts, name)
			case !ok || sc.StartedMs < st:
				m.starts[name] = sc.StartedMs
			}
		}
		m.requests(r)
		m.phases(r.Summary)
		for name, sd := range r.Series {
			m.series[name] = append(m.series[name], sd.Points...)
		}
		for _, w := range r.Windows {
			w.Instance = i
			m.out.Windows = append(m.out.Windows, w)
		}
		s.Series.WindowsDropped += r.Summary.Series.WindowsDropped
		s.Series.WindowsStride = max(s.Series.WindowsStride, r.Summary.Series.WindowsStride)
	}
	s.End = mergeEnds(runs, names)
	// a schema-1 folder's last new connection may count from the run's
	// first request (written before d609a47, 2026-11-27 about 16:20 UTC), a schema-2
	// one's counts from its phase's: their largest may mean neither, so
	// the merged folder leaves it null and says why
	var old []string
	for i, r := range runs {
		// a folder merged from schema-1 folders left it null: null there
		// is unknown, not none, and must not let another input's stand
		if r.Summary.Schema < 2 || slices.ContainsFunc(r.Summary.Warnings, func(w string) bool { return strings.HasPrefix(w, schemaOneMergeWarning) }) {
			name := fmt.Sprintf("input %d", i+1)
			if i < len(names) {
				name = names[i]
			}
			old = append(old, name)
		}
	}
	if len(old) > 0 {
		for _, row := range s.Requests {
			row.LastNewConnectionMs = nil
		}
		for _, c := range s.ConnectionColdStart {
			c.LastNewConnectionMs = nil
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s (%s): their last new connection "+
			"may count from the run's first request, not its phase's, so last_new_connection_ms is left null", schemaOneMergeWarning, strings.Join(old, ", ")))
	}
	m.mergeSeries()
	sort.SliceStable(m.out.Windows, func(i, j int) bool { return m.out.Windows[i].LastMs < m.out.Windows[j].LastMs })
	if !s.Ended.IsZero() {
		s.DurationS = s.Ended.Sub(s.Started).Seconds()
	}
	m.out.Finalize()
	return m.out, nil
}

// schemaOneMergeWarning starts the warning of a folder merged from
// schema-1 folders.
const schemaOneMergeWarning = "merged from folders of summary.json schema 1"

// merger holds a merge in progress.
type merger struct {
	out     *Run
	reqRows map[string]*RequestRow   // the merged request rows, by key
	series  map[string][]SeriesPoint // every instance's points, by scenario
	// starts: each scenario's earliest start (Unix ms) over the instances
	// that knew it; a scenario is absent when one of them did not
	starts map[string]float64
}

// header merges the run's identity (the first instance's), its span (the
// earliest start, the latest end), abort, environments and warnings.
func (m *merger) header(in *Summary, i int) {
	s := m.out.Summary
	s.Instances += max(in.Instances, 1)
	if i == 0 {
		s.RunID, s.TestID, s.Started, s.Ended, s.Extra = in.RunID, in.TestID, in.Started, in.Ended, in.Extra
		s.Environment = in.Environment
	}
	if !in.Started.IsZero() && (s.Started.IsZero() || in.Started.Before(s.Started)) {
		s.Started = in.Started
	}
	if in.Ended.After(s.Ended) {
		s.Ended = in.Ended
	}
	s.Aborted = s.Aborted || in.Aborted
	if len(in.InstanceEnvironments) > 0 {
		s.InstanceEnvironments = append(s.InstanceEnvironments, in.InstanceEnvironments...)
	} else {
		s.InstanceEnvironments = append(s.InstanceEnvironments, in.Environment)
	}
	s.Warnings = dedupe(append(s.Warnings, in.Warnings...))
	s.IterationsWithoutScenario += in.IterationsWithoutScenario
	for _, e := range in.Environment.Warnings {
		s.Warnings = dedupe(append(s.Warnings, fmt.Sprintf("instance %d: %s", i, e)))
	}
}

// requests adds the run's request rows to the merged ones of the same key:
// counters summed, histograms merged.
func (m *merger) requests(r *Run) {
	s := m.out.Summary
	for _, row := range r.Summary.Requests {
		k := row.Key()
		dst := m.reqRows[k]
		if dst == nil {
			cp := *row
			cp.LastNewConnectionMs = nil
			dst = &cp
			m.reqRows[k] = dst
			s.Requests = append(s.Requests, dst)
			m.out.Req[k] = latency.Empty()
			dst.Errors, dst.Status5xx, dst.NoResponse, dst.NewConnections, dst.ConnectMs, dst.TLSMs = 0, 0, 0, 0, 0, 0
		}
		dst.Errors += row.Errors
		dst.Status5xx += row.Status5xx
		dst.NoResponse += row.NoResponse
		dst.NewConnections += row.NewConnections
		dst.ConnectMs += row.ConnectMs
		dst.TLSMs += row.TLSMs
		dst.LastNewConnectionMs = maxPtr(dst.LastNewConnectionMs, row.LastNewConnectionMs)
		m.out.Req[k].Merge(r.Req[k])
		m.out.Req[k].TakeGeometry(r.Req[k]) // a row no instance recorded a value in keeps a geometry for its .hlog entry
	}
}

// phases adds the run's per-phase tables: the connection-pool cold start
// and the tracked metrics.
func (m *merger) phases(in *Summary) {
	s := m.out.Summary
	for phase, c := range in.ConnectionColdStart {
		dst := s.ConnectionColdStart[phase]
		if dst == nil {
			dst = &ConnPhase{}
			s.ConnectionColdStart[phase] = dst
		}
		dst.Add(c)
	}
	for metric, byPhase := range in.Tracked {
		if s.Tracked == nil {
			s.Tracked = map[string]map[string]*TrackedCell{}
		}
		if s.Tracked[metric] == nil {
			s.Tracked[metric] = map[string]*TrackedCell{}
		}
		for phase, c := range byPhase {
			dst := s.Tracked[metric][phase]
			if dst == nil {
				dst = &TrackedCell{Type: c.Type, Max: c.Max}
				s.Tracked[metric][phase] = dst
			}
			dst.Count += c.Count
			dst.NonFinite += c.NonFinite
			dst.Sum += c.Sum
			dst.Last = c.Last
			dst.Max = math.Max(dst.Max, c.Max)
		}
	}
}

// mergeSeries interleaves each scenario's points of every instance by end
// time, renumbers and bounds them, and settles the merged series again.
func (m *merger) mergeSeries() {
	s := m.out.Summary
	for name, pts := range m.series {
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].EndMs < pts[j].EndMs })
		var total int64
		var width int32 = 1
		for i := range pts {
			p := &pts[i]
			p.Index = total
			total += int64(p.N)
			width = max(width, p.N)
		}
		pts, f := rebound(pts, DefaultSeriesLimit)
		w := int(width) * f
		info := seriesInfo("", total, len(pts), w)
		info.Note = "merged from several instances: points interleaved by end time and renumbered. " + info.Note
		m.out.Series[name] = &SeriesData{Points: pts, Info: info}
		// the settled view of the merged series: the instances' own views
		// each saw a part of the load
		if sc := s.Scenarios[name]; sc != nil {
			// from the scenario's start, as each instance measured its own
			// (not the test's: a phase chained with startTime starts later);
			// unknown (older files): from the merged series' first iteration
			sc.StartedMs = m.starts[name]
			sc.Settled = settleSeries(pts, int64(m.starts[name]*1e6), s.Aborted)
			sc.Settled.FromSeries = true
			for _, p := range pts {
				if p.N > 1 {
					sc.Settled.Approximate = true
					break
				}
			}
		}
	}
}

// mergeEnds is how the merged test ended: as the first instance that did
// not complete, else completed when every instance says so, else unknown.
func mergeEnds(runs []*Run, names []string) *RunEnd {
	all := true
	for i, r := range runs {
		e := r.Summary.End
		if e == nil {
			all = false
			continue
		}
		if e.Status != EndCompleted {
			out := *e
			name := fmt.Sprint(i)
			if i < len(names) {
				name = names[i]
			}
			out.Detail = strings.TrimSuffix(fmt.Sprintf("instance %s; %s", name, e.Detail), "; ")
			return &out
		}
	}
	if all {
		return &RunEnd{Status: EndCompleted}
	}
	return nil
}

func maxPtr(a, b *float64) *float64 {
	switch {
	case b == nil:
		return a
	case a == nil || *b > *a:
		v := *b
		return &v
	}
	return a
}

var classRank = map[string]int{"flat": 0, "warmup": 1, "slowdown": 2, "undecided": 3, "no-steady-state": 4}

func mergeScenario(s *Summary, out *Run, name string, sc *Scenario, hs *[3]*latency.Histogram, instance int) {
	dst := s.Scenarios[name]
	if dst == nil {
		cp := *sc
		cp.Regimes = map[string]*Dist{}
		cp.Transitions = nil
		cp.Iterations, cp.Untagged, cp.Relapses = 0, 0, 0
		cp.ColdStart = ColdStart{}
		// re-settled from the merged series below; without a series, none
		cp.Settled = nil
		dst = &cp
		s.Scenarios[name] = dst
		out.Iter[name] = &[3]*latency.Histogram{}
	} else {
		if classRank[sc.Class] > classRank[dst.Class] {
			dst.Class = sc.Class
		}
		if regimeRank(sc.Regime) < regimeRank(dst.Regime) {
			dst.Regime = sc.Regime
		}
		dst.Steady = dst.Steady && sc.Steady
		if sc.TTSSMs == nil || dst.TTSSMs == nil {
			dst.TTSSMs, dst.DeclaredAfterMs, dst.SteadyStart, dst.DeclaredAt = nil, nil, nil, nil
		} else {
			dst.TTSSMs = maxPtr(dst.TTSSMs, sc.TTSSMs)
			dst.DeclaredAfterMs = maxPtr(dst.DeclaredAfterMs, sc.DeclaredAfterMs)
			dst.SteadyStart = laterPoint(dst.SteadyStart, sc.SteadyStart)
			dst.DeclaredAt = laterPoint(dst.DeclaredAt, sc.DeclaredAt)
		}
		dst.ColdEnd = laterPoint(dst.ColdEnd, sc.ColdEnd)
	}
	dst.Iterations += sc.Iterations
	dst.Untagged += sc.Untagged
	dst.Relapses += sc.Relapses
	for _, t := range sc.Transitions {
		t.Instance = instance
		dst.Transitions = append(dst.Transitions, t)
	}
	sort.SliceStable(dst.Transitions, func(i, j int) bool { return dst.Transitions[i].AtMs < dst.Transitions[j].AtMs })
	if hs == nil {
		return
	}
	acc := out.Iter[name]
	for i, h := range hs {
		if h == nil {
			continue
		}
		if acc[i] == nil {
			acc[i] = latency.Empty()
		}
		acc[i].Merge(h)
		acc[i].TakeGeometry(h) // nothing recorded anywhere yet: keep the geometry
	}
}

func laterPoint(a, b *Point) *Point {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case b.ElapsedMs > a.ElapsedMs:
		return b
	}
	return a
}

// shareScenarios refuses inputs of different tests: every instance of one
// test runs its scenarios (an instance whose share of a small scenario is
// no VU may lack it), so an input with no scenario in common with any
// other input is no instance of the same test.
func shareScenarios(runs []*Run, names []string) error {
	name := func(i int) string {
		if i < len(names) {
			return names[i]
		}
		return fmt.Sprintf("input %d", i+1)
	}
	if len(runs) < 2 {
		return nil
	}
	for i, r := range runs {
		if len(r.Summary.Scenarios) == 0 {
			continue
		}
		others := map[string]bool{}
		for j, o := range runs {
			if j != i {
				for sc := range o.Summary.Scenarios {
					others[sc] = true
				}
			}
		}
		if len(others) == 0 {
			continue
		}
		common := false
		for sc := range r.Summary.Scenarios {
			if others[sc] {
				common = true
				break
			}
		}
		if !common {
			return fmt.Errorf("merge: %s (scenarios %s) has no scenario in common with the other inputs (scenarios %s): results of different tests; "+
				"merge joins the instances of one test", name(i), strings.Join(r.Summary.SortedScenarios(), ", "),
				strings.Join(slices.Sorted(maps.Keys(others)), ", "))
		}
	}
	return nil
}

// resolvedPath is p absolute with its symbolic links resolved, as far as
// p exists (a folder to be written resolves through its parents).
func resolvedPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return filepath.Join(abs, rest), nil
		}
		rest = filepath.Join(filepath.Base(abs), rest)
		abs = parent
	}
}

// CheckMergePaths refuses a merge that would count a folder twice (the same
// input given twice, under any name) or overwrite anything (an output that
// exists, an input above all). Every problem is reported.
func CheckMergePaths(inputs []string, out string) error {
	var errs []error
	infos := make([]os.FileInfo, len(inputs))
	for i, in := range inputs {
		fi, err := os.Stat(in)
		if err != nil {
			errs = append(errs, fmt.Errorf("input %s: %w", in, err))
			continue
		}
		infos[i] = fi
		for j := range i {
			if infos[j] != nil && os.SameFile(infos[j], fi) {
				errs = append(errs, fmt.Errorf("input %s is the same folder as input %s: each instance's results may be merged once", in, inputs[j]))
				break
			}
		}
	}
	if ao, err := resolvedPath(out); err == nil {
		for _, in := range inputs {
			if ai, err := resolvedPath(in); err == nil && strings.HasPrefix(ao, ai+string(filepath.Separator)) {
				errs = append(errs, fmt.Errorf("--out %s lies inside input %s: merge never writes into its inputs; give a folder outside them", out, in))
			}
		}
	}
	if fo, err := os.Stat(out); err == nil {
		same := ""
		for i, fi := range infos {
			if fi != nil && os.SameFile(fi, fo) {
				same = inputs[i]
				break
			}
		}
		if same != "" {
			errs = append(errs, fmt.Errorf("--out %s is input %s: merge never overwrites its inputs; give a new folder", out, same))
		} else {
			errs = append(errs, fmt.Errorf("--out %s %w; give a new folder", out, ErrExists))
		}
	}
	return errors.Join(errs...)
}

package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/latency"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// Bounds of what the recorder keeps, so memory stays fixed for hour-long runs.
const (
	// maxRecordedWindows bounds the detector windows kept per process: at
	// the bound every other kept window is dropped and from then on one
	// window in twice as many is kept, so windows.csv (and the report's
	// plot of them) covers the whole run at a coarser resolution instead
	// of losing its end. 20,000 rows is about 2.5 MB in memory.
	maxRecordedWindows     = 20_000
	maxRecordedTransitions = 1_000 // per scenario
)

// recorder is the results writer's observer: per scenario the bounded
// iteration series and the time span of each regime, the detectors' closed
// windows and the transitions with their times. Its calls come from k6's
// metrics engine goroutine with a scenario lock held; each takes the
// recorder's one mutex for a few field updates (the series Add does not
// allocate; window and transition appends are amortised and bounded).
//
// A recorder is safe for concurrent use.
type recorder struct {
	mu             sync.Mutex
	scenarios      map[string]*recordedScenario
	lastName       string            // the scenario of the last iteration,
	lastScenario   *recordedScenario // and its record (most runs have one or two)
	windows        []results.WindowRow
	windowsDropped int64
	windowStride   int64 // the windows kept are those whose Seq is a multiple (1 until the first thinning)
	probe          *results.Probe
	seriesLimit    int
	first, last    float64 // Unix ms: first iteration start, last iteration end
	saved          *results.Summary
}

type recordedScenario struct {
	series      *results.IterSeries
	first, last [4]float64 // per regime (cold, warmup, steady, untagged): Unix ms
	transitions []results.Transition
	dropped     int64
}

var _ Observer = (*recorder)(nil)

func newRecorder(seriesLimit int) *recorder {
	return &recorder{scenarios: map[string]*recordedScenario{}, probe: results.NewProbe(), seriesLimit: seriesLimit}
}

// setSeriesLimit sets the points kept per scenario series; series created
// before (none: configure runs in the init context) keep theirs.
func (r *recorder) setSeriesLimit(n int) {
	r.mu.Lock()
	r.seriesLimit = n
	r.mu.Unlock()
}

func (r *recorder) scenario(name string) *recordedScenario {
	if r.lastScenario != nil && r.lastName == name {
		return r.lastScenario
	}
	sc := r.scenarios[name]
	defer func() { r.lastName, r.lastScenario = name, sc }()
	if sc == nil {
		sc = &recordedScenario{series: results.NewIterSeries(r.seriesLimit)}
		r.scenarios[name] = sc
	}
	return sc
}

// regimeIndex is a regime name's index in the recorder's per-regime
// arrays; 3 for any other name (untagged).
func regimeIndex(s string) uint8 {
	if r, ok := detector.LookupRegime(s); ok {
		return uint8(r)
	}
	return 3
}

func unixMs(t time.Time) float64 { return float64(t.UnixNano()) / 1e6 }

func (r *recorder) Iteration(scenario string, index int64, regime string, end time.Time, ms float64) {
	endMs := unixMs(end)
	startMs := endMs - ms
	ri := regimeIndex(regime)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.probe.Started() {
		r.probe.Start() // once: the first iteration marks the test start
	}
	sc := r.scenario(scenario)
	sc.series.Add(index, ri, endMs, ms)
	if sc.first[ri] == 0 || startMs < sc.first[ri] {
		sc.first[ri] = startMs
	}
	sc.last[ri] = max(sc.last[ri], endMs) // the builtin: math.Max is a call here
	if r.first == 0 || startMs < r.first {
		r.first = startMs
	}
	r.last = max(r.last, endMs)
}

func (r *recorder) Window(scenario, endpoint string, w detector.Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// a detector numbers its windows 0, 1, 2...: keeping the multiples
	// of the stride thins every scope alike, whatever their interleaving
	if r.windowStride == 0 {
		r.windowStride = 1
	}
	if int64(w.Seq)%r.windowStride != 0 {
		r.windowsDropped++
		return
	}
	if len(r.windows) >= maxRecordedWindows {
		r.windowStride *= 2
		k := 0
		for _, kept := range r.windows {
			if int64(kept.Seq)%r.windowStride == 0 {
				r.windows[k] = kept
				k++
			}
		}
		clear(r.windows[k:]) // their strings
		r.windowsDropped += int64(len(r.windows) - k)
		r.windows = r.windows[:k]
		if int64(w.Seq)%r.windowStride != 0 {
			r.windowsDropped++
			return
		}
	}
	r.windows = append(r.windows, results.WindowRow{
		Scenario: scenario, Endpoint: endpoint, Seq: w.Seq, FirstIndex: w.First.Index, LastIndex: w.Last.Index,
		FirstMs: float64(w.First.Time) / 1e6, LastMs: float64(w.Last.Time) / 1e6, N: w.N,
		Median: w.Median, Tail: w.Tail, TailQuantile: w.TailQuantile, Drift: w.Drift, Stable: w.Stable, Regime: w.Regime.String(),
	})
}

func (r *recorder) Transition(scenario string, t TransitionRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.scenario(scenario)
	if len(sc.transitions) >= maxRecordedTransitions {
		sc.dropped++
		return
	}
	sc.transitions = append(sc.transitions, results.Transition{
		Endpoint: t.Endpoint, Kind: t.Kind, From: t.From.String(), To: t.To.String(),
		Index: t.At.Index, Boundary: t.Boundary.Index,
		AtMs: float64(t.At.Time) / 1e6, BoundaryMs: float64(t.Boundary.Time) / 1e6, ElapsedMs: ms(t.Elapsed),
	})
}

// eachCell calls fn for every request cell, with the breakdown's lock held.
// fn must not keep c.
func (b *breakdown) eachCell(fn func(k breakdownKey, c *requestCell)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, c := range b.cells {
		fn(k, c)
	}
}

// saveOptions are saveResults' options.
type saveOptions struct {
	Dir    string         `json:"dir"`
	TestID string         `json:"testid"`
	Extra  map[string]any `json:"extra"`
	Report *bool          `json:"report"`
	// Files are extra files (name -> text) written into the run folder; the
	// folder's own file names are refused.
	Files map[string]string `json:"files"`
	// Aborted marks the run as aborted in the script's judgement, when the
	// extension found it completed (it finds out how a run ended by itself).
	Aborted bool `json:"aborted"`
	// Thresholds are k6's verdicts (metric -> expression -> ok).
	Thresholds map[string]map[string]bool `json:"thresholds"`
	// Required makes k6 exit with status 111 when the folder cannot be
	// written and k6 would otherwise exit 0.
	Required bool `json:"required"`
}

// ErrNotAfterTest is SaveResults' error before the test ended.
var ErrNotAfterTest = errors.New("saveResults() must be called from handleSummary, after the test: " +
	"in setup(), the default function or teardown() the run's figures are not complete")

// buildRun assembles the run's results from the run state and the recorder.
func (r *recorder) buildRun(rs *RunState, testID string, now time.Time) (*results.Run, error) {
	rep := rs.Report()
	run := runFromReport(rep)
	s := run.Summary
	rs.regimeHistograms(func(name string, rg detector.Regime, h *latency.Histogram) {
		hs := run.Iter[name]
		if hs == nil {
			hs = &[3]*latency.Histogram{}
			run.Iter[name] = hs
		}
		hs[rg] = h.Clone()
	})
	rs.bd.eachCell(func(k breakdownKey, c *requestCell) {
		row := &results.RequestRow{Scenario: k.scenario, Phase: k.phase, Regime: k.regime, Endpoint: k.endpoint, Protocol: k.proto}
		run.Req[row.Key()] = c.hist.Clone()
	})
	first, last := r.addRecorded(run)
	s.Warnings = append(s.Warnings, endpointLimitWarnings(s)...)
	switch {
	case rep.RunStarted != nil:
		s.Started = *rep.RunStarted
	case first > 0:
		s.Started = time.UnixMilli(int64(first))
	default:
		s.Started = now
	}
	s.Ended = now
	if last > 0 {
		s.Ended = time.UnixMilli(int64(math.Ceil(last)))
	}
	s.TestID = testID
	if s.Series.WindowsDropped > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s holds one detector window in %d of each scope, over the whole run (%d not written): it is bounded to %d rows",
			results.WindowsFile, s.Series.WindowsStride, s.Series.WindowsDropped, maxRecordedWindows))
	}
	if n := rs.foreign.Load(); n > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d iterations started with a %q tag the script set on the VU itself: "+
			"it overrides the extension's tag in their samples and in the regime counts ('regime' is the extension's tag)", n, RegimeTag))
	}
	if d := rs.dropped.Load(); d > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d regime samples produced after the test ended were dropped", d))
	}
	s.Warnings = append(s.Warnings, misplacedWarnings(s)...)
	if n := rep.IterationsWithoutScenario; n > 0 {
		s.IterationsWithoutScenario = n
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d iterations had no 'scenario' tag and are in no scenario's regimes "+
			"(keep 'scenario' in systemTags)", n))
	}
	run.Finalize()
	return run, nil
}

// runFromReport is a run whose summary holds the report's scenarios and
// request figures (no histograms yet).
func runFromReport(rep *RunReport) *results.Run {
	run := results.NewRun()
	s := run.Summary
	for _, name := range slices.Sorted(maps.Keys(rep.Scenarios)) {
		res, err := rep.Scenarios[name].result()
		if err != nil {
			s.Warnings = append(s.Warnings, fmt.Sprintf("scenario %s: %v", name, err))
		}
		s.Scenarios[name] = res
	}
	s.Requests = make([]*results.RequestRow, 0, len(rep.Requests))
	for _, row := range rep.Requests {
		s.Requests = append(s.Requests, row.result())
	}
	s.ConnectionColdStart, s.Tracked = rep.ConnectionColdStart, rep.Tracked
	return run
}

// addRecorded adds what the recorder kept (the iterations' spans, the
// transitions, the series, the windows, the environment) to run, and
// returns the first start and last end of the iterations (Unix ms; 0 when
// none).
func (r *recorder) addRecorded(run *results.Run) (first, last float64) {
	s := run.Summary
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Environment = r.probe.Finish()
	for _, name := range slices.Sorted(maps.Keys(r.scenarios)) {
		sc := r.scenarios[name]
		if hs := run.Iter[name]; hs != nil {
			for i := range 3 {
				if hs[i] != nil {
					hs[i].FirstMs, hs[i].LastMs = sc.first[i], sc.last[i]
				}
			}
		}
		if sum := s.Scenarios[name]; sum != nil && len(sc.transitions) > 0 {
			sum.Transitions = append([]results.Transition(nil), sc.transitions...)
		}
		if sc.dropped > 0 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("scenario %s: %d transitions beyond %d were not recorded", name, sc.dropped, maxRecordedTransitions))
		}
		run.Series[name] = &results.SeriesData{Points: sc.series.Points(), Info: sc.series.Info("")}
	}
	run.Windows = append([]results.WindowRow(nil), r.windows...)
	s.Series.WindowsDropped = r.windowsDropped
	s.Series.WindowsStride = max(r.windowStride, 1)
	return r.first, r.last
}

// endpointLimitWarnings say, per scenario, what went beyond maxEndpoints.
func endpointLimitWarnings(s *results.Summary) []string {
	var out []string
	for _, name := range s.SortedScenarios() {
		l := s.Scenarios[name].EndpointLimit
		if l == nil {
			continue
		}
		at := ""
		if !l.ValuesExact {
			at = "at least "
		}
		out = append(out, fmt.Sprintf("scenario %s: %s%d endpoint values beyond maxEndpoints %d (e.g. %s): "+
			"%d requests counted under endpoint %s, %d observations fed to its detector", name, at, l.Values, l.Max,
			strings.Join(l.Examples, ", "), l.Requests, otherEndpoint, l.Observations))
	}
	return out
}

// maxTestIDLen is the longest testid saveResults takes: the folder's name
// holds it with about 40 more bytes, within the 255 of a file name.
const maxTestIDLen = 200

// save writes a new run folder under opts.Dir (named by a run ID that
// cannot collide, written complete or not at all: results.Run.Save) and
// returns its path; end says how the run ended.
func (r *recorder) save(rs *RunState, end *results.RunEnd, opts saveOptions) (string, *results.Run, error) {
	if opts.Dir == "" {
		opts.Dir = "results"
	}
	for name := range opts.Files {
		if err := results.CheckExtraFileName(name); err != nil {
			return "", nil, fmt.Errorf("option 'files': %w", err)
		}
	}
	if n := utf8.RuneCountInString(opts.TestID); n > maxTestIDLen {
		// it is part of the folder's name (<UTC start>-<testid>-<8 hex>,
		// and a hidden .partial- one while it is written): a name over 255
		// bytes failed the save with "file name too long"
		return "", nil, fmt.Errorf("option 'testid' is %d characters long; at most %d (it is part of the results folder's name, each character one byte there)", n, maxTestIDLen)
	}
	run, err := r.buildRun(rs, opts.TestID, time.Now())
	if err != nil {
		return "", nil, err
	}
	run.Summary.Extra = opts.Extra
	run.Summary.Thresholds = opts.Thresholds
	run.Summary.Profile = rs.profileUse()
	if opts.Aborted && end.Status == results.EndCompleted {
		end = &results.RunEnd{Status: results.EndAborted, Detail: "marked aborted by the script (saveResults({aborted: true}))"}
	}
	run.Summary.End = end
	run.Summary.Aborted = end.Status != results.EndCompleted
	if run.Summary.Aborted {
		// the settled view judged what the run saw before it was cut short
		for _, sc := range run.Summary.Scenarios {
			if v := sc.Settled; v != nil {
				v.Partial = true
				for _, e := range v.Endpoints {
					e.Partial = true
				}
			}
		}
	}
	dir, err := run.Save(opts.Dir, results.WriteOptions{Report: opts.Report == nil || *opts.Report}, opts.Files)
	if err != nil {
		return "", nil, err
	}
	r.mu.Lock()
	r.saved = run.Summary
	r.mu.Unlock()
	return dir, run, nil
}

// SaveResults writes the run's results folder and returns its path. It
// must run once the test has ended (k6 runs handleSummary on interrupted
// runs too). optionsJSON are saveResults' options ({dir, testid, extra,
// report, files, aborted, thresholds, required}; nil for none), unknown keys
// refused; with required, a failure makes k6 exit with status 111 when it
// would exit 0.
func (rs *RunState) SaveResults(optionsJSON []byte) (string, error) {
	if !rs.ended.Load() {
		return "", ErrNotAfterTest
	}
	var opts saveOptions
	if optionsJSON != nil {
		if err := strictUnmarshal(optionsJSON, &opts); err != nil {
			err = fmt.Errorf("saveResults: options: %w", err)
			// a typo beside required: true still fails the run (it exited 0
			// with no folder)
			var req struct {
				Required bool `json:"required"`
			}
			if json.Unmarshal(optionsJSON, &req) == nil && req.Required {
				rs.end.noteFailed(err)
			}
			return "", err
		}
	}
	dir, run, err := rs.rec.save(rs, rs.end.current(), opts)
	if err != nil {
		if opts.Required {
			rs.end.noteFailed(err)
		}
		return "", fmt.Errorf("saveResults: %w", err)
	}
	rs.end.noteSaved(dir, run, opts.Report == nil || *opts.Report)
	return dir, nil
}

// TextSummary is the console regime table of the saved results (or of the
// run so far when nothing was saved).
func (rs *RunState) TextSummary() (string, error) {
	rec := rs.rec
	rec.mu.Lock()
	s := rec.saved
	rec.mu.Unlock()
	if s == nil {
		run, err := rec.buildRun(rs, "", time.Now())
		if err != nil {
			return "", fmt.Errorf("textSummary: %w", err)
		}
		s = run.Summary
		// how the run ended, as saveResults would record it: a run cut
		// short says so above its figures (they read as a whole run's
		// otherwise)
		s.End = rs.end.current()
		s.Aborted = s.End.Status != results.EndCompleted
	}
	return results.TextTable(s), nil
}

// misplacedWarnings names the scenarios (and their endpoints, each with a
// settled view of its own) whose settled view kept observations where
// their start times did not belong (before the scenario's start, or
// implausibly far ahead of the run: a clock that stepped) or clamped
// durations outside 1 µs..1 h.
func misplacedWarnings(s *results.Summary) []string {
	var out []string
	warn := func(what string, v *results.Settled) {
		if v == nil || v.Early+v.Late+v.Clamped == 0 {
			return
		}
		out = append(out, fmt.Sprintf("%s: the settled view kept %d observations that started before the scenario "+
			"in its first time bucket and %d timed implausibly far ahead of the run in its last (a clock that stepped?), "+
			"and clamped %d durations outside 1 µs..1 h", what, v.Early, v.Late, v.Clamped))
	}
	for _, name := range s.SortedScenarios() {
		sc := s.Scenarios[name]
		if sc == nil || sc.Settled == nil {
			continue
		}
		warn("scenario "+name, sc.Settled)
		for _, ep := range slices.Sorted(maps.Keys(sc.Settled.Endpoints)) {
			warn("scenario "+name+" endpoint "+ep, sc.Settled.Endpoints[ep])
		}
	}
	return out
}

package harness

import (
	"fmt"
	"math"
	"sort"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// EngineDelay is how late the extension's detectors see an iteration: k6's
// metrics engine hands samples over in batches every 50 ms.
const EngineDelay = 0.05 // s

// Replayed is what a detector configuration would have tagged on a
// recorded run: each iteration's regime (the detector's state when it
// started, as far as the engine had delivered), and the gate.
type Replayed struct {
	Tags     []string
	Relapses int
	// DeclaredAfter: when steady state was first declared, seconds after the
	// first iteration started (nil: never).
	DeclaredAfter *float64
	// TTSS is the (retroactive) start of the steady state at the end, in
	// seconds after the first iteration started (nil: not steady).
	TTSS *float64
	// Held is the steady gate as the extension judges it: steady at the end,
	// the final steady state declared early enough to span gateFraction of
	// the run, its level within median_tolerance between its halves.
	Held    bool
	Verdict string
}

// ReplayOnline feeds a recorded series to a detector in the order k6
// delivers it (by iteration end, with EngineDelay) and tags each iteration
// with the detector's regime when it started. gateFraction is the
// extension's setting (0.5 by default).
func ReplayOnline(it []Iteration, cfg detector.Config, gateFraction float64) (*Replayed, error) {
	cfg.DropTrace = true
	rp := &Replayed{Tags: make([]string, len(it))}
	var declared []float64
	cfg.OnTransition = func(tr detector.Transition) {
		if tr.Kind == "relapse" {
			rp.Relapses++
		}
		if tr.To == detector.Steady {
			declared = append(declared, float64(tr.At.Time)/1e9)
		}
	}
	d, err := detector.New(cfg)
	if err != nil {
		return nil, err
	}
	byEnd := make([]int, len(it))
	byStart := make([]int, len(it))
	for i := range it {
		byEnd[i], byStart[i] = i, i
	}
	end := func(i int) float64 { return it[i].Start + it[i].Ms/1000 }
	sort.SliceStable(byEnd, func(a, b int) bool { return end(byEnd[a]) < end(byEnd[b]) })
	sort.SliceStable(byStart, func(a, b int) bool { return it[byStart[a]].Start < it[byStart[b]].Start })
	next := 0
	feed := func(until float64) {
		for next < len(byEnd) && end(byEnd[next]) <= until {
			i := byEnd[next]
			d.Observe(int64(math.Round(end(i)*1e9)), it[i].Ms)
			next++
		}
	}
	last := 0.0
	for _, i := range byStart {
		feed(it[i].Start - EngineDelay)
		rp.Tags[i] = d.Regime().String()
		last = max(last, end(i))
	}
	feed(math.Inf(1))
	if len(declared) > 0 {
		rp.DeclaredAfter = ptr(declared[0])
	}
	switch {
	case d.Regime() != detector.Steady:
		rp.Verdict = "never reached"
		if len(declared) > 0 {
			rp.Verdict = "reached but not held"
		}
	default:
		at := declared[len(declared)-1]
		s := d.Snapshot()
		if s.DeclaredAt != nil {
			at = float64(s.DeclaredAt.Time) / 1e9
		}
		if s.SteadyStart != nil {
			rp.TTSS = ptr(float64(s.SteadyStart.Time) / 1e9)
		}
		frac := 1.0
		if last > 0 {
			frac = (last - at) / last
		}
		_, held, ok := d.Drift()
		rp.Held = frac >= gateFraction && (!ok || held)
		rp.Verdict = "held"
		if !rp.Held {
			rp.Verdict = "reached but not held"
		}
	}
	return rp, nil
}

// ReplayQuality judges replayed tags against a reference, as the online
// tags of a run are judged.
func ReplayQuality(it []Iteration, ref Reference, rp *Replayed) Quality {
	return quality(it, ref, func(i int) bool { return rp.Tags[i] == "steady" })
}

// ReplayFigures returns the figures of a run judged again with the online
// tags replayed by cfg instead of those k6 recorded (the exit code is the
// gate's: 0 held, 99 not; the five-way consistency is k6's and is not
// checked), and the settled view computed again from the series by the
// current code.
//
// A run made with a profile is replayed with the prior its profile gave
// the extension's detector (the profile.json its summary.json names), as
// the extension sets it (results.Prior.Apply); without it the
// replay would judge a run without a profile under the profiled case's name.
func ReplayFigures(c Case, f *Figures, out *RunOutput, cfg detector.Config, gateFraction float64) (*Figures, error) {
	if c.Profiled {
		var err error
		if cfg, err = withRunPrior(cfg, out); err != nil {
			return nil, err
		}
	}
	return ReplayFiguresWith(c, f, out, cfg, gateFraction)
}

// ReplayFiguresWith is ReplayFigures with cfg as given: a profiled case's
// prior already set on it (the leave-one-out replay sets the prior of a
// profile of the case's other runs).
func ReplayFiguresWith(c Case, f *Figures, out *RunOutput, cfg detector.Config, gateFraction float64) (*Figures, error) {
	rp, err := ReplayOnline(out.Series, cfg, gateFraction)
	if err != nil {
		return nil, err
	}
	g := *f
	g.Replayed = "replay"
	g.Online = ReplayQuality(out.Series, f.Ref, rp)
	g.Relapses = int64(rp.Relapses)
	g.DeclaredAfter, g.TTSS = rp.DeclaredAfter, rp.TTSS
	g.Online.TTSSError = nil
	if g.TTSS != nil && f.Ref.Steady {
		g.Online.TTSSError = ptr(*g.TTSS - f.Ref.Boundary)
	}
	g.ExitCode, g.Verdict = 99, rp.Verdict
	if rp.Held {
		g.ExitCode = 0
	}
	g.Inconsistencies = nil
	sv := ReplaySettled(out.Series, detector.DefaultSettleConfig())
	g.Settled, g.SettledClass, g.SettledSource = SettledQuality(out.Series, f.Ref, sv), sv.Class.String(), "replay"
	g.StepViolations = 0
	if c.Kind == KindStep {
		drop := stepDrop(out.Series)
		for i, x := range out.Series {
			if rp.Tags[i] == "steady" && x.Start < drop {
				g.StepViolations++
			}
		}
	}
	g.Checks = checks(c, &g)
	if f.LeaveOneOut != nil {
		g.LeaveOneOut = judgeLeaveOneOut(c, g, f.LeaveOneOut.Ref, ReplayQuality(out.Series, f.LeaveOneOut.Ref, rp))
	}
	return &g, nil
}

// WithProfilePrior sets on cfg the prior that the profile at path gives
// the harness's scenario (cfg unchanged when the profile's runs had no
// settled steady state there).
func WithProfilePrior(cfg detector.Config, path string) (detector.Config, error) {
	p, err := results.LoadProfile(path)
	if err != nil {
		return cfg, err
	}
	pr := p.Scope(scenarioName, "").Prior()
	if !pr.Ok {
		return cfg, nil
	}
	return pr.Apply(cfg), nil
}

// withRunPrior sets on cfg the prior of the profile that judged the run
// (none when the profile's runs had no settled steady state there); an
// error when the run names no profile or it cannot be read.
func withRunPrior(cfg detector.Config, out *RunOutput) (detector.Config, error) {
	if out.Run == nil || out.Run.Summary == nil || out.Run.Summary.Profile == nil {
		return cfg, fmt.Errorf("replay: %s was run with a profile, but its summary.json names none", out.Dir)
	}
	c, err := WithProfilePrior(cfg, out.Run.Summary.Profile.Path)
	if err != nil {
		return cfg, fmt.Errorf("replay: %s: %w", out.Dir, err)
	}
	return c, nil
}

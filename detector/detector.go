package detector

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

const (
	maxStoredRelapses = 64   // Snapshot.Relapses keeps the first 64
	maxSplits         = 4    // burst splits per segment search
	searchEvery       = 32   // see evalWarmup
	subBlock          = 5    // observations per sub-block (see refineStart)
	maxSubs           = 10   // sub-blocks kept per window: its first 50 observations
	maxBlocks         = 1024 // block boundaries kept for the shift scan
	shiftRecent       = 4    // steady state: shifts sought in the last 4*shift_min observations at every window (evalSteady)
	shiftPoints       = 256  // and over the whole segment every k windows, k such that about 256 points are tested per window
)

// Detector tags a stream of observations as cold, warmup or steady.
//
// A Detector is one scope (one series). It is NOT safe for concurrent use:
// the caller must hold a lock around Observe, Regime, Snapshot and Hindsight.
// Hooks set in the Config run synchronously inside Observe, under that lock.
//
// How it decides is in the package documentation (doc.go).
type Detector struct {
	cfg Config

	n          int64
	regime     Regime
	counts     [3]int64
	outOfRange int64 // observations not positive and finite, or beyond the histogram's range

	scale float64 // observation -> histogram units; 0 until the first valid value
	hiX   float64
	hist  *histogram

	win  window      // the window being filled
	ring []winSum    // closed windows' summaries (windows.go)
	subs []subBlocks // parallel to ring
	seq  int         // windows closed so far

	scan    shiftScan // blocks.go
	scratch []float64
	diffs   []float64

	cold coldTail // cold.go

	floor Point // segments may not start before this (cold end, last relapse)

	trace trace // the series, bounded, for Hindsight

	steady steadyState // steady.go
	class  Class

	svc svcState // the service method's state (service.go)
}

// window is the window being filled: its first and last observations,
// count and sum of squares, and its current sub-block of subBlock
// observations (refineStart reads the window's sub-block medians).
type window struct {
	first, last Point
	// clock is the time the window's duration counts from: its first
	// observation's, or a later one's after the clock stepped back
	clock int64
	n     int64
	sumSq float64
	sb    [subBlock]float64
	sbN   int
	sbAt  Point
	subs  subBlocks
}

// shiftScan is the state of the shift scan (blocks.go): block boundaries
// and running sums since the cold end, and where it found a shift.
type shiftScan struct {
	blocks            []block
	fill              int // observations in the newest block
	sumN, sumX, sumX2 float64
	cut               Point // where segment() found the last shift, if hasCut
	hasCut            bool
	scanFrom          int64 // steady state: shifts are sought from here on
	pending           bool  // a shift was found at the last window close, at pendingAt
	pendingAt         Point
}

// coldTail is the state of the cold-tail search (cold.go): the last
// observations and their running medians, the candidate end and, once
// found, the end.
type coldTail struct {
	v     [coldBufSize]float64
	at    [coldBufSize]int64
	med   [maxColdConfirm]float64
	cand  int64 // the candidate end of the cold tail: its first observation that is not cold
	first int64 // the first valid observation (value > 0 and finite); v and at start there
	t0    int64 // the time of the first observation, valid or not
	end   Point
	found bool
}

// steadyState is the steady state (steady.go): where it started and was
// declared (it is held while the regime is Steady), its level monitors,
// the one the last relapse lost (resumed if the level returns) and the
// relapses so far.
type steadyState struct {
	start      Point
	declaredAt Point
	mon        [3]monitor // by stat
	// the steady state lost by the last relapse, resumed if the level returns
	hasPrev   bool
	prev      [3]monitor
	prevStart Point
	prevClass Class
	// with shift_z on: the last relapse (at window seq shiftSeq) awaits
	// resumeAfterShift
	shifted        bool
	shiftSeq       int
	relapseShiftAt Point     // where the shift of the last relapse began
	relapses       []Relapse // the first maxStoredRelapses
	nRelapses      int
	lastFrom       float64 // the level the latest relapse left
}

// scaleFloor is how many histogram units first/DynamicRange maps to: an HDR
// histogram of sig_digits 2 counts values below 256 units one unit apart,
// so a value of 10 units is known to 10% only. When the first observation
// mapped to DynamicRange units, a first request 1,000 times slower than
// the steady ones (a connection pool or a lazy initialisation on the first
// request) left the steady medians at about 10 units: on a flat service at
// 0.5 ms after a 500-ms first request, every window median came out the
// same value, and after a 2-s one 20% off. With first/DynamicRange at 100
// units, values from first/DynamicRange to first*DynamicRange keep their
// sig_digits precision (values down to first/(100*DynamicRange) are still
// counted, more coarsely); the histogram grows by log2(100) buckets. The
// service method only: its first request is often the slowest by far, and
// its windows of a second or more clear and scan the histogram seldom
// (Observe at 10,000 a second: 32-43 ns with either range, in alternating
// runs on 2026-11-28). The benchmark method keeps the range it was tuned
// on: its windows are small (window_min 50), each clearing and scanning
// its histogram, and a JMH fork's first iteration is seldom 100 times
// slower than its last.
const scaleFloor = 100

// unitsAtFirst is how many histogram units the first observation maps to.
func unitsAtFirst(cfg Config) float64 {
	if cfg.Method == MethodService {
		return scaleFloor * cfg.DynamicRange
	}
	return cfg.DynamicRange
}

// New returns a Detector for cfg, or the joined Validate errors.
func New(cfg Config) (*Detector, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid detector config: %w", errors.Join(errs...))
	}
	hiX := unitsAtFirst(cfg) * cfg.DynamicRange
	h, err := newHistogram(hiX, cfg.SigDigits)
	if err != nil {
		return nil, err
	}
	d := &Detector{
		cfg:     cfg,
		hist:    h,
		hiX:     hiX,
		ring:    make([]winSum, 0, cfg.MaxWindows),
		subs:    make([]subBlocks, 0, cfg.MaxWindows),
		scan:    shiftScan{blocks: make([]block, 0, maxBlocks)},
		scratch: make([]float64, max(cfg.MaxWindows, maxSubs*refineWindows)),
		diffs:   make([]float64, 0, 2*cfg.StableWindows+2),
	}
	if !cfg.DropTrace {
		d.trace = newTrace()
	}
	if cfg.Method == MethodService {
		d.svc = newSvcState(cfg)
	}
	return d, nil
}

// SetOnTransition sets the transition hook (nil clears it).
func (d *Detector) SetOnTransition(f func(Transition)) { d.cfg.OnTransition = f }

// SetOnWindow sets the window hook (nil clears it).
func (d *Detector) SetOnWindow(f func(Window)) { d.cfg.OnWindow = f }

// Config returns the configuration in use.
func (d *Detector) Config() Config { return d.cfg }

// Regime returns the regime the next observation will be counted in.
func (d *Detector) Regime() Regime { return d.regime }

// Observe adds one observation (timestamp in nanoseconds, value > 0 in any
// unit) and returns the regime it is counted in: the regime in force when it
// arrived. Values that are not positive and finite are counted (N, Counts,
// OutOfRange) but carry no information. O(1) amortized, no allocation.
func (d *Detector) Observe(t int64, v float64) Regime {
	r := d.regime
	idx := d.n
	d.n++
	d.counts[r]++
	if idx == 0 {
		d.cold.t0 = t // the prior's clock starts at the first observation
	}
	if !(v > 0) || v > math.MaxFloat64 {
		d.outOfRange++
		if d.scale != 0 && idx-d.cold.first < coldBufSize {
			// its time, for the cold tail's end (its value stays 0: no
			// information); before the first valid observation the
			// buffer has not started
			d.cold.at[idx-d.cold.first] = t
		}
		return r
	}
	if d.scale == 0 {
		// Scale from the first observation: with the service method it
		// maps to scaleFloor * DynamicRange units, so that values down to
		// first/DynamicRange keep sig_digits precision (see scaleFloor).
		d.scale = unitsAtFirst(d.cfg) / v
		// the cold tail starts at the first valid observation: invalid
		// ones before it (a service not up yet) are neither its end nor
		// part of its length (cold_max)
		d.cold.first = idx
		d.cold.cand = max(d.cold.cand, idx)
	}
	x := v * d.scale
	if x < 1 || x > d.hiX {
		d.outOfRange++
	}
	d.hist.Record(x)
	// the raw value, not the clamped one the histogram holds: the
	// benchmark method's burst and dispersion tests were tuned on it (on
	// the JMH corpus the clamped one cut 0.3 points more forks short)
	d.win.sumSq += x * x
	p := Point{Index: idx, Time: t}
	if !d.cfg.DropTrace {
		d.trace.add(p, v)
	}
	if d.cfg.ShiftZ > 0 {
		d.blkAdd(p, x) // the running sums serve only the shift test
	}
	if d.win.n == 0 {
		d.win.first, d.win.clock = p, t
	}
	d.win.last = p
	d.win.n++
	d.subAdd(p, v)
	if j := idx - d.cold.first; j < coldBufSize {
		// the first observations from the first valid one are kept for
		// the cold tail and MSER-5
		d.cold.v[j] = v
		d.cold.at[j] = t
	}
	if d.regime == Cold {
		d.coldStep(p, v)
	}
	if dur := int64(d.cfg.WindowMinDuration); dur > 0 && d.win.clock-t > dur {
		// the clock stepped back by more than a window (sample times are
		// wall-clock; VUs' samples arrive a little out of order, which
		// this leaves alone): the window's duration counts from here, or
		// it would close only once the clock caught up
		d.win.clock = t
	}
	if d.win.n >= int64(d.cfg.WindowMin) &&
		(d.cfg.WindowMinDuration <= 0 || t-d.win.clock >= int64(d.cfg.WindowMinDuration)) {
		d.closeWindow()
	}
	return r
}

func (d *Detector) emit(tr Transition) {
	if d.cfg.OnTransition != nil {
		d.cfg.OnTransition(tr)
	}
}

func ptr(p Point) *Point { return &p }

// Snapshot returns the online state.
func (d *Detector) Snapshot() Snapshot {
	s := Snapshot{
		N: d.n, Regime: d.regime, Counts: d.counts, OutOfRange: d.outOfRange,
		Windows: d.seq, Class: d.class,
	}
	if d.cold.found {
		s.ColdEnd = ptr(d.cold.end)
	}
	if d.regime == Steady {
		s.SteadyStart = ptr(d.steady.start)
		s.DeclaredAt = ptr(d.steady.declaredAt)
	} else if d.class == Undecided && d.seq >= d.cfg.NoSteadyWindows {
		s.Class = NoSteadyState
	}
	if len(d.steady.relapses) > 0 {
		s.Relapses = slices.Clone(d.steady.relapses)
	}
	s.NRelapses = d.steady.nRelapses
	return s
}

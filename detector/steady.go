package detector

// Steady state: the forward monitors that report a relapse, and the
// resumption of a steady state the level comes back to.

import "math"

// resumeAfterShift decides, relapse_windows windows after a relapse (of any
// kind, with shift_z on) ended a steady state, whether it was an excursion, walking back from
// the newest observations like the corpus labels: the last segment starts at
// e, the last shift since the relapse boundary c (right binary segmentation;
// e = c when none). If the last segment's mean differs from the previous
// steady state's (its start to c) the level has changed and the usual search
// goes on. Otherwise, if an excursion [c, e) differs from the last segment,
// steady state restarts at e (when that covers min_steady_fraction of the
// run); if not, the excursion was no segment of its own and the previous
// steady state resumes.
func (d *Detector) resumeAfterShift() bool {
	if d.seq-d.steady.shiftSeq < d.cfg.RelapseWindows {
		return false
	}
	c := d.steady.relapseShiftAt
	e := c
	for range maxSplits {
		x, ok := d.shift(e.Index, e.Index)
		if !ok {
			break
		}
		e = x
	}
	p, q, now := d.blockAt(d.steady.prevStart.Index), d.blockAt(c.Index), len(d.scan.blocks)
	if d.differ(p, q, d.blockAt(e.Index), now) {
		return false
	}
	start := d.steady.prevStart
	// The excursion now lies inside the steady state: it is not sought
	// again (that would be a relapse every window: flapping).
	d.scan.scanFrom = d.ring[len(d.ring)-1].last.Index + 1
	if e.Index > c.Index {
		last := d.ring[len(d.ring)-1].last.Index
		if f := d.cfg.MinSteadyFraction; float64(last-e.Index+1) < f*float64(last+1) {
			return false
		}
		start = e
	}
	d.steady.shifted = false
	d.class = d.steady.prevClass
	d.enterSteady(start, restarted(d.steady.prev), d.scan.scanFrom)
	return true
}

// restarted returns the monitors with their CUSUMs at zero.
func restarted(m [3]monitor) [3]monitor {
	for i := range m {
		m[i].sp, m[i].sn = 0, 0
	}
	return m
}

// enterSteady declares steady state from start, watched by mon; shifts are
// sought from scanFrom on.
func (d *Detector) enterSteady(start Point, mon [3]monitor, scanFrom int64) {
	d.steady.start = start
	d.scan.scanFrom = scanFrom
	d.steady.declaredAt = d.ring[len(d.ring)-1].last
	d.steady.mon = mon
	d.regime = Steady
	d.emit(Transition{From: Warmup, To: Steady, At: d.steady.declaredAt, Boundary: start, Kind: KindSteady})
}

// monitor is a forward two-sided CUSUM of one window statistic against the
// steady level (Page 1954), each window's contribution capped at tau.
type monitor struct {
	on             bool
	level, tau     float64
	se             float64 // typical relative standard error (mean monitor)
	allow          float64 // allowance, in units of tau
	sp, sn         float64
	pStart, nStart Point
}

// step adds window w's statistic; it returns whether the window is within
// the band, and, when the CUSUM crossed h*tau, the change boundary (where
// the CUSUM last left zero).
func (m *monitor) step(v float64, w *winSum, h float64) (in, alarm bool, b Point) {
	r := v/m.level - 1
	if m.sp == 0 {
		m.pStart = w.first
	}
	if m.sn == 0 {
		m.nStart = w.first
	}
	k := m.allow * m.tau
	m.sp = max(0, m.sp+min(r-k, m.tau))
	m.sn = max(0, m.sn+min(-r-k, m.tau))
	switch {
	case m.sp > h*m.tau:
		return false, true, m.pStart
	case m.sn > h*m.tau:
		return false, true, m.nStart
	}
	return math.Abs(r) <= m.tau, false, Point{}
}

// evalSteady runs the forward CUSUMs of the window median (and mean, when
// its gate is on) against the steady levels; a shift persisting
// relapse_windows windows is a relapse (hysteresis: one wild window cannot
// cause one), whose boundary is where the CUSUM last left zero.
func (d *Detector) evalSteady(w winSum) bool {
	h := float64(d.cfg.RelapseWindows - 1)
	stable := true
	alarm := false
	var b Point
	for st := range d.steady.mon {
		m := &d.steady.mon[st]
		if !m.on {
			continue
		}
		in, al, bb := m.step(w.get(stat(st)), &w, h)
		stable = stable && in
		if al && (!alarm || bb.Index < b.Index) {
			alarm, b = true, bb
		}
	}
	if d.isBurst(w) {
		// A burst ends the steady state at once; the next steady segment
		// starts after it, and a return to this level does not resume it.
		d.relapse(w, w.first, Point{Index: w.last.Index + 1, Time: w.last.Time}, false)
		return false
	}
	if d.cfg.ShiftZ > 0 && d.cfg.MeanTolerance > 0 && d.cfg.RelapseOnMean {
		// Shifts are sought among the recent observations at every window,
		// and over the whole steady segment every k windows, with k such
		// that the points tested per window stay about shiftPoints: a
		// shift early in the segment (the segment started too early) only
		// becomes significant as the part after it grows.
		after := max(d.steady.start.Index, d.scan.scanFrom)
		a := d.blockAt(after)
		if k := (len(d.scan.blocks) - a) / shiftPoints; k > 1 && d.seq%k != 0 {
			after = max(after, w.last.Index+1-int64(shiftRecent*d.cfg.ShiftMin))
		}
		if d.scan.pending {
			after = min(after, d.scan.pendingAt.Index)
		}
		c, ok := d.shift(d.steady.start.Index, after)
		if ok && d.scan.pending {
			// the recent observations' mean left the band, at two window
			// closes in a row (hysteresis: a fluctuation that the next
			// window dilutes is none): a new level, or a transient
			// excursion (resumeAfterShift)
			d.relapse(w, c, c, true)
			return false
		}
		d.scan.pending, d.scan.pendingAt = ok, c
	}
	if !alarm {
		return stable
	}
	d.relapse(w, b, b, true)
	return false
}

// isBurst tests a steady window against the recent level: the median of
// the means of the stable_windows windows before it, within the steady
// segment (a level that wanders inside its band is followed).
func (d *Detector) isBurst(w winSum) bool {
	m := &d.steady.mon[statMean]
	if d.cfg.BurstZ <= 0 || !m.on {
		return false
	}
	lo := d.firstAfter(d.steady.start.Index)
	s := d.scratch[:0]
	for j := len(d.ring) - 2; j >= lo && len(s) < d.cfg.StableWindows; j-- {
		s = append(s, d.ring[j].mean)
	}
	level := m.level
	if len(s) > 0 {
		level = median(s)
	}
	return d.burst(&w, level, m.se)
}

// relapse ends the steady state at window w: the shift began at b, the next
// steady segment may start at floor; resumable says whether a return to the
// previous steady level resumes this steady state.
func (d *Detector) relapse(w winSum, b, floor Point, resumable bool) {
	lo := d.firstAfter(b.Index)
	after := d.scratch[:0]
	for j := lo; j < len(d.ring); j++ {
		after = append(after, d.ring[j].med)
	}
	rl := Relapse{At: w.last, Boundary: b, From: d.steady.mon[statMedian].level, To: median(after)}
	if len(d.steady.relapses) < maxStoredRelapses {
		d.steady.relapses = append(d.steady.relapses, rl)
	}
	d.steady.nRelapses++
	d.steady.lastFrom = rl.From
	d.steady.hasPrev = resumable
	d.scan.pending = false
	d.steady.shifted, d.steady.shiftSeq, d.steady.relapseShiftAt = d.cfg.ShiftZ > 0 && d.cfg.MeanTolerance > 0, d.seq, b
	d.steady.prev = d.steady.mon
	d.steady.prevStart = d.steady.start
	d.steady.prevClass = d.class
	d.floor = floor
	d.regime = Warmup
	d.class = NoSteadyState
	d.emit(Transition{From: Steady, To: Warmup, At: w.last, Boundary: b, Kind: KindRelapse})
}

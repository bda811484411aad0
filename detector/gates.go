package detector

// Warm-up, step 2: the gates that declare steady state on the segment
// found (median, tail and mean over stable_windows windows, coverage).

import "math"

// sums returns the count, sum and sum of squares of the observations in
// blocks [i, j) (j = len(blocks): up to now).
func (d *Detector) sums(i, j int) (n, s, q float64) {
	a := &d.scan.blocks[i]
	if j >= len(d.scan.blocks) {
		return d.scan.sumN - a.n, d.scan.sumX - a.s, d.scan.sumX2 - a.s2
	}
	b := &d.scan.blocks[j]
	return b.n - a.n, b.s - a.s, b.s2 - a.s2
}

// differ reports whether the means of blocks [i, j) and [k, l) differ by
// the shift test (see shift).
func (d *Detector) differ(i, j, k, l int) bool {
	if i >= j || k >= l || j > len(d.scan.blocks) || k >= len(d.scan.blocks) {
		return false
	}
	nL, sL, qL := d.sums(i, j)
	nR, sR, qR := d.sums(k, l)
	if nL < 2 || nR < 2 {
		return false
	}
	mL, mR := sL/nL, sR/nR
	if mL <= 0 || mR <= 0 {
		return false
	}
	vL := max(qL-sL*mL, 0) / (nL - 1) / (nL * mL * mL)
	vR := max(qR-sR*mR, 0) / (nR - 1) / (nR * mR * mR)
	return meansDiffer(mL, vL, mR, vR, d.cfg.MeanTolerance, d.cfg.ShiftZ)
}

// meansDiffer reports whether the ratio r = mB/mA of two means, with its
// delta-method interval of z standard errors, lies wholly outside 1 ± tol;
// rvA and rvB are the squared relative standard errors of the means
// (variance of the mean / mean²). The shift test and Hindsight's segment
// test (the corpus labels' walk-back) share it.
func meansDiffer(mA, rvA, mB, rvB, tol, z float64) bool {
	r := mB / mA
	dev := math.Abs(r-1) - tol
	return dev > 0 && dev*dev > z*z*r*r*(rvA+rvB)
}

func (d *Detector) evalWarmup() bool {
	if d.steady.shifted && d.resumeAfterShift() {
		return true
	}
	return d.evalGates()
}

// evalGates declares steady state when the segment the search finds holds
// stable_windows windows whose medians agree with its level to the newest
// one, is long enough, and (on a relapse's return) resumes or replaces the
// previous steady state.
func (d *Detector) evalGates() bool {
	// The segment search is O(ring length): with a long ring it runs every
	// len/searchEvery windows, so the work per window stays bounded.
	if stride := len(d.ring) / searchEvery; stride > 1 && d.seq%stride != 0 {
		return false
	}
	lo := d.firstAfter(d.floor.Index)
	s, taus, ok := d.segment(lo)
	if !ok {
		return false
	}
	tau := taus[statMedian]
	if len(d.ring)-s < d.cfg.StableWindows {
		return false
	}
	level, ok := d.newestAgree(s, tau)
	if !ok {
		return false
	}
	mon := d.steadyMonitors(s, level, tau)
	start, preLevel := d.segmentStart(s, lo, level, tau)
	resume := d.resumes(mon)
	if !resume && d.tooShort(s) {
		return false
	}
	if resume {
		start = d.steady.prevStart
		d.class = d.steady.prevClass
		mon = restarted(d.steady.prev)
	} else {
		d.class = d.classOf(s, lo, level, preLevel)
	}
	d.enterSteady(start, mon, start.Index)
	return true
}

// newestAgree returns the level (median of the window medians) of the
// segment from window s to the newest, and whether its windows agree with
// it up to the newest: the backward CUSUM tolerates a couple of deviating
// windows at its start, which would otherwise hide a shift that has only
// just begun.
func (d *Detector) newestAgree(s int, tau float64) (float64, bool) {
	last := len(d.ring) - 1
	seg := d.scratch[:0]
	for j := s; j <= last; j++ {
		seg = append(seg, d.ring[j].med)
	}
	level := median(seg)
	m := monitor{level: level, tau: tau, allow: d.cfg.CusumAllowance}
	for j := s; j <= last; j++ {
		in, alarm, _ := m.step(d.ring[j].med, &d.ring[j], float64(d.cfg.RelapseWindows-1))
		if alarm || (j == last && !in) {
			return level, false
		}
	}
	return level, !(m.sp > tau || m.sn > tau)
}

// steadyMonitors returns the monitors that will watch a steady state
// starting at window s: the median always, the mean and the tail when their
// relapse options are on.
func (d *Detector) steadyMonitors(s int, level, tau float64) [3]monitor {
	last := len(d.ring) - 1
	var mon [3]monitor
	mon[statMedian] = monitor{on: true, level: level, tau: tau, allow: d.cfg.CusumAllowance}
	bases := [3]float64{statMean: d.cfg.MeanTolerance, statTail: d.cfg.TailTolerance}
	wants := [3]bool{statMean: d.cfg.RelapseOnMean, statTail: d.cfg.RelapseOnTail}
	for _, st := range []stat{statMean, statTail} {
		if bases[st] <= 0 || !wants[st] {
			continue
		}
		seg := d.scratch[:0]
		for j := s; j <= last; j++ {
			seg = append(seg, d.ring[j].get(st))
		}
		l := median(seg)
		mon[st] = monitor{on: true, level: l, tau: d.tolerance(bases[st], s, st, l), allow: d.cfg.CusumAllowance, se: d.typicalSE(s)}
	}
	return mon
}

// segmentStart returns where the steady state of the segment from window s
// starts (truncated to the floor, refined inside its first window when it
// follows other windows, never before the last shift found) and the level
// of the windows before it since lo (0 when none).
func (d *Detector) segmentStart(s, lo int, level, tau float64) (Point, float64) {
	start := d.truncate(s, d.floor)
	preLevel := 0.0
	if s > lo {
		pre := d.scratch[:0]
		for j := lo; j < s; j++ {
			pre = append(pre, d.ring[j].med)
		}
		preLevel = median(pre)
		if start == d.ring[s].first {
			start = d.refineStart(s, level, tau, preLevel > level)
		}
	}
	if d.scan.hasCut && d.scan.cut.Index > start.Index {
		start = d.scan.cut
	}
	return start, preLevel
}

// resumes tells whether a relapse came back to the previous steady levels
// (every monitored statistic): a transient excursion, after which the
// previous steady state (its start and levels) resumes, as the corpus
// labels do when no lasting segment separates the two.
func (d *Detector) resumes(mon [3]monitor) bool {
	if !d.steady.hasPrev {
		return false
	}
	for st := range d.steady.prev {
		p := &d.steady.prev[st]
		if p.on && (!mon[st].on || math.Abs(mon[st].level/p.level-1) > p.tau) {
			return false
		}
	}
	return true
}

// classOf is the class of a new steady state at level from window s
// (Barrett et al. 2017): compared with what came before the segment, or
// with the steady state a relapse ended.
func (d *Detector) classOf(s, lo int, level, preLevel float64) Class {
	switch {
	case d.steady.nRelapses > 0 && math.Abs(level/d.steady.prev[statMedian].level-1) <= d.steady.prev[statMedian].tau:
		// back at the level of the steady state a burst ended: same shape
		return d.steady.prevClass
	case d.steady.nRelapses > 0:
		if prev := d.steady.lastFrom; level < prev {
			return ClassWarmup
		}
		return Slowdown
	case s <= lo:
		return Flat
	case preLevel > level:
		return ClassWarmup
	}
	return Slowdown
}

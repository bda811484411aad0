package detector

// Warm-up, step 1: find where the current stable segment begins (backward
// CUSUM over the window statistics, burst splits, trend check), and where
// inside its first windows it really starts.

import "math"

// noise returns a robust, trend-free estimate of the window-to-window
// standard deviation of a window statistic over ring[lo:], relative to ref:
// the MAD of successive differences around their median, times 1.4826/sqrt2
// (Rousseeuw & Croux 1993 for the MAD consistency constant).
func (d *Detector) noise(lo int, st stat, ref float64) float64 {
	hi := len(d.ring)
	if k := 2*d.cfg.StableWindows + 1; lo < hi-k {
		lo = hi - k // the recent windows, most likely inside the segment
	}
	if hi-lo < 4 || ref <= 0 {
		return 0
	}
	d.diffs = d.diffs[:0]
	for j := lo + 1; j < hi; j++ {
		d.diffs = append(d.diffs, d.ring[j].get(st)-d.ring[j-1].get(st))
	}
	m := median(d.diffs)
	for i := range d.diffs {
		d.diffs[i] = math.Abs(d.diffs[i] - m)
	}
	return median(d.diffs) * 1.4826 / math.Sqrt2 / ref
}

// backScan walks back from the newest window with a two-sided CUSUM of the
// relative deviation from ref (allowance tau, each window's contribution
// capped at tau so that one wild window cannot end a segment) and returns the
// ring index where the stable segment starts: the last index at which the
// CUSUM was zero before it crossed the threshold (Page 1954; the change-point
// estimate of the CUSUM).
func (d *Detector) backScan(lo int, st stat, ref, tau, allow, h float64) int {
	var sp, sn float64
	start := len(d.ring) - 1
	for j := len(d.ring) - 1; j >= lo; j-- {
		r := d.ring[j].get(st)/ref - 1
		k := allow * tau
		sp = max(0, sp+min(r-k, tau))
		sn = max(0, sn+min(-r-k, tau))
		if sp > h*tau || sn > h*tau {
			break
		}
		if sp == 0 && sn == 0 {
			start = j
		}
	}
	return start
}

// recentRef is the median of the statistic over the last k windows >= lo.
func (d *Detector) recentRef(lo int, st stat) float64 {
	k := d.cfg.StableWindows
	s := d.scratch[:0]
	for j := len(d.ring) - 1; j >= lo && len(s) < k; j-- {
		s = append(s, d.ring[j].get(st))
	}
	return median(s)
}

func (d *Detector) tolerance(base float64, lo int, st stat, ref float64) float64 {
	if st == statMean {
		// The mean's allowance grows with its within-window standard error,
		// not with the between-window scatter: windows whose means scatter
		// more than their own variance explains (clustered outliers, drift)
		// are not steady.
		return base + d.cfg.NoiseZ*d.typicalSE(lo)
	}
	return max(base, d.cfg.NoiseZ*d.noise(lo, st, ref))
}

// scanStat returns the segment start by one statistic.
func (d *Detector) scanStat(lo int, st stat, base float64) (start int, ref, tau float64) {
	h := float64(d.cfg.RelapseWindows - 1)
	ref = d.recentRef(lo, st)
	tau = d.tolerance(base, lo, st, ref)
	return d.backScan(lo, st, ref, tau, d.cfg.CusumAllowance, h), ref, tau
}

// segment finds the start (ring index) of the current stable segment over
// ring[lo:], by both median and tail, plus the median reference and
// tolerance. ok is false when the ring holds too few windows.
func (d *Detector) segment(lo int) (start int, taus [3]float64, ok bool) {
	last := len(d.ring) - 1
	if last-lo+1 < d.cfg.StableWindows {
		return 0, taus, false
	}
	bases := [3]float64{statMedian: d.cfg.MedianTolerance, statTail: d.cfg.TailTolerance, statMean: d.cfg.MeanTolerance}
	start = lo
	for st, base := range bases {
		if base <= 0 {
			continue
		}
		s, _, tau := d.scanStat(lo, stat(st), base)
		start = max(start, s)
		taus[st] = tau
	}
	// A steady segment may not span a burst window: it starts after the
	// last one (the corpus labels walk back to the first segment whose mean
	// is outside the band, however short).
	if d.cfg.BurstZ > 0 && d.cfg.MeanTolerance > 0 {
		ref, se := d.recentRef(lo, statMean), d.typicalSE(lo)
		for j := last; j >= start; j-- {
			if d.burst(&d.ring[j], ref, se) {
				start = j + 1
				break
			}
		}
	}
	// A burst of outliers inside the segment (overdispersed window means)
	// splits it, as a changepoint in mean and variance would (Barrett et al.
	// 2017 segment with PELT on mean and variance): the segment restarts
	// after the most deviant window, until it is homogeneous or too short.
	// (At most maxSplits splits per search, to bound the work per window.)
	for i := 0; last-start+1 >= d.cfg.StableWindows && d.overdispersed(start); i++ {
		if i == maxSplits {
			return last + 1, taus, true
		}
		start = d.mostDeviant(start) + 1
	}
	if last-start+1 < d.cfg.StableWindows || !d.trendFree(start, taus) {
		return last + 1, taus, true
	}
	// Nor may it span a shift in mean (observation-block resolution): it
	// starts at the last one, found by binary segmentation to the right.
	// (Sought last: it is the costliest test, O(blocks in the segment).)
	d.scan.hasCut = false
	if d.cfg.ShiftZ > 0 && d.cfg.MeanTolerance > 0 && last-start+1 >= d.cfg.StableWindows {
		from := d.ring[start].first.Index
		for range maxSplits {
			c, ok := d.shift(from, from)
			if !ok {
				break
			}
			from, d.scan.cut, d.scan.hasCut = c.Index, c, true
		}
		for d.scan.hasCut && start <= last && d.ring[start].last.Index < from {
			start++
		}
	}
	if last-start+1 < d.cfg.StableWindows || !d.trendFree(start, taus) {
		return last + 1, taus, true
	}
	return start, taus, true
}

// burst reports whether the confidence interval of window w's mean (burst_z
// standard errors, the larger of the window's own and the typical one, se,
// both relative to level) lies wholly outside the mean tolerance band around
// level: the labels' bootstrap test of a segment against the last one
// (Traini et al. 2023), at window scale. One huge outlier widens its own
// window's interval, so it is no burst; a run of consistently slow (or
// fast) observations is.
func (d *Detector) burst(w *winSum, level, se float64) bool {
	if level <= 0 {
		return false
	}
	r := math.Abs(w.mean/level - 1)
	return r-d.cfg.BurstZ*max(w.se*w.mean/level, se) > d.cfg.MeanTolerance
}

// typicalSE is the median relative standard error of the window means over
// the last stable_windows windows >= lo.
func (d *Detector) typicalSE(lo int) float64 {
	s := d.scratch[:0]
	for j := len(d.ring) - 1; j >= lo && len(s) < d.cfg.StableWindows; j-- {
		s = append(s, d.ring[j].se)
	}
	return median(s)
}

// mostDeviant returns the ring index in [s, last] whose window mean lies
// farthest from the mean of the segment (O(n), no sorting).
func (d *Detector) mostDeviant(s int) int {
	last := len(d.ring) - 1
	var sum, n float64
	for j := s; j <= last; j++ {
		sum += d.ring[j].mean * float64(d.ring[j].n)
		n += float64(d.ring[j].n)
	}
	ref := sum / n
	best, bestZ := s, -1.0
	for j := s; j <= last; j++ {
		if z := math.Abs(d.ring[j].mean/ref - 1); z > bestZ {
			best, bestZ = j, z
		}
	}
	return best
}

// truncate returns the steady start for a segment found at ring[s], not
// before floor; when it lies among the buffered first observations it is
// refined by MSER-5 (White 1997): window granularity is coarse exactly where
// most warm-ups end.
func (d *Detector) truncate(s int, floor Point) Point {
	last := len(d.ring) - 1
	start := d.ring[s].first
	if start.Index < floor.Index {
		start = floor
	}
	if b := d.cold.first; d.cfg.MSER5 && start.Index >= b && start.Index-b < coldBufSize/2 {
		if i := d.mser5(start.Index, d.ring[last].last.Index+1); i > start.Index {
			start = Point{Index: i, Time: d.cold.at[i-b]}
		}
	}
	return start
}

// refineWindows is how many windows after a segment's first one give the
// noise of sub-block medians in refineStart.
const refineWindows = 8

// refineStart returns where a steady segment whose first window is ring[s]
// really starts, to the sub-block (subBlock observations): past the leading
// sub-blocks of that window whose medians still lie beyond the segment's
// level on the side of the transient before it (slower after a warm-up,
// faster before a slowdown) by more than the median tolerance tau, or by
// noise_z robust standard deviations of the sub-block medians of the next
// windows when that is larger. A window's median looks steady once most of
// it is, so without this the start could be dated inside the transient. It
// never moves the start earlier: a start that is late by part of a window
// only delays the boundary, one that is early counts transient samples as
// steady.
func (d *Detector) refineStart(s int, level, tau float64, slower bool) Point {
	w := &d.subs[s]
	if w.n == 0 || level <= 0 {
		return d.ring[s].first
	}
	last := len(d.ring) - 1
	devs := d.scratch[:0]
	for j := s + 1; j <= min(last, s+refineWindows); j++ {
		for k := range int(d.subs[j].n) {
			devs = append(devs, float64(d.subs[j].med[k])/level-1)
		}
	}
	th := tau
	if len(devs) >= 2*maxSubs {
		m := median(devs)
		for i := range devs {
			devs[i] = math.Abs(devs[i] - m)
		}
		th = max(th, d.cfg.NoiseZ*1.4826*median(devs))
	}
	for k := range int(w.n) {
		r := float64(w.med[k])/level - 1
		if !slower {
			r = -r
		}
		if r <= th {
			return w.at[k]
		}
	}
	if s < last && int(w.n) == maxSubs {
		return d.ring[s+1].first
	}
	return d.ring[s].first
}

// mser5 returns the MSER-5 truncation point (White 1997) over the first
// observations [from, to) kept in the buffer (batch means of 5), restricted
// to the first half.
func (d *Detector) mser5(from, to int64) int64 {
	base := d.cold.first // the buffer's first observation (from >= base)
	to = min(to, base+coldBufSize)
	k := (to - from) / 5
	if k < 4 {
		return from
	}
	var sn, sm, sm2 float64
	best, bestV := from, math.Inf(1)
	for b := k - 1; b >= 0; b-- {
		var m float64
		for i := from + 5*b; i < from+5*b+5; i++ {
			m += d.cold.v[i-base]
		}
		m /= 5
		sn++
		sm += m
		sm2 += m * m
		if b > k/2 {
			continue
		}
		v := (sm2 - sm*sm/sn) / (sn * sn)
		if v <= bestV {
			best, bestV = from+5*b, v
		}
	}
	return best
}

// tooShort reports whether a segment starting at ring[s] covers less than
// min_steady_fraction of all observations so far: a steady state must cover
// a fair share of what has been seen (the corpus labels call a steady state
// that starts in the last sixth of a run "no steady state").
func (d *Detector) tooShort(s int) bool {
	f := d.cfg.MinSteadyFraction
	last := len(d.ring) - 1
	if f <= 0 || s > last {
		return s > last
	}
	span := float64(d.ring[last].last.Index - d.ring[s].first.Index + 1)
	return span < f*float64(d.ring[last].last.Index+1)
}

// overdispersed reports whether the window means of ring[s:] scatter more
// than their within-window variance explains (a one-way ANOVA dispersion
// check): outliers that come in bursts (GC storms, compactions) rather than
// independently make a series that is not steady at the window scale, even
// when its median is. Scatter within mean_tolerance/2 is always accepted.
func (d *Detector) overdispersed(s int) bool {
	if d.cfg.MeanTolerance <= 0 || d.cfg.DispersionRatio <= 0 {
		return false
	}
	last := len(d.ring) - 1
	var sum, sumW float64
	for j := s; j <= last; j++ {
		sum += d.ring[j].mean
		sumW += d.ring[j].se * d.ring[j].se
	}
	k := float64(last - s + 1)
	mu := sum / k
	var vb float64
	for j := s; j <= last; j++ {
		r := d.ring[j].mean/mu - 1
		vb += r * r
	}
	vb /= k - 1
	vw := sumW / k
	half := d.cfg.MeanTolerance / 2
	return vb > d.cfg.DispersionRatio*vw && vb > half*half
}

// trendFree compares the first and second halves of the segment for every
// gated statistic, like Geweke's (1992) convergence diagnostic: a slow drift
// that stays inside the tolerance band window by window still shows as a
// difference between the halves.
func (d *Detector) trendFree(s int, taus [3]float64) bool {
	last := len(d.ring) - 1
	mid := s + (last-s+1)/2
	for st, tau := range taus {
		if tau <= 0 {
			continue
		}
		a := d.scratch[:0]
		for j := s; j < mid; j++ {
			a = append(a, d.ring[j].get(stat(st)))
		}
		ma := median(a)
		b := d.scratch[:0]
		for j := mid; j <= last; j++ {
			b = append(b, d.ring[j].get(stat(st)))
		}
		if math.Abs(median(b)/ma-1) > tau {
			return false
		}
	}
	return true
}

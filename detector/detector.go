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
	shiftRecent       = 4
	shiftPoints       = 256 // see evalSteady    // steady state: shifts sought in the last 4*shift_min observations
)

// block is where a block of subBlock observations began, with the running
// sums of all recorded observations before it: the sums over any range of
// blocks are differences, so the shift scan costs O(1) per candidate point.
// Dropping a boundary merges its block into the previous one.
type block struct {
	first    Point
	n, s, s2 float64
}

// winSum is the bounded per-window summary kept in the ring.
type winSum struct {
	first, last     Point
	n               int64
	med, tail, mean float64
	se              float64 // relative standard error of mean
}

// subBlocks holds the medians of a window's first sub-blocks of subBlock
// observations and where each began (none once merged): where in its first
// window a steady segment really starts (refineStart). Kept apart from
// winSum, in a ring parallel to it, so that the scans over window
// statistics stay compact in cache.
type subBlocks struct {
	n   uint8
	med [maxSubs]float32
	at  [maxSubs]Point
}

// Detector tags a stream of observations as cold, warmup or steady.
//
// A Detector is one scope (one series). It is NOT safe for concurrent use:
// the caller must hold a lock around Observe, Regime, Snapshot and Hindsight.
// Hooks set in the Config run synchronously inside Observe, under that lock.
//
// Method, in short (details and references at each step):
//   - observations go into an HDR histogram window that closes after
//     window_min observations and window_min_duration; the window's median,
//     capped tail quantile, mean and the mean's standard error are kept in a
//     bounded ring of summaries (max_windows; when full, the older half is
//     merged pairwise, so memory is constant and recent windows stay fine);
//   - the cold tail is the prefix of observations more than cold_factor
//     times slower than the running median of the last cold_confirm ones;
//   - in warmup, at each window close, a backward two-sided CUSUM (Page
//     1954) over the window medians, tails and means, measured against the
//     most recent windows, finds where the current stable segment began
//     (the corpus labels' rule: steady state starts at the first segment,
//     walking back, within tolerance of the last one; Traini et al. EMSE
//     2023). A segment whose window means scatter more than their
//     within-window variance explains (bursts) is split after its most
//     deviant window, like a mean-and-variance changepoint (Barrett et al.
//     OOPSLA 2017); a segment whose halves differ is a drift, not a steady
//     state (Geweke 1992). Steady state is declared when the segment holds
//     stable_windows windows by every gate (the design's dual gate of median
//     and tail, plus the mean) and covers min_steady_fraction of the run;
//     steady_start is its first observation, refined by MSER-5 (White 1997)
//     among the first observations, and elsewhere to the sub-block of 5
//     observations from the medians of its first window's sub-blocks
//     (refineStart);
//   - tolerances widen with the noise: for median and tail with the
//     window-to-window scatter measured robustly (MAD of successive
//     differences, trend-free); for the mean with its within-window standard
//     error; so heavy-tailed but stationary series still settle;
//   - in steady state forward CUSUMs of the median and mean against the
//     steady levels report a relapse only once a shift persists about
//     relapse_windows windows (hysteresis); a level that comes back to the
//     previous steady level resumes that steady state;
//   - with burst_z > 0, a burst (a window whose mean's confidence interval
//     lies wholly outside the mean band, the labels' segment test at window
//     scale) ends a steady state at once and is never resumed across: the
//     next steady segment starts after it. Segments found in warmup may not
//     span a burst either.
//   - with shift_z > 0 (opt-in), a shift in mean at observation-block
//     resolution (shift) bounds segments and ends a steady state; a relapse
//     whose excursion proves short resumes (resumeAfterShift).
//   - Hindsight, kept apart from all of the above, re-runs at the end the
//     corpus labels' offline procedure (PELT changepoints, walk back from
//     the last segment) on a bounded trace of the series (hindsight.go).
type Detector struct {
	cfg Config

	n      int64
	regime Regime
	counts [3]int64
	oor    int64

	scale float64 // observation -> histogram units; 0 until the first valid value
	hiX   float64
	hist  *Histogram

	// current window
	wFirst, wLast Point
	wN            int64
	wSumSq        float64
	seq           int
	// current sub-block of the window
	sb   [subBlock]float64
	sbN  int
	sbAt Point
	wSub subBlocks

	ring []winSum
	subs []subBlocks // parallel to ring
	// shift scan: block boundaries and running sums since the cold end
	blk         []block
	bCount      int
	cN, cS, cS2 float64
	cut         Point // where segment() found the last shift, if hasCut
	hasCut      bool
	scanFrom    int64 // steady state: shifts are sought from here on
	pend        bool  // a shift was found at the last window close, at pendAt
	pendAt      Point
	scratch     []float64
	diffs       []float64

	// cold tail
	coldV   [coldBufSize]float64
	coldT   [coldBufSize]int64
	coldMed [maxColdConfirm]float64
	ce      int64
	coldEnd Point
	hasCold bool

	floor Point // segments may not start before this (cold end, last relapse)

	trace trace // the series, bounded, for Hindsight

	// steady state
	hasSteady   bool
	steadyStart Point
	declaredAt  Point
	mon         [3]monitor // by stat
	// the steady state lost by the last relapse, resumed if the level returns
	hasPrev bool
	// with shift_z on: the last relapse (at window seq shiftSeq) awaits
	// resumeAfterShift
	shifted   bool
	shiftSeq  int
	relB      Point // where the shift of the last relapse began
	prev      [3]monitor
	prevStart Point
	prevClass Class
	class     Class
	relapses  []Relapse
	nRelapses int

	svc svcState // the service method's state (service.go)
}

// New returns a Detector for cfg, or the joined Validate errors.
func New(cfg Config) (*Detector, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid detector config: %w", errors.Join(errs...))
	}
	hiX := cfg.DynamicRange * cfg.DynamicRange
	h, err := NewHistogram(1, hiX, cfg.SigDigits)
	if err != nil {
		return nil, err
	}
	d := &Detector{
		cfg:     cfg,
		hist:    h,
		hiX:     hiX,
		ring:    make([]winSum, 0, cfg.MaxWindows),
		subs:    make([]subBlocks, 0, cfg.MaxWindows),
		blk:     make([]block, 0, maxBlocks),
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
	if !(v > 0) || v > math.MaxFloat64 {
		d.oor++
		return r
	}
	if d.scale == 0 {
		// Scale from the first observation: it maps to DynamicRange units,
		// giving sig_digits precision from first/DynamicRange*100 upward.
		d.scale = d.cfg.DynamicRange / v
	}
	x := v * d.scale
	if x < 1 || x > d.hiX {
		d.oor++
	}
	d.hist.Record(x)
	d.wSumSq += x * x
	p := Point{Index: idx, Time: t}
	if !d.cfg.DropTrace {
		d.trace.add(p, v)
	}
	if d.cfg.ShiftZ > 0 {
		d.blkAdd(p, x) // the running sums serve only the shift test
	}
	if d.wN == 0 {
		d.wFirst = p
	}
	d.wLast = p
	d.wN++
	d.subAdd(p, v)
	if idx < coldBufSize {
		// the first observations are kept for the cold tail and MSER-5
		d.coldV[idx] = v
		d.coldT[idx] = t
	}
	if d.regime == Cold {
		d.coldStep(p, v)
	}
	if d.wN >= int64(d.cfg.WindowMin) &&
		(d.cfg.WindowMinDuration <= 0 || t-d.wFirst.Time >= int64(d.cfg.WindowMinDuration)) {
		d.closeWindow()
	}
	return r
}

// coldStep tracks the cold tail: the prefix of observations more than
// cold_factor times slower than the current level, M = the median of the
// last cold_confirm observations. The candidate end ce (the first
// observation that is not cold) only moves forward; the tail ends once
// cold_confirm observations have followed ce. Comparing with a median, not
// with single later values, keeps heavy-tailed noise from making a tail.
func (d *Detector) coldStep(p Point, v float64) {
	i := p.Index
	if i < coldBufSize {
		k := int64(d.cfg.ColdConfirm)
		lo := max(0, i-k+1)
		buf := d.coldMed[:0]
		for j := lo; j <= i; j++ {
			if d.coldV[j] > 0 {
				buf = append(buf, d.coldV[j])
			}
		}
		lim := d.cfg.ColdFactor * median(buf)
		for d.ce <= i && (d.coldV[d.ce] > lim || !(d.coldV[d.ce] > 0)) {
			d.ce++
		}
	}
	if i-d.ce+1 >= int64(d.cfg.ColdConfirm) || i+1 >= int64(d.cfg.ColdMax) {
		d.endCold(p)
	}
}

func (d *Detector) endCold(at Point) {
	ce := d.ce
	if ce > at.Index {
		ce = at.Index
	}
	t := at.Time
	if ce < coldBufSize {
		t = d.coldT[ce]
	}
	d.coldEnd = Point{Index: ce, Time: t}
	d.hasCold = true
	// The cold observations belong to no window: restart the current window
	// at cold_end, re-recording the buffered observations since then.
	if ce < coldBufSize && at.Index < coldBufSize && d.wN > 0 && d.wFirst.Index <= ce {
		d.hist.Reset()
		d.wSumSq = 0
		d.wN = 0
		d.sbN, d.wSub.n = 0, 0
		d.blk, d.bCount, d.cN, d.cS, d.cS2 = d.blk[:0], 0, 0, 0, 0
		for i := ce; i <= at.Index; i++ {
			if v := d.coldV[i]; v > 0 {
				x := v * d.scale
				d.hist.Record(x)
				d.wSumSq += x * x
				q := Point{Index: i, Time: d.coldT[i]}
				if d.cfg.ShiftZ > 0 {
					d.blkAdd(q, x)
				}
				if d.wN == 0 {
					d.wFirst = q
				}
				d.wN++
				d.subAdd(q, v)
			}
		}
	}
	d.floor = d.coldEnd
	d.regime = Warmup
	d.emit(Transition{From: Cold, To: Warmup, At: at, Boundary: d.coldEnd, Kind: KindColdEnd})
}

// blkAdd adds a recorded observation (histogram units) to the running sums,
// opening a block every subBlock observations; when maxBlocks boundaries are
// kept, every other one of the older half is dropped (its block merges into
// the previous one), so recent blocks stay fine and memory bounded.
func (d *Detector) blkAdd(p Point, x float64) {
	if d.bCount == 0 {
		if len(d.blk) == cap(d.blk) {
			half := len(d.blk) / 2
			k := 0
			for i := 0; i < half; i += 2 {
				d.blk[k] = d.blk[i]
				k++
			}
			k += copy(d.blk[k:], d.blk[half:])
			d.blk = d.blk[:k]
		}
		d.blk = append(d.blk, block{first: p, n: d.cN, s: d.cS, s2: d.cS2})
	}
	d.cN++
	d.cS += x
	d.cS2 += x * x
	if d.bCount++; d.bCount == subBlock {
		d.bCount = 0
	}
}

// blockAt returns the index of the first block that begins at or after
// observation index i.
func (d *Detector) blockAt(i int64) int {
	lo, hi := 0, len(d.blk)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.blk[m].first.Index < i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// shift finds the most significant change in mean among the observations
// since from: over every block boundary c with at least shift_min
// observations on each side (and c at or after after), the ratio r of the
// mean after c to the mean before it (both back to from) and its standard
// error (delta method, each side's own variance) give z = (|r-1| -
// mean_tolerance) / se; the boundary with the largest z is a shift when z >
// shift_z. This is the corpus labels' test of a segment against the last
// one (a bootstrap 95% interval of the mean ratio wholly outside +-5%;
// Traini et al. 2023) applied where it is most significant, as binary
// segmentation does with a likelihood ratio (Scott & Knott 1974).
func (d *Detector) shift(from, after int64) (Point, bool) {
	a := d.blockAt(from)
	if a >= len(d.blk) {
		return Point{}, false
	}
	b0 := &d.blk[a]
	nT, sT, qT := d.cN-b0.n, d.cS-b0.s, d.cS2-b0.s2
	minN := float64(d.cfg.ShiftMin)
	if nT < 2*minN {
		return Point{}, false
	}
	tol := d.cfg.MeanTolerance
	best, bestZ := Point{}, d.cfg.ShiftZ
	found := false
	for c := max(a+1, d.blockAt(after)); c < len(d.blk); c++ {
		bc := &d.blk[c]
		nL := bc.n - b0.n
		if nL < minN {
			continue
		}
		nR := nT - nL
		if nR < minN {
			break
		}
		sL := bc.s - b0.s
		sR := sT - sL
		// |mR/mL - 1| <= tol, without a division: most points stop here
		if diff := sR*nL - sL*nR; diff <= tol*sL*nR && -diff <= tol*sL*nR {
			continue
		}
		mL, mR := sL/nL, sR/nR
		if mL <= 0 || mR <= 0 {
			continue
		}
		qL := bc.s2 - b0.s2
		qR := qT - qL
		vL := max(qL-sL*mL, 0) / (nL - 1) / (nL * mL * mL)
		vR := max(qR-sR*mR, 0) / (nR - 1) / (nR * mR * mR)
		r := mR / mL
		dev := math.Abs(r-1) - tol
		// z > bestZ  <=>  dev^2 > bestZ^2 * r^2 * (vL+vR)
		if dev*dev > bestZ*bestZ*r*r*(vL+vR) {
			bestZ = dev / (r * math.Sqrt(vL+vR))
			best, found = bc.first, true
		}
	}
	return best, found
}

// subAdd adds a recorded observation to the window's current sub-block;
// closeSub keeps the median of each of the window's first maxSubs
// sub-blocks.
func (d *Detector) subAdd(p Point, v float64) {
	if d.wSub.n < maxSubs {
		if d.sbN == 0 {
			d.sbAt = p
		}
		d.sb[d.sbN] = v
		d.sbN++
		if d.sbN == subBlock {
			d.closeSub()
		}
	}
}

func (d *Detector) closeSub() {
	d.wSub.med[d.wSub.n] = float32(median5(&d.sb))
	d.wSub.at[d.wSub.n] = d.sbAt
	d.wSub.n++
	d.sbN = 0
}

// median5 is the median of five values by a min/max network (no branches
// to mispredict on noisy data): the median of e and the two middle values
// of the pairs (a,b), (c,d).
func median5(x *[subBlock]float64) float64 {
	a, b, c, d, e := x[0], x[1], x[2], x[3], x[4]
	f := max(min(a, b), min(c, d))
	g := min(max(a, b), max(c, d))
	return max(min(e, f), min(max(e, f), g))
}

func (d *Detector) emit(tr Transition) {
	if d.cfg.OnTransition != nil {
		d.cfg.OnTransition(tr)
	}
}

// tailQuantile caps the configured quantile so that at least tail_min_above
// samples of an n-sample window lie above it (p99.9 of 200 samples would just
// be the maximum).
func (d *Detector) tailQuantile(n int64) float64 {
	q := d.cfg.TailQuantile
	if c := 100 * (1 - float64(d.cfg.TailMinAbove)/float64(n)); c < q {
		q = c
	}
	return max(q, 50)
}

func (d *Detector) closeWindow() {
	if d.regime == Cold {
		d.endCold(d.wLast)
		if d.wN < int64(d.cfg.WindowMin) {
			return
		}
	}
	n := d.wN
	tq := d.tailQuantile(n)
	med := d.hist.Quantile(50) / d.scale
	tail := d.hist.Quantile(tq) / d.scale
	mx := d.hist.Mean()
	mean := mx / d.scale
	// relative standard error of the window mean, from the within-window
	// variance: what the mean of a stationary series would scatter by.
	se := 0.0
	if n > 1 && mx > 0 {
		vr := (d.wSumSq/float64(n) - mx*mx) * float64(n) / float64(n-1)
		se = math.Sqrt(max(vr, 0)/float64(n)) / mx
	}
	d.wSumSq = 0
	d.hist.Reset()
	d.wN = 0
	w := winSum{first: d.wFirst, last: d.wLast, n: n, med: med, tail: tail, mean: mean, se: se}
	drift := 0.0
	if k := len(d.ring); k > 0 {
		drift = med/d.ring[k-1].med - 1
	}
	d.push(w)
	d.sbN, d.wSub.n = 0, 0
	d.seq++

	stable := false
	switch d.regime {
	case Warmup:
		if d.cfg.Method == MethodService {
			stable = d.svcWarmup()
		} else {
			stable = d.evalWarmup()
		}
	case Steady:
		if d.cfg.Method == MethodService {
			stable = d.svcSteady(w)
		} else {
			stable = d.evalSteady(w)
		}
	}
	if d.cfg.OnWindow != nil {
		d.cfg.OnWindow(Window{
			Seq: d.seq - 1, First: w.first, Last: w.last, N: int(n),
			Median: med, Tail: tail, TailQuantile: tq, Drift: drift,
			Stable: stable, Regime: d.regime,
		})
	}
}

// push appends a summary; when the ring is full the older half is merged
// pairwise (weighted means of medians, max of tails), keeping recent windows
// at full resolution and memory bounded for any run length.
func (d *Detector) push(w winSum) {
	if len(d.ring) == cap(d.ring) {
		half := len(d.ring) / 2
		k := 0
		for i := 0; i+1 < half; i += 2 {
			a, b := d.ring[i], d.ring[i+1]
			tot := float64(a.n + b.n)
			d.ring[k] = winSum{
				first: a.first, last: b.last, n: a.n + b.n,
				med:  (a.med*float64(a.n) + b.med*float64(b.n)) / tot,
				mean: (a.mean*float64(a.n) + b.mean*float64(b.n)) / tot,
				se:   math.Hypot(a.se*float64(a.n)/tot, b.se*float64(b.n)/tot),
				tail: max(a.tail, b.tail),
			}
			d.subs[k].n = 0 // a merged window has no sub-blocks
			k++
		}
		copy(d.subs[k:], d.subs[k*2:])
		k += copy(d.ring[k:], d.ring[k*2:])
		d.ring = d.ring[:k]
		d.subs = d.subs[:k]
	}
	d.ring = append(d.ring, w)
	d.subs = append(d.subs, d.wSub)
}

// firstAfter returns the first ring index whose window has an observation at
// or after the floor.
func (d *Detector) firstAfter(floor int64) int {
	for j := len(d.ring) - 1; j >= 0; j-- {
		if d.ring[j].last.Index < floor {
			return j + 1
		}
	}
	return 0
}

// median of s (reorders s).
func median(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

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

// stat selects a window statistic.
type stat uint8

const (
	statMedian stat = iota
	statTail
	statMean
)

func (w *winSum) get(s stat) float64 {
	switch s {
	case statTail:
		return w.tail
	case statMean:
		return w.mean
	}
	return w.med
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
	d.hasCut = false
	if d.cfg.ShiftZ > 0 && d.cfg.MeanTolerance > 0 && last-start+1 >= d.cfg.StableWindows {
		from := d.ring[start].first.Index
		for range maxSplits {
			c, ok := d.shift(from, from)
			if !ok {
				break
			}
			from, d.cut, d.hasCut = c.Index, c, true
		}
		for d.hasCut && start <= last && d.ring[start].last.Index < from {
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
	if d.cfg.MSER5 && start.Index < coldBufSize/2 {
		if i := d.mser5(start.Index, d.ring[last].last.Index+1); i > start.Index {
			start = Point{Index: i, Time: d.coldT[i]}
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
	to = min(to, coldBufSize)
	k := (to - from) / 5
	if k < 4 {
		return from
	}
	var sn, sm, sm2 float64
	best, bestV := from, math.Inf(1)
	for b := k - 1; b >= 0; b-- {
		var m float64
		for i := from + 5*b; i < from+5*b+5; i++ {
			m += d.coldV[i]
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
	if d.seq-d.shiftSeq < d.cfg.RelapseWindows {
		return false
	}
	c := d.relB
	e := c
	for range maxSplits {
		x, ok := d.shift(e.Index, e.Index)
		if !ok {
			break
		}
		e = x
	}
	p, q, now := d.blockAt(d.prevStart.Index), d.blockAt(c.Index), len(d.blk)
	if d.differ(p, q, d.blockAt(e.Index), now) {
		return false
	}
	start := d.prevStart
	// The excursion now lies inside the steady state: it is not sought
	// again (that would be a relapse every window: flapping).
	d.scanFrom = d.ring[len(d.ring)-1].last.Index + 1
	if e.Index > c.Index {
		last := d.ring[len(d.ring)-1].last.Index
		if f := d.cfg.MinSteadyFraction; float64(last-e.Index+1) < f*float64(last+1) {
			return false
		}
		start = e
	}
	d.shifted = false
	d.class = d.prevClass
	d.enterSteady(start, restarted(d.prev), d.scanFrom)
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
	d.hasSteady = true
	d.steadyStart = start
	d.scanFrom = scanFrom
	d.declaredAt = d.ring[len(d.ring)-1].last
	d.mon = mon
	d.regime = Steady
	d.emit(Transition{From: Warmup, To: Steady, At: d.declaredAt, Boundary: start, Kind: KindSteady})
}

// sums returns the count, sum and sum of squares of the observations in
// blocks [i, j) (j = len(blk): up to now).
func (d *Detector) sums(i, j int) (n, s, q float64) {
	a := &d.blk[i]
	if j >= len(d.blk) {
		return d.cN - a.n, d.cS - a.s, d.cS2 - a.s2
	}
	b := &d.blk[j]
	return b.n - a.n, b.s - a.s, b.s2 - a.s2
}

// differ reports whether the means of blocks [i, j) and [k, l) differ by
// the shift test (see shift).
func (d *Detector) differ(i, j, k, l int) bool {
	if i >= j || k >= l || j > len(d.blk) || k >= len(d.blk) {
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
	if d.shifted && d.resumeAfterShift() {
		return true
	}
	return d.evalGates()
}

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
	last := len(d.ring) - 1
	if last-s+1 < d.cfg.StableWindows {
		return false
	}
	// The newest windows must agree with the segment's level: the backward
	// CUSUM tolerates a couple of deviating windows at its start, which
	// would otherwise hide a shift that has only just begun.
	seg := d.scratch[:0]
	for j := s; j <= last; j++ {
		seg = append(seg, d.ring[j].med)
	}
	level := median(seg)
	m := monitor{level: level, tau: tau, allow: d.cfg.CusumAllowance}
	for j := s; j <= last; j++ {
		in, alarm, _ := m.step(d.ring[j].med, &d.ring[j], float64(d.cfg.RelapseWindows-1))
		if alarm || (j == last && !in) {
			return false
		}
	}
	if m.sp > tau || m.sn > tau {
		return false
	}
	// The monitors that will watch this steady state: the median always,
	// the mean and the tail when their relapse options are on.
	var mon [3]monitor
	mon[statMedian] = monitor{on: true, level: level, tau: tau, allow: d.cfg.CusumAllowance}
	bases := [3]float64{statMean: d.cfg.MeanTolerance, statTail: d.cfg.TailTolerance}
	wants := [3]bool{statMean: d.cfg.RelapseOnMean, statTail: d.cfg.RelapseOnTail}
	for _, st := range []stat{statMean, statTail} {
		if bases[st] <= 0 || !wants[st] {
			continue
		}
		seg = d.scratch[:0]
		for j := s; j <= last; j++ {
			seg = append(seg, d.ring[j].get(st))
		}
		l := median(seg)
		mon[st] = monitor{on: true, level: l, tau: d.tolerance(bases[st], s, st, l), allow: d.cfg.CusumAllowance, se: d.typicalSE(s)}
	}
	// Declare steady state.
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
	if d.hasCut && d.cut.Index > start.Index {
		start = d.cut
	}
	// A relapse that came back to the previous steady levels (every
	// monitored statistic) was a transient excursion: resume the previous
	// steady state (its start and levels), as the corpus labels do when no
	// lasting segment separates the two.
	resume := d.hasPrev
	for st := range d.prev {
		p := &d.prev[st]
		if p.on && (!mon[st].on || math.Abs(mon[st].level/p.level-1) > p.tau) {
			resume = false
		}
	}
	if !resume && d.tooShort(s) {
		return false
	}
	// Class (Barrett et al. 2017): compare with what came before the segment.
	switch {
	case resume:
		start = d.prevStart
		d.class = d.prevClass
	case d.nRelapses > 0 && math.Abs(level/d.prev[statMedian].level-1) <= d.prev[statMedian].tau:
		// back at the level of the steady state a burst ended: same shape
		d.class = d.prevClass
	case d.nRelapses > 0:
		prev := d.relapses[min(d.nRelapses, maxStoredRelapses)-1].From
		if level < prev {
			d.class = ClassWarmup
		} else {
			d.class = Slowdown
		}
	case s <= lo:
		d.class = Flat
	default:
		if preLevel > level {
			d.class = ClassWarmup
		} else {
			d.class = Slowdown
		}
	}
	if resume {
		mon = restarted(d.prev)
	}
	d.enterSteady(start, mon, start.Index)
	return true
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
	for st := range d.mon {
		m := &d.mon[st]
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
		after := max(d.steadyStart.Index, d.scanFrom)
		a := d.blockAt(after)
		if k := (len(d.blk) - a) / shiftPoints; k > 1 && d.seq%k != 0 {
			after = max(after, w.last.Index+1-int64(shiftRecent*d.cfg.ShiftMin))
		}
		if d.pend {
			after = min(after, d.pendAt.Index)
		}
		c, ok := d.shift(d.steadyStart.Index, after)
		if ok && d.pend {
			// the recent observations' mean left the band, at two window
			// closes in a row (hysteresis: a fluctuation that the next
			// window dilutes is none): a new level, or a transient
			// excursion (resumeAfterShift)
			d.relapse(w, c, c, true)
			return false
		}
		d.pend, d.pendAt = ok, c
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
	m := &d.mon[statMean]
	if d.cfg.BurstZ <= 0 || !m.on {
		return false
	}
	lo := d.firstAfter(d.steadyStart.Index)
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
	rl := Relapse{At: w.last, Boundary: b, From: d.mon[statMedian].level, To: median(after)}
	if len(d.relapses) < maxStoredRelapses {
		d.relapses = append(d.relapses, rl)
	}
	d.nRelapses++
	d.hasPrev = resumable
	d.pend = false
	d.shifted, d.shiftSeq, d.relB = d.cfg.ShiftZ > 0 && d.cfg.MeanTolerance > 0, d.seq, b
	d.prev = d.mon
	d.prevStart = d.steadyStart
	d.prevClass = d.class
	d.hasSteady = false
	d.floor = floor
	d.regime = Warmup
	d.class = NoSteadyState
	d.emit(Transition{From: Steady, To: Warmup, At: w.last, Boundary: b, Kind: KindRelapse})
}

func ptr(p Point) *Point { return &p }

// Snapshot returns the online state.
func (d *Detector) Snapshot() Snapshot {
	s := Snapshot{
		N: d.n, Regime: d.regime, Counts: d.counts, OutOfRange: d.oor,
		Windows: d.seq, Class: d.class,
	}
	if d.hasCold {
		s.ColdEnd = ptr(d.coldEnd)
	}
	if d.hasSteady {
		s.SteadyStart = ptr(d.steadyStart)
		s.DeclaredAt = ptr(d.declaredAt)
	} else if d.class == Undecided && d.seq >= d.cfg.NoSteadyWindows {
		s.Class = NoSteadyState
	}
	if len(d.relapses) > 0 {
		s.Relapses = slices.Clone(d.relapses)
	}
	return s
}

// Hindsight returns a Snapshot refined with the whole series known: the
// corpus labels' procedure (outlier filter, PELT changepoints, walk back
// from the last segment; hindsight.go) on the detector's trace of the
// series. SteadyStart and Class are its verdict (ColdEnd stays the online
// one, and the steady state never starts inside the cold tail); DeclaredAt
// is nil; all other fields are the online ones, unchanged. It costs up to
// a few seconds (see hindsight.go): call it once, at the end. It needs
// the trace (ErrNoTrace with Config.DropTrace).
func (d *Detector) Hindsight() (Snapshot, error) {
	if d.cfg.DropTrace {
		return Snapshot{}, ErrNoTrace
	}
	s := d.Snapshot()
	s.DeclaredAt = nil
	s.SteadyStart = nil
	s.Class = NoSteadyState
	x, at := d.trace.series()
	if len(x) == 0 {
		return s, nil
	}
	tol := d.cfg.MeanTolerance
	st := labelStart(x, tol)
	if d.hasCold {
		for st < len(at) && at[st].Index < d.coldEnd.Index {
			st++
		}
		if st == len(at) {
			return s, nil
		}
	}
	start := at[st]
	// as online: the steady stretch must hold stable_windows windows'
	// worth of observations and more than min_steady_fraction of the run
	rest := d.n - start.Index
	if rest < int64(d.cfg.StableWindows*d.cfg.WindowMin) ||
		float64(rest) <= d.cfg.MinSteadyFraction*float64(d.n) {
		return s, nil
	}
	if h := st + (len(x)-st)/2; differs(moments(x[st:h]), moments(x[h:]), tol) {
		return s, nil // a drift
	}
	s.SteadyStart = ptr(start)
	pre, post := median(slices.Clone(x[:st])), median(slices.Clone(x[st:]))
	switch {
	case st == 0 || start.Index < subBlock || (d.hasCold && start.Index <= d.coldEnd.Index) ||
		math.Abs(pre/post-1) <= d.cfg.MeanTolerance:
		s.Class = Flat // what came before is a few observations, the cold tail, or at the steady level
	case pre > post:
		s.Class = ClassWarmup
	default:
		s.Class = Slowdown
	}
	return s, nil
}

package detector

import (
	"math"
	"slices"
)

// The service method (Config.Method = "service", ServiceConfig), for request
// streams: latency measured by a load generator against a real service.
//
// What it is built for, as measured on 2 cores shared by k6 and the service
// (the live harness, live/): the median of one-second blocks of requests
// wanders by +-15-25% in waves of 5-30 s (GC, JIT tiers, the scheduler, the
// load generator itself), the p99 far more; a JIT service improves for a few
// to 20 seconds; some services start on a plateau (40 ms for 8 s, then 5 ms).
// A detector that judges a few hundred requests at a time inside a +-6% band
// declares every plateau steady and relapses at the next wave.
//
// So it judges windows of at least a second (window_min_duration, and
// window_min observations), each summarised by its median and its tail,
// on a log scale (levels compare by ratio). The tail is the capped tail
// quantile smoothed over the order statistics around it (the geometric mean
// of as many values as lie above the quantile, from the ranks next to its
// own, the largest half as many left out; see histogram.SmoothTail): a quantile that a slow path straddles flips between
// the two paths from window to window, the smoothed tail does not; and it
// leaves out the largest values, which one slow request would move.
//
//   - Segment. At each window close, walking back from the newest window,
//     the longest run of windows whose 3-window running medians all lie
//     within the level band of the run's median (median_tolerance, widened
//     to noise_z robust standard deviations of the window-to-window change
//     when the series is noisier than that: few observations per window),
//     and whose tails do the same within tail_tolerance (the dual gate of
//     median and tail: a JIT's compile pauses and the first connections keep
//     the tail high after the median has settled).
//   - Evidence. A segment that no visible transient precedes (the first
//     level of the run, or one that started where the search stopped) must
//     hold stable_windows windows (9): a service can start on a cold
//     plateau (40 ms for 8 s, then 5 ms), and the first level is all the
//     detector has seen. A segment reached after a transient (the level
//     before it lies outside twice the band, or a tail before it beyond
//     four tail bands, a factor (1+tail_tolerance)^4) must hold
//     settle_windows (11): warm-
//     ups come in stages (interpreter, C1, C2), and the level that follows
//     the first fast drop is often an intermediate one (HotSpot services
//     improved by another 20-30% for 7-17 s after it in the live harness).
//     After a relapse, the new level must also be confirmed by
//     settle_windows windows that closed after the relapse was decided.
//   - Trend. The medians of the segment's two halves must agree within
//     trend_tolerance after a transient (the end of a warm-up that is still
//     improving), and its tail must not fall by more than
//     tail_trend_tolerance between them (a cache warming as its keys are
//     read settles its median at about 10 s and its tail later); the tail
//     is judged so also on a first level after slower windows (a warm-up
//     in stages); for a first level, the medians within the level band
//     when it improves and twice that when it slows down (a wave of the
//     machine in the first seconds is no warm-up).
//     When only the tail's trend fails, the segment may start later: at
//     the first window from which the rest passes every test, if enough
//     windows are left (the tail's wider band let the walk-back reach into
//     the fall); a median still moving is waited for.
//   - Relapse. In steady state, the level is the median of the steady
//     segment's windows; when the median of the last relapseSpan (5)
//     windows, or of the second half of the segment against its first half,
//     lies more than relapse_tolerance from it at relapse_windows (10)
//     window closes in a row, or beyond twice it at relapseSpan closes in a
//     row, steady state is lost (a spell of a settled service comes back
//     within that time; a slowdown or a drift does not). The next steady
//     segment starts no earlier than where the shift began (shiftStart);
//     but when the level comes back within the level band of the lost
//     steady state for relapseSpan closes in a row, that steady state
//     resumes (an excursion: reported, its iterations not steady, the
//     steady state not restarted). An excursion long enough for a steady
//     state of its own ends the same way: when that state's level lies
//     above the level band of the one it interrupted (a slower excursion)
//     and the level comes back within it for relapseSpan closes, the
//     excursion's steady state is lost and the one before resumes
//     (svcExcursionEnds). The excursions' windows (the last
//     maxExcursions) are no part of the resumed level (steadyLogs).
//
// Per window close the work is O(search_windows^2) at worst (the walk-back
// keeps a sorted copy of the segment), and up to
// O(search_windows^2 log search_windows) when the tail's trend makes it try
// later starts (the medians of the halves at each), once a second, in
// warm-up only; Observe is unchanged.

// svcState is the service method's state.
type svcState struct {
	// minSeq: no steady state is declared before this window (fresh
	// evidence after a relapse).
	minSeq int
	// over counts the consecutive window closes at which the steady level
	// was out of the relapse band, far those at which it was beyond twice
	// it; back, after a relapse, those at which the level was back within
	// the level band of the steady state it left.
	over, back, far int
	// prevDeclared is when the steady state a relapse ended was declared
	// (a resumed steady state keeps it).
	prevDeclared Point
	// ex: the excursions (observation indexes from, to) the steady state
	// came back from, the latest maxExcursions; their windows are no part
	// of its level (steadyLogs). Cleared when a steady state is declared.
	ex  [maxExcursions][2]int64
	nEx int
	// scratch, sized once
	y, u, sm, sorted, tmp []float64
}

func newSvcState(cfg Config) svcState {
	n := max(cfg.MaxWindows, cfg.SearchWindows) + 2
	return svcState{
		y: make([]float64, 0, n), u: make([]float64, 0, n), sm: make([]float64, 0, n),
		sorted: make([]float64, 0, n), tmp: make([]float64, 0, n),
	}
}

// logs fills s.y (and s.u when tails) with the log medians (and log tails)
// of ring[from..].
func (d *Detector) logs(from int, tails bool) {
	s := &d.svc
	s.y, s.u = s.y[:0], s.u[:0]
	for j := from; j < len(d.ring); j++ {
		s.y = append(s.y, math.Log(d.ring[j].med))
		if tails {
			s.u = append(s.u, math.Log(d.ring[j].stail))
		}
	}
}

// medianOf returns the median of v without reordering it.
func (d *Detector) medianOf(v []float64) float64 {
	d.svc.tmp = append(d.svc.tmp[:0], v...)
	return median(d.svc.tmp)
}

// diffNoise is a robust standard deviation of the change between
// consecutive values of v: 1.4826 MAD of the differences / sqrt 2
// (Rousseeuw & Croux 1993). Trends and slow waves barely move it; the
// sampling noise of few-observation windows does.
func (d *Detector) diffNoise(v []float64) float64 {
	if len(v) < 5 {
		return 0
	}
	t := d.svc.tmp[:0]
	for i := 1; i < len(v); i++ {
		t = append(t, v[i]-v[i-1])
	}
	m := median(t)
	for i := range t {
		t[i] = math.Abs(t[i] - m)
	}
	d.svc.tmp = t
	return median(t) * 1.4826 / math.Sqrt2
}

// smooth3 fills s.sm with the 3-point running median of y (2 points at
// the ends).
func (d *Detector) smooth3(y []float64) {
	s := &d.svc
	s.sm = s.sm[:0]
	for i := range y {
		switch {
		case len(y) == 1:
			s.sm = append(s.sm, y[0])
		case i == 0:
			s.sm = append(s.sm, (y[0]+y[1])/2)
		case i == len(y)-1:
			s.sm = append(s.sm, (y[i-1]+y[i])/2)
		default:
			a, b, c := y[i-1], y[i], y[i+1]
			s.sm = append(s.sm, max(min(a, b), min(max(a, b), c)))
		}
	}
}

// walkBack returns the first index of the longest suffix of y whose
// 3-point running medians all lie within band of the suffix's median, and
// that median.
func (d *Detector) walkBack(y []float64, band float64) (start int, level float64) {
	s := &d.svc
	d.smooth3(y)
	n := len(y)
	s.sorted = s.sorted[:0]
	lo, hi := math.Inf(1), math.Inf(-1)
	start, level = n-1, y[n-1]
	for i := n - 1; i >= 0; i-- {
		v := y[i]
		k, _ := slices.BinarySearch(s.sorted, v)
		s.sorted = slices.Insert(s.sorted, k, v)
		lo, hi = min(lo, s.sm[i]), max(hi, s.sm[i])
		m := len(s.sorted)
		med := s.sorted[m/2]
		if m%2 == 0 {
			med = (s.sorted[m/2-1] + s.sorted[m/2]) / 2
		}
		if m >= 3 && (hi-med > band || med-lo > band) {
			break
		}
		start, level = i, med
	}
	return start, level
}

// svcSegment is the segment the service method found at a window close:
// windows from+s to the newest (n of them from from), on a log scale.
type svcSegment struct {
	lo, from, s, n int
	ms             int     // where the medians' walk-back alone started it (s is the later of it and the tails')
	level          float64 // log median of its windows' medians
	band           float64 // the level band, widened by the noise
	sig, tsig      float64 // the window-to-window noise of the medians, of the tails
}

// svcWarmup looks for a steady segment at a window close; it reports
// whether steady state was declared.
func (d *Detector) svcWarmup() bool {
	if d.steady.hasPrev && d.svcResume() {
		return true
	}
	if d.seq < d.svc.minSeq {
		return false
	}
	lo, ok := d.svcSearchFrom()
	if !ok {
		return false
	}
	g := d.svcFind(lo)
	afterTransient := d.afterTransient(g)
	need := d.cfg.StableWindows
	if afterTransient {
		need = d.cfg.SettleWindows
	}
	if !afterTransient && g.lo == 0 && g.from == 0 && g.s == 1 && g.ms == 0 &&
		math.Abs(math.Log(d.ring[0].med)-g.level) <= g.band {
		// the run's first window (its first connections) left the first
		// level on its tail alone: it is no part of the level, but its
		// second counts toward the wait, as when its tail stays within
		// the band
		need--
	}
	prior := d.atPriorLevel(g.level)
	if prior {
		// earlier runs settled at this level, after the prior warm-up
		need = d.cfg.PriorWindows
	} else if !afterTransient && d.driftedPrior(g) {
		// or at another, one level since the prior warm-up end: the
		// machine's speed moved since the profile's runs
		prior = true
		need = d.cfg.PriorWindows
	}
	if g.n-g.s < need {
		return false
	}
	// The segment starts where the walk-back stopped, and its halves are
	// judged over all of it. A tail walks back within a wider band than a
	// median (a factor 2 at the preset): the segment can then start on a
	// tail that halved since (a cache warming as its keys are read), so
	// that its halves disagree for as long as that part is in it. When
	// only the tail's trend fails, the steady state starts at the first
	// window from which the rest passes every test, if at least need
	// windows are left. A median still moving is waited for.
	judgeTail := (afterTransient || d.slowerBefore(g)) && !prior
	if !d.medianHalvesAgree(g, afterTransient) {
		return false
	}
	class := Flat
	if !d.tailHalvesAgree(g, judgeTail) {
		found := false
		for s := g.s + 1; g.n-s >= need; s++ {
			h := g
			h.s, h.level = s, d.medianOf(d.svc.y[s:])
			if d.medianHalvesAgree(h, afterTransient) && d.tailHalvesAgree(h, judgeTail) {
				g, found = h, true
				break
			}
		}
		if !found {
			return false
		}
		// the windows left out were a warm-up's end: their tail fell
		class = ClassWarmup
	}
	start := d.ring[g.from+g.s].first
	if start.Index < d.floor.Index {
		start = d.floor
	}
	d.class = d.svcClass(g)
	if d.class == Flat {
		d.class = class
	}
	var mon [3]monitor
	mon[statMedian] = monitor{on: true, level: math.Exp(g.level)}
	d.svc.over, d.svc.far, d.svc.back = 0, 0, 0
	d.svc.nEx = 0
	d.enterSteady(start, mon, start.Index)
	return true
}

// svcSearchFrom returns the first window a steady segment may start at
// (after the floor and the prior warm-up end, if any), and whether enough
// windows follow it to judge.
func (d *Detector) svcSearchFrom() (int, bool) {
	lo := d.firstAfter(d.floor.Index)
	last := len(d.ring) - 1
	fewest := min(d.cfg.StableWindows, d.cfg.SettleWindows)
	if d.cfg.PriorLevel > 0 {
		fewest = min(fewest, d.cfg.PriorWindows)
	}
	if last-lo+1 < fewest {
		return lo, false
	}
	if w := int64(d.cfg.PriorWarmup); w > 0 {
		// a prior warm-up end: no steady state starts before it
		end := d.cold.t0 + w
		if d.win.last.Time < end {
			return lo, false
		}
		for lo <= last && d.ring[lo].first.Time < end {
			lo++
		}
		if last-lo+1 < fewest {
			return lo, false
		}
	}
	return lo, true
}

// svcFind walks back over the newest search_windows windows from lo (their
// logs in d.svc.y and d.svc.u) to where the medians, and with the dual gate
// the tails, left their band.
func (d *Detector) svcFind(lo int) svcSegment {
	last := len(d.ring) - 1
	g := svcSegment{lo: lo, from: max(lo, last-d.cfg.SearchWindows+1)}
	d.logs(g.from, d.cfg.TailTolerance > 0)
	y, u := d.svc.y, d.svc.u
	g.n = len(y)
	recent := max(0, g.n-2*d.cfg.StableWindows)
	g.sig = d.diffNoise(y[recent:])
	g.band = max(math.Log1p(d.cfg.MedianTolerance), d.cfg.NoiseZ*g.sig)
	g.s, g.level = d.walkBack(y, g.band)
	g.ms = g.s
	if d.cfg.TailTolerance > 0 {
		// the dual gate: the tail must have settled too
		g.tsig = d.diffNoise(u[recent:])
		tband := max(math.Log1p(d.cfg.TailTolerance), d.cfg.NoiseZ*g.tsig)
		if st, _ := d.walkBack(u, tband); st > g.s {
			g.s, g.level = st, d.medianOf(y[st:])
		}
		// The walk smooths each end with the mean of two windows, so the
		// first window of the search whose tail is a transient (a JIT's
		// first second, the cold tail in it) can join the segment: it
		// starts after that window, which afterTransient then sees. That
		// is the run's first window, or the first after a prior's warm-up
		// end. After a relapse the search starts at the relapse's
		// boundary, an estimate (2r-1 windows back) that usually falls
		// before the shift, so the shift's first window is then not the
		// search's first and stays in the segment.
		if g.s == 0 && g.from == g.lo && g.n > 1 && u[0]-d.medianOf(u[1:]) > transientTailBands*math.Log1p(d.cfg.TailTolerance) {
			g.s, g.level = 1, d.medianOf(y[1:])
		}
	}
	return g
}

// transientTailBands: a window whose tail lies this many tail bands (in
// logs; a factor (1+tail_tolerance)^4, 16 at the preset's 1) above the
// segment's is a transient, a JIT's cold tail, not the first connections
// of a pool. Measured on the live harness's recorded runs (b8-b13, the
// first one-second window against the median of the next twelve, about
// what the segment holds when the rule is asked): the demo service's
// first second, its pool filling, 8.2-9.3 times (embedded) and 2.7-11.2
// times (PostgreSQL); the Go controls 0.5-4.2, V8 1.5-6.7, CPython
// 1.9-3.1; HotSpot's `jvm-sha` 18-60 and `jvm-mixed` 40-89, but
// `jvm-maps` only 8.2-24.5 (9 of 17 runs under 16: its segment's own
// tail is still the JIT's, and the rule does not fire there). Three bands
// (a factor 8) took the demo's pool cold start for a warm-up (declared at
// 13 s instead of 10 s); four leave it a first level. The factor was
// calibrated at tail_tolerance 1 only, and on the window quantile. On the
// smoothed tail (histogram.SmoothTail) the same ratios came out within a
// factor 1.22 of the quantile's, run by run, where either is above 5
// (within 1.67 below; b25-b27, 44 runs): `jvm-sha` 36-72,
// `jvm-mixed` 48-77, `jvm-maps` 17-40, the demo 5.2-8.4 (embedded) but
// 33-40 (PostgreSQL, 2 runs: on these its first second was slower than
// in b8-b13, on the quantile as well, so that four bands no longer left
// its pool cold start a first level there), V8 2.9-6.2, the Go controls
// 0.6-2.1, CPython 1.4-2.2.
const transientTailBands = 4

// afterTransient tells whether a visible transient comes before the
// segment: the windows just before it lie outside twice the band (a first
// second 30% slower than the rest, as the first connections make it, is no
// warm-up in stages; a JIT's first seconds, 4-300 times slower, are). The
// windows before the search range count: those of the cold tail are the
// first of a JIT's warm-up. Twice the level band, not the band widened by
// the windows' noise: a JIT's first windows are noisy and 1.7 times slower.
//
// With the dual gate, a tail is a transient too (tailTransient).
func (d *Detector) afterTransient(g svcSegment) bool {
	at := g.from + g.s
	if at <= 0 {
		return false
	}
	t := d.svc.tmp[:0]
	for j := max(0, at-3); j < at; j++ {
		t = append(t, math.Log(d.ring[j].med))
	}
	d.svc.tmp = t
	if math.Abs(median(t)-g.level) > 2*math.Log1p(d.cfg.MedianTolerance) {
		return true
	}
	return d.tailTransient(g, 0)
}

// tailTransient tells whether, with the dual gate, one of the (up to 3)
// windows just before the segment, from window lo on, has a tail beyond
// transientTailBands times the tail band above the segment's (a factor 16
// at tail_tolerance 1). It reads d.svc.u as svcFind left it.
func (d *Detector) tailTransient(g svcSegment, lo int) bool {
	at := g.from + g.s
	if at <= lo || d.cfg.TailTolerance <= 0 {
		return false
	}
	tail := math.Inf(-1)
	for j := max(lo, at-3); j < at; j++ {
		tail = max(tail, math.Log(d.ring[j].stail))
	}
	return tail-d.medianOf(d.svc.u[g.s:]) > transientTailBands*math.Log1p(d.cfg.TailTolerance)
}

// medianHalvesAgree compares the medians of the segment's halves. After a
// transient the warm-up may still be ending: its halves must agree within
// trend_tolerance. A first level only has to stay within the level band
// between its halves when it improves (an unfinished warm-up), within
// twice the band when it slows down (a wave of the machine in the first
// seconds is no warm-up; a slowdown that goes on is a relapse later).
func (d *Detector) medianHalvesAgree(g svcSegment, afterTransient bool) bool {
	y := d.svc.y
	n, s := g.n, g.s
	h := (n - s) / 2
	change := d.medianOf(y[n-h:]) - d.medianOf(y[s:s+h])
	limit := g.band
	switch {
	case afterTransient:
		limit = max(math.Log1p(d.cfg.TrendTolerance), 2*g.sig)
	case change > 0:
		limit = 2 * g.band
	}
	return math.Abs(change) <= limit
}

// tailHalvesAgree is the dual gate's trend, asked (judge) after a
// transient, and of a first level which slower windows of the search
// precede (slowerBefore: a warm-up that came down in stages, its last
// stage close enough to the level that afterTransient does not see it),
// without a prior (the earlier runs' warm-up end stands for it): the tail
// must have stopped falling, as the median has. A cache that warms as its
// keys are read settles its median in about 10 s and its tail 10-20 s later
// (the live harness's cache service). Noisy tails widen the limit, as noisy
// medians do. When it fails, svcWarmup tries the segment's later starts.
// A second rule, that the share of slow samples (above twice the window
// median) no longer halve between the halves, was dropped: replayed on the
// cache's 20 runs of b48, b53, b62 and b63, each batch judged by its own
// consensus, it declared at 21-40 s and 12 met every online check, 15
// without it (at 20-33 s); on 150 runs of every case no other run's
// verdict changed (docs/tag-quality.md, "The share of slow samples:
// dropped").
func (d *Detector) tailHalvesAgree(g svcSegment, judge bool) bool {
	if !judge || d.cfg.TailTrendTolerance <= 0 || d.cfg.TailTolerance <= 0 {
		return true
	}
	u := d.svc.u
	n, s := g.n, g.s
	h := (n - s) / 2
	tlim := max(math.Log1p(d.cfg.TailTrendTolerance), 2*g.tsig)
	return d.medianOf(u[n-h:])-d.medianOf(u[s:s+h]) >= -tlim
}

// kendallTau is Kendall's tau (Kendall 1938) of v against its order: +1
// for a series that only rises, -1 for one that only falls; O(len(v)^2).
func kendallTau(v []float64) float64 {
	n := len(v)
	if n < 2 {
		return 0
	}
	conc := 0
	for i := range v {
		for j := i + 1; j < n; j++ {
			switch {
			case v[j] > v[i]:
				conc++
			case v[j] < v[i]:
				conc--
			}
		}
	}
	return float64(conc) / float64(n*(n-1)/2)
}

// slowerBefore tells whether a window before segment g, since the start
// of the search (window g.lo: the cold end, a prior's warm-up end, or
// the boundary of the last relapse; windows before g.from included,
// merged or not), has a median more than twice the level band above the
// segment's level: the segment is no first level of the run, though the
// windows just before it (afterTransient) may lie close to it, when a
// warm-up came down in stages.
func (d *Detector) slowerBefore(g svcSegment) bool {
	lim := math.Exp(g.level + 2*math.Log1p(d.cfg.MedianTolerance))
	for j := g.lo; j < g.from+g.s; j++ {
		if d.ring[j].med > lim {
			return true
		}
	}
	return false
}

// svcClass is the class of the steady state g starts (Barrett et al.
// 2017): against what came before the segment, or the steady state a
// relapse ended. A level whose median is that of what came before is a
// warm-up all the same when what came before, from the start of the
// search (the cold end, or the prior's warm-up end), is at most 3 windows
// and has a tail transient: a JIT's first second, its median within the
// band and its tail 16 times the settled one (without a prior, the
// detector held the level to settle_windows for it, as after a warm-up).
func (d *Detector) svcClass(g svcSegment) Class {
	switch {
	case d.steady.nRelapses > 0:
		if prev := d.steady.lastFrom; math.Exp(g.level) < prev {
			return ClassWarmup
		}
		return Slowdown
	case g.from+g.s <= g.lo:
		return Flat
	}
	// before d.logs below: tailTransient reads d.svc.u as svcFind left it
	tailOnly := g.from+g.s-g.lo <= 3 && d.tailTransient(g, g.lo)
	before := d.medianOf(d.svc.y[:g.s])
	if g.from > g.lo {
		// the search did not reach the cold end: compare with all of it
		d.logs(g.lo, false)
		before = d.medianOf(d.svc.y[:g.from+g.s-g.lo])
	}
	switch {
	case math.Abs(before-g.level) <= g.band && tailOnly:
		return ClassWarmup
	case math.Abs(before-g.level) <= g.band:
		return Flat
	case before > g.level:
		return ClassWarmup
	}
	return Slowdown
}

// atPriorLevel reports whether a log level lies within the prior's band of
// levels (false without a prior level).
func (d *Detector) atPriorLevel(level float64) bool { return d.inPriorBand(level, 0) }

// inPriorBand reports whether a log level lies within the prior's band
// widened by widen (a log factor) on each side (false without a prior
// level).
func (d *Detector) inPriorBand(level, widen float64) bool {
	if d.cfg.PriorLevel <= 0 {
		return false
	}
	p := math.Log(d.cfg.PriorLevel)
	return level >= p+math.Log1p(d.cfg.PriorLevelLow)-widen && level <= p+math.Log1p(d.cfg.PriorLevelHigh)+widen
}

// driftedPrior reports whether the segment takes the prior at a level
// outside its band: the segment is one level from the search's first window
// (the prior warm-up end, or the cold end with none) and its level lies
// within the band widened by prior_drift on each side. The caller checks
// that no visible transient precedes it (afterTransient: windows just
// before whose median lies more than twice the level band from the
// segment's, or whose tail is a JIT's; a warm-up still falling into the
// prior's end in such a step is judged without the prior). What it cannot
// tell apart: a warm-up longer than the profile's that falls by less than
// the level band per window after the prior's end, which is then declared
// there (TestServicePriorDrift; the
// profile gate's TTSS check sets the settled TTSS, from the whole run,
// against the profile's). Measured with 0.5 (docs/tag-quality.md, "A prior
// that tolerates the machine's speed"): replayed on the profiled runs recorded
// before it (b76, b78, b80, b83; b83's machine 3-21% slower than its
// profile's runs), every profile check met in 64 of 80 runs against 45, the
// same 6 runs over 2% contaminated; leave-one-out on b73-b75 + b77 (114
// runs), 99 against 88, runs over 2% contaminated 16 against 12; on 34
// fresh runs with profiles 2-5 hours old (b84, b85, replayed without it
// for the comparison), 31 against 28, but runs over 2% contaminated 8
// against 2 (`jvm-sha`, whose runs warmed up until 11-22 s against its
// profile's 4 s, 5 of 5): so the preset leaves it off.
func (d *Detector) driftedPrior(g svcSegment) bool {
	if d.cfg.PriorDrift <= 0 || g.from != g.lo || g.s != 0 {
		return false
	}
	return d.inPriorBand(g.level, math.Log1p(d.cfg.PriorDrift))
}

// relapseSpan is how many of the newest windows the relapse rule takes the
// median of (at most relapse_windows), and how many closes in a row decide
// a relapse when the level lies beyond twice relapse_tolerance (2.25 times
// slower, or 5 times faster at the preset's 0.5: a plateau left for a much
// faster level, a slowdown; on the live harness's recorded runs b45-b49
// the 5-window median of a settled service stayed 2.25 times above its
// level for 5 closes only in runs the reference itself calls a slowdown:
// the demo on PostgreSQL's run 1 of b45 and PyPy's run 1 of b48), or
// decide that an excursion ended. A spell beyond relapse_tolerance alone
// must last relapse_windows closes.
const relapseSpan = 5

// svcSteady watches the steady level at a window close; it reports whether
// the window lies within the relapse band.
func (d *Detector) svcSteady(w winSum) bool {
	lo := d.firstAfter(d.steady.start.Index)
	d.steadyLogs(lo)
	y := d.svc.y
	n := len(y)
	if n == 0 {
		return true
	}
	r := d.cfg.RelapseWindows
	level := d.medianOf(y)
	band := math.Log1p(d.cfg.RelapseTolerance)
	span := min(r, relapseSpan)
	if d.steady.hasPrev && d.svcExcursionEnds(w, lo, level, d.medianOf(y[max(0, n-span):]), span) {
		return true
	}
	// slower by more than the band, or faster by more than twice it (a
	// settled service's level switches by up to a factor 1.8 on shared
	// cores, both ways; a slowdown matters to a gate, an improvement of
	// that size does not, a plateau left for good does)
	beyond := func(shift float64) bool { return shift > band || shift < -2*band }
	shift := d.medianOf(y[max(0, n-span):]) - level
	out := beyond(shift)
	if h := n / 2; n >= 2*r && beyond(d.medianOf(y[n-h:])-d.medianOf(y[:h])) {
		out = true // the second half moved away: a drift
	}
	if !out {
		d.svc.over, d.svc.far = 0, 0
		return true
	}
	d.svc.over++
	if shift > 2*band || shift < -4*band {
		d.svc.far++
	} else {
		d.svc.far = 0
	}
	if d.svc.over < r && d.svc.far < span {
		return false
	}
	// the shift began after the latest excursion the steady state came
	// back from, whose windows would pull the change point back to its end
	b := d.ring[d.shiftStart(d.afterExcursions(lo, r), r)].first
	d.svc.prevDeclared = d.steady.declaredAt
	d.relapse(w, b, b, true)
	d.svc.minSeq = d.seq + d.cfg.SettleWindows
	d.svc.over, d.svc.far, d.svc.back = 0, 0, 0
	return false
}

// shiftStart estimates where the shift a relapse decided began: the
// change point of the log window medians of the steady state's last 4r
// windows (from lo on), the split that maximises the between-halves sum of
// squares (a single mean shift, least squares: the CUSUM estimate; Hinkley
// 1970), with at least r/2 windows after it. The median of the newest
// relapseSpan windows lies beyond the band once about half of them are
// shifted, and r closes in a row (relapseSpan when beyond twice the band)
// come before the decision: the shift began about r+3 windows ago (8 for a
// far shift). The rule it replaces put it 2r-1 windows back, 1.5-4 s
// before a step at r = 5 and 4-6 s at r = 10. Reads and overwrites d.svc.y.
func (d *Detector) shiftStart(lo, r int) int {
	a := max(lo, len(d.ring)-4*r)
	d.logs(a, false)
	y := d.svc.y
	n := len(y)
	after := max(1, r/2)
	if n <= after {
		return a
	}
	total := 0.0
	for _, v := range y {
		total += v
	}
	best, at, sum := -1.0, 0, 0.0
	for k := 1; k <= n-after; k++ {
		sum += y[k-1]
		m1, m2 := sum/float64(k), (total-sum)/float64(n-k)
		if ss := float64(k*(n-k)) / float64(n) * (m1 - m2) * (m1 - m2); ss > best {
			best, at = ss, k
		}
	}
	return a + at
}

// svcResume resumes the steady state the last relapse ended when the level
// came back: the median of the newest relapseSpan windows within the level
// band of that steady level at relapseSpan closes in a row (an excursion,
// such as a wave of the machine longer than the relapse took, is reported
// as a relapse, its iterations not steady, but it does not restart the
// steady state). The resumed state keeps its start and the time it was
// first declared.
func (d *Detector) svcResume() bool {
	r := min(d.cfg.RelapseWindows, relapseSpan)
	lo := max(d.firstAfter(d.floor.Index), len(d.ring)-r)
	d.logs(lo, false)
	if len(d.svc.y) < r {
		return false
	}
	prev := d.steady.prev[statMedian].level
	if prev <= 0 || math.Abs(d.medianOf(d.svc.y)-math.Log(prev)) > math.Log1p(d.cfg.MedianTolerance) {
		d.svc.back = 0
		return false
	}
	if d.svc.back++; d.svc.back < r {
		return false
	}
	from := d.steady.relapseShiftAt
	end := d.ring[d.shiftStart(d.firstAfter(from.Index), r)].first
	d.resumePrev(from, end)
	return true
}

// resumePrev resumes the steady state the last relapse ended; the
// excursion from..end is no part of its level.
func (d *Detector) resumePrev(from, end Point) {
	d.class = d.steady.prevClass
	d.svc.over, d.svc.far, d.svc.back = 0, 0, 0
	d.enterSteady(d.steady.prevStart, d.steady.prev, d.steady.prevStart.Index)
	d.steady.declaredAt = d.svc.prevDeclared
	d.steady.hasPrev = false
	if d.svc.nEx == maxExcursions {
		// the oldest excursion's windows count again
		copy(d.svc.ex[:], d.svc.ex[1:])
		d.svc.nEx--
	}
	d.svc.ex[d.svc.nEx] = [2]int64{from.Index, max(end.Index, from.Index)}
	d.svc.nEx++
}

// maxExcursions is how many excursions a steady state keeps out of its
// level (svcState.ex).
const maxExcursions = 4

// afterExcursions returns the first ring window after the latest excursion
// the steady state came back from, or lo when that leaves fewer than keep
// windows (or there is none).
func (d *Detector) afterExcursions(lo, keep int) int {
	if d.svc.nEx == 0 {
		return lo
	}
	if a := d.firstAfter(d.svc.ex[d.svc.nEx-1][1]); a > lo && len(d.ring)-a >= keep {
		return a
	}
	return lo
}

// svcExcursionEnds ends a steady state declared during an excursion when
// the level comes back to the steady state the excursion interrupted: the
// current steady level (log, level) lies above the level band of that
// steady state (a slower excursion), and the median of the newest span
// windows (recent) within it at span closes in a row. Seen live (the demo on PostgreSQL, b50 run 4):
// the level went from 1.9 to 3-5 ms for 27 s, long enough for a relapse and
// a steady state of its own, then came back; 1.6 times faster lay within
// that steady state's relapse band, so it held, and the gate judged a steady
// state that started in the excursion. The excursion's steady state is
// lost (a relapse, its boundary where the level came back) and the one it
// interrupted resumes, with its start and the time it was first declared.
func (d *Detector) svcExcursionEnds(w winSum, lo int, level, recent float64, span int) bool {
	prev := d.steady.prev[statMedian].level
	if prev <= 0 {
		return false
	}
	p, mb := math.Log(prev), math.Log1p(d.cfg.MedianTolerance)
	// only a slower excursion: a level faster than the one it left that
	// settled is the service's level now (a cold plateau left for good),
	// and a return to the slower one is a slowdown
	if level-p <= mb || math.Abs(recent-p) > mb {
		d.svc.back = 0
		return false
	}
	if d.svc.back++; d.svc.back < span {
		return false
	}
	from := d.steady.relapseShiftAt
	end := d.ring[d.shiftStart(lo, span)].first
	mon, start, class := d.steady.prev, d.steady.prevStart, d.steady.prevClass
	d.relapse(w, end, end, false)
	d.steady.prev, d.steady.prevStart, d.steady.prevClass = mon, start, class
	d.resumePrev(from, end)
	return true
}

// steadyLogs fills d.svc.y with the log medians of ring[from..] but those
// of the windows that lie inside the last excursion a resumed steady state
// came back from (svcState.ex).
func (d *Detector) steadyLogs(from int) {
	s := &d.svc
	s.y = s.y[:0]
	for j := from; j < len(d.ring); j++ {
		if !d.inExcursion(&d.ring[j]) {
			s.y = append(s.y, math.Log(d.ring[j].med))
		}
	}
}

// inExcursion reports whether window w lies inside an excursion the steady
// state came back from.
func (d *Detector) inExcursion(w *winSum) bool {
	for _, e := range d.svc.ex[:d.svc.nEx] {
		if w.first.Index >= e[0] && w.last.Index < e[1] {
			return true
		}
	}
	return false
}

// driftTau is how monotone a steady state's window medians must be, by
// Kendall's tau, for a move of its level to be a drift (see Drift).
const driftTau = 0.75

// Drift measures how the level of the current steady state moved, for
// the end of a run: the window medians of the steady state (the windows
// closed since it started, those still in the ring of max_windows) in
// thirds; change is the relative change of the last third's median against
// the first's (0.3 = 30% slower). ok is false when the detector is not
// steady, does not use the service method, or the steady state spans fewer
// than stable_windows windows (the gate fraction judges those).
//
// Held is false for a level that kept moving: the change beyond
// median_tolerance and the window medians monotone, Kendall's tau (Kendall
// 1938) at least driftTau in magnitude. A drift and latency that grows like
// the square root of time are monotone at every scale (tau 0.9-1.0 on the
// live harness's drift and slowdown services); it is what fails them when
// they move too slowly for a relapse. The level of a settled service is
// not: on 2 cores shared by k6 and the service it switches by 25-45% at
// random times and stays for tens of seconds, so that its thirds or halves
// differ by that much (tau within +-0.6 on the 35 runs of settled services
// of the harness's first batch, where a halves rule failed 6 of them).
func (d *Detector) Drift() (change float64, held, ok bool) {
	if d.regime != Steady || d.cfg.Method != MethodService {
		return 0, false, false
	}
	lo := d.firstAfter(d.steady.start.Index)
	// the window the steady state starts in is mixed: skip it
	if lo < len(d.ring) && d.ring[lo].first.Index < d.steady.start.Index {
		lo++
	}
	// the windows of an excursion it came back from are no part of it
	w := d.scratch[:0]
	for j := lo; j < len(d.ring); j++ {
		if !d.inExcursion(&d.ring[j]) {
			w = append(w, d.ring[j].med)
		}
	}
	n := len(w)
	if n < d.cfg.StableWindows {
		return 0, false, false
	}
	third := func(k int) float64 {
		return d.medianOf(w[k*n/3 : (k+1)*n/3])
	}
	m1, m3 := third(0), third(2)
	if m1 <= 0 || m3 <= 0 {
		return 0, true, true
	}
	change = m3/m1 - 1
	d.steadyLogs(lo) // logs keep the order of the medians: the same tau
	tau := kendallTau(d.svc.y)
	moved := math.Abs(math.Log(m3/m1)) > math.Log1p(d.cfg.MedianTolerance)
	return change, !(moved && math.Abs(tau) >= driftTau), true
}

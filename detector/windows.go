package detector

// Windows: the HDR histogram window closes into a bounded ring of window
// summaries; every later stage reads the ring.

import (
	"math"
	"slices"
)

// winSum is the bounded per-window summary kept in the ring.
type winSum struct {
	first, last     Point
	n               int64
	med, tail, mean float64
	se              float64 // relative standard error of mean
	// stail (service method only): the window's tail quantile smoothed
	// over the order statistics around it (histogram.SmoothTail), the tail
	// the service method's dual gate judges
	stail float64
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
		d.endCold(d.win.last)
		// the window restarted at the cold end: it closes only if what is
		// left still makes a window (window_min, and window_min_duration)
		if d.win.n < int64(d.cfg.WindowMin) ||
			(d.cfg.WindowMinDuration > 0 && d.win.last.Time-d.win.clock < int64(d.cfg.WindowMinDuration)) {
			return
		}
	}
	n := d.win.n
	tq := d.tailQuantile(n)
	med := d.hist.Quantile(50) / d.scale
	tail := d.hist.Quantile(tq) / d.scale
	mx := d.hist.Mean()
	mean := mx / d.scale
	stail := 0.0
	if d.cfg.Method == MethodService {
		// the quantile smoothed over the ranks around it: a quantile whose
		// level a mixture straddles (a 1% slow path and p99) jumps between
		// the fast and the slow mode from one window to the next on the
		// count of slow samples in it; the smoothed tail moves with that
		// count, and leaves out the largest values (one request 200 times
		// slower than the rest)
		stail = d.hist.SmoothTail(tq) / d.scale
	}
	// relative standard error of the window mean, from the within-window
	// variance: what the mean of a stationary series would scatter by.
	se := 0.0
	if n > 1 && mx > 0 {
		vr := (d.win.sumSq/float64(n) - mx*mx) * float64(n) / float64(n-1)
		se = math.Sqrt(max(vr, 0)/float64(n)) / mx
	}
	d.win.sumSq = 0
	d.hist.Reset()
	d.win.n = 0
	w := winSum{first: d.win.first, last: d.win.last, n: n, med: med, tail: tail, mean: mean, se: se, stail: stail}
	drift := 0.0
	if k := len(d.ring); k > 0 {
		drift = med/d.ring[k-1].med - 1
	}
	d.push(w)
	d.win.sbN, d.win.subs.n = 0, 0
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
// pairwise (weighted means of medians, max of tail quantiles, weighted
// geometric means of smoothed tails), keeping
// recent windows at full resolution and memory bounded for any run length.
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
				// the smoothed tails' weighted geometric mean: their max
				// would put back the extremes they leave out
				stail: smoothMerge(a, b),
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
	d.subs = append(d.subs, d.win.subs)
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

// smoothMerge is the smoothed tail of two merged windows: the geometric
// mean of theirs, weighted by their counts (0 when either has none: the
// benchmark method keeps none).
func smoothMerge(a, b winSum) float64 {
	if a.stail <= 0 || b.stail <= 0 || a.n+b.n == 0 {
		return 0
	}
	wa := float64(a.n) / float64(a.n+b.n)
	return math.Exp(wa*math.Log(a.stail) + (1-wa)*math.Log(b.stail))
}

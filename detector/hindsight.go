package detector

import (
	"errors"
	"math"
	"slices"
)

// The end-of-run refinement (Hindsight) re-runs, on the whole series, the
// procedure that labelled the JMH steady-state corpus (Traini, Cortellessa,
// Di Pompeo, Tucci, "Towards effective assessment of steady state
// performance in Java software: are we there yet?", EMSE 2023; their
// replication package, steps filter_outliers / changepoint /
// classify_runs):
//
//  1. outliers: an observation beyond median ± 3·(p99 − p1) of a sliding
//     window of 200 observations containing it is left out of step 2;
//  2. changepoints: PELT (Killick, Fearnhead, Eckley, JASA 2012) with the
//     normal mean-and-variance cost (R changepoint's cpt.meanvar, minimum
//     segment length 2), the penalty chosen at the knee (Kneedle; Satopää et
//     al., ICDCS-W 2011) of the changepoints-versus-penalty curve that CROPS
//     (Haynes, Eckley, Fearnhead, JCGS 2017) traces over [4, 10⁵]·ln n;
//  3. walking back from the last segment, steady state starts after the
//     latest segment whose mean differs from the last one's by more than
//     mean_tolerance (5% in the benchmark preset, the labels' value; the
//     labels use a bootstrap interval of the ratio, here the delta method,
//     1.96 standard errors), with outliers kept;
//  4. a steady state that would hold min_steady_fraction of the series or
//     less is none (the labels: one starting after iteration 2499 of 3000),
//     and so is one shorter than stable_windows windows (as online);
//  5. not in the labels: a steady stretch whose halves differ by the test
//     of step 3 is a drift, not a steady state (Geweke 1992; the online
//     detector's drift check). On the corpus it moves no-steady reported
//     as none from 79.9% to 80.5% and missed from 2.0% to 3.3%; it is what
//     keeps a slow ramp from being called steady over its last stretch.
//
// It needs the series, which the online detector does not keep: a trace of
// at most traceCap entries records every valid observation; when full, its
// entries are averaged pairwise and each new entry is the mean of twice as
// many observations, so memory is fixed and a series of up to traceCap
// observations (the corpus' 3,000) is seen exactly. The cost, paid once at
// the end: CROPS runs PELT 10-250 times and PELT prunes little under this
// cost (O(n²) per run at high penalties), so the segment costs, which do
// not depend on the penalty, are computed once (n²/2 logarithms, 36 MB for
// 3,000 points, from a pool) and the runs CROPS needs in one round share
// one pass over them; each run adds and compares. On amd64 with AVX2 the
// costs and the runs' steps are computed 4 at a time, bit for bit as the
// Go code computes them (pelt_amd64.s). BenchmarkLabelStart: about 0.07 s
// per corpus fork here (0.17 s in Go alone, 0.35 s with one dependent chain
// of minima and a run at a time; 1.06 s computing the costs in every run).
// Observe pays a few nanoseconds.
const (
	traceCap       = 4096
	outlierWindow  = 200
	outlierSkip    = 20 // the labels skip ceil(200/ln(1+ops in 0.1 s)) first observations: 15-21 for 1 µs-1 ms per op
	outlierStride  = 10 // window step; the labels slide by 1 (same steady starts on the 5 corpus forks compared, 10x cheaper)
	cropsMinFactor = 4
	cropsMaxFactor = 1e5
	cropsMaxRuns   = 1000 // bound on PELT runs; CROPS needs at most about twice the changepoint counts it finds
	shiftZ         = 1.96
	log2Pi         = 1.8378770664093453
	minVar         = 1e-11 // R changepoint's value for a segment variance <= 0
)

// ErrNoTrace: Hindsight was called on a detector with Config.DropTrace.
var ErrNoTrace = errors.New("detector: Hindsight needs the trace, and Config.DropTrace dropped it")

// trace is the bounded record of the series for Hindsight.
type trace struct {
	v     []float64
	at    []Point // first observation of each entry
	block int64   // observations per entry
	acc   float64
	accN  int64
	accAt Point
}

func newTrace() trace {
	return trace{v: make([]float64, 0, traceCap), at: make([]Point, 0, traceCap), block: 1}
}

func (t *trace) add(p Point, v float64) {
	if t.accN == 0 {
		t.accAt = p
	}
	t.acc += v
	t.accN++
	if t.accN < t.block {
		return
	}
	if len(t.v) == cap(t.v) {
		// the pending entry becomes the first half of an entry of the new size
		h := len(t.v) / 2
		for i := range h {
			t.v[i] = (t.v[2*i] + t.v[2*i+1]) / 2
			t.at[i] = t.at[2*i]
		}
		t.v, t.at = t.v[:h], t.at[:h]
		t.block *= 2
		return
	}
	t.v = append(t.v, t.acc/float64(t.accN))
	t.at = append(t.at, t.accAt)
	t.acc, t.accN = 0, 0
}

// series returns the entries, the pending partial one included.
func (t *trace) series() ([]float64, []Point) {
	x, at := slices.Clone(t.v), slices.Clone(t.at)
	if t.accN > 0 {
		x = append(x, t.acc/float64(t.accN))
		at = append(at, t.accAt)
	}
	return x, at
}

// labelStart returns the index in x where steady state starts by the
// corpus labels' procedure (see above), before the min_steady_fraction rule.
func labelStart(x []float64, tol float64) int {
	keep := inliers(x)
	y := make([]float64, len(keep))
	for i, k := range keep {
		y[i] = x[k]
	}
	var p pelt
	p.init(y)
	cps, _ := p.run(p.knee())
	p.release()
	// segment starts in x: 0, then the first observation after each
	// changepoint's last inlier
	starts := make([]int, 1, len(cps)+1)
	for _, c := range cps {
		starts = append(starts, keep[c-1]+1)
	}
	last := moments(x[starts[len(starts)-1]:])
	for i := len(starts) - 1; i >= 1; i-- {
		if differs(last, moments(x[starts[i-1]:starts[i]]), tol) {
			return starts[i]
		}
	}
	return 0
}

// inliers returns the indexes of x that no outlier window flags (step 1).
func inliers(x []float64) []int {
	n := len(x)
	out := make([]bool, n)
	w := make([]float64, outlierWindow)
	for k := outlierSkip; k+outlierWindow <= n; k += outlierStride {
		copy(w, x[k:k+outlierWindow])
		slices.Sort(w)
		med := quantile(w, 0.5)
		spread := 3 * (quantile(w, 0.99) - quantile(w, 0.01))
		for i := k; i < k+outlierWindow; i++ {
			if x[i] > med+spread || x[i] < med-spread {
				out[i] = true
			}
		}
	}
	keep := make([]int, 0, n)
	for i, o := range out {
		if !o {
			keep = append(keep, i)
		}
	}
	return keep
}

// quantile of sorted s, linear interpolation (numpy's default).
func quantile(s []float64, q float64) float64 {
	h := q * float64(len(s)-1)
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

type moment struct{ n, s, q float64 }

func moments(x []float64) moment {
	var m moment
	for _, v := range x {
		m.n++
		m.s += v
		m.q += v * v
	}
	return m
}

// differs: the means of a and b differ beyond 1 ± tol by meansDiffer, with
// the population variance of each stretch (as the labels' bootstrap).
func differs(a, b moment, tol float64) bool {
	ma, mb := a.s/a.n, b.s/b.n
	rva := math.Max(a.q/a.n-ma*ma, 0) / a.n / (ma * ma)
	rvb := math.Max(b.q/b.n-mb*mb, 0) / b.n / (mb * mb)
	return meansDiffer(mb, rvb, ma, rva, tol, shiftZ)
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
	if d.cold.found {
		for st < len(at) && at[st].Index < d.cold.end.Index {
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
	case st == 0 || start.Index < subBlock || (d.cold.found && start.Index <= d.cold.end.Index) ||
		math.Abs(pre/post-1) <= d.cfg.MeanTolerance:
		s.Class = Flat // what came before is a few observations, the cold tail, or at the steady level
	case pre > post:
		s.Class = ClassWarmup
	default:
		s.Class = Slowdown
	}
	return s, nil
}

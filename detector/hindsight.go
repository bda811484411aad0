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
// 3,000 points) and each run adds and compares; 0.27 s per corpus fork on
// average here (1.06 s computing the costs in every run). Observe pays a
// few nanoseconds.
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
	cps := p.run(p.knee())
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

// pelt holds the prefix sums of a series and PELT's work arrays.
type pelt struct {
	s, q   []float64
	f      []float64
	last   []int
	r, r2  []int
	cost   []float64
	runs   int
	ncp    int     // changepoints of the last run
	rawFit float64 // its unpenalised cost
	// seg holds segCost(c, t) of every segment, row t from t(t-1)/2,
	// column c: a cost does not depend on the penalty and CROPS runs PELT
	// tens of times over the same series, so each (a logarithm) is computed
	// once, and a run reads the row of t in order. n(n+1)/2 float64s: 36 MB
	// for the corpus' 3,000 observations, 67 MB for a full trace; nil for
	// longer series, whose costs are computed as needed.
	seg []float64
}

// segCacheMax is the longest series whose segment costs are kept: a full
// trace and its pending entry.
const segCacheMax = traceCap + 1

func (p *pelt) init(y []float64) {
	n := len(y)
	p.s = make([]float64, n+1)
	p.q = make([]float64, n+1)
	for i, v := range y {
		p.s[i+1] = p.s[i] + v
		p.q[i+1] = p.q[i] + v*v
	}
	p.f = make([]float64, n+1)
	p.last = make([]int, n+1)
	if n <= segCacheMax {
		p.seg = make([]float64, n*(n+1)/2)
		for t := 2; t <= n; t++ {
			row := p.seg[t*(t-1)/2:][:t]
			for c := range t - 1 { // segments of at least two observations
				row[c] = p.segCost(c, t)
			}
		}
	}
}

// segCost: twice the negative maximised normal log-likelihood of y[a:b].
func (p *pelt) segCost(a, b int) float64 {
	k := float64(b - a)
	s := p.s[b] - p.s[a]
	v := (p.q[b] - p.q[a] - s*s/k) / k
	if v <= 0 {
		v = minVar
	}
	return k * (log2Pi + math.Log(v) + 1)
}

// run segments the series with penalty pen and returns the changepoints
// (each the exclusive end of a segment, in increasing order).
func (p *pelt) run(pen float64) []int {
	p.runs++
	n := len(p.s) - 1
	f, last := p.f, p.last
	f[0] = -pen
	if n >= 1 {
		f[1] = math.Inf(1)
	}
	r := append(p.r[:0], 0)
	for t := 2; t <= n; t++ {
		// F(t) = min over the candidates c of f[c] + cost(c, t) + pen; the
		// first pass takes the least cost without a branch on the data
		// (the comparisons of a data-dependent branch are half
		// mispredicted), the second finds the first candidate that attains
		// it (PELT's, and R's, choice on ties) and prunes
		cost := slices.Grow(p.cost[:0], len(r))[:len(r)]
		lo := math.Inf(1)
		if p.seg != nil {
			row := p.seg[t*(t-1)/2:][:t]
			for i, c := range r {
				v := math.Inf(1)
				if t-c >= 2 {
					v = f[c] + row[c]
				}
				cost[i] = v
				lo = min(lo, v)
			}
		} else {
			for i, c := range r {
				v := math.Inf(1)
				if t-c >= 2 {
					v = f[c] + p.segCost(c, t)
				}
				cost[i] = v
				lo = min(lo, v)
			}
		}
		p.cost = cost
		// rounding is monotonic, so min(cost) + pen = min(cost + pen)
		best, arg, found := lo+pen, 0, math.IsInf(lo, 1)
		r2 := p.r2[:0]
		for i, c := range r {
			if !found && cost[i]+pen == best {
				arg, found = c, true
			}
			// prune c once it can never start the last segment again
			if t-c < 2 || cost[i] <= best {
				r2 = append(r2, c)
			}
		}
		f[t], last[t] = best, arg
		r2 = append(r2, t-1)
		p.r, p.r2 = r2, r
		r = r2
	}
	var cps []int
	for t := last[n]; t > 0; t = last[t] {
		cps = append(cps, t)
	}
	slices.Reverse(cps)
	p.ncp = len(cps)
	p.rawFit = f[n] - pen*float64(len(cps))
	return cps
}

type cropsPoint struct {
	pen    float64
	ncp    int
	rawFit float64
}

// knee runs CROPS over [cropsMinFactor, cropsMaxFactor]·ln n and returns
// the penalty at the knee of the changepoint-count curve (15·ln n when
// Kneedle finds none, as the labels do).
func (p *pelt) knee() float64 {
	n := float64(len(p.s) - 1)
	if n < 4 {
		return cropsMinFactor * math.Log(max(n, 2))
	}
	var pts []cropsPoint
	at := func(pen float64) cropsPoint {
		for _, c := range pts {
			if c.pen == pen {
				return c
			}
		}
		p.run(pen)
		c := cropsPoint{pen, p.ncp, p.rawFit}
		pts = append(pts, c)
		return c
	}
	type interval struct{ a, b float64 }
	todo := []interval{{cropsMinFactor * math.Log(n), cropsMaxFactor * math.Log(n)}}
	for len(todo) > 0 && p.runs < cropsMaxRuns {
		v := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		a, b := at(v.a), at(v.b)
		if a.ncp <= b.ncp+1 {
			continue
		}
		lam := (b.rawFit - a.rawFit) / float64(a.ncp-b.ncp)
		if !(v.a < lam && lam < v.b) {
			continue
		}
		if l := at(lam); l.ncp != b.ncp {
			todo = append(todo, interval{v.a, lam}, interval{lam, v.b})
		}
	}
	slices.SortFunc(pts, func(a, b cropsPoint) int {
		switch {
		case a.pen < b.pen:
			return -1
		case a.pen > b.pen:
			return 1
		}
		return 0
	})
	// one point per changepoint count, at the smallest penalty giving it;
	// the penalty reported for each count is where it begins (CROPS' output)
	var tp []cropsPoint
	for _, c := range pts {
		if len(tp) == 0 || tp[len(tp)-1].ncp != c.ncp {
			tp = append(tp, c)
		}
	}
	def := 15 * math.Log(n)
	if len(tp) < 2 {
		return tp[0].pen
	}
	beta := make([]float64, len(tp))
	ncp := make([]float64, len(tp))
	for k := range tp {
		ncp[k] = float64(tp[k].ncp)
		beta[k] = tp[k].pen
		if k > 0 {
			beta[k] = (tp[k].rawFit - tp[k-1].rawFit) / float64(tp[k-1].ncp-tp[k].ncp)
		}
	}
	slices.Reverse(beta)
	slices.Reverse(ncp)
	if k, ok := kneedle(beta, ncp); ok {
		return k
	}
	return def
}

// kneedle finds the first knee of a convex decreasing curve (Kneedle with
// sensitivity 1, offline, as the Python package kneed computes it); false
// where kneed finds none or fails.
func kneedle(x, y []float64) (float64, bool) {
	n := len(x)
	xn, yn := unitScale(x), unitScale(y)
	ymax := slices.Max(yn)
	d := make([]float64, n)
	for i := range d {
		d[i] = (ymax - yn[i]) - xn[i]
	}
	isMax := func(i int) bool { return d[i] >= d[max(i-1, 0)] && d[i] >= d[min(i+1, n-1)] }
	isMin := func(i int) bool { return d[i] <= d[max(i-1, 0)] && d[i] <= d[min(i+1, n-1)] }
	var mdiff float64
	for i := 1; i < n; i++ {
		mdiff += xn[i] - xn[i-1]
	}
	mdiff = math.Abs(mdiff / float64(n-1))
	first := -1
	for i := range n {
		if isMax(i) {
			first = i
			break
		}
	}
	if first < 0 {
		return 0, false
	}
	var threshold float64
	thIdx := 0
	for i := first; i < n; i++ {
		if xn[i] == 1 {
			break
		}
		if isMax(i) {
			threshold = d[i] - mdiff
			thIdx = i
		}
		if isMin(i) {
			threshold = 0
		}
		if i+1 >= n {
			return 0, false // kneed raises IndexError here; the labels fall back
		}
		if d[i+1] < threshold {
			return x[thIdx], true
		}
	}
	return 0, false
}

func unitScale(a []float64) []float64 {
	lo, hi := slices.Min(a), slices.Max(a)
	out := make([]float64, len(a))
	for i, v := range a {
		if hi > lo {
			out[i] = (v - lo) / (hi - lo)
		}
	}
	return out
}

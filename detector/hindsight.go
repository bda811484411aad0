package detector

import (
	"errors"
	"math"
	"slices"
	"sync"
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
// one pass over them; each run adds and compares. BenchmarkLabelStart: about
// 0.12 s per corpus fork here (0.35 s with one dependent chain of minima
// and a run at a time; 1.06 s computing the costs in every run). Observe
// pays a few nanoseconds.
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

// pelt holds the prefix sums of a series, its segment costs and the work
// arrays of the PELT runs under way.
type pelt struct {
	s, q []float64
	runs int
	// seg holds segCost(c, t) of every segment, row t from t(t-1)/2,
	// column c: a cost does not depend on the penalty and CROPS runs PELT
	// tens of times over the same series, so each (a logarithm) is computed
	// once. n(n+1)/2 float64s: 36 MB for the corpus' 3,000 observations,
	// 67 MB for a full trace (taken from segPool: a detect over the corpus
	// refines thousands of series); nil for longer series, whose costs are
	// computed as needed.
	seg  []float64
	pool *[]float64
	// slot[i] is the state of the i-th run of a batch
	slot []peltRun
}

// peltRun is one PELT run's state: its penalty, F and the last changepoint
// of the best segmentation of every prefix, the candidates, their costs.
type peltRun struct {
	pen    float64
	f      []float64
	last   []int
	r, r2  []int
	cost   []float64
	cps    []int   // its changepoints, at the end
	rawFit float64 // its unpenalised cost
}

// segCacheMax is the longest series whose segment costs are kept: a full
// trace and its pending entry.
const segCacheMax = traceCap + 1

var segPool sync.Pool // *[]float64, cap segCacheMax*(segCacheMax+1)/2 at most

func (p *pelt) init(y []float64) {
	n := len(y)
	p.s = make([]float64, n+1)
	p.q = make([]float64, n+1)
	for i, v := range y {
		p.s[i+1] = p.s[i] + v
		p.q[i+1] = p.q[i] + v*v
	}
	if n <= segCacheMax {
		// every entry that a run reads (c <= t-2) is written below, so a
		// pooled buffer needs no clearing
		size := n * (n + 1) / 2
		buf, _ := segPool.Get().(*[]float64)
		if buf == nil || cap(*buf) < size {
			b := make([]float64, size)
			buf = &b
		}
		p.pool, p.seg = buf, (*buf)[:size]
		for t := 2; t <= n; t++ {
			row := p.seg[t*(t-1)/2:][:t]
			for c := range t - 1 { // segments of at least two observations
				row[c] = p.segCost(c, t)
			}
		}
	}
}

// release returns the segment costs' buffer to the pool; p cannot run again.
func (p *pelt) release() {
	if p.pool != nil {
		segPool.Put(p.pool)
	}
	p.pool, p.seg = nil, nil
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
// (each the exclusive end of a segment, in increasing order) and the
// unpenalised cost of that segmentation.
func (p *pelt) run(pen float64) ([]int, float64) {
	r := &p.batch([]float64{pen})[0]
	return r.cps, r.rawFit
}

// batch runs PELT at each penalty of pens, in one pass over the segment
// costs: the row of costs that ends at t is read once for all the runs
// (the costs are 36 MB, read again by every run, for a corpus series), and
// every run computes what it would alone. The results are p.slot[:len(pens)].
func (p *pelt) batch(pens []float64) []peltRun {
	n := len(p.s) - 1
	for len(p.slot) < len(pens) {
		p.slot = append(p.slot, peltRun{})
	}
	runs := p.slot[:len(pens)]
	for i := range runs {
		p.runs++
		runs[i].start(pens[i], n)
	}
	for t := 2; t <= n; t++ {
		var row []float64
		if p.seg != nil {
			row = p.seg[t*(t-1)/2:][:t]
		}
		for i := range runs {
			runs[i].step(p, t, row)
		}
	}
	for i := range runs {
		runs[i].finish(n)
	}
	return runs
}

func (r *peltRun) start(pen float64, n int) {
	r.pen = pen
	r.f = slices.Grow(r.f[:0], n+1)[:n+1]
	r.last = slices.Grow(r.last[:0], n+1)[:n+1]
	r.f[0], r.last[0] = -pen, 0
	if n >= 1 {
		r.f[1], r.last[1] = math.Inf(1), 0
	}
	r.r = append(r.r[:0], 0)
}

// step computes F(t) = min over the candidates c of f[c] + cost(c, t) +
// pen, and prunes. Every candidate is at most t-2 (the newest, t-1, joins
// after this step), so every segment c..t has the minimum length 2. The
// first pass takes the least cost without a branch on the data and with
// four independent minima (one chain of dependent comparisons was most of
// the time of detect), the second finds the first candidate that attains
// it (PELT's, and R's, choice on ties), the third prunes.
func (r *peltRun) step(p *pelt, t int, row []float64) {
	f, cands, pen := r.f, r.r, r.pen
	cost := slices.Grow(r.cost[:0], len(cands))[:len(cands)]
	r.cost = cost
	lo := math.Inf(1)
	switch {
	case row == nil:
		for i, c := range cands {
			v := f[c] + p.segCost(c, t)
			cost[i] = v
			lo = min(lo, v)
		}
	case cands[0]+len(cands) == t-1:
		// nothing pruned since cands[0] (the costly case): f and the row
		// are read in order
		lo = addMin(cost, f[cands[0]:t-1], row[cands[0]:t-1])
	default:
		lo = gatherAddMin(cost, cands, f, row)
	}
	// rounding is monotonic, so min(cost) + pen = min(cost + pen)
	best, arg := lo+pen, 0
	if !math.IsInf(lo, 1) {
		for i, v := range cost {
			if v+pen == best {
				arg = cands[i]
				break
			}
		}
	}
	// prune the candidates that can never start the last segment again
	// (f[c] + cost(c, t) > F(t)); written so that the compiler keeps no
	// branch on the data
	r2 := slices.Grow(r.r2[:0], len(cands)+1)[:len(cands)+1]
	k := 0
	for i, c := range cands {
		r2[k] = c
		if cost[i] <= best {
			k++
		}
	}
	f[t], r.last[t] = best, arg
	r2[k] = t - 1
	r.r, r.r2 = r2[:k+1], cands
}

func (r *peltRun) finish(n int) {
	r.cps = r.cps[:0]
	for t := r.last[n]; t > 0; t = r.last[t] {
		r.cps = append(r.cps, t)
	}
	slices.Reverse(r.cps)
	r.rawFit = r.f[n] - r.pen*float64(len(r.cps))
}

// addMin sets dst[i] = a[i] + b[i] and returns the least (+Inf for none);
// eight running minima, so that the comparisons do not wait on each other.
// No value is NaN (the costs are finite, f is finite or +Inf), so the order
// of the comparisons cannot change the result.
func addMin(dst, a, b []float64) float64 {
	inf := math.Inf(1)
	l0, l1, l2, l3, l4, l5, l6, l7 := inf, inf, inf, inf, inf, inf, inf, inf
	n := len(dst)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		x, y, d := a[i:i+8], b[i:i+8], dst[i:i+8]
		v0, v1, v2, v3 := x[0]+y[0], x[1]+y[1], x[2]+y[2], x[3]+y[3]
		v4, v5, v6, v7 := x[4]+y[4], x[5]+y[5], x[6]+y[6], x[7]+y[7]
		d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = v0, v1, v2, v3, v4, v5, v6, v7
		l0, l1, l2, l3 = min(l0, v0), min(l1, v1), min(l2, v2), min(l3, v3)
		l4, l5, l6, l7 = min(l4, v4), min(l5, v5), min(l6, v6), min(l7, v7)
	}
	for ; i < n; i++ {
		v := a[i] + b[i]
		dst[i] = v
		l0 = min(l0, v)
	}
	return min(min(l0, l1, l2, l3), min(l4, l5, l6, l7))
}

// gatherAddMin is addMin over the candidates r: dst[i] = f[r[i]] + row[r[i]].
func gatherAddMin(dst []float64, r []int, f, row []float64) float64 {
	inf := math.Inf(1)
	l0, l1, l2, l3, l4, l5, l6, l7 := inf, inf, inf, inf, inf, inf, inf, inf
	n := len(dst)
	r = r[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		c, d := r[i:i+8], dst[i:i+8]
		v0, v1, v2, v3 := f[c[0]]+row[c[0]], f[c[1]]+row[c[1]], f[c[2]]+row[c[2]], f[c[3]]+row[c[3]]
		v4, v5, v6, v7 := f[c[4]]+row[c[4]], f[c[5]]+row[c[5]], f[c[6]]+row[c[6]], f[c[7]]+row[c[7]]
		d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = v0, v1, v2, v3, v4, v5, v6, v7
		l0, l1, l2, l3 = min(l0, v0), min(l1, v1), min(l2, v2), min(l3, v3)
		l4, l5, l6, l7 = min(l4, v4), min(l5, v5), min(l6, v6), min(l7, v7)
	}
	for ; i < n; i++ {
		v := f[r[i]] + row[r[i]]
		dst[i] = v
		l0 = min(l0, v)
	}
	return min(min(l0, l1, l2, l3), min(l4, l5, l6, l7))
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
	return kneeOf(p.crops(), n)
}

// crops returns the points (penalty, changepoints, unpenalised cost) of
// the PELT runs CROPS makes over [cropsMinFactor, cropsMaxFactor]·ln n,
// in the order they were run. CROPS is run breadth first: the penalties
// that the intervals of one round need are run in one batch. Each
// interval's outcome depends only on its ends, so the penalties run are
// those of CROPS' usual depth-first order (unless cropsMaxRuns stops it
// first).
func (p *pelt) crops() []cropsPoint {
	n := float64(len(p.s) - 1)
	var pts []cropsPoint
	find := func(pen float64) (cropsPoint, bool) {
		for _, c := range pts {
			if c.pen == pen {
				return c, true
			}
		}
		return cropsPoint{}, false
	}
	// ensure runs, in one batch, the penalties of pens not run yet
	var todoPens []float64
	ensure := func(pens ...float64) {
		todoPens = todoPens[:0]
		for _, pen := range pens {
			if _, ok := find(pen); !ok && !slices.Contains(todoPens, pen) {
				todoPens = append(todoPens, pen)
			}
		}
		if len(todoPens) == 0 {
			return
		}
		for _, r := range p.batch(todoPens) {
			pts = append(pts, cropsPoint{r.pen, len(r.cps), r.rawFit})
		}
	}
	at := func(pen float64) cropsPoint {
		c, _ := find(pen)
		return c
	}
	type interval struct{ a, b, lam float64 }
	lo, hi := cropsMinFactor*math.Log(n), cropsMaxFactor*math.Log(n)
	ensure(lo, hi)
	round := []interval{{a: lo, b: hi}}
	for len(round) > 0 && p.runs < cropsMaxRuns {
		var lams []float64
		open := round[:0]
		for _, v := range round {
			a, b := at(v.a), at(v.b)
			if a.ncp <= b.ncp+1 {
				continue
			}
			lam := (b.rawFit - a.rawFit) / float64(a.ncp-b.ncp)
			if !(v.a < lam && lam < v.b) {
				continue
			}
			v.lam = lam
			open = append(open, v)
			lams = append(lams, lam)
		}
		// the depth-first order stops at cropsMaxRuns runs: so does this
		lams = lams[:min(len(lams), max(cropsMaxRuns-p.runs, 0))]
		ensure(lams...)
		var next []interval
		for _, v := range open {
			if l, ok := find(v.lam); ok && l.ncp != at(v.b).ncp {
				next = append(next, interval{a: v.a, b: v.lam}, interval{a: v.lam, b: v.b})
			}
		}
		round = next
	}
	return pts
}

// kneeOf returns the penalty at the knee of the CROPS points pts.
func kneeOf(pts []cropsPoint, n float64) float64 {
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

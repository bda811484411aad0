package detector

// PELT with the normal mean-and-variance cost (Hindsight, step 2).

import (
	"math"
	"slices"
	"sync"
)

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
	pen   float64
	f     []float64
	last  []int
	r, r2 []int
	// dense: the run keeps fm instead of the candidates r: fm[c] = f[c]
	// for a candidate c, +Inf for any other c < first or pruned; first is
	// the first candidate. With the AVX2 kernels a step reads every c from
	// first on, 4 at a time, rather than gathering the candidates one by
	// one (most are candidates: the high penalties prune little).
	dense  bool
	fm     []float64
	first  int
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
			p.costRow(p.seg[t*(t-1)/2:][:t-1], t) // segments of at least two observations
		}
	}
}

// costRow sets row[c] = segCost(c, t) for every c < len(row).
func (p *pelt) costRow(row []float64, t int) {
	n := len(row)
	c := 0
	for c < n {
		if useAVX2 {
			c += costRowAVX2(row[c:n], p.s[c:n], p.q[c:n], p.s[t], p.q[t], float64(t-c))
		}
		// the rest, or a group of 4 that the kernel left (a NaN or an
		// infinite variance), or all of them without the kernel
		e := n
		if useAVX2 {
			e = min(c+4, n)
		}
		for ; c < e; c++ {
			row[c] = p.segCost(c, t)
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
		runs[i].start(pens[i], n, useAVX2 && p.seg != nil)
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

func (r *peltRun) start(pen float64, n int, dense bool) {
	r.pen = pen
	r.f = slices.Grow(r.f[:0], n+1)[:n+1]
	r.last = slices.Grow(r.last[:0], n+1)[:n+1]
	r.f[0], r.last[0] = -pen, 0
	if n >= 1 {
		r.f[1], r.last[1] = math.Inf(1), 0
	}
	r.r = append(r.r[:0], 0)
	r.dense, r.first = dense, 0
	if dense {
		r.fm = slices.Grow(r.fm[:0], n+1)[:n+1]
		r.fm[0] = r.f[0]
	}
}

// stepDense is step for a dense run: the same F(t), last changepoint and
// candidates (pruned ones at +Inf in fm), from the same sums and
// comparisons.
func (r *peltRun) stepDense(t int, row []float64) {
	lo, fm := r.first, r.fm
	m := sumMin(fm[lo:t-1], row[lo:t-1])
	best, arg := m+r.pen, 0
	if !math.IsInf(m, 1) {
		// the first candidate that attains it; prune the others beyond it
		arg = lo + pruneDense(fm[lo:t-1], row[lo:t-1], r.pen, best)
	}
	r.f[t], r.last[t] = best, arg
	fm[t-1] = r.f[t-1] // t-1 joins the candidates
	for r.first < t-1 && math.IsInf(fm[r.first], 1) {
		r.first++
	}
}

// step computes F(t) = min over the candidates c of f[c] + cost(c, t) +
// pen, and prunes. Every candidate is at most t-2 (the newest, t-1, joins
// after this step), so every segment c..t has the minimum length 2. The
// first pass takes the least cost without a branch on the data and with
// four independent minima (one chain of dependent comparisons was most of
// the time of detect), the second finds the first candidate that attains
// it (PELT's, and R's, choice on ties), the third prunes.
func (r *peltRun) step(p *pelt, t int, row []float64) {
	if r.dense {
		r.stepDense(t, row)
		return
	}
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

// sumMin returns the least a[i] + b[i] (+Inf for none), on the AVX2
// kernel when there is one.
func sumMin(a, b []float64) float64 {
	n := len(a)
	b = b[:n]
	m, lo := 0, math.Inf(1)
	if useAVX2 {
		m = n &^ 3
		if m > 0 {
			lo = sumMinAVX2(a[:m], b[:m])
		}
	}
	for i := m; i < n; i++ {
		lo = min(lo, a[i]+b[i])
	}
	return lo
}

// pruneDense sets fm[i] to +Inf unless fm[i] + row[i] <= best (a pruned
// candidate, as step prunes), and returns the first i with (fm[i] +
// row[i]) + pen == best (-1 for none). On the AVX2 kernel when there is
// one. (A NaN cost, from sums of squares beyond the float64 range, is
// pruned as step prunes it; the least of sums with a NaN may differ from
// step's, which never meets one from observations Observe accepts below
// about 1e154.)
func pruneDense(fm, row []float64, pen, best float64) int {
	n := len(fm)
	if !useAVX2 || n < 4 {
		return prunePure(fm, row, pen, best)
	}
	m := n &^ 3
	arg := pruneAVX2(fm[:m], row[:m], pen, best)
	if rest := prunePure(fm[m:], row[m:n], pen, best); arg < 0 && rest >= 0 {
		arg = m + rest
	}
	return arg
}

// prunePure is pruneDense in Go.
func prunePure(fm, row []float64, pen, best float64) int {
	arg := -1
	row = row[:len(fm)]
	for i := range fm {
		v := fm[i] + row[i]
		if arg < 0 && v+pen == best {
			arg = i
		}
		if !(v <= best) {
			fm[i] = math.Inf(1)
		}
	}
	return arg
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

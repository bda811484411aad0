package detector

// CROPS over the penalty range and the knee of its changepoint curve
// (Hindsight, step 2: the penalty PELT runs with).

import (
	"math"
	"slices"
)

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

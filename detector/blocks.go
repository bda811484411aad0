package detector

// Blocks and sub-blocks of observations: the running sums behind the shift
// scan (shift_z) and the sub-block medians that place a steady start
// inside its first window (refineStart).

import "math"

// block is where a block of subBlock observations began, with the running
// sums of all recorded observations before it: the sums over any range of
// blocks are differences, so the shift scan costs O(1) per candidate point.
// Dropping a boundary merges its block into the previous one.
type block struct {
	first    Point
	n, s, s2 float64
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

// blkAdd adds a recorded observation (histogram units) to the running sums,
// opening a block every subBlock observations; when maxBlocks boundaries are
// kept, every other one of the older half is dropped (its block merges into
// the previous one), so recent blocks stay fine and memory bounded.
func (d *Detector) blkAdd(p Point, x float64) {
	if d.scan.fill == 0 {
		if len(d.scan.blocks) == cap(d.scan.blocks) {
			half := len(d.scan.blocks) / 2
			k := 0
			for i := 0; i < half; i += 2 {
				d.scan.blocks[k] = d.scan.blocks[i]
				k++
			}
			k += copy(d.scan.blocks[k:], d.scan.blocks[half:])
			d.scan.blocks = d.scan.blocks[:k]
		}
		d.scan.blocks = append(d.scan.blocks, block{first: p, n: d.scan.sumN, s: d.scan.sumX, s2: d.scan.sumX2})
	}
	d.scan.sumN++
	d.scan.sumX += x
	d.scan.sumX2 += x * x
	if d.scan.fill++; d.scan.fill == subBlock {
		d.scan.fill = 0
	}
}

// blockAt returns the index of the first block that begins at or after
// observation index i.
func (d *Detector) blockAt(i int64) int {
	lo, hi := 0, len(d.scan.blocks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.scan.blocks[m].first.Index < i {
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
	if a >= len(d.scan.blocks) {
		return Point{}, false
	}
	b0 := &d.scan.blocks[a]
	nT, sT, qT := d.scan.sumN-b0.n, d.scan.sumX-b0.s, d.scan.sumX2-b0.s2
	minN := float64(d.cfg.ShiftMin)
	if nT < 2*minN {
		return Point{}, false
	}
	tol := d.cfg.MeanTolerance
	best, bestZ := Point{}, d.cfg.ShiftZ
	found := false
	for c := max(a+1, d.blockAt(after)); c < len(d.scan.blocks); c++ {
		bc := &d.scan.blocks[c]
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
	if d.win.subs.n < maxSubs {
		if d.win.sbN == 0 {
			d.win.sbAt = p
		}
		d.win.sb[d.win.sbN] = v
		d.win.sbN++
		if d.win.sbN == subBlock {
			d.closeSub()
		}
	}
}

func (d *Detector) closeSub() {
	d.win.subs.med[d.win.subs.n] = float32(median5(&d.win.sb))
	d.win.subs.at[d.win.subs.n] = d.win.sbAt
	d.win.subs.n++
	d.win.sbN = 0
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

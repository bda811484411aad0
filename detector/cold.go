package detector

// The cold tail: the first stage of Observe, before any window is judged.

// coldStep tracks the cold tail: the prefix of observations more than
// cold_factor times slower than the current level, M = the median of the
// last cold_confirm observations. The candidate end coldCand (the first
// observation that is not cold) only moves forward; the tail ends once
// cold_confirm observations have followed coldCand. Comparing with a median, not
// with single later values, keeps heavy-tailed noise from making a tail.
func (d *Detector) coldStep(p Point, v float64) {
	i := p.Index
	b := d.cold.first // the buffer's first observation
	if i-b < coldBufSize {
		k := int64(d.cfg.ColdConfirm)
		lo := max(b, i-k+1)
		buf := d.cold.med[:0]
		for j := lo; j <= i; j++ {
			if d.cold.v[j-b] > 0 {
				buf = append(buf, d.cold.v[j-b])
			}
		}
		lim := d.cfg.ColdFactor * median(buf)
		for d.cold.cand <= i && (d.cold.v[d.cold.cand-b] > lim || !(d.cold.v[d.cold.cand-b] > 0)) {
			d.cold.cand++
		}
	}
	if i-d.cold.cand+1 >= int64(d.cfg.ColdConfirm) || i-d.cold.first+1 >= int64(d.cfg.ColdMax) {
		d.endCold(p)
	}
}

func (d *Detector) endCold(at Point) {
	end := d.cold.cand
	if end > at.Index {
		end = at.Index
	}
	t := at.Time
	b := d.cold.first // the buffer's first observation (end >= b)
	if end-b < coldBufSize {
		t = d.cold.at[end-b]
	}
	d.cold.end = Point{Index: end, Time: t}
	d.cold.found = true
	// The cold observations belong to no window: restart the current window
	// at cold_end, re-recording the buffered observations since then.
	if end-b < coldBufSize && at.Index-b < coldBufSize && d.win.n > 0 && d.win.first.Index <= end {
		d.hist.Reset()
		d.win.sumSq = 0
		d.win.n = 0
		d.win.sbN, d.win.subs.n = 0, 0
		d.scan.blocks, d.scan.fill, d.scan.sumN, d.scan.sumX, d.scan.sumX2 = d.scan.blocks[:0], 0, 0, 0, 0
		for i := end; i <= at.Index; i++ {
			if v := d.cold.v[i-b]; v > 0 {
				x := v * d.scale
				d.hist.Record(x)
				d.win.sumSq += x * x
				q := Point{Index: i, Time: d.cold.at[i-b]}
				if d.cfg.ShiftZ > 0 {
					d.blkAdd(q, x)
				}
				if d.win.n == 0 {
					d.win.first, d.win.clock = q, q.Time
				}
				d.win.n++
				d.subAdd(q, v)
			}
		}
	}
	d.floor = d.cold.end
	d.regime = Warmup
	d.emit(Transition{From: Cold, To: Warmup, At: at, Boundary: d.cold.end, Kind: KindColdEnd})
}

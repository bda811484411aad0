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
		for d.coldCand <= i && (d.coldV[d.coldCand] > lim || !(d.coldV[d.coldCand] > 0)) {
			d.coldCand++
		}
	}
	if i-d.coldCand+1 >= int64(d.cfg.ColdConfirm) || i+1 >= int64(d.cfg.ColdMax) {
		d.endCold(p)
	}
}

func (d *Detector) endCold(at Point) {
	end := d.coldCand
	if end > at.Index {
		end = at.Index
	}
	t := at.Time
	if end < coldBufSize {
		t = d.coldT[end]
	}
	d.coldEnd = Point{Index: end, Time: t}
	d.hasCold = true
	// The cold observations belong to no window: restart the current window
	// at cold_end, re-recording the buffered observations since then.
	if end < coldBufSize && at.Index < coldBufSize && d.wN > 0 && d.wFirst.Index <= end {
		d.hist.Reset()
		d.wSumSq = 0
		d.wN = 0
		d.sbN, d.wSub.n = 0, 0
		d.blocks, d.blockFill, d.sumN, d.sumX, d.sumX2 = d.blocks[:0], 0, 0, 0, 0
		for i := end; i <= at.Index; i++ {
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

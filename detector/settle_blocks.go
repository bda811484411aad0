package detector

import (
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Stage 1 of the settled view: blocks. Consecutive time buckets are joined
// into blocks that end on a multiple of SettleConfig.BlockMin from the
// origin and hold at least SettleConfig.BlockMinN observations (a
// low-rate series gets longer blocks); each block is summarised by the logarithm of its median and of
// its tail: the p99, capped so that at least 5 observations lie above it
// (a quantile of fewer says nothing). Medians and logs make the blocks
// robust to the heavy tails of request latency and put levels on a ratio
// scale (Law & Kelton's batch means, with a median as the batch statistic;
// Tukey's re-expression by logarithms). A trailing stretch too small to be
// a block joins the last block.

// settleBlock is one block of buckets [first, last].
type settleBlock struct {
	first, last int
	start       int64 // Unix ns
	n           int64
	med, tail   float64 // log ms
}

// tailAbove is how many observations must lie above a block's tail quantile.
const tailAbove = 5

// blocks forms the blocks of tb; scratch is a histogram of the buckets'
// geometry that it resets.
func blocks(tb *TimeBuckets, minSpan int64, minN int64, scratch *hdrhistogram.Histogram) []settleBlock {
	var out []settleBlock
	cur := settleBlock{first: -1}
	flush := func(last int) {
		cur.last = last
		out = append(out, cur)
		cur = settleBlock{first: -1}
	}
	for k := 0; k < tb.Len(); k++ {
		b := tb.Bucket(k)
		if b.H == nil || b.H.TotalCount() == 0 {
			continue
		}
		if cur.first < 0 {
			cur.first, cur.start = k, tb.Start(k)
		}
		cur.n += b.H.TotalCount()
		// a block ends in the bucket that reaches a multiple of minSpan
		// from the origin
		end := tb.Start(k) + tb.Width() - tb.Origin()
		if cur.n >= minN && end/minSpan != (end-tb.Width())/minSpan {
			flush(k)
		}
	}
	if cur.first >= 0 {
		if len(out) > 0 {
			// too small to judge on its own: the end of the last block
			out[len(out)-1].n += cur.n
			out[len(out)-1].last = tb.Len() - 1
		} else {
			flush(tb.Len() - 1)
		}
	}
	for i := range out {
		bl := &out[i]
		h := tb.Bucket(bl.first).H
		if bl.last > bl.first {
			scratch.Reset()
			for k := bl.first; k <= bl.last; k++ {
				if b := tb.Bucket(k); b.H != nil {
					scratch.Merge(b.H)
				}
			}
			h = scratch
		}
		bl.med = logMs(h.ValueAtQuantile(50))
		bl.tail = logMs(h.ValueAtQuantile(tailQuantileOf(h.TotalCount())))
	}
	return out
}

// tailQuantileOf is the p99 capped so that tailAbove observations of n lie
// above it.
func tailQuantileOf(n int64) float64 {
	return math.Max(50, math.Min(99, 100*(1-float64(tailAbove)/float64(n))))
}

func logMs(us int64) float64 { return math.Log(float64(max(us, 1)) / 1000) }

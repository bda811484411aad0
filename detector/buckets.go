package detector

import (
	"errors"
	"fmt"
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// TimeBuckets is what the settled view (Settle) reads: a series of
// observations kept as one HDR histogram per time bucket, by the time each
// observation started, so that no sample is stored one by one. Buckets are
// BucketWidth wide from an origin; when an observation falls beyond the
// last of MaxBuckets buckets, neighbouring buckets are merged pairwise and
// the width doubles (as many times as needed), so memory is bounded for
// any run length: at most MaxBuckets histograms of BucketBytes each.
//
// Values are recorded in integer microseconds (the unit of the results'
// .hlog files) with BucketSigDigits significant digits, from 1 µs to 1 h;
// values out of range are clamped and counted (OutOfRange). Each bucket
// also counts requests and failed requests that started in it (Count), for
// the error rate of the iterations the settled view calls steady.
//
// A bucket's histogram is allocated when its first value arrives and
// reused after a merge frees it; Record is index arithmetic otherwise.
// TimeBuckets is not safe for concurrent use; callers synchronize.
type TimeBuckets struct {
	origin  int64 // ns
	width   int64 // ns
	max     int
	b       []Bucket
	free    []*hdrhistogram.Histogram
	n       int64
	early   int64
	late    int64
	last    int64 // the latest time seen within reach (ns)
	seen    bool  // last is set (the first time sets it)
	outside int64
	merges  int
}

// Bucket is one time bucket.
type Bucket struct {
	// H holds the durations of the observations that started in the
	// bucket, in µs; nil when there is none.
	H *hdrhistogram.Histogram
	// Requests and Failed count the requests (of any kind the caller
	// counts) that started in the bucket, and those that failed.
	Requests, Failed int64
	// Marked counts the observations the caller marked (Mark): the
	// extension marks the iterations its online tags called steady, so
	// that the settled view can say how far the online tags were from it.
	Marked int64
	// the least and greatest duration recorded in the bucket (µs), exact
	// where Record and RecordN recorded them (the histogram rounds them to
	// its 2 significant digits: a settled max above every iteration's);
	// valid when H holds a value
	minUs, maxUs int64
	// sumUs is the sum of what the bucket holds (µs), exact where Record
	// and RecordN recorded it (the histogram's mean uses its buckets'
	// middles: a mean above every recorded value)
	sumUs float64
}

// note widens the bucket's exact range to [lo, hi] (µs).
// A bucket's H is set only when a value is recorded in it, so a nil H is
// an empty bucket.
func (b *Bucket) note(lo, hi int64) {
	if b.H == nil {
		b.minUs, b.maxUs = lo, hi
		return
	}
	b.minUs, b.maxUs = min(b.minUs, lo), max(b.maxUs, hi)
}

// Geometry of the bucket histograms and the default bucketing.
const (
	BucketSigDigits    = 2
	bucketHighestUs    = 3_600_000_000 // 1 h
	DefaultBucketWidth = 250_000_000   // ns
	DefaultMaxBuckets  = 256
	// EndpointMaxBuckets bounds the buckets of one endpoint's series
	EndpointMaxBuckets = 64
	minMaxBuckets      = 8
)

// BucketBytes is the memory of one bucket histogram (its counts array).
var BucketBytes = hdrhistogram.New(1, bucketHighestUs, BucketSigDigits).ByteSize()

// NewTimeBuckets returns empty buckets of width ns from origin (Unix ns),
// at most maxBuckets of them (8 or more).
func NewTimeBuckets(origin, width int64, maxBuckets int) (*TimeBuckets, error) {
	if width <= 0 {
		return nil, fmt.Errorf("time buckets: width must be positive, got %d ns", width)
	}
	if maxBuckets < minMaxBuckets {
		return nil, fmt.Errorf("time buckets: at least %d buckets, got %d", minMaxBuckets, maxBuckets)
	}
	return &TimeBuckets{origin: origin, width: width, max: maxBuckets, b: make([]Bucket, 0, maxBuckets)}, nil
}

// NewBucketHistogram returns an empty histogram of the buckets' geometry.
func NewBucketHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, bucketHighestUs, BucketSigDigits)
}

// Origin is the start of the first bucket (Unix ns).
func (tb *TimeBuckets) Origin() int64 { return tb.origin }

// Width is the current bucket width (ns).
func (tb *TimeBuckets) Width() int64 { return tb.width }

// MaxBuckets is the bound on the number of buckets.
func (tb *TimeBuckets) MaxBuckets() int { return tb.max }

// N is the number of values recorded.
func (tb *TimeBuckets) N() int64 { return tb.n }

// Early counts the observations (Record, RecordN, Add) that started before
// the origin: kept in the first bucket.
func (tb *TimeBuckets) Early() int64 { return tb.early }

// Late counts the observations (Record, RecordN, Add) timed further ahead
// of the latest time seen than the run so far and lateGap: kept in the last
// bucket. Counts and marks (Count, Mark, MarkN) are placed alike but not
// counted here: they belong to observations already counted.
func (tb *TimeBuckets) Late() int64 { return tb.late }

// lateGap is the least jump ahead that Late counts (ns): a day, or the
// run so far if longer; a run's timestamps advance with the run. The
// first time is never late (a scenario's endpoint may first be called
// long after the buckets' origin).
const lateGap = int64(24 * time.Hour)

// OutOfRange counts values outside 1 µs..1 h (clamped).
func (tb *TimeBuckets) OutOfRange() int64 { return tb.outside }

// Len is the number of buckets up to the last one used.
func (tb *TimeBuckets) Len() int { return len(tb.b) }

// Bucket returns bucket k (0 <= k < Len()); the caller must not keep it
// across a Record.
func (tb *TimeBuckets) Bucket(k int) *Bucket { return &tb.b[k] }

// Start is the start time of bucket k (Unix ns).
func (tb *TimeBuckets) Start(k int) int64 { return tb.origin + int64(k)*tb.width }

// index returns the bucket of time t, merging buckets until it fits; n
// observations start at t (0 for counts and marks, which belong to
// observations already counted), and those placed in the first bucket
// (before the origin) or the last (implausibly far ahead) are counted.
func (tb *TimeBuckets) index(t, n int64) int {
	if t < tb.origin {
		tb.early += n
		t = tb.origin
	}
	if !tb.seen {
		tb.seen, tb.last = true, t
	}
	if t-tb.last > max(lateGap, tb.last-tb.origin) {
		// a jump ahead of everything seen by more than the run so far
		// (and a day): a bogus timestamp, or a wall clock stepped
		// forward, would merge the whole run into one bucket; kept in
		// the last one
		tb.late += n
		if len(tb.b) == 0 {
			tb.b = append(tb.b, Bucket{})
		}
		return len(tb.b) - 1
	}
	tb.last = max(tb.last, t)
	d := t - tb.origin
	k := d / tb.width
	for k >= int64(tb.max) {
		tb.compact()
		k = d / tb.width
	}
	for int(k) >= len(tb.b) {
		tb.b = append(tb.b, Bucket{})
	}
	return int(k)
}

// compact merges neighbouring buckets pairwise and doubles the width.
func (tb *TimeBuckets) compact() {
	j := 0
	for i := 0; i < len(tb.b); i += 2 {
		a := tb.b[i]
		if i+1 < len(tb.b) {
			b := tb.b[i+1]
			a.Requests += b.Requests
			a.Failed += b.Failed
			a.Marked += b.Marked
			if b.H != nil && b.H.TotalCount() > 0 {
				if a.H == nil || a.H.TotalCount() == 0 || b.minUs < a.minUs {
					a.minUs = b.minUs
				}
				if a.H == nil || a.H.TotalCount() == 0 || b.maxUs > a.maxUs {
					a.maxUs = b.maxUs
				}
				a.sumUs += b.sumUs
			}
			switch {
			case a.H == nil:
				a.H = b.H
			case b.H != nil:
				a.H.Merge(b.H)
				b.H.Reset()
				tb.free = append(tb.free, b.H)
			}
		}
		tb.b[j] = a
		j++
	}
	clear(tb.b[j:])
	tb.b = tb.b[:j]
	tb.width *= 2
	tb.merges++
}

func (tb *TimeBuckets) hist(k int) *hdrhistogram.Histogram {
	b := &tb.b[k]
	if b.H == nil {
		if n := len(tb.free); n > 0 {
			b.H = tb.free[n-1]
			tb.free = tb.free[:n-1]
		} else {
			b.H = NewBucketHistogram()
		}
	}
	return b.H
}

// bucketUs is ms in whole microseconds, clamped to 1 µs..1 h (false when
// clamped). The bounds are tested on the float: converting +Inf or a value
// beyond int64 to an integer is implementation-defined (MinInt64 on amd64,
// which was stored as 1 µs).
func bucketUs(ms float64) (int64, bool) {
	f := math.Round(ms * 1000)
	switch {
	case !(f >= 1): // NaN too
		return 1, false
	case f > bucketHighestUs:
		return bucketHighestUs, false
	}
	return int64(f), true
}

// Record adds one observation that started at t (Unix ns) and lasted ms
// milliseconds.
func (tb *TimeBuckets) Record(t int64, ms float64) {
	us, ok := bucketUs(ms)
	if !ok {
		tb.outside++
	}
	k := tb.index(t, 1)
	tb.b[k].note(us, us)
	tb.b[k].sumUs += float64(us)
	_ = tb.hist(k).RecordValue(us) // within range: cannot fail
	tb.n++
}

// Count adds one request that started at t (Unix ns), failed or not.
func (tb *TimeBuckets) Count(t int64, failed bool) {
	b := &tb.b[tb.index(t, 0)]
	b.Requests++
	if failed {
		b.Failed++
	}
}

// Mark counts one marked observation that started at t (Unix ns).
func (tb *TimeBuckets) Mark(t int64) {
	tb.b[tb.index(t, 0)].Marked++
}

// MarkN counts n marked observations that started at t.
func (tb *TimeBuckets) MarkN(t, n int64) {
	tb.b[tb.index(t, 0)].Marked += n
}

// RecordN adds n observations that started at t (Unix ns) and lasted ms
// milliseconds each (n <= 0 adds none).
func (tb *TimeBuckets) RecordN(t int64, ms float64, n int64) {
	if n <= 0 {
		return
	}
	us, ok := bucketUs(ms)
	if !ok {
		tb.outside += n
	}
	k := tb.index(t, n)
	tb.b[k].note(us, us)
	tb.b[k].sumUs += float64(us) * float64(n)
	_ = tb.hist(k).RecordValues(us, n) // within range: cannot fail
	tb.n += n
}

// Span is what the buckets from a time on hold: merged histogram (µs)
// and counts, and the marks before that time.
type Span struct {
	Stats SettledStats
	// Hist holds the durations (µs) of the buckets from the time on.
	Hist *hdrhistogram.Histogram
	// Marked counts the marks from the time on, MarkedBefore before it;
	// Before the observations before it.
	Marked, MarkedBefore, Before int64
}

// From returns what the buckets that start at or after t (Unix ns) hold;
// the bucket that contains t counts as after when t is its start, before
// otherwise (so a boundary on a bucket start splits exactly).
func (tb *TimeBuckets) From(t int64) Span {
	var sp Span
	h := NewBucketHistogram()
	var lo, hi int64 // the exact range of what h holds
	var sum float64  // and its sum (µs)
	for k := range tb.b {
		b := &tb.b[k]
		if tb.Start(k) < t {
			sp.MarkedBefore += b.Marked
			if b.H != nil {
				sp.Before += b.H.TotalCount()
			}
			continue
		}
		sp.Marked += b.Marked
		sp.Stats.Requests += b.Requests
		sp.Stats.Failed += b.Failed
		if b.H != nil && b.H.TotalCount() > 0 {
			if h.TotalCount() == 0 || b.minUs < lo {
				lo = b.minUs
			}
			if h.TotalCount() == 0 || b.maxUs > hi {
				hi = b.maxUs
			}
			sum += b.sumUs
			h.Merge(b.H)
		}
	}
	sp.Stats.Count = h.TotalCount()
	if sp.Stats.Count > 0 {
		// the histogram's values are its buckets' edges (2 significant
		// digits); the range is exact, and no quantile lies outside it
		ms := func(us int64) float64 { return float64(min(max(us, lo), hi)) / 1000 }
		sp.Stats.Min, sp.Stats.Max = ms(lo), ms(hi)
		sp.Stats.Mean = min(max(sum/float64(sp.Stats.Count), float64(lo)), float64(hi)) / 1000
		// interpolated within their buckets, to the ns (a figure's last
		// digits are no more than the interpolation's)
		var qs [4]float64
		InterpolatedQuantiles(h, []float64{50, 90, 95, 99}, qs[:])
		q := func(us float64) float64 { return math.Round(min(max(us, float64(lo)), float64(hi))*1000) / 1e6 }
		sp.Stats.P50, sp.Stats.P90, sp.Stats.P95, sp.Stats.P99 = q(qs[0]), q(qs[1]), q(qs[2]), q(qs[3])
	}
	sp.Hist = h
	return sp
}

// Add merges a histogram (values in µs, any HDR geometry) and request counts
// into the bucket of time t: loading saved buckets, merging instances.
func (tb *TimeBuckets) Add(t int64, h *hdrhistogram.Histogram, requests, failed int64) {
	var n int64
	if h != nil {
		n = h.TotalCount()
	}
	k := tb.index(t, n)
	b := &tb.b[k]
	b.Requests += requests
	b.Failed += failed
	if h != nil && h.TotalCount() > 0 {
		// a histogram's own range: its values' bucket edges, not exact
		b.note(h.Min(), h.Max())
		b.sumUs += h.Mean() * float64(h.TotalCount())
		tb.hist(k).Merge(h)
		tb.n += h.TotalCount()
	}
}

// errBadBuckets: a saved bucket series that cannot be read back.
var errBadBuckets = errors.New("time buckets: width and bucket count must be positive")

// InterpolatedQuantiles writes h's ps[i]-th percentile (0-100) to out[i],
// in one pass over h's buckets (ps in increasing order), each interpolated
// within the histogram bucket that holds it, as if that bucket's
// observations were spread evenly over its range: the rank p/100 × count
// falls a fraction of the way through the bucket's observations, and the
// value the same fraction of the way through its range (at most the
// bucket's highest value). ValueAtQuantile returns the bucket's highest
// value instead, so that with 2 significant digits a percentile moves in
// steps of 0.4-0.8% (128 µs at 16-33 ms) and repeated runs of a stable
// service report the same figure exactly: a series in which a change-point
// detector sees no variance at all (Otava 0.8.0 reported no change for a
// +15% step between two such constant stretches). 0 for an empty
// histogram; p is clamped to 0-100 (NaN reads as 100).
func InterpolatedQuantiles(h *hdrhistogram.Histogram, ps, out []float64) {
	n := h.TotalCount()
	if n == 0 {
		clear(out[:len(ps)])
		return
	}
	k := 0
	rank := func() float64 {
		p := ps[k]
		if !(p <= 100) { // NaN too
			p = 100
		}
		return max(p, 0) / 100 * float64(n)
	}
	var below int64
	for _, b := range h.Distribution() {
		if b.Count == 0 {
			continue
		}
		for k < len(ps) && float64(below+b.Count) >= rank() {
			f := (rank() - float64(below)) / float64(b.Count)
			out[k] = min(float64(b.From)+f*float64(b.To+1-b.From), float64(b.To))
			k++
		}
		if k == len(ps) {
			return
		}
		below += b.Count
	}
	for ; k < len(ps); k++ {
		out[k] = float64(h.Max())
	}
}

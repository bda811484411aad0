package results

import (
	"math"
	"slices"
)

// DefaultSeriesLimit is how many points an iteration series keeps per
// scenario before it aggregates: every iteration of the first 100k, then
// buckets whose width doubles each time the limit is reached again.
const DefaultSeriesLimit = 100_000

// maxExactBucket bounds the values kept to compute a bucket's exact median;
// wider buckets take the median of their first maxExactBucket iterations.
const maxExactBucket = 256

// SeriesPoint is one iteration (N == 1) or a bucket of N consecutive
// iterations (by arrival order) of a scenario.
type SeriesPoint struct {
	Index int64   // index of the first iteration in the bucket
	EndMs float64 // Unix ms of the last iteration's end
	Min   float32 // ms
	Med   float32 // ms; see IterSeries for how exact it is
	Max   float32 // ms
	N     int32
	// Regime (0 cold, 1 warmup, 2 steady, 3 untagged) of the bucket's
	// majority of iterations.
	Regime uint8
}

// IterSeries is the per-iteration latency series of one scenario, bounded in
// memory: it keeps every iteration up to its limit; at the limit it merges
// adjacent pairs of points (min of mins, max of maxes, the count-weighted
// mean of the two medians: an approximation) and from then on collects
// buckets twice as wide, whose median is exact (up to maxExactBucket
// iterations). Memory is fixed at construction; Add does not allocate.
//
// An IterSeries is not safe for concurrent use; callers synchronize.
type IterSeries struct {
	limit  int
	pts    []SeriesPoint
	width  int32 // iterations per bucket
	total  int64
	cur    SeriesPoint
	vals   []float32 // values of the bucket being filled
	counts [4]int32
	merges int
}

// NewIterSeries returns a series keeping at most limit points (>= 2).
func NewIterSeries(limit int) *IterSeries {
	if limit < 2 {
		limit = 2
	}
	return &IterSeries{limit: limit, pts: make([]SeriesPoint, 0, limit), width: 1, vals: make([]float32, 0, maxExactBucket)}
}

// Add records one finished iteration: its index, regime (0..2, 3 when
// untagged), end time (Unix ms) and duration (ms).
func (s *IterSeries) Add(index int64, regime uint8, endMs, ms float64) {
	if regime > 3 {
		regime = 3
	}
	s.total++
	v := float32(ms)
	if s.width == 1 {
		s.push(SeriesPoint{Index: index, EndMs: endMs, Min: v, Med: v, Max: v, N: 1, Regime: regime})
		return
	}
	c := &s.cur
	if c.N == 0 {
		*c = SeriesPoint{Index: index, Min: v, Max: v}
		s.counts = [4]int32{}
		s.vals = s.vals[:0]
	}
	c.N++
	if endMs > c.EndMs {
		c.EndMs = endMs
	}
	c.Min = min(c.Min, v)
	c.Max = max(c.Max, v)
	s.counts[regime]++
	if len(s.vals) < cap(s.vals) {
		s.vals = append(s.vals, v)
	}
	if c.N >= s.width {
		s.closeBucket()
	}
}

func (s *IterSeries) closeBucket() {
	c := s.cur
	c.Med = median32(s.vals)
	c.Regime = majority(s.counts)
	s.cur = SeriesPoint{}
	s.push(c)
}

func majority(counts [4]int32) uint8 {
	best := uint8(0)
	for i := 1; i < 4; i++ {
		if counts[i] >= counts[best] {
			best = uint8(i)
		}
	}
	return best
}

// median32 returns the median of vals, reordering them: the value a sort
// would give, by selection (linear time; a bucket closes on k6's metrics
// goroutine, where sorting it was a tenth of the per-iteration cost).
func median32(vals []float32) float32 {
	n := len(vals)
	if n == 0 {
		return 0
	}
	hi := selectK(vals, n/2)
	if n%2 == 1 {
		return hi
	}
	// selectK left the n/2 smallest values before index n/2
	return (slices.Max(vals[:n/2]) + hi) / 2
}

// selectK reorders a so that a[k] is the value a sort would put there,
// with no greater value before it and no smaller one after, and returns
// it. Three-way partitions around a median of three: many equal values
// (latencies at a timer's resolution) cost no more than distinct ones.
func selectK(a []float32, k int) float32 {
	lo, hi := 0, len(a)-1
	for lo < hi {
		x, y, z := a[lo], a[lo+(hi-lo)/2], a[hi]
		p := max(min(x, y), min(max(x, y), z))
		lt, i, gt := lo, lo, hi
		for i <= gt {
			switch v := a[i]; {
			case v < p:
				a[lt], a[i] = v, a[lt]
				lt++
				i++
			case v > p:
				a[i], a[gt] = a[gt], v
				gt--
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt - 1
		case k > gt:
			lo = gt + 1
		default:
			return p
		}
	}
	return a[k]
}

func (s *IterSeries) push(p SeriesPoint) {
	if len(s.pts) == s.limit {
		s.compact()
	}
	s.pts = append(s.pts, p)
}

// compact merges adjacent pairs of points and doubles the bucket width.
func (s *IterSeries) compact() {
	n := len(s.pts)
	j := 0
	for i := 0; i+1 < n; i += 2 {
		s.pts[j] = mergePoints(s.pts[i], s.pts[i+1])
		j++
	}
	if n%2 == 1 {
		s.pts[j] = s.pts[n-1]
		j++
	}
	s.pts = s.pts[:j]
	s.width *= 2
	s.merges++
}

func mergePoints(a, b SeriesPoint) SeriesPoint {
	n := a.N + b.N
	p := SeriesPoint{
		Index: a.Index, EndMs: math.Max(a.EndMs, b.EndMs),
		Min: min(a.Min, b.Min), Max: max(a.Max, b.Max), N: n,
		Med:    float32((float64(a.Med)*float64(a.N) + float64(b.Med)*float64(b.N)) / float64(n)),
		Regime: a.Regime,
	}
	if b.N >= a.N {
		p.Regime = b.Regime
	}
	return p
}

// Points returns the points, the bucket being filled included (a copy).
func (s *IterSeries) Points() []SeriesPoint {
	out := make([]SeriesPoint, len(s.pts), len(s.pts)+1)
	copy(out, s.pts)
	if s.cur.N > 0 {
		c := s.cur
		vals := append([]float32(nil), s.vals...)
		c.Med = median32(vals)
		c.Regime = majority(s.counts)
		out = append(out, c)
	}
	return out
}

// Total is the number of iterations added.
func (s *IterSeries) Total() int64 { return s.total }

// Info describes the series for summary.json.
func (s *IterSeries) Info(file string) IterSeriesInfo {
	return seriesInfo(file, s.total, len(s.pts)+boolInt(s.cur.N > 0), int(s.width))
}

func seriesInfo(file string, total int64, points, width int) IterSeriesInfo {
	info := IterSeriesInfo{File: file, Iterations: total, Points: points, BucketWidth: width, Aggregated: width > 1}
	if info.Aggregated {
		info.Note = "aggregated: more iterations than the series limit; each row is a bucket of up to bucket_width " +
			"consecutive iterations with their min, median and max (buckets made by merging pairs carry the " +
			"count-weighted mean of the two medians, an approximation; min, max and counts are exact)"
	}
	return info
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rebound reduces points (sorted) to at most limit by merging pairs, and
// returns the resulting width factor.
func rebound(pts []SeriesPoint, limit int) ([]SeriesPoint, int) {
	factor := 1
	for len(pts) > limit {
		j := 0
		for i := 0; i+1 < len(pts); i += 2 {
			pts[j] = mergePoints(pts[i], pts[i+1])
			j++
		}
		if len(pts)%2 == 1 {
			pts[j] = pts[len(pts)-1]
			j++
		}
		pts = pts[:j]
		factor *= 2
	}
	return pts, factor
}

// Region is a stretch of a scenario's iterations in one regime (for the
// report's shading).
type Region struct {
	Regime    string  `json:"regime"`
	FromIndex int64   `json:"from_index"`
	ToIndex   int64   `json:"to_index"`
	FromMs    float64 `json:"from_ms"`
	ToMs      float64 `json:"to_ms"`
}

// Regions splits points into runs of one regime. Iterations reach the
// metrics engine a little out of order around a transition, so a new region
// starts only where at least confirm consecutive points agree on it.
func Regions(pts []SeriesPoint) []Region {
	const confirm = 3
	var out []Region
	if len(pts) == 0 {
		return out
	}
	name := func(r uint8) string {
		if int(r) < len(Regimes) {
			return Regimes[r]
		}
		return "untagged"
	}
	cur := Region{Regime: name(pts[0].Regime), FromIndex: pts[0].Index, FromMs: pts[0].EndMs}
	curR := pts[0].Regime
	for i := 1; i < len(pts); i++ {
		p := pts[i]
		if p.Regime == curR {
			continue
		}
		ok := true
		for k := i + 1; k < len(pts) && k < i+confirm; k++ {
			if pts[k].Regime != p.Regime {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		cur.ToIndex, cur.ToMs = p.Index, p.EndMs
		out = append(out, cur)
		cur = Region{Regime: name(p.Regime), FromIndex: p.Index, FromMs: p.EndMs}
		curR = p.Regime
	}
	last := pts[len(pts)-1]
	cur.ToIndex, cur.ToMs = last.Index+int64(last.N), last.EndMs
	out = append(out, cur)
	return out
}

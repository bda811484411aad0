package engine

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/metrics"
)

// TestIngestHourFlat drives an hour at 10,000 iterations/s through the
// extension's ingest path, as k6's metrics engine delivers it: 36 M
// iteration_duration samples (a warm-up, then a level with waves) and one
// http_req_duration sample in ten, over three endpoints. Everything the
// extension keeps per run is bounded (series, windows, transitions, time
// buckets, detectors, request rows), so the retained heap stops growing
// once the bounds are reached: under 64 MiB over the start, and within
// 4 MiB between minute 30 and minute 60. Minutes of work under the race
// detector: it runs without it (make test runs it so).
func TestIngestHourFlat(t *testing.T) { //nolint:paralleltest // measures the heap
	if raceEnabled || testing.Short() {
		t.Skip("an hour of samples: run without -race and -short (make test does)")
	}
	rs, registry, builtin := benchRun(t)
	base := registry.RootTagSet().With("scenario", "load").With("phase", "gameplay")
	iterTags := [3]*metrics.TagSet{}
	for i, r := range regimeNames {
		iterTags[i] = base.With(RegimeTag, r)
	}
	var reqTags [3][3]*metrics.TagSet
	for i := range reqTags {
		for j, ep := range []string{"list", "claim", "events"} {
			reqTags[i][j] = iterTags[i].With("endpoint", ep).With("status", "200")
		}
	}
	heap := func() float64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / (1 << 20)
	}
	const (
		perSecond = 10_000
		seconds   = 3600
	)
	rng := rand.New(rand.NewPCG(1, 2))
	it := metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.IterationDuration}}
	rq := metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.HTTPReqDuration}}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	before := heap()
	var at30 float64
	for sec := range seconds {
		// 20 ms falling to 5 ms over the first minute, then 5 ms with a
		// wave of ±10% and a period of 20 s
		level := 5 * (1 + 0.1*math.Sin(2*math.Pi*float64(sec)/20))
		if sec < 60 {
			level *= 1 + 3*float64(60-sec)/60
		}
		regime := 2
		if sec < 60 {
			regime = 1
		}
		for i := range perSecond {
			at := start.Add(time.Duration(sec)*time.Second + time.Duration(i)*(time.Second/perSecond))
			v := level * (1 + 0.2*rng.ExpFloat64())
			it.Tags, it.Time, it.Value = iterTags[regime], at, v
			rs.ingest(sinkIteration, it)
			if i%10 == 0 {
				rq.Tags, rq.Time, rq.Value = reqTags[regime][i%3], at, v*0.8
				rs.ingest(sinkHTTP, rq)
			}
		}
		if sec == seconds/2-1 {
			at30 = heap()
		}
	}
	end := heap()
	t.Logf("36 M iterations and 3.6 M requests in an hour of sample time: heap %.1f MiB at the start, %.1f MiB at 30 min, %.1f MiB at 60 min (+%.1f MiB; %.2f MiB from 30 to 60 min)",
		before, at30, end, end-before, end-at30)
	require.Less(t, end-before, 64.0, "the extension's retained heap after an hour at 10k/s")
	require.Less(t, end-at30, 4.0, "no growth of its own once the bounds are reached")
	st := rs.Scenario("load")
	st.mu.Lock()
	n := st.tagged[0].count + st.tagged[1].count + st.tagged[2].count
	untagged := st.untagged
	st.mu.Unlock()
	require.Equal(t, int64(perSecond*seconds), n, "every iteration counted in one regime")
	require.Zero(t, untagged)
}

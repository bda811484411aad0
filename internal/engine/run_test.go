package engine

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/metrics"
)

// TestTestEndWhileIngesting: k6's TestEnd arrives while the metrics engine
// still delivers the last samples. The steady gate is pushed once per
// scenario, and every iteration is still accounted after it: the first half
// races TestEnd, the second half is delivered after it ended. Run with -race.
func TestTestEndWhileIngesting(t *testing.T) {
	t.Parallel()
	rs, reg := newTestRunState(t)
	ch := make(chan metrics.SampleContainer, 1<<12)
	out := chan<- metrics.SampleContainer(ch)
	rs.samples.Store(&out)
	m := reg.Get(iterationDurationMetric)
	scenarios := []string{"a", "b"}
	const n = 20_000
	started, done := make(chan struct{}), make(chan struct{})
	lateOK := false // written by the ingester before done closes
	go func() {     // k6's metrics engine: one goroutine
		defer close(done)
		base := time.Unix(1_700_000_000, 0)
		for i := range n {
			if i == n/10 {
				close(started)
			}
			if i == n/2 {
				// the second half after TestEnd, whatever the scheduler
				// did with the first (bounded: 10 s)
				for deadline := time.Now().Add(10 * time.Second); !rs.Ended() && time.Now().Before(deadline); {
					runtime.Gosched()
				}
				lateOK = rs.Ended()
			}
			sc := scenarios[i%2]
			tags := reg.RootTagSet().With(scenarioTag, sc).With(RegimeTag, "steady")
			rs.ingest(sinkIteration, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: m, Tags: tags},
				Time: base.Add(time.Duration(i) * time.Millisecond), Value: 5})
		}
	}()
	<-started
	rs.testEnd()
	<-done
	require.True(t, rs.Ended())
	require.True(t, lateOK, "TestEnd had not ended 10 s after it began")

	gates := map[string]int{}
	for len(ch) > 0 {
		for _, s := range (<-ch).GetSamples() {
			if s.Metric.Name == "regime_steady" {
				sc, _ := s.Tags.Get(scenarioTag)
				gates[sc]++
			}
		}
	}
	require.Equal(t, map[string]int{"a": 1, "b": 1}, gates, "one steady gate per scenario")
	rep := rs.Report()
	for _, sc := range scenarios {
		require.EqualValues(t, n/2, rep.Scenarios[sc].Iterations, sc)
	}
}

package engine

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/metrics"
)

// TestIngestMemoryBounded feeds the extension, as k6's metrics engine does,
// 30,000 requests with distinct endpoint values in scope endpoint: the
// request rows and detectors stop at maxEndpoints (100) plus "(other)", so
// the heap grows by about 100 x (144 + 3 x 24.5) KiB, not by 30,000 x
// that (6 GiB): under 40 MiB.
func TestIngestMemoryBounded(t *testing.T) { //nolint:paralleltest // measures the heap
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	rs := newRunState()
	cfg := defaultConfig()
	cfg.Defaults.Scope, cfg.Defaults.Input = scopeEndpoint, inputRequest
	rs.cfg.Store(cfg)
	const n = 30_000
	base := registry.RootTagSet().With(scenarioTag, "load").With("status", "200")
	tags := make([]*metrics.TagSet, n)
	for i := range tags {
		tags[i] = base.With(RegimeTag, regimeNames[i%3]).With("endpoint", fmt.Sprint("ep-", i))
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	t0 := time.Now()
	for i, tg := range tags {
		rs.ingest(sinkHTTP, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.HTTPReqDuration, Tags: tg},
			Time: t0.Add(time.Duration(i) * time.Millisecond), Value: 2 + float64(i%7)/10})
	}
	grown := float64(heap()-before) / (1 << 20)
	st := rs.Scenario("load")
	st.mu.Lock()
	detectors := len(st.scopes)
	st.mu.Unlock()
	lim := rs.bd.endpointLimit("load")
	t.Logf("%d requests with distinct endpoints: heap +%.1f MiB, %d detectors, %d request rows; beyond the cap: %d values (exact %v), %d requests",
		n, grown, detectors, len(rs.bd.cells), lim.Values, lim.ValuesExact, lim.Requests)
	require.Equal(t, defaultMaxEndpoints+1, detectors)
	require.LessOrEqual(t, len(rs.bd.cells), 3*(defaultMaxEndpoints+1))
	require.Less(t, grown, 40.0)
	runtime.KeepAlive(tags)
}

package engine

import (
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/js/common"
	"go.k6.io/k6/v2/metrics"
)

// benchRun is a run state, observed by its results writer as in a run,
// installed on a fresh registry, logging nowhere.
func benchRun(b testing.TB) (*RunState, *metrics.Registry, *metrics.BuiltinMetrics) {
	b.Helper()
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	rs := NewRunState()
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	require.NoError(b, rs.install(registry, logger, common.Events{}))
	return rs, registry, builtin
}

// BenchmarkIngestIteration is the engine's cost per iteration on k6's
// metrics-engine goroutine: the detection sink's work for one
// iteration_duration sample (accounting, detector, results recorder).
func BenchmarkIngestIteration(b *testing.B) {
	rs, registry, builtin := benchRun(b)
	tags := registry.RootTagSet().With("scenario", "load").With("phase", "gameplay").With(RegimeTag, "steady")
	s := metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.IterationDuration, Tags: tags}, Value: 5}
	start := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.Time = start.Add(time.Duration(i) * time.Microsecond)
		s.Value = 5 + float64(i%7)*0.1
		rs.ingest(sinkIteration, s)
	}
}

// BenchmarkIngestRequest is the same for one http_req_duration sample (the
// per phase x regime x endpoint breakdown).
func BenchmarkIngestRequest(b *testing.B) {
	rs, registry, builtin := benchRun(b)
	tags := registry.RootTagSet().With("scenario", "load").With("phase", "gameplay").
		With(RegimeTag, "steady").With("endpoint", "claim").With("status", "200")
	s := metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.HTTPReqDuration, Tags: tags}, Value: 2}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rs.ingest(sinkHTTP, s)
	}
}

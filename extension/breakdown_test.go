package extension

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/metrics"
)

// TestBreakdownSetupTeardownRows: requests made by setup() and teardown()
// carry no scenario tag, only k6's group; they get rows of their own
// instead of one with an empty scenario name.
func TestBreakdownSetupTeardownRows(t *testing.T) {
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	root := registry.RootTagSet().With("name", "http://127.0.0.1/").With("status", "200")
	bd := newBreakdown()
	for _, tags := range []*metrics.TagSet{
		root.With("group", "::setup"),
		root.With("group", "::teardown"),
		root.With("group", "::teardown"),
		root.With("group", "").With("scenario", "load").With("phase", "gameplay").With(regimeTag, "steady"),
		root.With("group", "::custom"), // no scenario, not setup or teardown: kept as it is
	} {
		bd.addLatency(metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.HTTPReqDuration, Tags: tags}, Value: 2}, "http")
	}
	counts := map[string]int64{}
	for k, c := range bd.cells {
		counts[k.scenario] += c.count
	}
	require.Equal(t, map[string]int64{setupRow: 1, teardownRow: 2, "load": 1, "": 1}, counts)
}

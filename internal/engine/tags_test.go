package engine

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/metrics"
)

// TestSampleTags: the values read once per tag set are those the
// breakdown, the detectors and the settled view read before (setup and
// teardown rows, the endpoint tag else k6's name, the failed-request rule),
// a tag set is read once, and the cache stays within tagCacheMax.
func TestSampleTags(t *testing.T) {
	t.Parallel()
	root := metrics.NewRegistry().RootTagSet()
	load := root.With(scenarioTag, "load").With("phase", "gameplay").With(RegimeTag, "steady")
	for _, tc := range []struct {
		name string
		ts   *metrics.TagSet
		want tagValues
		http bool // failed as an HTTP request
		grpc bool // failed as a gRPC request
	}{
		{"http 200 with endpoint", load.With("endpoint", "claim").With("name", "http://x/claim").With("status", "200"),
			tagValues{scenario: "load", hasScenario: true, row: "load", phase: "gameplay", regime: "steady", hasRegime: true,
				endpoint: "claim", endpointTag: "claim", status: "200", code: 200}, false, true},
		{"name when no endpoint tag, 503", load.With("name", "http://x/list").With("status", "503"),
			tagValues{scenario: "load", hasScenario: true, row: "load", phase: "gameplay", regime: "steady", hasRegime: true,
				endpoint: "http://x/list", status: "503", code: 503}, true, true},
		{"no response", load.With("status", "0"),
			tagValues{scenario: "load", hasScenario: true, row: "load", phase: "gameplay", regime: "steady", hasRegime: true,
				status: "0"}, true, false},
		{"setup", root.With("group", "::setup").With("status", "200"),
			tagValues{row: setupRow, status: "200", code: 200}, false, true},
		{"teardown, gRPC OK", root.With("group", "::teardown").With("status", "0"),
			tagValues{row: teardownRow, status: "0"}, true, false},
		{"gRPC unavailable", load.With("status", "14"),
			tagValues{scenario: "load", hasScenario: true, row: "load", phase: "gameplay", regime: "steady", hasRegime: true,
				status: "14", code: 14}, false, true},
	} {
		got := readSampleTags(tc.ts)
		require.Equal(t, tc.want, got.tagValues, tc.name)
		require.Equal(t, tc.http, got.failed("http"), tc.name)
		require.Equal(t, tc.grpc, got.failed("grpc"), tc.name)
	}

	var c tagCache
	a := load.With("endpoint", "a")
	first := c.get(a)
	require.Same(t, first, c.get(load.With("endpoint", "a")), "k6 interns the set: read once")
	require.NotSame(t, first, c.get(load.With("endpoint", "b")))
	for i := range 3 * tagCacheMax {
		ts := load.With("endpoint", fmt.Sprint("ep-", i))
		require.Equal(t, fmt.Sprint("ep-", i), c.get(ts).endpoint)
		if i%256 == 0 || i == 3*tagCacheMax-1 {
			n := 0
			c.m.Range(func(_, _ any) bool { n++; return true })
			require.LessOrEqual(t, n, tagCacheMax)
		}
	}
}

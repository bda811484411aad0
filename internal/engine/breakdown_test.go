package engine

import (
	"fmt"
	"testing"
	"time"

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
		root.With("group", "").With("scenario", "load").With("phase", "gameplay").With(RegimeTag, "steady"),
		root.With("group", "::custom"), // no scenario, not setup or teardown: kept as it is
	} {
		bd.addLatency(metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.HTTPReqDuration, Tags: tags}, Value: 2}, readSampleTags(tags), "http")
	}
	counts := map[string]int64{}
	for k, c := range bd.cells {
		counts[k.scenario] += c.count
	}
	require.Equal(t, map[string]int64{setupRow: 1, teardownRow: 2, "load": 1, "": 1}, counts)
}

// TestConnectionColdStartLeavesOutSetupTeardown: the connections setup()
// and teardown() open (in VUs of their own, before and after the load) are
// no cold start of the load's pool: the phase's last new connection is its
// scenarios', counted from their first request (a teardown 40 s later once
// made it 40 s), and the setup and teardown rows keep theirs.
func TestConnectionColdStartLeavesOutSetupTeardown(t *testing.T) {
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	root := registry.RootTagSet().With("name", "http://127.0.0.1/").With("status", "200")
	t0 := time.Unix(1_700_000_000, 0)
	bd := newBreakdown()
	for _, r := range []struct {
		tags *metrics.TagSet
		at   time.Duration
	}{
		{root.With("group", "::setup"), 0},
		{root.With("group", "").With("scenario", "load").With(RegimeTag, "cold"), time.Second},
		{root.With("group", "").With("scenario", "load").With(RegimeTag, "cold"), 1200 * time.Millisecond},
		{root.With("group", "::teardown"), 40 * time.Second},
	} {
		st := readSampleTags(r.tags)
		s := metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.HTTPReqDuration, Tags: r.tags}, Time: t0.Add(r.at), Value: 2}
		bd.addLatency(s, st, "http")
		s.Metric, s.Value = builtin.HTTPReqConnecting, 1
		bd.addConnect(s, st, false)
	}
	cs := bd.connectionColdStart()
	require.Len(t, cs, 1)
	p := cs[""]
	require.Equal(t, int64(2), p.NewConnections, "the load's two connections only")
	require.NotNil(t, p.LastNewConnectionMs)
	require.InDelta(t, 200, *p.LastNewConnectionMs, 1e-6, "from the load's first request")
	for _, row := range bd.requestReports() {
		require.NotNil(t, row.LastNewConnectionMs, row.Scenario)
		want := map[string]float64{"load": 200, setupRow: 0, teardownRow: 0}[row.Scenario]
		require.InDelta(t, want, *row.LastNewConnectionMs, 1e-6, row.Scenario)
	}
}

// TestBreakdownEndpointCap: a distinct endpoint (or URL) per request made
// one request cell, with its histogram, per value: memory without bound.
// Beyond the scenario's cap the requests share the rows of "(other)".
func TestBreakdownEndpointCap(t *testing.T) {
	t.Parallel()
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	root := registry.RootTagSet().With("scenario", "load").With("status", "200").With(RegimeTag, "steady")
	// each tag set read afresh, and through the run's cache (which keeps
	// the row of a tag set whose endpoint has its own): the same rows
	var cache tagCache
	for name, get := range map[string]func(*metrics.TagSet) *sampleTags{"uncached": readSampleTags, "cached": cache.get} {
		bd := newBreakdown()
		bd.setMaxEndpoints(func(string) int { return 10 })
		for i := range 1000 {
			tags := root.With("name", fmt.Sprintf("http://127.0.0.1/users/%d", i%500))
			s := metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.HTTPReqDuration, Tags: tags}, Value: 2}
			bd.addLatency(s, get(tags), "http")
			s.Metric, s.Value = builtin.HTTPReqConnecting, 1
			bd.addConnect(s, get(tags), false)
		}
		endpoints := map[string]int64{}
		conns := map[string]int64{}
		for k, c := range bd.cells {
			endpoints[k.endpoint] += c.count
			conns[k.endpoint] += c.newConns
		}
		require.Len(t, endpoints, 11, "%s: 10 endpoints and (other)", name)
		require.EqualValues(t, 980, endpoints[otherEndpoint], name)
		require.EqualValues(t, 980, conns[otherEndpoint], name)
		for i := range 10 {
			ep := fmt.Sprintf("http://127.0.0.1/users/%d", i)
			require.EqualValues(t, 2, endpoints[ep], "%s %s", name, ep)
			require.EqualValues(t, 2, conns[ep], "%s %s", name, ep)
		}
		lim := bd.endpointLimit("load")
		require.Equal(t, 490, lim.Values, name)
		require.True(t, lim.ValuesExact, name)
		require.EqualValues(t, 980, lim.Requests, name)
		require.Len(t, lim.Examples, 5, name)
		require.Nil(t, bd.endpointLimit("other-scenario"), name)
	}
}

// TestBreakdownLastNewConnectionPerPhase: when a phase's last new connection
// happened counts from that phase's first request, not the run's: a phase
// that starts 20 s into the run and fills its pool in its first 0.5 s says
// 0.5 s (it said 20.5).
func TestBreakdownLastNewConnectionPerPhase(t *testing.T) {
	registry := metrics.NewRegistry()
	builtin := metrics.RegisterBuiltinMetrics(registry)
	root := registry.RootTagSet().With("scenario", "load").With("status", "200").With(RegimeTag, "steady").
		With("name", "http://127.0.0.1/")
	bd := newBreakdown()
	t0 := time.Unix(1_700_000_000, 0)
	req := func(phase string, at time.Duration, newConn bool) {
		tags := root.With("phase", phase)
		s := metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: builtin.HTTPReqDuration, Tags: tags}, Time: t0.Add(at), Value: 2}
		bd.addLatency(s, readSampleTags(tags), "http")
		if newConn {
			s.Metric, s.Value = builtin.HTTPReqConnecting, 1
			bd.addConnect(s, readSampleTags(tags), false)
		}
	}
	req("warmup", 0, true)
	req("warmup", 3*time.Second, true)
	req("warmup", 10*time.Second, false)
	req("init", 20*time.Second, false)
	req("init", 20*time.Second+500*time.Millisecond, true)
	req("init", 25*time.Second, false)
	phases := bd.connectionColdStart()
	require.InDelta(t, 3000, *phases["warmup"].LastNewConnectionMs, 1e-9)
	require.InDelta(t, 500, *phases["init"].LastNewConnectionMs, 1e-9)
	for _, row := range bd.requestReports() {
		if row.Phase == "init" {
			require.InDelta(t, 500, *row.LastNewConnectionMs, 1e-9)
		}
	}
}

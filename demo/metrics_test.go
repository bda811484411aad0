package demo

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

func parseMetrics(tb testing.TB, text string) map[string]*dto.MetricFamily {
	tb.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(tb, err, text)
	return fams
}

// value returns the sample of family name whose labels include want.
func value(tb testing.TB, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	tb.Helper()
	f, ok := fams[name]
	require.True(tb, ok, "family %s missing", name)
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	tb.Fatalf("no sample of %s with labels %v", name, want)
	return 0
}

func TestMetricsEndpointParsesBack(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	_, srv := newTestServer(t, cfg, newTestMemDB(t, cfg, noSleep))
	for range 3 {
		require.Equal(t, 200, do(t, srv, "GET", "/api/challenges", "").code)
	}
	require.Equal(t, 201, do(t, srv, "POST", "/api/players/p1/goals/initialize", "").code)
	require.Equal(t, 404, do(t, srv, "POST", "/api/players/p2/rewards/claim", `{"challenge_id":"daily-login"}`).code)
	require.Equal(t, 404, do(t, srv, "GET", "/api/random/path/1", "").code)

	r := do(t, srv, "GET", "/metrics", "")
	require.Equal(t, 200, r.code)
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", r.header.Get("Content-Type"))
	fams := parseMetrics(t, r.body)

	require.Equal(t, dto.MetricType_GAUGE, fams["demo_db_pool_total_conns"].GetType())
	require.Equal(t, dto.MetricType_COUNTER, fams["demo_db_pool_acquires_total"].GetType())
	require.Equal(t, dto.MetricType_HISTOGRAM, fams["demo_http_request_duration_seconds"].GetType())
	for _, name := range []string{
		"demo_db_pool_max_conns", "demo_db_pool_idle_conns", "demo_db_pool_in_use_conns", "demo_db_pool_constructing_conns",
		"demo_db_pool_waited_acquires_total", "demo_db_pool_acquire_wait_seconds_total", "demo_db_pool_acquire_timeouts_total",
		"demo_db_pool_acquire_errors_total", "demo_db_pool_new_conns_total", "demo_db_pool_conn_setup_seconds_total",
		"demo_database_info",
	} {
		require.Contains(t, fams, name)
	}
	require.Equal(t, float64(cfg.PoolMax), value(t, fams, "demo_db_pool_max_conns", nil))
	require.Equal(t, 1.0, value(t, fams, "demo_db_pool_total_conns", nil))
	require.Equal(t, 1.0, value(t, fams, "demo_db_pool_new_conns_total", nil))
	require.Equal(t, 1.0, value(t, fams, "demo_database_info", map[string]string{"backend": "simulated"}))
	require.Equal(t, 3.0, value(t, fams, "demo_cache_hits_total", map[string]string{"cache": "challenges"}), "3 lists + 1 claim, 1 miss")
	require.Equal(t, 1.0, value(t, fams, "demo_cache_misses_total", map[string]string{"cache": "challenges"}))
	require.Equal(t, 1.0, value(t, fams, "demo_cache_entries", map[string]string{"cache": "players"}))
	require.Equal(t, 3.0, value(t, fams, "demo_http_requests_total", map[string]string{"method": "GET", "route": "/api/challenges", "code": "200"}))
	require.Equal(t, 1.0, value(t, fams, "demo_http_requests_total", map[string]string{"method": "POST", "route": "/api/players/{id}/goals/initialize", "code": "201"}))
	require.Equal(t, 1.0, value(t, fams, "demo_http_requests_total", map[string]string{"method": "POST", "route": "/api/players/{id}/rewards/claim", "code": "404"}))
	require.Equal(t, 1.0, value(t, fams, "demo_http_requests_total", map[string]string{"method": "GET", "route": "other", "code": "404"}))
	require.Equal(t, 3.0, value(t, fams, "demo_http_request_duration_seconds", map[string]string{"method": "GET", "route": "/api/challenges"}))
}

func TestHistogramBuckets(t *testing.T) {
	t.Parallel()
	var h histogram
	for _, v := range []float64{0.0005, 0.001, 0.003, 7} {
		h.observe(v)
	}
	require.Equal(t, uint64(2), h.counts[0], "le is inclusive")
	require.Equal(t, uint64(1), h.counts[2])
	require.Equal(t, uint64(1), h.counts[len(latencyBuckets)], "out of range goes to +Inf")
	var b strings.Builder
	e := expo{w: newBufWriter(&b)}
	e.family("x_seconds", "histogram", "test")
	e.histogram("x_seconds", &h, "op", `a"b\c`)
	require.NoError(t, e.flush())
	fams := parseMetrics(t, b.String())
	hist := fams["x_seconds"].GetMetric()[0].GetHistogram()
	require.Equal(t, uint64(4), hist.GetSampleCount())
	require.InDelta(t, 7.0045, hist.GetSampleSum(), 1e-9)
	require.Equal(t, `a"b\c`, fams["x_seconds"].GetMetric()[0].GetLabel()[0].GetValue())
	require.Equal(t, uint64(3), hist.GetBucket()[2].GetCumulativeCount())
}

package extension

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

var updateReportGolden = flag.Bool("update-report", false, "rewrite testdata/report_golden.txt")

// goldenRunState is a run state fed through its real detection path with
// two scenarios: "load" judges iterations (a cold start, then steady),
// "api" judges requests per endpoint (one endpoint warms up, one is flat,
// one fails now and then), with TestEnd run.
func goldenRunState(t *testing.T) *runState {
	t.Helper()
	rs, reg := newTestRunState(t)
	tracked, err := reg.NewMetric("golden_items", metrics.Counter)
	require.NoError(t, err)
	cfg, err := parseConfig([]byte(`{"scenarios":{"load":{},"api":{},"idle":{}}}`),
		[]byte(`{"track":["golden_items"],"scenarios":{"api":{"scope":"endpoint","input":"request","maxEndpoints":2}}}`))
	require.NoError(t, err)
	require.NoError(t, rs.setConfig(cfg))
	rs.bd.setMaxEndpoints(func(scenario string) int { return cfg.forScenario(scenario).MaxEndpoints }) // as configure() does
	it, req := reg.Get(iterationDurationMetric), reg.Get(httpReqDurationMetric)
	load := rs.scenario("load")
	load.mu.Lock()
	load.start = time.Unix(1_699_999_999, 500_000_000) // as k6's scenario state gives it
	load.mu.Unlock()
	rs.scenario("idle") // declared, never ran
	rng := rand.New(rand.NewPCG(11, 12))
	base := time.Unix(1_700_000_000, 0)
	for i := range 6000 {
		at := base.Add(time.Duration(i) * 5 * time.Millisecond)
		v := 5 + rng.Float64()*0.5
		regime := "steady"
		if i < 40 {
			v += 80 * math.Exp(-float64(i)/10)
			regime = "cold"
		} else if i < 400 {
			regime = "warmup"
		}
		tags := reg.RootTagSet().With("scenario", "load").With("regime", regime)
		rs.ingest(sinkIteration, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: it, Tags: tags}, Time: at, Value: v})
		for k, ep := range []string{"/warm", "/flat", "/flaky"} {
			w := 2 + rng.Float64()
			if k == 0 {
				w += 20 * math.Exp(-float64(i)/800)
			}
			status := "200"
			if k == 2 && i%97 == 0 {
				status = "500"
			}
			rt := reg.RootTagSet().With("scenario", "api").With("endpoint", ep).With("status", status).
				With("expected_response", fmt.Sprint(status == "200")).With("method", "GET").With("name", ep)
			rs.ingest(sinkHTTP, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: req, Tags: rt}, Time: at, Value: w})
		}
		if i%50 == 0 {
			for _, phase := range []string{"warmup", "gameplay"} {
				tt := reg.RootTagSet().With("scenario", "load").With("phase", phase)
				rs.ingest(sinkTracked, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: tracked, Tags: tt}, Time: at, Value: float64(i % 7)})
			}
		}
		if i%3 == 0 {
			tags := reg.RootTagSet().With("scenario", "api").With("regime", regime)
			rs.ingest(sinkIteration, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: it, Tags: tags}, Time: at, Value: v * 3})
		}
	}
	ch := make(chan metrics.SampleContainer, 1<<16)
	var out chan<- metrics.SampleContainer = ch
	rs.samples.Store(&out)
	rs.testEnd()
	return rs
}

// TestReportGolden pins what the extension hands out about a run: the JS
// summary (as JSON), summary.json as saved, and the InfluxDB summary
// points, by SHA-256, so that a refactor of how they are built shows any
// change. Regenerate with -update-report after a deliberate change.
func TestReportGolden(t *testing.T) {
	rs := goldenRunState(t)
	var lines []string
	add := func(name string, b []byte) {
		lines = append(lines, fmt.Sprintf("%s %x", name, sha256.Sum256(b)))
		if os.Getenv("REPORT_GOLDEN_DUMP") != "" {
			require.NoError(t, os.WriteFile("/tmp/report-golden-"+name, b, 0o644))
		}
	}
	// the JS summary, with its keys in order
	sum, err := rs.summary()
	require.NoError(t, err)
	js, err := json.Marshal(sum)
	require.NoError(t, err)
	var canon any
	require.NoError(t, json.Unmarshal(js, &canon))
	js, err = json.MarshalIndent(canon, "", " ")
	require.NoError(t, err)
	add("summary.js.json", js)

	rec := newRecorder(0)
	run, err := rec.buildRun(rs, "golden", time.Unix(1_700_000_100, 0))
	require.NoError(t, err)
	run.Summary.RunID = "run"
	run.Summary.Environment = results.Environment{}
	sj, err := json.MarshalIndent(run.Summary, "", " ")
	require.NoError(t, err)
	add("summary.json", sj)

	o := &influxOutput{rs: rs}
	var lp []string
	for _, p := range o.summaryPoints(time.Unix(1_700_000_200, 0)) {
		lp = append(lp, write.PointToLineProtocol(p, time.Nanosecond))
	}
	add("influx.lp", []byte(strings.Join(lp, "")))

	got := strings.Join(lines, "\n") + "\n"
	const file = "testdata/report_golden.txt"
	if *updateReportGolden {
		require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

// TestHistogramUnits: the histograms the extension keeps count in the
// results' unit, so copyHist shares their HDR counts as they are; one in
// another unit is refused, not copied with its values scaled wrong.
func TestHistogramUnits(t *testing.T) {
	t.Parallel()
	require.Equal(t, results.UnitMs, newDurationHistogram().Lowest())
	b := newBreakdown()
	require.Equal(t, results.UnitMs, b.cell(breakdownKey{scenario: "s"}).hist.Lowest())
	h := newDurationHistogram()
	h.Record(12.5)
	got := copyHist(h)
	require.InDelta(t, 12.5, got.Quantile(50), 0.05)
	other, err := detector.NewHistogram(1, 1e6, 3) // seconds, say
	require.NoError(t, err)
	require.PanicsWithValue(t, "copyHist: a histogram in units of 1 ms, not the results' 0.001 ms", func() { copyHist(other) })
}

package engine_test

// An external test: the InfluxDB summary points come from internal/influxdb,
// which imports this package (export_test.go gives it the run state).

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/engine"
	"github.com/xk6-regime/xk6-regime/internal/influxdb"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

var updateReportGolden = flag.Bool("update-report", false, "rewrite testdata/report_golden.txt")

// TestReportGolden pins what the engine hands out about a run: the report's
// JSON (what regime.summary() gives JavaScript, decoded), summary.json as
// saved, and the InfluxDB summary points, by SHA-256, so that a refactor of
// how they are built shows any change. Regenerate with -update-report after
// a deliberate change.
func TestReportGolden(t *testing.T) {
	rs := engine.GoldenRunState(t)
	var lines []string
	add := func(name string, b []byte) {
		lines = append(lines, fmt.Sprintf("%s %x", name, sha256.Sum256(b)))
		if os.Getenv("REPORT_GOLDEN_DUMP") != "" {
			require.NoError(t, os.WriteFile("/tmp/report-golden-"+name, b, 0o644))
		}
	}
	// the JS summary: the report's JSON, with its keys in order
	js, err := json.Marshal(rs.Report())
	require.NoError(t, err)
	var canon any
	require.NoError(t, json.Unmarshal(js, &canon))
	js, err = json.MarshalIndent(canon, "", " ")
	require.NoError(t, err)
	add("summary.js.json", js)

	run, err := engine.BuildRun(rs, "golden", time.Unix(1_700_000_100, 0))
	require.NoError(t, err)
	run.Summary.RunID = "run"
	run.Summary.Environment = results.Environment{}
	sj, err := json.MarshalIndent(run.Summary, "", " ")
	require.NoError(t, err)
	add("summary.json", sj)

	// summary.json and summary() agree to the last bit (every duration of
	// the golden run is within the histograms' range): the saved
	// distributions are clones of the histograms the report reads, not
	// rebuilt from a mean.
	rep := rs.Report()
	for name, sc := range rep.Scenarios {
		saved := run.Summary.Scenarios[name]
		require.NotNil(t, saved, name)
		for rg, d := range sc.Regimes {
			require.Equal(t, d.Count, saved.Regimes[rg].Count, "%s %s count", name, rg)
			require.Equal(t, d.SumMs, saved.Regimes[rg].SumMs, "%s %s sum_ms", name, rg)
		}
		if sc.ColdStart.ExcessMs != nil {
			require.Equal(t, *sc.ColdStart.ExcessMs, *saved.ColdStart.ExcessMs, "%s excess_ms", name)
		}
	}

	// the points of an output that dropped and wrote nothing
	var lp []string
	for _, p := range influxdb.SummaryPoints(rs.Report(), influxdb.Counts{}, time.Unix(1_700_000_200, 0)) {
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

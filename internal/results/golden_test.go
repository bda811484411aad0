package results

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/latency"
)

var updateGolden = flag.Bool("update", false, "write testdata/golden.txt from this code")

// TestGoldenResults pins every user-visible output of this package to what
// it was when the golden file was written: two fixed synthetic runs, each
// written as a results folder (summary.json, windows.csv, the series, the
// HDR logs, report.html) and read back; their merge written the same way;
// the comparison of the two with budgets; the text table. A refactoring
// that changes a byte of any of them fails here, naming the file
// (go test -run TestGoldenResults -update ./internal/results/ after a
// change of output that is meant).
func TestGoldenResults(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "base"), filepath.Join(root, "cand")}
	runs := make([]*Run, 2)
	for i, seed := range []uint64{11, 12} {
		r := synthRun(6000, DefaultSeriesLimit, seed)
		widenRun(r, seed)
		r.Summary.Scenarios["load"].Settled = settleSeries(r.Series["load"].Points, r.Summary.Started.UnixNano(), false)
		require.NoError(t, r.WriteDir(dirs[i], WriteOptions{Report: true}))
		var err error
		runs[i], err = LoadDir(dirs[i])
		require.NoError(t, err)
	}
	merged, err := Merge(runs, []string{"base", "cand"})
	require.NoError(t, err)
	require.NoError(t, merged.WriteDir(filepath.Join(root, "merged"), WriteOptions{Report: true}))
	budgets, err := ParseBudgets("p95=+5%,p99_9=+10%,errors=+0.001,ttss=+20%,settled_p50=+1%,cold_start=+1")
	require.NoError(t, err)
	cand := runs[1].Summary
	cand.Scenarios["load"].TTSSMs = nil // a figure the candidate lacks
	cmp := Compare(runs[0].Summary, cand, budgets)
	rules, err := ParseLimits("p95<6,p99<9,ttss<20000,error_rate<0.01")
	require.NoError(t, err)
	gate, err := JudgeSettled(runs[0].Summary, rules, nil, "")
	require.NoError(t, err)
	hist, err := BuildHistory([]*Summary{runs[0].Summary, runs[1].Summary}, dirs, HistoryOptions{KeepMissing: true})
	require.NoError(t, err)
	histCSV, err := hist.CSV()
	require.NoError(t, err)
	// the profile of five runs of a service that warms up for 8-12 s
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	var in []ProfileInput
	for i, w := range []float64{8, 9, 10, 11, 12} {
		in = append(in, profileRun(rng, string(rune('a'+i)), t0.Add(time.Duration(i)*time.Minute), 60, w, 0.1))
	}
	prof, err := BuildProfile(in, ProfileOptions{RateTolerance: 0.2})
	require.NoError(t, err)
	prof.Created = time.Time{} // the time it was built
	profJSON, err := json.Marshal(prof.Rounded())
	require.NoError(t, err)
	outputs := map[string][]byte{
		"compare.txt":  []byte(cmp.Text("base", "cand") + "\n" + strings.Join(cmp.Failures, "\n")),
		"text.txt":     []byte(TextTable(runs[0].Summary)),
		"gate.txt":     []byte(gate.Text()),
		"history.csv":  histCSV,
		"profile.json": profJSON,
		"profile.txt":  []byte(prof.Text()),
		"profile.svg":  []byte(prof.SVG()),
	}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(root, path)
		outputs[filepath.ToSlash(rel)] = b
		return err
	}))
	names := make([]string, 0, len(outputs))
	for n := range outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	var got strings.Builder
	for _, n := range names {
		// the folders are temporary: their paths are not part of the output
		b := bytes.ReplaceAll(outputs[n], []byte(root), []byte("ROOT"))
		fmt.Fprintf(&got, "%x  %s\n", sha256.Sum256(b), n)
	}
	golden := filepath.Join("testdata", "golden.txt")
	if *updateGolden {
		require.NoError(t, os.WriteFile(golden, []byte(got.String()), 0o644))
		return
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "no golden file: go test -run TestGoldenResults -update ./internal/results/")
	require.Equal(t, string(want), got.String(), "an output changed (lines name the files; -update if meant)")
}

// widenRun gives a synthetic run more request rows than synthRun's one
// key (phases, endpoints, a second protocol, a name of no regime), added
// out of order, and a tracked metric, so that the outputs pin how rows are
// ordered, merged and compared.
func widenRun(r *Run, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 9))
	t0 := float64(r.Summary.Started.UnixMilli())
	keys := []struct{ phase, endpoint, proto, regime string }{
		{"main", "post /y", "http", "steady"}, {"init", "get /x", "grpc", "warmup"}, {"main", "post /y", "http", "cold"},
		{"init", "", "http", "steady"}, {"init", "get /x", "grpc", "steady"}, {"main", "get /x", "http", ""},
	}
	for i, k := range keys {
		row := &RequestRow{Scenario: "load", Phase: k.phase, Endpoint: k.endpoint, Protocol: k.proto, Regime: k.regime}
		row.Errors, row.Status5xx, row.NewConnections = int64(i), int64(i/2), int64(3-i/2)
		h := latency.New(600_000, 2)
		for j := range 200 {
			v := 2 + float64(i) + rng.ExpFloat64()
			record(h, v, t0+float64(j)*100, t0+float64(j)*100+v)
		}
		r.Summary.Requests = append(r.Summary.Requests, row)
		r.Req[row.Key()] = h
	}
	r.Summary.Tracked = map[string]map[string]*TrackedCell{
		"claims": {"main": {Type: "counter", Count: 10 + int64(seed), Sum: 42, Last: 3, Max: 7}},
		"queue":  {"init": {Type: "gauge", Count: 5, Sum: 12.5, Last: float64(seed), Max: 4}},
	}
	r.Finalize()
}

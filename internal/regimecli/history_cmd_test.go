package regimecli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// TestHistoryCommand: history reads run folders and folders of them
// (skipping hidden ones: a .partial-* folder being written), writes the CSV
// to stdout or --out, names the runs it leaves out, and exits 2 on bad
// input, naming it.
func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	place := func(name string, edit func(*results.Summary)) string {
		src := summaryDir(t, edit)
		dst := filepath.Join(parent, name)
		require.NoError(t, os.MkdirAll(dst, 0o755))
		b, err := os.ReadFile(filepath.Join(src, results.SummaryFile))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, results.SummaryFile), b, 0o600))
		return dst
	}
	a := place("a", withSettled(true, false))
	place("b", withSettled(true, false))
	place(".partial-c", withSettled(true, false))
	require.NoError(t, os.MkdirAll(filepath.Join(parent, "not-a-run"), 0o755))
	unsettled := summaryDir(t, withSettled(false, false))
	interrupted := summaryDir(t, func(s *results.Summary) {
		withSettled(true, true)(s)
		s.End = &results.RunEnd{Status: results.EndInterrupted, Signal: "SIGINT"}
	})
	other := summaryDir(t, func(s *results.Summary) {
		withSettled(true, false)(s)
		s.Scenarios["browse"] = s.Scenarios["load"]
	})

	code, out := runRegime(t, "history", parent)
	require.Equal(t, 0, code, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, "a header and the two runs (not .partial-c): %s", out)
	require.True(t, strings.HasPrefix(lines[0], "time,label,run_id,dir,load.steady_p50_ms,"), lines[0])
	require.Contains(t, lines[0], "load[get].steady_p95_ms")

	file := filepath.Join(t.TempDir(), "history.csv")
	code, out = runRegime(t, "history", "--out", file, a, unsettled)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "history: left out "+unsettled+": no load.steady_p50_ms")
	require.Contains(t, out, "(load: the level drifts by +60%)")
	require.Contains(t, out, "1 runs, ")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(string(b)), "\n"), 2)

	// alone, a run without a settled steady state has the columns it has
	code, out = runRegime(t, "history", unsettled)
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "time,label,run_id,dir,load.online_ttss_ms,load.cold_start_ms,load.relapses\n"), out)
	code, out = runRegime(t, "history", "--keep-incomplete", interrupted)
	require.Equal(t, 0, code, out)

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"twice", []string{"history", parent, a}, "given twice"},
		{"no runs", []string{"history", filepath.Join(parent, "not-a-run")}, "holds no summary.json, nor do its folders"},
		{"missing", []string{"history", filepath.Join(parent, "nope")}, "nope"},
		{"nothing left", []string{"history", interrupted}, "no run left to write (1 left out)"},
		{"other script", []string{"history", a, other}, "has browse, load: the runs of a history must come from one script"},
		{"no args", []string{"history"}, "requires at least 1 arg"},
	} {
		code, out := runRegime(t, tc.args...)
		require.Equal(t, 2, code, "%s: %s", tc.name, out)
		require.Contains(t, out, tc.want, tc.name)
	}
}

// TestProfileCommand: profile writes profile.json and the picture from
// three runs, refuses fewer or a missing --out with exit 2, and writes
// nothing when it refuses.
func TestProfileCommand(t *testing.T) {
	t.Parallel()
	var runs []string
	for i := range 3 {
		dir := summaryDir(t, func(s *results.Summary) {
			withSettled(true, false)(s)
			s.RunID = fmt.Sprint("r", i)
			s.Scenarios["load"].Iterations = 3000
			s.Scenarios["load"].Settled.AtMs = 1e12 + 8000
		})
		var b strings.Builder
		b.WriteString("scenario,endpoint,seq,first_index,last_index,first_ms,last_ms,n,median_ms,tail_ms,tail_quantile,drift,stable,regime,instance,settled\n")
		for k := range 30 {
			m := 5.0
			if k < 8 {
				m = 20 - float64(k)*15/8
			}
			fmt.Fprintf(&b, "load,,%d,%d,%d,%d,%d,100,%g,%g,99.9,0,true,steady,0,\n", k, k*100, k*100+99, int64(1e12)+int64(k)*1000, int64(1e12)+int64(k)*1000+999, m, 2*m)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, results.WindowsFile), []byte(b.String()), 0o600))
		runs = append(runs, dir)
	}
	out := filepath.Join(t.TempDir(), "p.json")
	code, txt := runRegime(t, append([]string{"profile", "--out", out}, runs...)...)
	require.Equal(t, 0, code, txt)
	require.Contains(t, txt, "warm-up end (settled boundary): median 8.0 s, 8.0-8.0 s over 3 runs")
	require.FileExists(t, out)
	svg, err := os.ReadFile(strings.TrimSuffix(out, ".json") + ".svg")
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(svg), `class="run"`))

	// compare --profile fails a run of another load, naming the rates:
	// the same windows with 2.5 times the iterations
	fast := t.TempDir()
	for _, name := range []string{results.SummaryFile, results.WindowsFile} {
		b, err := os.ReadFile(filepath.Join(runs[0], name))
		require.NoError(t, err)
		if name == results.SummaryFile {
			b = []byte(strings.Replace(string(b), `"iterations":3000`, `"iterations":7500`, 1))
			require.Contains(t, string(b), `"iterations":7500`)
		}
		require.NoError(t, os.WriteFile(filepath.Join(fast, name), b, 0o600))
	}
	code, txt = runRegime(t, "compare", "--profile", out, fast)
	require.Equal(t, 1, code, txt)
	require.Contains(t, txt, "FAILED scenario load ran 250.0 iterations/s, the profile's runs 100.0 (more than 20% apart): another load")
	code, txt = runRegime(t, "compare", "--profile", out, runs[0])
	require.NotEqual(t, 2, code, "a run of the profile's load is judged: %s", txt)
	require.NotContains(t, txt, "another load", "a run of the profile's load")

	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"two runs", append([]string{"profile", "--out", filepath.Join(dir, "x.json")}, runs[:2]...), "2 run(s); a profile needs at least 3"},
		{"no out", append([]string{"profile"}, runs...), "--out FILE is required"},
		{"svg is out", append([]string{"profile", "--out", filepath.Join(dir, "x.svg")}, runs...), "are the same file"},
		{"bad tolerance", append([]string{"profile", "--out", filepath.Join(dir, "x.json"), "--rate-tolerance", "-1"}, runs...), "--rate-tolerance must be a finite share >= 0"},
		{"NaN tolerance", append([]string{"profile", "--out", filepath.Join(dir, "x.json"), "--rate-tolerance", "NaN"}, runs...), "got NaN"},
		{"svg spelt otherwise", append([]string{"profile", "--out", filepath.Join(dir, "x.json"), "--svg", dir + "/./x.json"}, runs...), "are the same file"},
		{"out in a run folder", append([]string{"profile", "--out", filepath.Join(runs[0], "series", "p.json")}, runs...), "lies inside the results folder"},
		{"history out in a run folder", append([]string{"history", "--out", filepath.Join(runs[0], "summary.json")}, runs...), "lies inside the results folder"},
		{"report over the series", []string{"report", runs[0], "--out", filepath.Join(runs[0], "series", "x.csv")}, "where only its report.html may be written"},
	} {
		code, txt := runRegime(t, tc.args...)
		require.Equal(t, 2, code, "%s: %s", tc.name, txt)
		require.Contains(t, txt, tc.want, tc.name)
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "nothing written when refused")

	// a folder that merely holds a summary.json (k6's --summary-export) is
	// no results folder: a profile may be written below it
	plain := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(plain, "summary.json"), []byte("{}"), 0o600))
	code, txt = runRegime(t, append([]string{"profile", "--out", filepath.Join(plain, "p.json")}, runs...)...)
	require.Equal(t, 0, code, txt)
}

// TestHistoryRareEndpoint: an endpoint that one run alone settled (an
// interrupted run, or one that called it) no longer leaves every other run
// out: the columns are the kept runs', and an endpoint's that fewer than
// half of them have is left out and named.
func TestHistoryRareEndpoint(t *testing.T) {
	t.Parallel()
	withAdmin := func(s *results.Summary) {
		withSettled(true, false)(s)
		ttss := 1000.0
		s.Scenarios["load"].Settled.Endpoints["/admin"] = &results.Settled{Steady: true, Class: "flat", TTSSMs: &ttss,
			Stats: &results.SettledStats{Count: 10, P50Ms: 3, P95Ms: 4, P99Ms: 5}}
	}
	runs := []string{summaryDir(t, withSettled(true, false)), summaryDir(t, withSettled(true, false)), summaryDir(t, withSettled(true, false))}
	interrupted := summaryDir(t, func(s *results.Summary) {
		withAdmin(s)
		s.End = &results.RunEnd{Status: results.EndInterrupted, Signal: "SIGINT"}
	})
	code, out := runRegime(t, append([]string{"history"}, append(runs, interrupted)...)...)
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, "/admin", "the interrupted run adds no column")
	require.Equal(t, 3, strings.Count(out, "\n")-1-strings.Count(out, "history: "), "three rows: %s", out)

	code, out = runRegime(t, append([]string{"history"}, append(runs, summaryDir(t, withAdmin))...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "history: left out the column load[/admin].steady_p50_ms: only 1 of 4 runs call the endpoint")
	require.NotContains(t, out, "history: left out /", "no run left out")
}

// TestHistoryApproximateTail: a merged folder whose series points held
// several iterations has an understated tail: its run is left out of the
// tail columns' history (named, with why), not written with a false drop.
func TestHistoryApproximateTail(t *testing.T) {
	t.Parallel()
	approx := summaryDir(t, func(s *results.Summary) {
		withSettled(true, false)(s)
		s.Scenarios["load"].Settled.Approximate = true
	})
	runs := []string{summaryDir(t, withSettled(true, false)), summaryDir(t, withSettled(true, false)), approx}
	code, out := runRegime(t, append([]string{"history"}, runs...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "history: left out "+approx+": no load.steady_p95_ms, load.steady_p99_ms")
	require.Contains(t, out, "a merged folder's approximate view, whose tail is understated")
}

package results

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// editSummary writes dir's summary.json after edit changed its generic form.
func editSummary(t *testing.T, dir string, edit func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, SummaryFile)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	edit(m)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, b, 0o600))
}

// useAll runs what report, merge and compare do with a folder.
func useAll(dir string) error {
	r, err := LoadDir(dir)
	if err != nil {
		return err
	}
	if err := r.Report(io.Discard); err != nil {
		return err
	}
	_ = TextTable(r.Summary)
	b, _ := ParseBudgets("p95=+10%,errors=+0.01,ttss=+20%")
	_ = Compare(r.Summary, r.Summary, b).Text("a", "b")
	m, err := Merge([]*Run{r, r}, []string{dir, dir})
	if err != nil {
		return err
	}
	return m.Report(io.Discard)
}

// TestNullEntriesAreErrors: null scenarios, request rows, phases and tracked
// cells made report, merge and compare dereference nil; file references
// outside the folder were followed. Each is now an error naming the entry.
func TestNullEntriesAreErrors(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	require.NoError(t, synthRun(2000, DefaultSeriesLimit, 11).WriteDir(src, WriteOptions{}))
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"null scenario", func(m map[string]any) { m["scenarios"].(map[string]any)["api"] = nil }, "scenarios.api is null"},
		{"null request row", func(m map[string]any) { m["requests"] = append(m["requests"].([]any), nil) }, "requests[3] is null"},
		{"null phase", func(m map[string]any) { m["connection_cold_start"].(map[string]any)["main"] = nil }, "connection_cold_start.main is null"},
		{"null tracked cell", func(m map[string]any) { m["tracked"] = map[string]any{"pool": map[string]any{"main": nil}} }, "tracked.pool.main is null"},
		{"null endpoint", func(m map[string]any) {
			m["scenarios"].(map[string]any)["load"].(map[string]any)["endpoints"] = map[string]any{"get": nil}
		}, "scenarios.load.endpoints.get is null"},
		{"hlog outside the folder", func(m map[string]any) {
			m["requests"].([]any)[0].(map[string]any)["hlog"] = "../../etc/passwd"
		}, `requests[0].hlog is "../../etc/passwd"`},
		{"series outside the folder", func(m map[string]any) {
			m["series"].(map[string]any)["iterations"].(map[string]any)["load"].(map[string]any)["file"] = "/etc/passwd"
		}, `series.iterations.load.file is "/etc/passwd"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
			editSummary(t, dir, tc.edit)
			var err error
			require.NotPanics(t, func() { err = useAll(dir) })
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, filepath.Join(dir, SummaryFile))
		})
	}
}

// TestCompareNeverPassesOnMissingData: a budget passes only on figures both
// runs have.
func TestCompareNeverPassesOnMissingData(t *testing.T) {
	t.Parallel()
	budgets, err := ParseBudgets("p95=+10%,errors=+0.01")
	require.NoError(t, err)
	base := func() *Summary { return synthRun(3000, DefaultSeriesLimit, 4).Summary }
	for _, tc := range []struct {
		name    string
		cand    func(s *Summary)
		base    func(s *Summary)
		budgets string
		want    []string // in the failures
	}{
		{"no scenarios and no requests at all", func(s *Summary) {
			s.Scenarios, s.Requests = map[string]*Scenario{}, nil
		}, nil, "", []string{"scenario load missing in candidate"}},
		{"candidate never reached steady state", func(s *Summary) {
			sc := s.Scenarios["load"]
			sc.TTSSMs, sc.SteadyStart, sc.Steady = nil, nil, false
			sc.Regimes["steady"] = &Dist{}
			var rows []*RequestRow
			for _, r := range s.Requests {
				if r.Regime != "steady" {
					rows = append(rows, r)
				}
			}
			s.Requests = rows
		}, nil, "", []string{"candidate never reached steady state in load"}},
		{"candidate reached steady state and lost it: its steady-tagged figures are not judged", func(s *Summary) {
			s.Scenarios["load"].Steady, s.Scenarios["load"].Relapses = false, 1
		}, nil, "", []string{"iteration load p95: the candidate's steady state was reached but not held in load (relapses: 1)",
			"request main/get /x/load/http p95: the candidate's steady state was reached but not held"}},
		{"metric missing for one endpoint", func(s *Summary) {
			s.Requests[2].Endpoint = "other"
		}, nil, "", []string{"request main/get /x/load/http p95", "missing in candidate"}},
		{"neither run reached steady state: ttss judged nothing", func(s *Summary) {
			s.Scenarios["load"].TTSSMs = nil
		}, func(s *Summary) { s.Scenarios["load"].TTSSMs = nil }, "ttss=+20%", []string{"no figure in either run"}},
		{"only the candidate has the figure: not judged, and nothing else was", func(s *Summary) {}, func(s *Summary) {
			s.Scenarios["load"].TTSSMs = nil
		}, "ttss=+20%", []string{"budget ttss=+20% judged no figure"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, x := base(), base()
			if tc.base != nil {
				tc.base(b)
			}
			tc.cand(x)
			bud := budgets
			if tc.budgets != "" {
				var err error // the subtests run in parallel: not the outer err
				bud, err = ParseBudgets(tc.budgets)
				require.NoError(t, err)
			}
			c := Compare(b, x, bud)
			txt := c.Text("base", "cand")
			require.True(t, c.Failed(), txt)
			for _, w := range tc.want {
				require.Contains(t, strings.Join(c.Failures, "\n"), w, txt)
			}
			require.NotContains(t, txt, "no budget exceeded")
		})
	}
	c := Compare(base(), base(), budgets)
	require.False(t, c.Failed(), c.Text("a", "a"))
}

func TestCheckBaselineAndEndText(t *testing.T) {
	t.Parallel()
	s := synthRun(500, DefaultSeriesLimit, 6).Summary
	require.NoError(t, CheckBaseline(s), "files without End that are not marked aborted")
	s.End = &RunEnd{Status: EndCompleted}
	require.NoError(t, CheckBaseline(s))
	code := 105
	s.End = &RunEnd{Status: EndInterrupted, Signal: "SIGINT", ExitCode: &code}
	require.ErrorContains(t, CheckBaseline(s), "interrupted by signal SIGINT")
	require.Contains(t, TextTable(s), "RUN ENDED EARLY: interrupted by signal SIGINT: the figures cover only the part that ran (k6 exit status 105)")
	var b strings.Builder
	run := synthRun(500, DefaultSeriesLimit, 6)
	run.Summary.End = s.End
	require.NoError(t, run.Report(&b))
	require.Contains(t, b.String(), `<p class="end end-incomplete" id="run-end"><b>Run ended:</b> interrupted by signal SIGINT`)
	require.Contains(t, Compare(run.Summary, run.Summary, nil).Text("a", "b"), "NOTE: the candidate run did not complete")
}

// TestSaveNeverOverwrites: a taken name gets a new run ID; WriteNew refuses
// an existing folder; a failed write leaves no folder, not even a partial one.
func TestSaveNeverOverwrites(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	run := synthRun(500, DefaultSeriesLimit, 8)
	taken := filepath.Join(parent, "synth")
	require.NoError(t, os.Mkdir(taken, 0o755))
	dir, err := run.Save(parent, WriteOptions{Report: true}, map[string]string{"k6.json": "{}"})
	require.NoError(t, err)
	require.NotEqual(t, taken, dir)
	entries, err := os.ReadDir(taken)
	require.NoError(t, err)
	require.Empty(t, entries, "the taken folder is untouched")
	s, err := ReadSummary(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Base(dir), s.RunID)

	require.ErrorIs(t, run.WriteNew(taken, WriteOptions{}, nil), ErrExists)
	require.ErrorIs(t, run.WriteNew(dir, WriteOptions{}, nil), ErrExists)
	require.ErrorContains(t, run.WriteNew(filepath.Join(parent, "new"), WriteOptions{}, map[string]string{"summary.json": "x"}), "reserved")

	file := filepath.Join(parent, "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = run.Save(file, WriteOptions{}, nil)
	require.Error(t, err)
	entries, err = os.ReadDir(parent)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), PartialPrefix), "no partial folder left: %s", e.Name())
	}
}

// TestWriteNewRemovesPartialOnError: an error midway (here: an extra file
// that cannot be written) removes the temporary folder.
func TestWriteNewRemovesPartialOnError(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	run := synthRun(500, DefaultSeriesLimit, 8)
	err := run.WriteNew(filepath.Join(parent, "x"), WriteOptions{}, map[string]string{strings.Repeat("n", 300): "too long a name"})
	require.Error(t, err)
	entries, rerr := os.ReadDir(parent)
	require.NoError(t, rerr)
	require.Empty(t, entries, "neither the folder nor a partial one")
}

func TestCheckMergePaths(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(a, link))
	require.NoError(t, CheckMergePaths([]string{a, b}, filepath.Join(t.TempDir(), "out")))
	err := CheckMergePaths([]string{a, b, a + "/.", link}, a)
	require.ErrorContains(t, err, "is the same folder as input "+a)
	require.ErrorContains(t, err, "input "+link+" is the same folder as input "+a)
	require.ErrorContains(t, err, "--out "+a+" is input "+a)
	require.ErrorIs(t, CheckMergePaths([]string{a}, b), ErrExists)
	require.ErrorContains(t, CheckMergePaths([]string{filepath.Join(a, "nope")}, filepath.Join(b, "o")), "no such file")
	require.ErrorContains(t, CheckMergePaths([]string{a, b}, filepath.Join(b, "sub")), "--out "+filepath.Join(b, "sub")+" lies inside input "+b)
	require.ErrorContains(t, CheckMergePaths([]string{link, b}, filepath.Join(a, "sub", "deeper")), "lies inside input "+link, "through a link")
}

// TestMergeRefusesOtherTests: inputs with no scenario in common are no
// instances of one test; inputs sharing one may differ (an instance whose
// share of a small scenario was no VU).
func TestMergeRefusesOtherTests(t *testing.T) {
	t.Parallel()
	run := func(id string, scenarios ...string) *Run {
		s := &Summary{RunID: id, Scenarios: map[string]*Scenario{}}
		for _, sc := range scenarios {
			s.Scenarios[sc] = &Scenario{}
		}
		return &Run{Summary: s}
	}
	_, err := Merge([]*Run{run("a", "gameplay", "warmup"), run("b", "live")}, []string{"A", "B"})
	require.ErrorContains(t, err, "A (scenarios gameplay, warmup) has no scenario in common with the other inputs (scenarios live)")
	require.NoError(t, shareScenarios([]*Run{run("a", "gameplay", "warmup"), run("b", "gameplay")}, []string{"A", "B"}))
	// not in the order given: each input against all the others
	require.NoError(t, shareScenarios([]*Run{run("a", "x"), run("b", "x", "y"), run("c", "y")}, []string{"A", "B", "C"}))
}

func TestMergeEnds(t *testing.T) {
	t.Parallel()
	r := func(e *RunEnd) *Run { return &Run{Summary: &Summary{End: e}} }
	done := &RunEnd{Status: EndCompleted}
	require.Equal(t, done, mergeEnds([]*Run{r(done), r(done)}, []string{"a", "b"}))
	require.Nil(t, mergeEnds([]*Run{r(done), r(nil)}, []string{"a", "b"}), "unknown when one instance does not say")
	got := mergeEnds([]*Run{r(done), r(&RunEnd{Status: EndInterrupted, Signal: "SIGTERM"})}, []string{"a", "b"})
	require.Equal(t, EndInterrupted, got.Status)
	require.Equal(t, "instance b", got.Detail)
}

// TestParseBudgetsRefusesDuplicates: two budgets on one metric kept only the
// last one, silently.
func TestParseBudgetsRefusesDuplicates(t *testing.T) {
	t.Parallel()
	_, err := ParseBudgets("p95=+10%,p95=+50%")
	require.ErrorContains(t, err, "--fail-on: p95 is given twice; give one budget per metric")
	_, err = ParseBudgets("p99.9=+10%,p99_9=+5%")
	require.ErrorContains(t, err, "p99_9 is given twice")
}

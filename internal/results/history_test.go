package results

import (
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func historyRun(id string, start time.Time, p99 float64, ttss *float64, commit string) *Summary {
	f := func(v float64) *float64 { return &v }
	settled := &Settled{Steady: ttss != nil, TTSSMs: ttss}
	if ttss != nil {
		settled.Stats = &SettledStats{Count: 1000, P50Ms: p99 / 2, P95Ms: p99 * 0.9, P99Ms: p99, ErrorRate: f(0)}
		settled.Endpoints = map[string]*Settled{"claim": {Steady: true, TTSSMs: ttss,
			Stats: &SettledStats{Count: 1000, P50Ms: p99 / 3, P95Ms: p99 * 0.8, P99Ms: p99 * 0.95}}}
	} else {
		settled.Reason = "never reached"
	}
	return &Summary{
		RunID: id, Started: start, End: &RunEnd{Status: EndCompleted},
		Extra: map[string]any{"commit": commit},
		Scenarios: map[string]*Scenario{"load": {
			TTSSMs: ttss, Relapses: 1, Settled: settled,
			ColdStart: ColdStart{DurationMs: 120, ExcessMs: f(80)},
		}},
	}
}

// TestBuildHistory: rows in run start order with their labels and
// figures; a run without a settled steady state is left out and named (or
// kept with empty cells); an incomplete run is left out; runs of another
// script are refused, their scenarios named.
func TestBuildHistory(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	f := func(v float64) *float64 { return &v }
	sums := []*Summary{
		historyRun("b", t0.Add(time.Hour), 12, f(3000), "c2"),
		historyRun("a", t0, 10, f(2000), "c1"),
		historyRun("c", t0.Add(2*time.Hour), 0, nil, "c3"),
	}
	dirs := []string{"runs/b", "runs/a", "runs/c"}
	h, err := BuildHistory(sums, dirs, HistoryOptions{LabelKey: "commit"})
	require.NoError(t, err)
	require.Equal(t, []string{"time", "label", "run_id", "dir",
		"load.steady_p50_ms", "load.steady_p95_ms", "load.steady_p99_ms", "load.steady_error_rate", "load.ttss_ms",
		"load.online_ttss_ms", "load.cold_start_ms", "load.cold_excess_ms", "load.relapses",
		"load[claim].steady_p50_ms", "load[claim].steady_p95_ms", "load[claim].steady_p99_ms", "load[claim].ttss_ms"}, h.Header,
		"the endpoint has no error rate in any run: no such column")
	require.Len(t, h.Rows, 2)
	require.Equal(t, []string{"2026-11-25T04:00:00Z", "c1", "a", "runs/a", "5", "9", "10", "0", "2000", "2000", "120", "80", "1",
		"3.33333", "8", "9.5", "2000"}, h.Rows[0])
	require.Equal(t, "c2", h.Rows[1][1])
	require.Equal(t, []string{"runs/c: no load.steady_p50_ms, load.steady_p95_ms, load.steady_p99_ms, load.steady_error_rate, load.ttss_ms, " +
		"load.online_ttss_ms, load[claim].steady_p50_ms, load[claim].steady_p95_ms, load[claim].steady_p99_ms, load[claim].ttss_ms (load: never reached)"}, h.Skipped)

	b, err := h.CSV()
	require.NoError(t, err)
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 3)

	h, err = BuildHistory(sums, dirs, HistoryOptions{LabelKey: "commit", KeepMissing: true})
	require.NoError(t, err)
	require.Len(t, h.Rows, 3)
	require.Equal(t, "", h.Rows[2][4], "an empty cell for the missing figure")
	require.Equal(t, "120", h.Rows[2][10], "the figures it has")

	sums[0].End = &RunEnd{Status: EndInterrupted, Signal: "SIGINT"}
	h, err = BuildHistory(sums, dirs, HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h.Rows, 1)
	require.Equal(t, "", h.Rows[0][1], "no label key: the testid, empty here")
	require.Contains(t, h.Skipped[0], "runs/b: the run did not complete (interrupted")

	other := historyRun("d", t0, 10, f(1), "c4")
	other.Scenarios["browse"] = other.Scenarios["load"]
	_, err = BuildHistory([]*Summary{sums[1], other}, []string{"runs/a", "runs/d"}, HistoryOptions{})
	require.ErrorContains(t, err, "runs/a has scenarios load, runs/d has browse, load: the runs of a history must come from one script")
	_, err = BuildHistory(nil, nil, HistoryOptions{})
	require.ErrorContains(t, err, "no results folders")
}

// TestHistoryEndpointStoppedSettling: an endpoint every run calls that
// settled in the 4 oldest of 10 runs and not in the 6 newest (a
// regression) keeps its columns: those 6 runs are left out and named, or
// kept with empty cells (KeepMissing); only an endpoint fewer than half the
// runs call loses its columns.
func TestHistoryEndpointStoppedSettling(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	sums, dirs := historyRuns(10, func(i int, s *Summary) {
		if i >= 4 {
			s.Scenarios["load"].Settled.Endpoints["claim"] = &Settled{Steady: false, Reason: "never reached"}
		}
		if i == 9 {
			s.Scenarios["load"].Settled.Endpoints["rare"] = &Settled{Steady: true, TTSSMs: f(1000), Stats: &SettledStats{Count: 10, P50Ms: 1, P95Ms: 2, P99Ms: 3}}
		}
	})
	h, err := BuildHistory(sums, dirs, HistoryOptions{})
	require.NoError(t, err)
	require.Contains(t, h.Header, "load[claim].steady_p50_ms")
	require.NotContains(t, h.Header, "load[rare].steady_p50_ms")
	require.Contains(t, h.Dropped, "load[rare].steady_p50_ms: only 1 of 10 runs call the endpoint")
	require.Len(t, h.Rows, 4)
	require.Len(t, h.Skipped, 6)
	require.Contains(t, h.Skipped[0], "no load[claim].steady_p50_ms")
	h, err = BuildHistory(sums, dirs, HistoryOptions{KeepMissing: true})
	require.NoError(t, err)
	require.Len(t, h.Rows, 10, "kept with empty cells")
}

// TestHistoryApproximateTails: when every run is a merged folder's
// approximate view, the tail columns are left out and named with why (not
// silently).
func TestHistoryApproximateTails(t *testing.T) {
	t.Parallel()
	sums, dirs := historyRuns(3, func(_ int, s *Summary) {
		s.Scenarios["load"].Settled.Approximate = true
		s.Scenarios["load"].Settled.Endpoints = nil
	})
	h, err := BuildHistory(sums, dirs, HistoryOptions{})
	require.NoError(t, err)
	require.Contains(t, h.Header, "load.steady_p50_ms")
	require.NotContains(t, h.Header, "load.steady_p99_ms")
	require.Len(t, h.Dropped, 2)
	require.Contains(t, h.Dropped[1], "load.steady_p99_ms: every run's settled view is a merged folder's approximate one")
	require.Len(t, h.Rows, 3)
}

// TestHistoryMissingWhy: a run left out is named with the reasons of the
// scenarios whose columns it lacks, not of another scenario that never
// settles in any run (the kit's probe).
func TestHistoryMissingWhy(t *testing.T) {
	t.Parallel()
	sums, dirs := historyRuns(3, func(i int, s *Summary) {
		s.Scenarios["probe"] = &Scenario{Settled: &Settled{Reason: "too short to judge"}}
		if i == 2 {
			s.Scenarios["load"].Settled = &Settled{Reason: "the level drifts by +60%"}
		}
	})
	h, err := BuildHistory(sums, dirs, HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h.Skipped, 1)
	require.Contains(t, h.Skipped[0], "(load: the level drifts by +60%)")
	require.NotContains(t, h.Skipped[0], "probe")
}

// historyRuns makes n runs an hour apart (historyRun's, settled at 2 s),
// each changed by edit, and their folder names.
func historyRuns(n int, edit func(i int, s *Summary)) ([]*Summary, []string) {
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	ttss := 2000.0
	var sums []*Summary
	var dirs []string
	for i := range n {
		s := historyRun(string(rune('a'+i)), t0.Add(time.Duration(i)*time.Hour), 10, &ttss, "c")
		edit(i, s)
		sums = append(sums, s)
		dirs = append(dirs, "runs/"+string(rune('a'+i)))
	}
	return sums, dirs
}

// TestMissingWhyOwner: a column is its longest-named scenario's (api.v2's
// columns are not api's).
func TestMissingWhyOwner(t *testing.T) {
	t.Parallel()
	s := &Summary{Scenarios: map[string]*Scenario{
		"api":    {Settled: &Settled{Reason: "too short"}},
		"api.v2": {Settled: &Settled{Reason: "drifts"}},
	}}
	require.Equal(t, " (api.v2: drifts)", missingWhy(s, []string{"api.v2.steady_p50_ms"}))
	require.Equal(t, " (api: too short)", missingWhy(s, []string{"api[get].steady_p50_ms"}))
}

package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// TestReplayPrior: a profiled run is replayed with its profile's prior (the
// later of the runs' median settled boundary and the Welch end; the level
// band widened by the envelope), and a flat series at the profile's level
// is then declared after the prior's warm-up end and 2 windows instead of
// 9; a profiled run whose summary.json names no profile, or names one that
// cannot be read, is an error, never a replay without the prior.
func TestReplayPrior(t *testing.T) {
	path := filepath.Join(t.TempDir(), "profile.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"schema": 1, "scopes": [{"scenario": "live",
		"warmup_end_ms": {"n": 5, "min": 1000, "median": 3000, "p90": 4000, "max": 4000}, "welch_end_ms": 1000,
		"level_ms": 2, "level_spread": {"lo": -0.05, "hi": 0.05}, "envelope": {"median": {"lo": -0.2, "hi": 0.15}}}]}`), 0o644))
	out := &RunOutput{Dir: "run", Run: &results.Run{Summary: &results.Summary{Profile: &results.ProfileUse{Path: path}}}}

	cfg, err := withRunPrior(detector.ServiceConfig(), out)
	require.NoError(t, err)
	require.Equal(t, detector.Duration(3*time.Second), cfg.PriorWarmup)
	require.InDelta(t, 2, cfg.PriorLevel, 1e-12)
	require.InDelta(t, -0.2, cfg.PriorLevelLow, 1e-12)
	require.InDelta(t, 0.15, cfg.PriorLevelHigh, 1e-12)

	// a flat series at the prior's level, 200 iterations a second for 30 s
	var it []Iteration
	for i := range 200 * 30 {
		it = append(it, Iteration{Start: float64(i) / 200, Ms: 2 * (1 + 0.05*float64(i%7-3)/3)})
	}
	with, err := ReplayOnline(it, cfg, 0.5)
	require.NoError(t, err)
	without, err := ReplayOnline(it, detector.ServiceConfig(), 0.5)
	require.NoError(t, err)
	require.NotNil(t, with.DeclaredAfter)
	require.NotNil(t, without.DeclaredAfter)
	require.GreaterOrEqual(t, *with.DeclaredAfter, 3.0, "not before the prior's warm-up end")
	require.Less(t, *with.DeclaredAfter, 6.0)
	require.GreaterOrEqual(t, *without.DeclaredAfter, 9.0)

	_, err = withRunPrior(detector.ServiceConfig(), &RunOutput{Dir: "bare", Run: &results.Run{Summary: &results.Summary{}}})
	require.ErrorContains(t, err, "names none")
	out.Run.Summary.Profile.Path = filepath.Join(t.TempDir(), "gone.json")
	_, err = withRunPrior(detector.ServiceConfig(), out)
	require.ErrorContains(t, err, "gone.json")
}

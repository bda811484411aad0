package engine

import (
	"time"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// Exports for the external tests (package engine_test), which may import
// internal/influxdb where an internal test may not (it imports this
// package): the InfluxDB output driven by the real engine (influx_test.go)
// and the report golden, whose summary points the output builds.
var (
	NewTestRunState = newTestRunState
	FeedColdSteady  = feedColdSteady
	GoldenRunState  = goldenRunState
)

// BuildRun is the run as saveResults writes it, from a fresh recorder.
func BuildRun(rs *RunState, testID string, now time.Time) (*results.Run, error) {
	return newRecorder(0).buildRun(rs, testID, now)
}

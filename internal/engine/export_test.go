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

// HookExit makes rs act as if subscribed to k6's Exit event (AtExit takes
// functions), and Exit delivers that event with the run's error (its
// os.Exit replaced by a no-op).
func HookExit(rs *RunState) {
	rs.end.mu.Lock()
	rs.end.hooked = true
	rs.end.exit = func(int) {}
	rs.end.mu.Unlock()
}

// Exit delivers k6's Exit event to rs.
func Exit(rs *RunState, err error) { rs.end.onExit(err) }

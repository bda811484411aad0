package engine

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/js/modulestest"
	"go.k6.io/k6/v2/metrics"
	"gopkg.in/guregu/null.v3"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// TestNoFalseEngineError: a run too short for k6's metrics engine to have
// delivered an iteration at TestEnd logged an ERROR blaming a --no-summary
// flag k6 v2 does not have. The error now comes from k6's options: only
// --summary-mode=disabled with --no-thresholds turns the engine off.
func TestNoFalseEngineError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		mode         string
		noThresholds bool
		wantErr      bool
	}{
		{"short run, defaults", "", false, false},
		{"summary disabled, thresholds on", "disabled", false, false},
		{"thresholds off, summary on", "compact", true, false},
		{"both off", "disabled", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logger, hook := test.NewNullLogger()
			registry := metrics.NewRegistry()
			metrics.RegisterBuiltinMetrics(registry)
			rt := modulestest.NewRuntime(t)
			rt.VU.InitEnvField.Registry = registry
			rt.VU.InitEnvField.Logger = logger
			rt.VU.InitEnvField.RuntimeOptions.SummaryMode = null.NewString(tc.mode, tc.mode != "")
			rt.VU.InitEnvField.RuntimeOptions.NoThresholds = null.BoolFrom(tc.noThresholds)
			rs := NewRunState()
			require.NoError(t, rs.Install(rt.VU.InitEnv(), rt.VU.Events()))
			ch := make(chan metrics.SampleContainer, 100)
			var out chan<- metrics.SampleContainer = ch
			rs.samples.Store(&out) // an iteration ran; none reached the detectors yet
			rs.testEnd()
			var errs []string
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.ErrorLevel {
					errs = append(errs, e.Message)
				}
			}
			if !tc.wantErr {
				require.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			require.Contains(t, errs[0], "--summary-mode=disabled and --no-thresholds")
			require.False(t, strings.Contains(errs[0], "--no-summary"))
		})
	}
}

// TestSettledNaNNeverFailsTheReport: a settled view with a non-finite
// figure (a bug: a NaN trend once made summary() panic in handleSummary and
// lose the run's results) is handed to JavaScript as its error, and left
// out of summary.json with a warning, while the rest of the report stands.
func TestSettledNaNNeverFailsTheReport(t *testing.T) {
	t.Parallel()
	bad := &ScenarioReport{Detection: Detection{Class: "flat"}, Regimes: map[string]*RegimeDist{},
		Settled: settledReport{&results.Settled{Trend: math.NaN()}}}
	good := &ScenarioReport{Detection: Detection{Class: "flat"}, Regimes: map[string]*RegimeDist{},
		Settled: settledReport{&results.Settled{Class: "flat"}}}
	rep := &RunReport{Scenarios: map[string]*ScenarioReport{"bad": bad, "good": good}}
	b, err := json.Marshal(rep) // what regime.summary() decodes
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	scs := m["scenarios"].(map[string]any)
	require.Contains(t, scs["bad"].(map[string]any)["settled"].(map[string]any)["error"], "the settled view cannot be written")
	require.Equal(t, "flat", scs["bad"].(map[string]any)["class"])
	require.Equal(t, "flat", scs["good"].(map[string]any)["settled"].(map[string]any)["class"])

	res, err := bad.result()
	require.ErrorContains(t, err, "the settled view cannot be written")
	require.Nil(t, res.Settled)
	require.Equal(t, "flat", res.Class)
	res, err = good.result()
	require.NoError(t, err)
	require.Equal(t, "flat", res.Settled.Class)
}

package extension

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/detector"
)

// TestScopeDetectorsDropTheTrace: the extension's detectors make online
// decisions only, so they keep no trace for Hindsight (96 KiB and 1-2 ns
// per observation each, per scenario and endpoint).
func TestScopeDetectorsDropTheTrace(t *testing.T) {
	t.Parallel()
	s := newScenarioState("s", scenarioConfig{Detector: detector.ServiceConfig()})
	sc := s.scopeFor("", func(*endpointScope, detector.Transition) {}, nil)
	sc.det.Observe(0, 1)
	_, err := sc.det.Hindsight()
	require.ErrorIs(t, err, detector.ErrNoTrace)
}

package extension

import (
	"fmt"
	"testing"
	"time"

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

// TestEndpointDetectorCap: with scope endpoint, every endpoint value got a
// detector (about 144 KiB each, up to 22 MiB with the largest settings).
// Beyond maxEndpoints they share one, "(other)", and are counted.
func TestEndpointDetectorCap(t *testing.T) {
	t.Parallel()
	cfg := defaultScenarioConfig()
	cfg.Scope, cfg.Input, cfg.MaxEndpoints = scopeEndpoint, inputRequest, 5
	s := newScenarioState("s", cfg)
	rs := newRunState()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range 200 {
		s.observe(rs, fmt.Sprintf("ep%d", i%50), time.Unix(0, int64(i)), 1+float64(i%3))
	}
	require.Len(t, s.scopes, 6)
	require.Contains(t, s.scopes, otherEndpoint)
	require.EqualValues(t, 180, s.overObs)
	require.EqualValues(t, 180, s.scopes[otherEndpoint].det.Snapshot().N)
}

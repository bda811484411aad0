package e2e

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// cardinalityScript makes one request per iteration, each with an endpoint
// tag of its own (the hostile case: a URL or ID per request), and saves
// the results folder.
const cardinalityScript = `
import http from 'k6/http';
import regime from 'k6/x/regime';
export const options = {
  scenarios: { load: { executor: 'shared-iterations', vus: 8, iterations: Number(__ENV.N), maxDuration: '5m' } },
};
regime.configure(options, { scope: __ENV.SCOPE });
export default function () {
  http.get(__ENV.URL, { tags: { endpoint: 'ep-' + __VU + '-' + __ITER } });
}
export function handleSummary() {
  return { stdout: 'RESULTS=' + regime.saveResults({ dir: __ENV.OUT, report: false }) + '\n' };
}
`

// TestMemoryDistinctEndpoints measures k6's peak resident memory (getrusage
// of the child) over a run of 100,000 requests, each with a distinct
// endpoint value, in scope scenario and scope endpoint, and requires it
// under 256 MiB. It takes about a minute, so it runs only when
// XK6_REGIME_MEMORY=1 (not in make test).
func TestMemoryDistinctEndpoints(t *testing.T) {
	if os.Getenv("XK6_REGIME_MEMORY") != "1" {
		t.Skip("a measurement of about a minute; run with XK6_REGIME_MEMORY=1")
	}
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("XK6_REGIME_MEMORY_N")); err == nil {
		n = v
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(cardinalityScript), 0o600))
	for _, scope := range []string{"scenario", "endpoint"} {
		t.Run(scope, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, k6Binary(t), "run", "--no-usage-report", "--quiet", "--log-format", "raw", "script.js")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true", "URL="+srv.URL, "OUT="+out,
				"SCOPE="+scope, "N="+strconv.Itoa(n))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			wall := time.Since(start)
			ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			require.True(t, ok)
			rssMiB := float64(ru.Maxrss) / 1024 // KiB on Linux
			s, err := results.ReadSummary(runDir(t, out))
			require.NoError(t, err)
			lim := s.Scenarios["load"].EndpointLimit
			require.NotNil(t, lim, "the cap was hit")
			var rows int
			for _, r := range s.Requests {
				if r.Scenario == "load" {
					rows++
				}
			}
			t.Logf("scope %s: %d requests with distinct endpoints: peak RSS %.0f MiB, wall %s; %d request rows; "+
				"beyond maxEndpoints %d: %d values (exact: %v), %d requests, %d detector observations",
				scope, n, rssMiB, wall.Round(100*time.Millisecond), rows, lim.Max, lim.Values, lim.ValuesExact, lim.Requests, lim.Observations)
			require.Less(t, rssMiB, 256.0)
			require.Contains(t, stderr.String(), "has more than 100 endpoint values", "warned in k6's log")
		})
	}
}

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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
	"github.com/xk6-regime/xk6-regime/test/testbin"
)

// cardinalityScript makes one request per iteration, each with an endpoint
// tag of its own (the hostile case: a URL or ID per request), and saves
// the results folder. STOCK=1 runs it without the extension.
const cardinalityScript = `
import http from 'k6/http';
import * as regime from 'REGIME';
export const options = {
  scenarios: { load: { executor: 'shared-iterations', vus: 8, iterations: Number(__ENV.N), maxDuration: '10m' } },
};
if (regime.configure) regime.configure(options, { scope: __ENV.SCOPE });
export default function () {
  http.get(__ENV.URL, { tags: { endpoint: 'ep-' + __VU + '-' + __ITER } });
}
export function handleSummary() {
  return { stdout: regime.saveResults ? 'RESULTS=' + regime.saveResults({ dir: __ENV.OUT, report: false }) + '\n' : '' };
}
`

// peakRSS runs k6 on script and returns its peak resident memory in MiB
// (getrusage of the child) and its stderr.
func peakRSS(t *testing.T, bin, script string, env ...string) (float64, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(script), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--no-usage-report", "--quiet", "--log-format", "raw", "script.js")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "K6_NO_USAGE_REPORT=true"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	require.True(t, ok)
	return float64(ru.Maxrss) / 1024, stderr.String() // KiB on Linux
}

// TestMemoryDistinctEndpoints measures the peak resident memory of k6
// over N requests (default 100,000), each with a distinct endpoint value,
// without the extension and with it in scope scenario and scope endpoint.
// k6 itself keeps about 7 KiB per distinct tag value, so the whole process
// cannot stay under a fixed bound; what the extension adds can, thanks to
// maxEndpoints. Its own heap is bounded exactly by TestIngestMemoryBounded;
// here the difference of two processes' peak RSS also holds GC slack (the
// Go runtime lets the heap grow to twice what is live), so the bound is
// 192 MiB, where the uncapped extension added 1.4 GiB per 10,000 values.
// A few minutes, so it runs only when XK6_REGIME_MEMORY=1 (not in make test).
func TestMemoryDistinctEndpoints(t *testing.T) {
	if os.Getenv("XK6_REGIME_MEMORY") != "1" {
		t.Skip("a measurement of a few minutes; run with XK6_REGIME_MEMORY=1")
	}
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("XK6_REGIME_MEMORY_N")); err == nil {
		n = v
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	env := []string{"URL=" + srv.URL, "N=" + strconv.Itoa(n)}
	stockRSS, _ := peakRSS(t, testbin.Stock(t), strings.Replace(cardinalityScript, "REGIME", "k6", 1), env...)
	t.Logf("stock k6, %d requests with distinct endpoint values: peak RSS %.0f MiB", n, stockRSS)
	for _, scope := range []string{"scenario", "endpoint"} {
		out := t.TempDir()
		rss, stderr := peakRSS(t, k6Binary(t), strings.Replace(cardinalityScript, "REGIME", "k6/x/regime", 1),
			append(env, "SCOPE="+scope, "OUT="+out)...)
		s, err := results.ReadSummary(runDir(t, out))
		require.NoError(t, err)
		lim := s.Scenarios["load"].EndpointLimit
		require.NotNil(t, lim, "the cap was hit")
		t.Logf("scope %s: peak RSS %.0f MiB (%+.0f MiB over stock); %d request rows; beyond maxEndpoints %d: "+
			"%d values (exact: %v), %d requests, %d detector observations",
			scope, rss, rss-stockRSS, len(s.Requests), lim.Max, lim.Values, lim.ValuesExact, lim.Requests, lim.Observations)
		require.Less(t, rss-stockRSS, 192.0, "what the extension adds")
		require.Contains(t, stderr, "has more than 100 endpoint values", "warned in k6's log")
	}
}

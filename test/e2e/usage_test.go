package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingServer is a local server that counts its requests and answers
// them with status.
func countingServer(t *testing.T, status int) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// runWithout runs `k6 run --quiet ARGS script.js` on script, with the
// environment but for the variable unset, plus env; it returns the output
// and the error.
func runWithout(t *testing.T, script, unset string, args []string, env ...string) (string, error) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(script), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k6Binary(t), append(append([]string{"run", "--quiet"}, args...), "script.js")...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, unset+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestNoUsageReportByDefault: this k6 sends k6's end-of-run usage report
// nowhere unless K6_NO_USAGE_REPORT=false asks for it (the report goes to
// K6_USAGE_REPORT_URL, here a local server, so that the test can see it
// sent when asked: the check can fail).
func TestNoUsageReportByDefault(t *testing.T) {
	srv, hits := countingServer(t, http.StatusOK)
	run := func(extra ...string) string {
		out, err := runWithout(t, "export const options = { iterations: 1 };\nexport default function () {}\n",
			"K6_NO_USAGE_REPORT", []string{"-v"}, append([]string{"K6_USAGE_REPORT_URL=" + srv.URL}, extra...)...)
		require.NoError(t, err, "%s", out)
		return out
	}
	out := run()
	require.Zero(t, hits.Load(), "a usage report was sent by default:\n%s", out)
	require.NotContains(t, out, "Sending usage report")

	out = run("K6_NO_USAGE_REPORT=false")
	require.Equal(t, int64(1), hits.Load(), "asked for, the usage report was not sent:\n%s", out)
}

// TestNoExtensionResolutionByDefault: a script importing an extension this
// binary lacks fails with k6's error naming it; k6 v2's default would ask
// Grafana's build service (K6_BUILD_SERVICE_URL, here a local server so
// that the test sees it asked when K6_AUTO_EXTENSION_RESOLUTION=true: the
// check can fail) to build another binary and run the test with that one.
func TestNoExtensionResolutionByDefault(t *testing.T) {
	srv, hits := countingServer(t, http.StatusNotImplemented)
	run := func(extra ...string) string {
		out, err := runWithout(t, "import x from 'k6/x/nonexistent';\nexport const options = { iterations: 1 };\nexport default function () {}\n",
			"K6_AUTO_EXTENSION_RESOLUTION", nil, append([]string{"K6_BUILD_SERVICE_URL=" + srv.URL, "K6_NO_USAGE_REPORT=true"}, extra...)...)
		require.Error(t, err, "a script importing a missing extension must fail:\n%s", out)
		return out
	}
	out := run()
	require.Zero(t, hits.Load(), "the build service was asked by default:\n%s", out)
	require.Contains(t, out, `unknown modules [\"k6/x/nonexistent\"]`)

	out = run("K6_AUTO_EXTENSION_RESOLUTION=true")
	require.Positive(t, hits.Load(), "asked for, the build service was not called:\n%s", out)
}

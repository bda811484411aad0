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

// TestNoUsageReportByDefault: this k6 sends k6's end-of-run usage report
// nowhere unless K6_NO_USAGE_REPORT=false asks for it (the report goes to
// K6_USAGE_REPORT_URL, here a local server, so that the test can see it
// sent when asked: the check can fail).
func TestNoUsageReportByDefault(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"),
		[]byte("export const options = { iterations: 1 };\nexport default function () {}\n"), 0o600))
	run := func(extra ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, k6Binary(t), "run", "--quiet", "-v", "script.js")
		cmd.Dir = dir
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "K6_NO_USAGE_REPORT=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, append([]string{"K6_USAGE_REPORT_URL=" + srv.URL}, extra...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
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
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNotImplemented)
	}))
	defer srv.Close()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"),
		[]byte("import x from 'k6/x/nonexistent';\nexport const options = { iterations: 1 };\nexport default function () {}\n"), 0o600))
	run := func(extra ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, k6Binary(t), "run", "--quiet", "script.js")
		cmd.Dir = dir
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "K6_AUTO_EXTENSION_RESOLUTION=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, append([]string{"K6_BUILD_SERVICE_URL=" + srv.URL, "K6_NO_USAGE_REPORT=true"}, extra...)...)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "a script importing a missing extension must fail:\n%s", out)
		return string(out)
	}
	out := run()
	require.Zero(t, hits.Load(), "the build service was asked by default:\n%s", out)
	require.Contains(t, out, `unknown modules [\"k6/x/nonexistent\"]`)

	out = run("K6_AUTO_EXTENSION_RESOLUTION=true")
	require.Positive(t, hits.Load(), "asked for, the build service was not called:\n%s", out)
}

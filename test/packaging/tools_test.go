package packaging

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tool returns the path of a pinned tool that `make tools` installs and
// `make test` passes in env: the checks below need it, so its absence is a
// failure with the way to fix it, never a skip.
func tool(t *testing.T, env, name string) string {
	t.Helper()
	p := os.Getenv(env)
	require.NotEmpty(t, p, "%s is not set: run `make tools` and pass %s=.cache/tools/%s-<version> (make test does)", env, env, name)
	fi, err := os.Stat(p)
	require.NoError(t, err, "%s=%s: run `make tools`", env, p)
	require.False(t, fi.IsDir())
	return p
}

// run runs a tool, bounded in time, and returns its exit code and output.
func run(t *testing.T, dir, exe string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "%s timed out", exe)
	if ee, ok := err.(*exec.ExitError); ok { //nolint:errorlint
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err, string(out))
	return 0, string(out)
}

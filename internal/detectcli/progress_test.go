package detectcli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProgress: --progress always rewrites one status line per file on
// stderr and ends it; auto writes nothing when stderr is not a terminal
// (a buffer here, a pipe in CI), nor does never; a bad value is a usage
// error naming the valid values.
func TestProgress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := writeFile(t, dir, "a.csv", csvSeries(1, 200), false)
	b := writeFile(t, dir, "b.csv", csvSeries(1, 200), false)
	for _, mode := range []string{"always", "auto", "never"} {
		var stdout, stderr bytes.Buffer
		code := Run([]string{"--no-hindsight", "--progress", mode, a, b}, &stdout, &stderr)
		require.Equal(t, 0, code, stderr.String())
		require.Equal(t, 2, strings.Count(stdout.String(), "\n"), "one JSON line per series")
		if mode != "always" {
			require.Empty(t, stderr.String(), mode)
			continue
		}
		out := stderr.String()
		require.Contains(t, out, "\rdetect: 1/2 files, ")
		require.Contains(t, out, "about ")
		require.Contains(t, out, "\rdetect: 2/2 files, ")
		require.True(t, strings.HasSuffix(out, "\n"), "the status line is ended: %q", out)
	}
	var stdout, stderr bytes.Buffer
	code := Run([]string{"--progress", "sometimes", a}, &stdout, &stderr)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr.String(), "--progress must be one of auto, always, never; got \"sometimes\"")
}

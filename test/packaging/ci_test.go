package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/test/testbin"
)

const workflow = "examples/ci/github-actions.yml"

// TestCIWorkflow: the GitHub Actions example passes actionlint, with
// shellcheck on its run: scripts, and actionlint does catch a broken copy
// (an undefined step output; an unquoted variable), so the pass means
// something. The workflow's contract is checked too: xk6 >= v1.4.0, the
// kit run as a step of its own (k6's exit code fails the job), artifacts
// kept whatever the outcome.
func TestCIWorkflow(t *testing.T) {
	t.Parallel()
	actionlint := tool(t, "ACTIONLINT_BIN", "actionlint")
	shellcheck, err := exec.LookPath("shellcheck")
	require.NoError(t, err, "shellcheck is not on PATH: `make deps` installs it (Debian package shellcheck)")
	root := testbin.RepoRoot(t)

	code, out := run(t, root, actionlint, "-shellcheck", shellcheck, workflow)
	require.Equal(t, 0, code, "actionlint %s:\n%s", workflow, out)

	b, err := os.ReadFile(filepath.Join(root, workflow))
	require.NoError(t, err)
	src := string(b)
	for name, broken := range map[string]string{
		"undefined step output": strings.Replace(src, "steps.run.outputs.dir", "steps.nope.outputs.dir", 1),
		"unquoted variable":     strings.Replace(src, "dir=$(find results", "dir=$(find $RESULTS_ROOT", 1),
	} {
		require.NotEqual(t, src, broken, name)
		p := filepath.Join(t.TempDir(), "broken.yml")
		require.NoError(t, os.WriteFile(p, []byte(broken), 0o600))
		code, out := run(t, root, actionlint, "-shellcheck", shellcheck, p)
		require.NotEqual(t, 0, code, "actionlint passed a workflow with an %s:\n%s", name, out)
	}

	require.Regexp(t, `XK6_VERSION: v1\.(4\.\d+|[5-9]\d*\.\d+)\b`, src, "xk6 v1.4.0 or later (the first that resolves k6 v2)")
	require.Contains(t, src, `"$(go env GOPATH)/bin/xk6" build "$K6_VERSION" --output ./k6 --with "$XK6_REGIME_MODULE"`)
	require.Contains(t, src, "run: ./k6 run ", "the kit runs as a step of its own: k6's exit code fails the job")
	require.Contains(t, src, "scenarios/combined.js")
	require.Equal(t, 2, strings.Count(src, "uses: actions/upload-artifact@"), "results/ and report.html")
	require.Equal(t, 3, strings.Count(src, "if: always()"), "the run folder is found and kept whatever k6's exit code")
}

package packaging

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/test/testbin"
)

// TestLayers checks the layering of docs/architecture.md on the import
// graph `go list` reports: every package of the module imports only
// packages of the layers its row allows, so that the statistics stay free
// of k6, the results model free of the k6 glue, the run engine free of the
// JS module and the outputs, and the harness and tools free of the
// extension.
func TestLayers(t *testing.T) {
	const mod = "github.com/xk6-regime/xk6-regime"
	layer0 := []string{"detector", "internal/cliexit", "internal/distinct", "internal/latency", "internal/observation"}
	layer1 := append([]string{"internal/results", "internal/detectcli"}, layer0...)
	allowed := map[string][]string{
		"detector":             nil,
		"internal/cliexit":     nil,
		"internal/distinct":    nil,
		"internal/latency":     nil,
		"internal/observation": nil,
		"internal/results":     layer0,
		"internal/detectcli":   layer0,
		"internal/regimecli":   layer1,
		"internal/engine":      layer1,
		"extension":            append([]string{"internal/engine"}, layer1...),
		"internal/influxdb":    append([]string{"internal/engine"}, layer1...),
		"":                     {"extension", "internal/influxdb", "internal/regimecli"},
		"cmd/k6":               {""},
		"cmd/k6-stock":         nil,
		"live/harness":         append([]string{"test/pgtest"}, layer1...),
		"live/cmd/live":        append([]string{"live/harness"}, layer1...),
		"live/services/gosvc":  nil,
		"tools/accuracy":       layer1,
		"tools/k6bench":        layer1,
		"tools/k6soak":         layer1,
		// test helpers, which the live harness uses too: nothing of the module
		"test/pgtest":  nil,
		"test/testbin": nil,
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = testbin.RepoRoot(t)
	out, err := cmd.Output()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], mod), "/")
		seen[pkg] = true
		if _, helper := allowed[pkg]; !helper && strings.HasPrefix(pkg, "test/") {
			continue // the end-to-end tests may import anything; their helpers are checked
		}
		ok, known := allowed[pkg]
		require.True(t, known, "package %q is not in docs/architecture.md's layers: add it there and here", pkg)
		for _, imp := range f[1:] {
			if imp != mod && !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, mod), "/")
			require.Contains(t, ok, dep, "%s imports %s, which its layer may not (docs/architecture.md)", pkg, dep)
		}
	}
	for pkg := range allowed {
		require.True(t, seen[pkg], "docs/architecture.md names package %q, which does not exist", pkg)
	}
}

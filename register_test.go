package regime

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/ext"
)

// TestRegistrationsNamed: k6 (ext.Register) names a registration after the
// build-info dependency whose path prefixes the registered value's package
// (a module) or its function's full name (a constructor), and without one
// after that package or name itself. In an xk6 build this module is such a
// dependency and all three show its path (test/packaging TestXk6Build
// checks `k6 version`); here, as in a plain `go build ./cmd/k6`, it is the
// main module, so each shows exactly its package or its named constructor
// in this package, never a compiler-generated closure name such as
// regime.init.0.func1.
func TestRegistrationsNamed(t *testing.T) {
	t.Parallel()
	const mod = "github.com/xk6-regime/xk6-regime"
	info, ok := debug.ReadBuildInfo()
	require.True(t, ok, "no build information")
	require.Equal(t, mod, info.Main.Path, "this test expects the module to be the main module")
	want := map[string]struct {
		typ  ext.ExtensionType
		path string
	}{
		"k6/x/regime":         {ext.JSExtension, mod + "/extension"}, // *extension.RootModule
		"regime":              {ext.SubcommandExtension, mod + ".newCommand"},
		"xk6-regime-influxdb": {ext.OutputExtension, mod + ".newOutput"},
	}
	found := 0
	for _, e := range ext.GetAll() {
		w, ok := want[e.Name]
		if !ok {
			continue
		}
		found++
		require.Equal(t, w.typ, e.Type, e.String())
		require.Equal(t, w.path, e.Path, e.String())
	}
	require.Equal(t, len(want), found, "registrations: %v", ext.GetAll())
}

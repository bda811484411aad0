package extension

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/ext"
)

// TestRegistrationsNamed: k6 lists each registration under the module path
// (an xk6 build) or, when this module is the main module, under the package
// or the constructor's name; never under a compiler-generated closure name
// such as extension.init.0.func1.
func TestRegistrationsNamed(t *testing.T) {
	t.Parallel()
	want := map[string]ext.ExtensionType{
		"k6/x/regime":         ext.JSExtension,
		"regime":              ext.SubcommandExtension,
		"xk6-regime-influxdb": ext.OutputExtension,
	}
	closure := regexp.MustCompile(`\.init\.\d+|\.func\d+|-fm$`)
	found := 0
	for _, e := range ext.GetAll() {
		typ, ok := want[e.Name]
		if !ok {
			continue
		}
		found++
		require.Equal(t, typ, e.Type, e.String())
		require.Regexp(t, `^github\.com/xk6-regime/xk6-regime(/|$)`, e.Path, e.String())
		require.NotRegexp(t, closure, e.Path, e.String())
	}
	require.Equal(t, len(want), found, "registrations: %v", ext.GetAll())
}

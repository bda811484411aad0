package regime

import (
	"github.com/spf13/cobra"
	"go.k6.io/k6/v2/cmd/state"
	"go.k6.io/k6/v2/js/modules"
	"go.k6.io/k6/v2/output"
	"go.k6.io/k6/v2/subcommand"

	"github.com/xk6-regime/xk6-regime/extension"
	"github.com/xk6-regime/xk6-regime/internal/influxdb"
	"github.com/xk6-regime/xk6-regime/internal/regimecli"
)

// module is the process's k6/x/regime module; the output registered here
// observes its run.
var module = extension.NewRootModule()

func init() {
	modules.Register("k6/x/regime", module)
	subcommand.RegisterExtension("regime", newCommand)
	output.RegisterExtension(influxdb.Name, newOutput)
}

// newOutput constructs the xk6-regime-influxdb output. It is a named
// function, not a closure, because k6 names a registration after its
// constructor: `k6 version` prints the module path of the build-info
// dependency whose path prefixes the function's name, and when there is
// none (this module built as the main module, a plain `go build ./cmd/k6`)
// the function's full name, which for a closure is `regime.init.0.func1`.
func newOutput(p output.Params) (output.Output, error) { return influxdb.New(p, module.Run()) }

// newCommand builds `k6 x regime` (named, as newOutput is).
func newCommand(gs *state.GlobalState) *cobra.Command { return regimecli.NewCommand(gs) }

// Package extension is the k6 side of xk6-regime: the k6/x/regime JS
// module (per-iteration regime tags, steady-state detection, summary) and
// the xk6-regime-influxdb output, and the registration of the `k6 x
// regime` subcommand (internal/regimecli). This file holds the
// registrations only.
package extension

import (
	"github.com/spf13/cobra"
	"github.com/xk6-regime/xk6-regime/internal/regimecli"
	"go.k6.io/k6/v2/cmd/state"
	"go.k6.io/k6/v2/js/modules"
	"go.k6.io/k6/v2/output"
	"go.k6.io/k6/v2/subcommand"
)

// theModule is the process's k6/x/regime module; outputs and subcommands
// registered by this package reach the run state through it.
var theModule = NewRootModule()

func init() {
	modules.Register("k6/x/regime", theModule)
	subcommand.RegisterExtension("regime", newCommand)
	output.RegisterExtension(influxOutputName, newOutput)
}

// newOutput constructs the xk6-regime-influxdb output. It is a named
// function, not a closure, because k6 names a registration after its
// constructor: `k6 version` prints the module path of the build-info
// dependency whose path prefixes the function's name, and when there is
// none (this module built as the main module, a plain `go build ./cmd/k6`)
// the function's full name, which for a closure is `extension.init.0.func1`.
func newOutput(p output.Params) (output.Output, error) {
	return newInfluxOutput(p, theModule.rs)
}

// newCommand builds `k6 x regime` (named, as newOutput is).
func newCommand(gs *state.GlobalState) *cobra.Command { return regimecli.NewCommand(gs) }

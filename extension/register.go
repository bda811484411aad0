// Package extension is the k6 side of xk6-regime: the k6/x/regime JS
// module (per-iteration regime tags, steady-state detection, summary) and
// the `k6 x regime` subcommand (offline tools) and the xk6-regime-influxdb
// output. This file holds the registrations only.
package extension

import (
	"go.k6.io/k6/v2/js/modules"
	"go.k6.io/k6/v2/output"
	"go.k6.io/k6/v2/subcommand"
)

// theModule is the process's k6/x/regime module; outputs and subcommands
// registered by this package reach the run state through it.
var theModule = newRootModule()

func init() {
	modules.Register("k6/x/regime", theModule)
	subcommand.RegisterExtension("regime", newCommand)
	output.RegisterExtension(influxOutputName, func(p output.Params) (output.Output, error) {
		return newInfluxOutput(p, theModule.rs)
	})
}

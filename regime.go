// Package regime is the xk6 entry point of xk6-regime: `xk6 build --with
// github.com/xk6-regime/xk6-regime` imports this package, which registers
// the k6/x/regime JS module, the `k6 x regime` subcommand and the
// xk6-regime-influxdb output (see package extension).
package regime

import (
	_ "github.com/xk6-regime/xk6-regime/extension" // registrations
)

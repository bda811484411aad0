// Package regime is the xk6 entry point of xk6-regime: `xk6 build --with
// github.com/xk6-regime/xk6-regime` imports this package, whose register.go
// registers, in one place, the k6/x/regime JS module (package extension),
// the `k6 x regime` subcommand (internal/regimecli) and the
// xk6-regime-influxdb output (internal/influxdb), the output observing the
// run the JS module drives (an internal/engine run state).
package regime

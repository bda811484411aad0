// Package extension is the k6/x/regime JS module of xk6-regime: RootModule
// (one per process) and its per-VU instance (module.go). It converts what
// the script hands over (settings and options to JSON, functions,
// numbers), checks where each function is called from (the init context or
// a VU), tags each iteration with its scenario's regime from a hook on
// __ITER, and calls the run engine (internal/engine) for everything else:
// configure, wrap, observe, current, summary, saveResults, textSummary.
//
// RootModule.Run is the engine's run state, which the module root
// (register.go) hands to the xk6-regime-influxdb output (internal/influxdb)
// to observe. This package registers nothing itself: a custom k6 imports
// the module root (github.com/xk6-regime/xk6-regime), as xk6 does.
package extension

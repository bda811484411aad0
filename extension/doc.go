// Package extension is the k6 side of xk6-regime: the k6/x/regime JS module
// (RootModule: per-iteration regime tags, steady-state detection, gates,
// summary, saveResults) and the run engine behind it (RunState: ingest,
// detectors, settled view, profile checks, the typed report). Outputs
// observe a run through the small API it exports: RootModule.Run,
// RunState.AddObserver, RemoveObserver and Report, the Observer interface,
// TransitionRecord and RunReport. The module root (register.go) registers
// the module, the `k6 x regime` subcommand and the xk6-regime-influxdb
// output (internal/influxdb).
package extension

// Package engine is the run engine of xk6-regime: what the k6/x/regime JS
// module (package extension) drives and the xk6-regime-influxdb output
// (internal/influxdb) observes. It never sees a JavaScript value (it
// takes k6's event system from js/common, nothing else of the JS runtime):
// the module converts the script's values, checks where it is called from
// and calls the engine.
//
// One RunState per k6 process (one test run) receives every sample of the
// metrics it learns from as k6's metrics engine delivers it (hidden
// submetric sinks), feeds each scenario's detectors and accounts the
// iterations by the regime they were tagged with, pushes its own metrics
// (regime_ttss, regime_steady, the settled view's), judges the steady gates
// at k6's TestEnd, and builds, once and typed, the run's report
// (RunState.Report: a RunReport), which JavaScript, summary.json and
// InfluxDB read.
//
// The JS module uses Install, Configure (with ParseConfig), the iteration
// hook's NoteExecution, FlushPending, Tagging, Scenario (Scenario.Regime)
// and NoteVU, then Observe, Report, Ended, SaveResults and TextSummary. An
// output uses AddObserver and RemoveObserver (its Observer receives each
// Transition, Window and Iteration) and Report.
//
// Iteration durations and request latencies are held in internal/latency
// histograms (milliseconds, integer microseconds in HDR) from the first
// sample on; the results writer clones them into the results folder, so
// summary.json and summary() read the same counts, and the same sums for
// every duration within the histograms' range (1 µs .. 1 h for iterations:
// summary() sums the durations as measured, the histograms as clamped).
//
// Where each part lives:
//
//   - run.go: RunState, its metrics and detection sinks, ingest, the
//     samples it pushes, the end of the test (the steady gates)
//   - scenario.go: Scenario, one scenario's detectors (one per endpoint
//     with scope 'endpoint'), its regime accounting and gate verdict
//   - tags.go: the tag values read from a sample's tag set, cached per set
//   - breakdown.go: the request breakdown (scenario x phase x regime x
//     endpoint x protocol), the connection cold start, tracked metrics
//   - settled.go: the settled view, computed at the end with the whole run
//     in hand (detector.Settle)
//   - profile.go: a profile's priors for the detectors, and its checks of
//     the settled view
//   - config.go: Config, what regime.configure() accepts: ParseConfig
//     (defaults, validation of everything at once, unknown keys refused)
//   - report.go: RunReport and the types it holds
//   - results.go: the results writer (an Observer: series, windows,
//     transitions), SaveResults and TextSummary
//   - runend.go: how the run ended (stop signals, k6's execution state,
//     failed abortOnFail thresholds, the error k6 exits with)
package engine

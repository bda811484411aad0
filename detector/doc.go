// Package detector finds where a stream of timings leaves its cold start,
// warms up and reaches steady state, online, in O(1) time and bounded memory
// per observation. It knows nothing of k6: the k6 glue, the detect command and
// the tests all drive it through Observe.
//
// # Method, in short
//
// Two methods share the windows, the cold tail and the relapse monitors:
// "benchmark" (Config.Method; the JMH preset, one observation per
// benchmark iteration) and "service" (the service preset, for request
// streams: windows of at least a second, judged on a log scale; service.go
// describes what it changes and why). The benchmark method, with details
// and references at each step:
//   - observations go into an HDR histogram window that closes after
//     window_min observations and window_min_duration; the window's median,
//     capped tail quantile, mean and the mean's standard error are kept in a
//     bounded ring of summaries (max_windows; when full, the older half is
//     merged pairwise, so memory is constant and recent windows stay fine);
//   - the cold tail is the prefix of observations more than cold_factor
//     times slower than the running median of the last cold_confirm ones;
//   - in warmup, at each window close, a backward two-sided CUSUM (Page
//     1954) over the window medians, tails and means, measured against the
//     most recent windows, finds where the current stable segment began
//     (the corpus labels' rule: steady state starts at the first segment,
//     walking back, within tolerance of the last one; Traini et al. EMSE
//     2023). A segment whose window means scatter more than their
//     within-window variance explains (bursts) is split after its most
//     deviant window, like a mean-and-variance changepoint (Barrett et al.
//     OOPSLA 2017); a segment whose halves differ is a drift, not a steady
//     state (Geweke 1992). Steady state is declared when the segment holds
//     stable_windows windows by every gate (the design's dual gate of median
//     and tail, plus the mean) and covers min_steady_fraction of the run;
//     steady_start is its first observation, refined by MSER-5 (White 1997)
//     among the first observations, and elsewhere to the sub-block of 5
//     observations from the medians of its first window's sub-blocks
//     (refineStart);
//   - tolerances widen with the noise: for median and tail with the
//     window-to-window scatter measured robustly (MAD of successive
//     differences, trend-free); for the mean with its within-window standard
//     error; so heavy-tailed but stationary series still settle;
//   - in steady state forward CUSUMs of the median and mean against the
//     steady levels report a relapse only once a shift persists about
//     relapse_windows windows (hysteresis); a level that comes back to the
//     previous steady level resumes that steady state;
//   - with burst_z > 0, a burst (a window whose mean's confidence interval
//     lies wholly outside the mean band, the labels' segment test at window
//     scale) ends a steady state at once and is never resumed across: the
//     next steady segment starts after it. Segments found in warmup may not
//     span a burst either.
//   - with shift_z > 0 (opt-in), a shift in mean at observation-block
//     resolution (shift) bounds segments and ends a steady state; a relapse
//     whose excursion proves short resumes (resumeAfterShift).
//   - Hindsight, kept apart from all of the above, re-runs at the end the
//     corpus labels' offline procedure (PELT changepoints, walk back from
//     the last segment) on a bounded trace of the series (hindsight.go).
//
// # Where each stage lives
//
//   - detector.go: the Detector, Observe, Snapshot, and the state of each
//     stage as a struct of its own (window, coldTail, shiftScan,
//     steadyState; the service method's svcState is in service.go);
//   - cold.go: the cold tail;
//   - windows.go: window summaries and their ring;
//   - blocks.go: observation blocks (shift scan) and sub-blocks (refined starts);
//   - segment.go and gates.go: warm-up, the segment search and the gates that
//     declare steady state (the benchmark method);
//   - service.go: the service method's warm-up and steady checks;
//   - steady.go: relapses and resumption;
//   - hindsight.go, pelt.go, crops.go: the end-of-run refinement;
//   - settle*.go, buckets.go: the settled view of long request streams;
//   - config.go, types.go, histogram.go: settings, results, the window
//     histogram (on the detector's own scale; latencies live in
//     internal/latency).
package detector

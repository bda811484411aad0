// Package harness is the live tag-quality harness behind `make live`
// (live/cmd/live) and its short form in `make test` (test/live): it starts
// real services on 127.0.0.1 (services.go), runs the project's k6 against
// each in repeated runs (cases.go, k6run.go), and judges the regime tags a
// run recorded against a reference that shares no code or parameter with
// the online detector.
//
//   - consensus.go: the reference of a case, what its repeated runs agree
//     on (Welch's procedure on 1-s block medians and p99s: the warm-up end,
//     the settled envelope, each run's own boundary);
//   - reference.go: the single-run reference (MSER on block medians), used
//     for fewer than 3 runs;
//   - figures.go: a run's figures against a reference (contamination,
//     coverage, p50/p99 distortion, TTSS error, relapses, the gate) and the
//     checks of its kind; table.go the per-case table;
//   - replay.go and settled.go: the online tags and the settled view a
//     detector configuration would have given on recorded runs (-replay),
//     judged the same way.
//
// docs/tag-quality.md describes the method and the figures.
package harness

// Package results is the results folder of a test run: its data model
// (summary.json, with a schema version), the HdrHistogram logs, the detector
// and iteration series, the self-contained HTML report, merging the folders of
// several k6 instances, comparing two runs, and the probe of the load
// generator's environment. It knows nothing of k6: the k6 glue fills a Run,
// the `k6 x regime` subcommands and the tests load and write folders.
package results

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xk6-regime/xk6-regime/detector"
)

// SchemaVersion is the version of summary.json's layout. It changes when a
// field changes meaning or goes away (new fields keep the version); the
// tools read every version from OldestSchemaVersion on, and say so when
// they set folders of different versions side by side (SchemaChanges).
const SchemaVersion = 2

// OldestSchemaVersion is the oldest summary.json the tools read.
const OldestSchemaVersion = 1

// SchemaChanges says what changed in version v (from v-1): what compare,
// history and profile warn about when their folders mix versions (merge
// writes a warning of its own, schemaOneMergeWarning).
var SchemaChanges = map[int]string{
	2: "schema-1 folders written by a version before commit d609a47 (2026-11-27, about 16:20 UTC) count the connection-pool " +
		"cold start's last new connection from the run's first request (schema 2: from its phase's) and, before 3d431b0 " +
		"(minutes later), cold_start.excess_ms against the steady median (schema 2: the mean); those before 2026-11-27 " +
		"23:00 UTC hold 0 for an empty regime's or request row's percentiles (schema 2: null); a schema-1 folder does not " +
		"say which version wrote it",
}

// SchemaNote returns a warning when sums mix summary.json versions (what
// changed between them, dirs naming the folders), or "".
func SchemaNote(sums []*Summary, dirs []string) string {
	byVersion := map[int][]string{}
	for i, s := range sums {
		if s != nil {
			byVersion[s.Schema] = append(byVersion[s.Schema], dirs[i])
		}
	}
	if len(byVersion) < 2 {
		return ""
	}
	versions := slices.Sorted(maps.Keys(byVersion))
	var b strings.Builder
	fmt.Fprintf(&b, "these folders mix summary.json versions, so some figures may not be the same quantity side by side:")
	for _, v := range versions {
		names := byVersion[v]
		more := ""
		if len(names) > 3 {
			more = fmt.Sprintf(" and %d more", len(names)-3)
			names = names[:3]
		}
		fmt.Fprintf(&b, " schema %d: %s%s;", v, strings.Join(names, ", "), more)
	}
	for v := versions[0] + 1; v <= versions[len(versions)-1]; v++ {
		fmt.Fprintf(&b, " what changed in schema %d: %s;", v, SchemaChanges[v])
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Regimes in order.
var Regimes = detector.RegimeNames()

// File names inside a run folder.
const (
	SummaryFile      = "summary.json"
	ReportFile       = "report.html"
	RequestsHLogFile = "requests.hlog"
	WindowsFile      = "windows.csv"
	hdrDir           = "hdr"
	seriesDir        = "series"
)

// Summary is summary.json.
type Summary struct {
	Schema    int       `json:"schema"`
	RunID     string    `json:"run_id"`
	TestID    string    `json:"testid,omitempty"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	DurationS float64   `json:"duration_s"`
	// Instances is 1 for one k6 process, the number of folders merged otherwise.
	Instances  int      `json:"instances"`
	MergedFrom []string `json:"merged_from,omitempty"`
	// Aborted is set when the run did not reach its natural end: End says how
	// it ended (kept for readers of files written before End existed).
	Aborted bool `json:"aborted,omitempty"`
	// End says how the run ended; nil in files written before it existed.
	End *RunEnd `json:"end,omitempty"`

	Environment Environment `json:"environment"`
	// InstanceEnvironments holds each instance's environment after a merge.
	InstanceEnvironments []Environment `json:"instance_environments,omitempty"`

	Scenarios           map[string]*Scenario               `json:"scenarios"`
	Requests            []*RequestRow                      `json:"requests"`
	ConnectionColdStart map[string]*ConnPhase              `json:"connection_cold_start"`
	Tracked             map[string]map[string]*TrackedCell `json:"tracked,omitempty"`
	Series              SeriesInfo                         `json:"series"`
	// IterationsWithoutScenario counts the iterations that carried no
	// scenario tag (systemTags without 'scenario'): in no scenario's regimes.
	IterationsWithoutScenario int64    `json:"iterations_without_scenario,omitempty"`
	Warnings                  []string `json:"warnings"`
	// Thresholds holds k6's threshold verdicts (metric -> expression -> ok), when given.
	Thresholds map[string]map[string]bool `json:"thresholds,omitempty"`
	// Profile names the profile that judged the run and its checks (nil:
	// none; regime.configure's profile setting or K6_REGIME_PROFILE).
	Profile *ProfileUse    `json:"profile,omitempty"`
	Extra   map[string]any `json:"extra,omitempty"`
}

// Scenario is what the detectors found in one scenario, with the iteration
// duration distribution of each regime.
type Scenario struct {
	Scope  string `json:"scope,omitempty"`
	Input  string `json:"input,omitempty"`
	Class  string `json:"class"`
	Regime string `json:"regime"` // at the end of the run
	Steady bool   `json:"steady"` // the steady gate: steady state reached and held to the end
	// HeldFraction is the share of the scenario's time the final steady
	// state spans (0 when not steady at the end); the gate needs
	// GateFraction of it.
	HeldFraction float64 `json:"held_fraction"`
	GateFraction float64 `json:"gate_fraction"`
	// LevelDrift is the change of the level from the first to the last
	// third of the final steady state (0.3: 30% slower); the gate fails when
	// it lies beyond the detector's median_tolerance and the level kept
	// moving (detector.Drift). Nil when not measured
	// (not steady at the end, or a steady state shorter than stable_windows
	// windows, or the benchmark method).
	LevelDrift *float64 `json:"level_drift"`
	Iterations int64    `json:"iterations"`
	Untagged   int64    `json:"untagged"`
	// StartedMs is the scenario's start (Unix ms), from which TTSS and the
	// settled boundary count (a phase chained with startTime starts after
	// the test); 0 in files written before it was kept.
	StartedMs float64 `json:"started_ms,omitempty"`
	// TTSSMs is the time to steady state: from the scenario start to the
	// (retroactive) start of the steady segment; nil when never reached.
	TTSSMs          *float64 `json:"ttss_ms"`
	DeclaredAfterMs *float64 `json:"declared_after_ms"`
	// WarmupMs is the warm-up duration: from the end of the cold tail to the
	// start of steady state; nil when either is missing.
	WarmupMs    *float64         `json:"warmup_duration_ms"`
	ColdEnd     *Point           `json:"cold_end"`
	SteadyStart *Point           `json:"steady_start"`
	DeclaredAt  *Point           `json:"declared_at"`
	Relapses    int64            `json:"relapses"`
	ColdStart   ColdStart        `json:"cold_start"`
	Regimes     map[string]*Dist `json:"regimes"`
	Transitions []Transition     `json:"transitions"`
	// Endpoints holds per-endpoint detections for scope "endpoint".
	Endpoints map[string]*Detection `json:"endpoints,omitempty"`
	// EndpointLimit reports the endpoint values beyond the scenario's
	// maxEndpoints; nil when there were none.
	EndpointLimit *EndpointLimit `json:"endpoint_limit,omitempty"`
	// Settled is the settled view: the scenario re-segmented at the end of
	// the run with the whole run in hand; nil in files written before it
	// existed.
	Settled *Settled `json:"settled,omitempty"`
}

// Settled is the settled view of a scenario (its iterations, boundary the
// latest of its series') or of one endpoint (its requests).
type Settled struct {
	// Steady: a steady state was found and held to the end.
	Steady bool `json:"steady"`
	// Class: flat, warm-up, slowdown or no-steady-state.
	Class string `json:"class"`
	// Reason says why there is no steady state ("" when steady).
	Reason string `json:"reason,omitempty"`
	// Partial: the run was interrupted; the view judges what it saw.
	Partial bool `json:"partial,omitempty"`
	// FromSeries: re-settled by merge from the instances' iteration series,
	// which carry no request counts: no error rate, no endpoint views.
	// Approximate: some points of those series held several iterations,
	// recorded at their median, so the view's figures above the median
	// (p90 to max) understate the tail.
	FromSeries  bool `json:"from_series,omitempty"`
	Approximate bool `json:"approximate,omitempty"`
	// Boundary is where the steady state starts: the number of
	// observations that started before it, and its time; TTSSMs the time
	// from the scenario's start to it. Nil when not steady.
	Boundary *Point   `json:"boundary"`
	TTSSMs   *float64 `json:"ttss_ms"`
	// AtMs is the boundary's time (Unix ms; 0 when not steady or unknown):
	// the clock of windows.csv and the transitions.
	AtMs float64 `json:"at_ms,omitempty"`
	// LevelMs is the steady median level; Tolerance and TailTolerance the
	// least half-widths of the run's envelope of block medians and of
	// block p99s (relative); Trend the Theil-Sen change of the level over the
	// steady stretch, TrendLow..TrendHigh its 95% interval.
	LevelMs       float64 `json:"level_ms"`
	Tolerance     float64 `json:"tolerance"`
	TailTolerance float64 `json:"tail_tolerance"`
	// Envelope and TailEnvelope are the run's own envelopes of its block
	// medians and block p99s, [low, high] relative to their level: how far
	// the second half of the run strayed (at least the tolerances); blocks
	// at its start beyond them are warm-up. Absent from older summaries.
	Envelope     *[2]float64 `json:"envelope,omitempty"`
	TailEnvelope *[2]float64 `json:"tail_envelope,omitempty"`
	Trend        float64     `json:"trend"`
	TrendLow     float64     `json:"trend_low"`
	TrendHigh    float64     `json:"trend_high"`
	// Blocks judged (of at least a second each), SteadyBlocks of them steady;
	// BucketMs the width of the time buckets at the end.
	Blocks       int     `json:"blocks"`
	SteadyBlocks int     `json:"steady_blocks"`
	BucketMs     float64 `json:"bucket_ms"`
	// Stats are the figures of the steady observations (nil when not steady).
	Stats *SettledStats `json:"stats"`
	// Early and Late count the observations the view kept in its first or
	// last time bucket because they started before the scenario's start or
	// implausibly far ahead of the run (a clock that stepped), Clamped those
	// outside 1 µs..1 h (recorded at the bound); absent when none. The
	// scenario's view counts those of the series its boundary comes from
	// (each endpoint's view its own). A merged folder's view, re-settled
	// from the instances' series, does not count them; the instances'
	// warnings are kept.
	Early   int64 `json:"early,omitempty"`
	Late    int64 `json:"late,omitempty"`
	Clamped int64 `json:"clamped,omitempty"`
	// Online compares the online tags with the settled view (scenario
	// level only; nil without steady state or steady-tagged iterations).
	Online *OnlineVsSettled `json:"online,omitempty"`
	// Endpoints holds the settled view of each endpoint's requests (scope
	// "endpoint").
	Endpoints map[string]*Settled `json:"endpoints,omitempty"`
}

// SettledStats are the figures of what a settled view calls steady (ms;
// error rate over the requests that started in it, nil without requests).
type SettledStats struct {
	Count     int64    `json:"count"`
	Requests  int64    `json:"requests"`
	Failed    int64    `json:"failed"`
	ErrorRate *float64 `json:"error_rate"`
	MinMs     float64  `json:"min_ms"`
	MeanMs    float64  `json:"mean_ms"`
	P50Ms     float64  `json:"p50_ms"`
	P90Ms     float64  `json:"p90_ms"`
	P95Ms     float64  `json:"p95_ms"`
	P99Ms     float64  `json:"p99_ms"`
	MaxMs     float64  `json:"max_ms"`
}

// OnlineVsSettled is how far the online steady tags were from the settled
// view: Contamination the share of steady-tagged iterations that started
// before the settled boundary, Coverage the share of the settled steady
// iterations tagged steady online, StartDiffMs the online TTSS minus the
// settled one (negative: online declared early).
type OnlineVsSettled struct {
	SteadyTagged  int64    `json:"steady_tagged"`
	Contamination float64  `json:"contamination"`
	Coverage      float64  `json:"coverage"`
	StartDiffMs   *float64 `json:"start_diff_ms"`
}

// EndpointLimit is what went beyond a scenario's cap on endpoint values:
// requests of further values share the request rows of endpoint "(other)",
// and with scope "endpoint" their observations share one detector.
type EndpointLimit struct {
	Max int `json:"max"`
	// Values counts the distinct values beyond the cap (a lower bound when
	// ValuesExact is false: counting stops at 10,000).
	Values      int  `json:"values"`
	ValuesExact bool `json:"values_exact"`
	// Requests went to the "(other)" request rows; Observations to the
	// "(other)" detector.
	Requests     int64    `json:"requests"`
	Observations int64    `json:"observations"`
	Examples     []string `json:"examples"`
}

// Detection is one endpoint detector's findings.
type Detection struct {
	Class       string `json:"class"`
	ColdEnd     *Point `json:"cold_end"`
	SteadyStart *Point `json:"steady_start"`
	DeclaredAt  *Point `json:"declared_at"`
}

// Point locates an observation: its index and the time since the scenario start.
type Point struct {
	Index     int64   `json:"index"`
	ElapsedMs float64 `json:"elapsed_ms"`
}

// ColdStart is the cost of the cold start.
type ColdStart struct {
	// DurationMs sums the durations of the iterations tagged cold.
	DurationMs float64 `json:"duration_ms"`
	Iterations int64   `json:"iterations"`
	// ExcessMs is what the cold and warm-up iterations took beyond the steady
	// median; nil without steady iterations.
	ExcessMs *float64 `json:"excess_ms"`
}

// Transition is one regime change of a scenario (or one of its endpoints).
type Transition struct {
	Endpoint string `json:"endpoint,omitempty"`
	Kind     string `json:"kind"`
	From     string `json:"from"`
	To       string `json:"to"`
	// Index and AtMs (Unix ms) are where it was decided online; Boundary and
	// BoundaryMs where, in hindsight, the new regime began.
	Index      int64   `json:"index"`
	Boundary   int64   `json:"boundary"`
	AtMs       float64 `json:"at_ms,omitempty"`
	BoundaryMs float64 `json:"boundary_ms,omitempty"`
	ElapsedMs  float64 `json:"elapsed_ms"`
	Instance   int     `json:"instance,omitempty"`
}

// Dist is a latency distribution (ms) with its count and rate. Percentiles
// come from an HDR histogram (written next to summary.json); count, sum, min
// and max are exact.
type Dist struct {
	Count int64   `json:"count"`
	SumMs float64 `json:"sum_ms"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
	// Rate is count per second over the span: from FirstMs to LastMs (Unix
	// ms: the first start and the last end of the regime's iterations).
	Rate    float64 `json:"rate"`
	SpanMs  float64 `json:"span_ms"`
	FirstMs float64 `json:"first_ms,omitempty"`
	LastMs  float64 `json:"last_ms,omitempty"`
	// Errors counts failed iterations or requests, where known.
	Errors int64 `json:"errors"`
	// HLog is the HdrHistogram log holding the distribution (values in
	// microseconds), relative to the run folder, with the Tag when shared.
	HLog string `json:"hlog,omitempty"`
	Tag  string `json:"hdr_tag,omitempty"`
}

// RequestRow is one cell of the request breakdown: scenario x phase x regime
// x endpoint x protocol.
type RequestRow struct {
	Scenario string `json:"scenario"`
	Phase    string `json:"phase"`
	Regime   string `json:"regime"`
	Endpoint string `json:"endpoint"`
	Protocol string `json:"protocol"`
	Dist
	ErrorRate           float64  `json:"error_rate"`
	Status5xx           int64    `json:"status_5xx"`
	NoResponse          int64    `json:"no_response"`
	NewConnections      int64    `json:"new_connections"`
	ConnectMs           float64  `json:"connect_ms"`
	TLSMs               float64  `json:"tls_ms"`
	LastNewConnectionMs *float64 `json:"last_new_connection_ms"`
}

// Key identifies the row across runs.
func (r *RequestRow) Key() string {
	return r.Scenario + "\x00" + r.Phase + "\x00" + r.Regime + "\x00" + r.Endpoint + "\x00" + r.Protocol
}

// tableKey is what orders a request row in the tables printed by phase
// (report.html's sections, compare's table): phase, endpoint, scenario,
// protocol, then regime in the regimes' order (unknown names last, then by
// name). summary.json and summary() list their rows by CompareRequests.
type tableKey struct{ phase, endpoint, scenario, proto, regime string }

func (r *RequestRow) tableKey() tableKey {
	return tableKey{r.Phase, r.Endpoint, r.Scenario, r.Protocol, r.Regime}
}

func compareTableKeys(a, b tableKey) int {
	return cmp.Or(cmp.Compare(a.phase, b.phase), cmp.Compare(a.endpoint, b.endpoint),
		cmp.Compare(a.scenario, b.scenario), cmp.Compare(a.proto, b.proto), compareRegimes(a.regime, b.regime))
}

// CompareRequests orders request rows as summary.json and the k6
// extension's summary() list them: by scenario, phase, endpoint and
// protocol, then regime in the regimes' order (unknown names last). The
// tables printed by phase (report.html, compare) use compareTableKeys.
func CompareRequests(scenarioA, phaseA, endpointA, protoA, regimeA, scenarioB, phaseB, endpointB, protoB, regimeB string) int {
	return cmp.Or(cmp.Compare(scenarioA, scenarioB), cmp.Compare(phaseA, phaseB), cmp.Compare(endpointA, endpointB),
		cmp.Compare(protoA, protoB), compareRegimes(regimeA, regimeB))
}

// compareRegimes orders regimes as the regimes' order, unknown names last
// and by name (two names of no regime: a total order all the same).
func compareRegimes(a, b string) int {
	return cmp.Or(cmp.Compare(regimeIndex(a), regimeIndex(b)), cmp.Compare(a, b))
}

// ConnPhase is the connection-pool cold start of one phase: requests that
// opened a new connection, and the errors, by regime.
type ConnPhase struct {
	Requests               int64            `json:"requests"`
	NewConnections         int64            `json:"new_connections"`
	ConnectMs              float64          `json:"connect_ms"`
	TLSMs                  float64          `json:"tls_ms"`
	NewConnectionsByRegime map[string]int64 `json:"new_connections_by_regime"`
	Errors                 int64            `json:"errors"`
	Status5xx              int64            `json:"status_5xx"`
	NoResponse             int64            `json:"no_response"`
	ErrorsByRegime         map[string]int64 `json:"errors_by_regime"`
	LastNewConnectionMs    *float64         `json:"last_new_connection_ms"`
}

// Add sums o into p (counts, times, per-regime counts; the latest new
// connection): one phase's cold start from several cells or instances.
func (p *ConnPhase) Add(o *ConnPhase) {
	p.Requests += o.Requests
	p.NewConnections += o.NewConnections
	p.ConnectMs += o.ConnectMs
	p.TLSMs += o.TLSMs
	p.Errors += o.Errors
	p.Status5xx += o.Status5xx
	p.NoResponse += o.NoResponse
	if p.NewConnectionsByRegime == nil {
		p.NewConnectionsByRegime = map[string]int64{}
	}
	if p.ErrorsByRegime == nil {
		p.ErrorsByRegime = map[string]int64{}
	}
	for k, v := range o.NewConnectionsByRegime {
		p.NewConnectionsByRegime[k] += v
	}
	for k, v := range o.ErrorsByRegime {
		p.ErrorsByRegime[k] += v
	}
	p.LastNewConnectionMs = maxPtr(p.LastNewConnectionMs, o.LastNewConnectionMs)
}

// TrackedCell aggregates one tracked custom metric in one phase.
type TrackedCell struct {
	Type  string  `json:"type"`
	Count int64   `json:"count"`
	Sum   float64 `json:"sum"`
	Last  float64 `json:"last"`
	Max   float64 `json:"max"`
	// NonFinite counts the samples left out of the figures above: ±Inf
	// (k6 refuses NaN, not x/0).
	NonFinite int64 `json:"non_finite,omitempty"`
}

// SeriesInfo says what the series files hold.
type SeriesInfo struct {
	Windows        string `json:"windows"`
	WindowsDropped int64  `json:"windows_dropped"`
	// WindowsStride: windows.csv holds the windows whose seq (numbered per
	// scope) is a multiple of it (1: every window; doubled each time the
	// bound is reached).
	WindowsStride int64                     `json:"windows_stride,omitempty"`
	Iterations    map[string]IterSeriesInfo `json:"iterations"`
}

// IterSeriesInfo describes one scenario's iteration series file.
type IterSeriesInfo struct {
	File       string `json:"file"`
	Iterations int64  `json:"iterations"`
	Points     int    `json:"points"`
	// BucketWidth is 1 while every iteration is kept; beyond the limit the
	// series is aggregated into buckets of up to BucketWidth iterations.
	BucketWidth int    `json:"bucket_width"`
	Aggregated  bool   `json:"aggregated"`
	Note        string `json:"note,omitempty"`
}

// ReadSummary reads a run folder's summary.json.
func ReadSummary(dir string) (*Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, SummaryFile), err)
	}
	if s.Schema < OldestSchemaVersion || s.Schema > SchemaVersion {
		return nil, fmt.Errorf("%s: schema version %d, this tool reads versions %d to %d", filepath.Join(dir, SummaryFile), s.Schema, OldestSchemaVersion, SchemaVersion)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SummaryFile), err)
	}
	return &s, nil
}

// How a run ended (RunEnd.Status).
const (
	// EndCompleted: the run reached its planned end (its thresholds may
	// still have failed: see Summary.Thresholds).
	EndCompleted = "completed"
	// EndInterrupted: stopped by a signal (Ctrl+C, SIGTERM) or by k6's REST API.
	EndInterrupted = "interrupted"
	// EndAbortedByThreshold: a threshold with abortOnFail stopped the run.
	EndAbortedByThreshold = "aborted_by_threshold"
	// EndAbortedByScript: test.abort(), or an exception the script did not catch.
	EndAbortedByScript = "aborted_by_script"
	// EndTimedOut: setup() or teardown() ran past its timeout.
	EndTimedOut = "timed_out"
	// EndAbortedByOutput: an output stopped the run.
	EndAbortedByOutput = "aborted_by_output"
	// EndAborted: stopped before its end for a reason k6 did not give.
	EndAborted = "aborted"
)

// RunEnd says how a run ended.
type RunEnd struct {
	Status string `json:"status"`
	// Signal names the signal that interrupted the run (SIGINT, SIGTERM).
	Signal string `json:"signal,omitempty"`
	// Thresholds lists the abortOnFail thresholds that had failed
	// ("metric: expression") when the run was aborted by a threshold.
	Thresholds []string `json:"thresholds,omitempty"`
	// Detail is k6's own message when it gave one.
	Detail string `json:"detail,omitempty"`
	// ExitCode is k6's exit status, when the run's end was known to the
	// extension (nil when the folder was written before k6 decided it).
	ExitCode *int `json:"exit_code,omitempty"`
}

// Completed says whether the run reached its planned end. Files written
// before End existed count as completed unless marked aborted.
func (s *Summary) Completed() bool {
	if s.End == nil {
		return !s.Aborted
	}
	return s.End.Status == EndCompleted
}

// EndText describes how the run ended, in one line.
func (s *Summary) EndText() string {
	e := s.End
	if e == nil {
		if s.Aborted {
			return "interrupted (no details: written before xk6-regime recorded how runs end)"
		}
		return "unknown (written before xk6-regime recorded how runs end)"
	}
	var b strings.Builder
	switch e.Status {
	case EndCompleted:
		b.WriteString("completed: the run reached its planned end")
	case EndInterrupted:
		b.WriteString("interrupted")
		if e.Signal != "" {
			b.WriteString(" by signal " + e.Signal)
		}
		b.WriteString(": the figures cover only the part that ran")
	case EndAbortedByThreshold:
		b.WriteString("aborted by a threshold with abortOnFail")
		if len(e.Thresholds) > 0 {
			b.WriteString(" (" + strings.Join(e.Thresholds, "; ") + ")")
		}
		b.WriteString(": the figures cover only the part that ran")
	case EndAbortedByScript:
		b.WriteString("aborted by the script (test.abort() or an uncaught exception): the figures cover only the part that ran")
	case EndTimedOut:
		b.WriteString("timed out (setup() or teardown() ran past its timeout)")
	case EndAbortedByOutput:
		b.WriteString("aborted by an output: the figures cover only the part that ran")
	default:
		b.WriteString(e.Status + ": the run stopped before its planned end; the figures cover only the part that ran")
	}
	if e.Detail != "" {
		b.WriteString("; k6: " + e.Detail)
	}
	if e.ExitCode != nil {
		fmt.Fprintf(&b, " (k6 exit status %d)", *e.ExitCode)
	}
	return b.String()
}

// OnlyScenarios returns a shallow copy of s that keeps the scenarios named
// (and their request rows) only: what compare --scenario judges. A name s
// does not have is left out; the caller checks the names.
func (s *Summary) OnlyScenarios(names []string) *Summary {
	keep := map[string]bool{}
	for _, n := range names {
		keep[n] = true
	}
	c := *s
	c.Scenarios = map[string]*Scenario{}
	for n, sc := range s.Scenarios {
		if keep[n] {
			c.Scenarios[n] = sc
		}
	}
	c.Requests = nil
	for _, r := range s.Requests {
		if keep[r.Scenario] {
			c.Requests = append(c.Requests, r)
		}
	}
	return &c
}

// SortedScenarios lists the scenario names in order.
func (s *Summary) SortedScenarios() []string {
	names := make([]string, 0, len(s.Scenarios))
	for n := range s.Scenarios {
		names = append(names, n)
	}
	sortStrings(names)
	return names
}

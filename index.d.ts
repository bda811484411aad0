// Types of the k6/x/regime JS module (xk6-regime).

/** A regime: the phase of a run an iteration started in. */
export type Regime = 'cold' | 'warmup' | 'steady';
/** How a detector classes its series. */
export type Class = 'undecided' | 'flat' | 'warmup' | 'slowdown' | 'no-steady-state';

export interface ScenarioSettings {
  /** One detector per scenario, or per scenario x endpoint tag. */
  scope?: 'scenario' | 'endpoint';
  /** What the detectors learn from (request is implied by scope endpoint). */
  input?: 'iteration' | 'request' | 'observe';
  /** Tag naming endpoints (default 'endpoint'). */
  endpointTag?: string;
  /** Detector options in snake_case (window_min_duration; the `k6 x regime detect` flags spell them in
   * kebab-case; see detector/config.go), over the
   * service preset; an object naming `method: 'benchmark'` starts from the benchmark preset instead. */
  detector?: Record<string, number | string | boolean>;
  /** The steady gate passes when the scenario ends in steady state declared early enough to span at least
   * this share of the scenario's time (0 to 1, default 0.5). */
  gateFraction?: number;
  /**
   * Most endpoint values of the scenario (1..100000, default 100) with a detector of their own (scope
   * endpoint) and request rows of their own; further values share endpoint "(other)", counted in the
   * summary's endpoint_limit and warned about.
   */
  maxEndpoints?: number;
}

export interface Settings extends ScenarioSettings {
  /** auto: every iteration (default); wrap: only the iterations that call a function passed through wrap(), from that call to their end; off: no tag. */
  tagging?: 'auto' | 'wrap' | 'off';
  /** Custom metrics aggregated per phase in the summary. */
  track?: string[];
  /** Per-scenario settings; keys must be scenarios of options.scenarios. */
  scenarios?: Record<string, ScenarioSettings>;
  /** Iterations the results' series keep one by one per scenario before they aggregate (1,000 to
   * 10,000,000; default 100,000; about 40 bytes each). */
  seriesLimit?: number;
  /** Path of a profile.json (k6 x regime profile) of earlier runs of this script: the detectors take its
   * warm-up end and steady level as a prior, and the settled figures are set against its runs at the end
   * (regime_profile_* metrics, summary().profile). K6_REGIME_PROFILE wins over it. */
  profile?: string;
}

/** Validate and install the settings (init context). Throws, naming every bad option value (an unknown key or a wrongly typed value alone). */
export function configure(options: object, settings?: Settings): void;
/** fn, setting the regime tag at each call (for tagging: 'wrap'). Init context. */
export function wrap<F extends (...args: any[]) => any>(fn: F): F;
/** Feed one measurement (finite, >= 1e-300) to the detector of the VU's scenario (input: 'observe'). */
export function observe(value: number): void;
/** The regime of the running iteration. Throws outside a scenario iteration (setup, teardown, handleSummary). */
export function current(): Regime;

export interface Point { index: number; elapsed_ms: number }
export interface Distribution {
  count: number; sum_ms: number;
  min: number | null; mean: number | null; p50: number | null; p90: number | null;
  p95: number | null; p99: number | null; p99_9: number | null; max: number | null;
}
/** One detector's findings (an endpoint's, with scope 'endpoint'). */
export interface Detection {
  class: Class; cold_end: Point | null; steady_start: Point | null; declared_at: Point | null;
  observations?: number; detector_relapses?: number; out_of_range?: number;
}
export interface ScenarioSummary {
  scope: string; input: string; regime: Regime; iterations: number; untagged: number;
  regimes: Record<Regime, Distribution>;
  class: Class; cold_end: Point | null; steady_start: Point | null; declared_at: Point | null;
  ttss_ms: number | null; declared_after_ms: number | null;
  /** The steady gate (regime_steady): steady at the end, declared early enough (gate_fraction), its level
   * held (level_drift). */
  steady: boolean;
  /** Share of the scenario's time the final steady state spans (0 when not steady at the end). */
  held_fraction: number; gate_fraction: number;
  /** The scenario's start (Unix ms), from which TTSS and the settled boundary count; absent when unknown. */
  started_ms?: number;
  /** Change of the level from the first to the last third of the final steady state (0.3: 30% slower);
   * the gate fails when it lies beyond the detector's median_tolerance and the steady windows' medians are
   * monotone (Kendall's tau >= 0.75: a drift, not a level that stepped once). Null when not measured (not
   * steady at the end, a steady state shorter than stable_windows windows, or the benchmark method). */
  level_drift: number | null;
  relapses: number;
  /** the cold-tagged iterations' summed duration; excess_ms: what the cold and warm-up iterations took beyond the
   * steady mean (null before steady state) */
  cold_start: { duration_ms: number; iterations: number; excess_ms: number | null };
  /** The scenario detector's own counts (scope 'scenario', once it has seen an observation; absent with
   * scope 'endpoint', where each endpoint has them): observations judged, its relapses, values it could not
   * use (not positive and finite, or beyond its histogram's range). */
  observations?: number; detector_relapses?: number; out_of_range?: number;
  /** Per endpoint (scope 'endpoint'). */
  endpoints?: Record<string, Detection>;
  /** Endpoint values beyond maxEndpoints, when there were any. */
  endpoint_limit?: { max: number; values: number; values_exact: boolean; requests: number; observations: number; examples: string[] };
  transitions: Array<{ endpoint: string; kind: string; from: Regime; to: Regime; index: number; boundary: number; elapsed_ms: number }>;
  /** Transitions beyond the ones kept (the list is bounded). */
  transitions_dropped: number;
  /** The settled view: the whole run re-segmented at test end (partial before it, or when the run was cut short);
   * { error } when it could not be written (a non-finite figure: a bug; summary.json then has a warning instead). */
  settled: Settled | { error: string };
}
/** The settled view of a scenario (its iterations) or of an endpoint (its requests). */
export interface Settled {
  steady: boolean; class: Class; reason?: string; partial?: boolean;
  /** Re-settled by merge from the instances' series (no error rate, no endpoint views); approximate when points
   * of those series held several iterations, so its figures above the median understate the tail. */
  from_series?: boolean; approximate?: boolean;
  /** Where steady state starts: observations started before it, ms from the scenario start. Null when not steady. */
  boundary: { index: number; elapsed_ms: number } | null;
  ttss_ms: number | null;
  /** The boundary's time, Unix ms (absent when not steady). */
  at_ms?: number;
  /** The steady median level; tolerance and tail_tolerance: the least half-widths of the envelopes. */
  level_ms: number; tolerance: number; tail_tolerance: number;
  /** The run's own envelopes of its 1-s block medians and p99s, [low, high] relative to their level (second half of the run); blocks at the start beyond them are warm-up. */
  envelope?: [number, number]; tail_envelope?: [number, number];
  /** Theil-Sen change of the level over the steady stretch, with its 95% interval. */
  trend: number; trend_low: number; trend_high: number;
  blocks: number; steady_blocks: number; bucket_ms: number;
  stats: {
    count: number; requests: number; failed: number; error_rate: number | null;
    min_ms: number; mean_ms: number; p50_ms: number; p90_ms: number; p95_ms: number; p99_ms: number; max_ms: number;
  } | null;
  /** The online tags against the settled view (scenario level). */
  online?: { steady_tagged: number; contamination: number; coverage: number; start_diff_ms: number | null };
  /** Observations kept in the first or last time bucket: started before the scenario, or implausibly far
   * ahead of the run (a clock that stepped); and durations outside 1 µs..1 h, clamped. Absent when none. */
  early?: number; late?: number; clamped?: number;
  endpoints?: Record<string, Settled>;
}
/** One cell of the request breakdown; the percentiles (ms) are absent and error_rate null without requests. */
export interface RequestRow {
  scenario: string; phase: string; regime: Regime | ''; endpoint: string; protocol: 'http' | 'grpc';
  count: number; errors: number; status_5xx: number; no_response: number; error_rate: number | null;
  /** Requests that opened a new connection, the connect and TLS time they added, ms from the first request of
   * the row's phase to the last one (null when none). */
  new_connections: number; connect_ms: number; tls_ms: number; last_new_connection_ms: number | null;
  p50?: number; p90?: number; p95?: number; p99?: number; p99_9?: number; max?: number;
}
export interface Summary {
  run_started: string | null;
  scenarios: Record<string, ScenarioSummary>;
  /** per scenario x phase x regime x endpoint x protocol: count, errors, percentiles, new connections */
  requests: RequestRow[];
  /** per phase: requests that opened new connections, their connect/TLS time, errors by regime */
  connection_cold_start: Record<string, Record<string, unknown>>;
  /** tracked metrics per phase: count, sum, last, max; non_finite counts the samples (±Infinity) left out of them */
  tracked: Record<string, Record<string, { type: string; count: number; sum: number; last: number; max: number; non_finite?: number }>>;
  dropped_samples: number;
  /** iterations whose samples had no scenario tag (systemTags without scenario) */
  iterations_without_scenario: number;
  /** The profile that judged the run and its checks (null without one; checks are made at test end). */
  profile: ProfileUse | null;
  /** How the run ended, in handleSummary (after the test); null when summary() is called during the test. */
  end: RunEnd | null;
}
/** How a run ended: summary.json's end. */
export interface RunEnd {
  status: 'completed' | 'interrupted' | 'aborted_by_threshold' | 'aborted_by_script' | 'timed_out' | 'aborted_by_output' | 'aborted';
  /** the signal that interrupted the run (SIGINT, SIGTERM) */
  signal?: string;
  /** the abortOnFail thresholds that had failed ("metric: expression") */
  thresholds?: string[];
  /** k6's own message */
  detail?: string;
  /** k6's exit status, when known */
  exit_code?: number;
}
/** One settled figure of the run set against the profile's runs. */
export interface ProfileCheck {
  scenario: string; endpoint?: string;
  /** ttss: against the p90 of the profile runs' TTSS; p50, p99: against the median of their steady p50 / p99. */
  figure: 'ttss' | 'p50' | 'p99';
  profile_ms: number;
  /** Null when the run has no such figure (no settled steady state): never a pass. */
  run_ms: number | null;
  /** run_ms / profile_ms; spread: the largest ratio one of the profile's own runs reached. */
  ratio: number | null; spread: number;
}
export interface ProfileUse { path: string; created: string; runs: string[]; checks: ProfileCheck[] }
/** What the detectors found (for handleSummary). */
export function summary(): Summary;
export interface SaveOptions {
  /** Parent folder (default 'results'); the run folder is <dir>/<UTC start>[-<testid>]-<random suffix>, written complete or not at all. */
  dir?: string;
  testid?: string;
  /** Anything to keep in summary.json under "extra" (profile, schedule, ...). */
  extra?: Record<string, unknown>;
  /** metric -> expression -> passed, from handleSummary's data. */
  thresholds?: Record<string, Record<string, boolean>>;
  /** Extra files (name -> text) to write in the run folder; the folder's own names (summary.json, ...) are refused. */
  files?: Record<string, string>;
  /** Write report.html (default true). */
  report?: boolean;
  /** Mark the run as aborted when the extension found it completed (it records how a run ended by itself). */
  aborted?: boolean;
  /** When the folder cannot be written, make k6 exit with status 111 (if it would exit 0). */
  required?: boolean;
}
/** Write results/<run id>/ (summary.json, HdrHistogram logs, series, report.html); returns its path. handleSummary only. */
export function saveResults(opts?: SaveOptions): string;
/** The console regime table. */
export function textSummary(): string;

declare const regime: {
  configure: typeof configure; wrap: typeof wrap; observe: typeof observe; current: typeof current;
  summary: typeof summary; saveResults: typeof saveResults; textSummary: typeof textSummary;
};
export default regime;

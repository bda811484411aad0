// Types of the thresholds helper (thresholds/index.js).

/** A k6 threshold expression ('p(95)<50') or its object form. */
export type ThresholdRule = string | { threshold: string; abortOnFail?: boolean; delayAbortEval?: string };
/** A k6 thresholds object: sub-metric name -> rules. */
export type Thresholds = Record<string, ThresholdRule[]>;

export interface SteadyOptions {
  /** Phases (scenario tags.phase values) whose steady samples are judged; one threshold per phase. */
  phases?: string[];
  /** The script's options.scenarios, to check phases and scenario names against. */
  scenarios: Record<string, { tags?: Record<string, string> } & Record<string, unknown>>;
  /** Extra scenario names to gate, beyond those of the phases. */
  scenarioNames?: string[];
  /** Add regime_steady{scenario}: rate==1 and iterations{regime:steady,scenario}: count>0 per gated scenario (default true). */
  gate?: boolean;
  /**
   * Counters whose count guards a budget's samples, per metric, beside k6's own (http_req_* -> http_reqs,
   * iteration_duration -> iterations): e.g. { grpc_req_duration: 'my_grpc_reqs' } (k6 counts no gRPC requests).
   */
  counters?: Record<string, string>;
}

/**
 * Scope thresholds to steady samples of the phases, guard each budget with a count>0 of its counter (a Trend
 * budget of a metric with no counter: max>0 on its own sub-metric, as k6 takes no count on a Trend, which fails a Trend
 * whose every value is 0 or less, such as a perfect CLS: give such a metric a counter), and add the steady gate. Two spellings of one sub-metric
 * keep both budgets. Throws on unknown phases or scenarios (in the options, or a scenario or phase tag in a key
 * outside the phases judged), and when no scenario is gated (unless gate is false).
 */
export function steady(spec: Thresholds, opts: SteadyOptions): Thresholds;
/** The steady gate of each scenario. */
export function gate(scenarioNames: string[]): Thresholds;
/** Concatenate the rules of several threshold sets. */
export function merge(...sets: Thresholds[]): Thresholds;
/** Split 'metric{a:1,b:2}' into its metric name and tags. */
export function parseKey(key: string): { metric: string; tags: Record<string, string> };
/** One spelling of a sub-metric name: tags sorted by key. */
export function formatKey(metric: string, tags: Record<string, string>): string;
/** Scenario names whose tags.phase is one of phases; throws when one does not exist. */
export function gatedScenarios(scenarios: SteadyOptions['scenarios'], phases?: string[], names?: string[]): string[];

export interface SettledOptions {
  /** Phases (scenario tags.phase values) whose scenarios are judged. */
  phases?: string[];
  /** The script's options.scenarios. */
  scenarios: SteadyOptions['scenarios'];
  /** Extra scenario names to judge. */
  scenarioNames?: string[];
  /** Budget on the settled time to steady state (ms): regime_settled_ttss{scenario}: value<ttss. */
  ttss?: number;
  /** The tag endpoints are named by (default 'endpoint'), as in regime.configure(). */
  endpointTag?: string;
  /**
   * Metrics of your own that settled() skips although their names lie within 3 edits of one it judges
   * (tcp_req_duration, iteration_durations): without it settled() throws on them as likely typos.
   */
  custom?: string[];
}

/**
 * Thresholds on the settled view (the whole run re-segmented at its end) from the same budgets as steady():
 * request percentiles per endpoint, iteration_duration percentiles and http_req_failed rate per scenario,
 * with guards (regime_settled rate==1, regime_settled_count count>0) so that nothing passes on no data.
 * Keys of other metrics are skipped, but a metric name within 3 edits of one that has a settled counterpart throws
 * (a typo); unsupported rules throw, and so does a call that judges no scenario.
 * A scenario tag in a key keeps it to that scenario; endpoint budgets need scope 'endpoint' in regime.configure().
 */
export function settled(spec: Thresholds, opts: SettledOptions): Thresholds;

/** How much worse than the profile each figure may be (0.2: 20%). */
export interface ProfileShares {
  /** The settled TTSS against the p90 of the profile runs' TTSS. */
  ttss?: number;
  /** The settled steady p50 against the median of the profile runs'. */
  p50?: number;
  /** The settled steady p99 against the median of the profile runs'. */
  p99?: number;
}

export interface ProfiledOptions extends SettledOptions {
  /** Endpoint names judged per endpoint as well (scope 'endpoint'; p50 and p99). */
  endpoints?: string[];
}

/**
 * Thresholds against a profile of earlier runs (the run reads it with regime.configure's profile setting or
 * K6_REGIME_PROFILE): regime_profile_ttss/_p50/_p99 value<1+share per scenario (and endpoint), with guards
 * (regime_profile_checks{figure} count>0 per figure, regime_settled rate==1) so that nothing passes on no data.
 */
export function profiled(spec: ProfileShares, opts: ProfiledOptions): Thresholds;

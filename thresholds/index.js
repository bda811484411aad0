// Thresholds helper for xk6-regime: scope thresholds to the steady-state
// samples of named phases, and make a gate on steady samples fail, instead of
// passing on no data, when steady state was never reached.
//
//   import { steady } from '../thresholds/index.js';
//   export const options = {
//     scenarios: { gameplay: { executor: 'constant-arrival-rate', tags: { phase: 'gameplay' }, ... } },
//   };
//   options.thresholds = steady(
//     { 'http_req_duration{endpoint:initialize}': ['p(95)<50'] },
//     { phases: ['gameplay'], scenarios: options.scenarios },
//   );
//
// gives
//   'http_req_duration{endpoint:initialize,phase:gameplay,regime:steady}': ['p(95)<50'],
//   'http_reqs{endpoint:initialize,phase:gameplay,regime:steady}': ['count>0'], // this budget's samples exist
//   'regime_steady{scenario:gameplay}': ['rate==1'],        // 0 when steady state was never reached or was lost
//   'iterations{regime:steady,scenario:gameplay}': ['count>0'], // a gate on no steady sample fails

const NAME = /^([A-Za-z0-9_]+)(?:\{(.*)\})?$/;

// parseKey splits 'metric{a:1,b:2}' into the metric name and its tags.
export function parseKey(key) {
  const m = NAME.exec(String(key).trim());
  if (!m) {
    throw new Error(`thresholds: ${JSON.stringify(key)} is not a metric name with optional {tag:value,...}`);
  }
  const tags = {};
  if (m[2] !== undefined && m[2].trim() !== '') {
    for (const kv of m[2].split(',')) {
      const i = kv.indexOf(':');
      if (i <= 0) {
        throw new Error(`thresholds: tag ${JSON.stringify(kv)} in ${JSON.stringify(key)} is not key:value`);
      }
      tags[kv.slice(0, i).trim()] = kv.slice(i + 1).trim();
    }
  }
  return { metric: m[1], tags };
}

// formatKey writes one spelling of a sub-metric (tags sorted by key), since
// k6 treats {a:1,b:2} and {b:2,a:1} as the same sub-metric.
export function formatKey(metric, tags) {
  const keys = Object.keys(tags).sort();
  if (keys.length === 0) return metric;
  return `${metric}{${keys.map((k) => `${k}:${tags[k]}`).join(',')}}`;
}

// gatedScenarios returns the scenario names whose tags.phase is one of phases,
// throwing when a phase (or an explicitly named scenario) does not exist.
export function gatedScenarios(scenarios, phases, names) {
  if (!scenarios || typeof scenarios !== 'object' || Object.keys(scenarios).length === 0) {
    throw new Error('thresholds: pass the scenarios (options.scenarios) so phases can be checked against them');
  }
  for (const [opt, v] of [['phases', phases], ['scenarioNames', names]]) {
    if (v !== undefined && v !== null && !Array.isArray(v)) {
      throw new Error(`thresholds: ${opt} must be an array of names, got ${JSON.stringify(v)}`);
    }
  }
  const all = Object.keys(scenarios);
  const out = [];
  for (const name of names || []) {
    if (!all.includes(name)) {
      throw new Error(`thresholds: scenario ${JSON.stringify(name)} does not exist; scenarios: ${all.join(', ')}`);
    }
    out.push(name);
  }
  const known = [...new Set(all.map((n) => (scenarios[n].tags || {}).phase).filter(Boolean))];
  for (const phase of phases || []) {
    const matched = all.filter((n) => (scenarios[n].tags || {}).phase === phase);
    if (matched.length === 0) {
      throw new Error(`thresholds: phase ${JSON.stringify(phase)} matches no scenario (tags.phase); phases: ${known.join(', ') || 'none'}`);
    }
    for (const n of matched) if (!out.includes(n)) out.push(n);
  }
  return out.sort();
}

// COUNTERS: the counter whose count says that a budget's samples exist, per
// metric of k6's own. A Trend threshold (p(95)<50) and a Rate threshold
// below a value (rate<0.01) pass on a sub-metric with no sample: a
// misspelled endpoint, or a protocol whose every request threw. k6 counts
// no gRPC requests (grpc_req_duration has no counter): give one of your
// own in steady()'s counters option.
const COUNTERS = {
  http_req_duration: 'http_reqs', http_req_waiting: 'http_reqs', http_req_blocked: 'http_reqs',
  http_req_connecting: 'http_reqs', http_req_tls_handshaking: 'http_reqs', http_req_sending: 'http_reqs',
  http_req_receiving: 'http_reqs', http_req_failed: 'http_reqs', http_reqs: 'http_reqs',
  iteration_duration: 'iterations', iterations: 'iterations',
};

// noScenario is the error of a helper called with nothing to gate.
function noScenario(fn) {
  return new Error(`thresholds: ${fn}(): no scenario to gate: name phases (matched by the scenarios' tags.phase) ` +
    'or scenarioNames, so that a run that never reached steady state fails' +
    (fn === 'steady' ? ' (or pass gate: false to keep the budgets without the steady gate)' : ''));
}

// steady(spec, {phases, scenarios, scenarioNames, gate, counters}) returns
// a k6 thresholds object. Each entry of spec is scoped to the steady
// samples of every phase in phases (one threshold per phase); entries are
// kept as they are when phases is empty but still scoped to regime:steady.
// gate (default true) adds, per gated scenario, the steady gate and the
// no-data guard; it throws when no scenario is gated. Each budget of a
// metric with a counter (COUNTERS, and counters: {metric: counterName} for
// your own, such as a gRPC request counter) gets a guard on the same
// sub-metric of that counter: count>0; a Trend budget of a metric with none,
// max>0 on its own sub-metric (0 when it has no sample).
export function steady(spec, opts = {}) {
  const phases = opts.phases || [];
  const gated = gatedScenarios(opts.scenarios, phases, opts.scenarioNames);
  if (opts.gate !== false && gated.length === 0) {
    throw noScenario('steady');
  }
  const counters = { ...COUNTERS, ...(opts.counters || {}) };
  const all = Object.keys(opts.scenarios);
  const phaseOf = (n) => (opts.scenarios[n].tags || {}).phase;
  const out = {};
  const guards = {};
  for (const [key, rules] of Object.entries(spec || {})) {
    if (!Array.isArray(rules)) {
      throw new Error(`thresholds: ${JSON.stringify(key)} must map to an array of threshold expressions`);
    }
    const { metric, tags } = parseKey(key);
    if ('regime' in tags) {
      throw new Error(`thresholds: ${JSON.stringify(key)} already names a regime; steady() adds regime:steady`);
    }
    let targets = phases.length > 0 ? phases : [undefined];
    // a scenario or phase named in the key: one that exists, and of the
    // phases judged (its budget would pass on no sample otherwise)
    if (tags.scenario !== undefined) {
      if (!all.includes(tags.scenario)) {
        throw new Error(`thresholds: ${JSON.stringify(key)} names scenario ${JSON.stringify(tags.scenario)}, which does not exist; scenarios: ${all.join(', ')}`);
      }
      if (phases.length > 0) {
        const p = phaseOf(tags.scenario);
        if (!phases.includes(p)) {
          throw new Error(`thresholds: ${JSON.stringify(key)} names scenario ${JSON.stringify(tags.scenario)}, whose phase ${JSON.stringify(p)} is not one of ${phases.join(', ')}`);
        }
        targets = [p];
      }
    }
    if (tags.phase !== undefined && phases.length > 0) {
      if (!phases.includes(tags.phase)) {
        throw new Error(`thresholds: ${JSON.stringify(key)} names phase ${JSON.stringify(tags.phase)}, which is not one of the phases judged: ${phases.join(', ')}`);
      }
      if (targets.length > 1 || targets[0] === tags.phase) {
        targets = [tags.phase];
      } else {
        throw new Error(`thresholds: ${JSON.stringify(key)} names phase ${JSON.stringify(tags.phase)} and a scenario of phase ${JSON.stringify(targets[0])}`);
      }
    }
    // a Trend budget (p(N), avg, med, min, max: k6 takes these on a Trend
    // only) of a metric with no counter is guarded on its own sub-metric by
    // max>0: k6 has no count on a Trend (count>0 there is a config error,
    // exit 104) and gives every statistic of an empty Trend as 0, so its
    // budgets pass on no sample and max>0 fails. A Trend whose every value
    // may be 0 needs a counter (counters option) instead.
    const trend = rules.some((r) => /^\s*(p\([0-9.]+\)|avg|med|min|max)\s*[<>=!]/.test(typeof r === 'string' ? r : String(r && r.threshold)));
    for (const phase of targets) {
      const t = { ...tags, regime: 'steady' };
      if (phase !== undefined) t.phase = phase;
      const k = formatKey(metric, t);
      out[k] = (out[k] || []).concat(rules); // two spellings of one sub-metric: both budgets
      if (counters[metric]) {
        guards[formatKey(counters[metric], t)] = ['count>0'];
      } else if (trend) {
        guards[k] = ['max>0'];
      }
    }
  }
  if (opts.gate !== false) {
    Object.assign(guards, gate(gated));
  }
  return merge(out, guards);
}

// gate returns, for each scenario, the thresholds that fail when steady state
// was not reached and held, or when no iteration ran in steady state.
export function gate(scenarioNames) {
  const out = {};
  for (const s of scenarioNames) {
    out[formatKey('regime_steady', { scenario: s })] = ['rate==1'];
    out[formatKey('iterations', { scenario: s, regime: 'steady' })] = ['count>0'];
  }
  return out;
}

// merge combines threshold sets; rules for the same key are concatenated.
export function merge(...sets) {
  const out = {};
  for (const set of sets) {
    for (const [k, v] of Object.entries(set || {})) {
      out[k] = (out[k] || []).concat(v);
    }
  }
  return out;
}

// The settled view's counterparts of online budgets: a percentile of a
// request metric per endpoint, or of iteration_duration per scenario, and
// the error rate of the scenario's requests.
const SETTLED_AGG = { 'p(50)': 'p50', med: 'p50', 'p(90)': 'p90', 'p(95)': 'p95', 'p(99)': 'p99', max: 'max' };
const LATENCY = new Set(['http_req_duration', 'grpc_req_duration']);
const SETTLED_METRICS = ['http_req_duration', 'grpc_req_duration', 'iteration_duration', 'http_req_failed'];

// editDistance is the Levenshtein distance of a and b (a misspelled metric
// name is skipped as a custom metric's otherwise).
function editDistance(a, b) {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

const RULE = /^\s*([a-z]+(?:\([0-9.]+\))?)\s*(<=|>=|<|>|==|===|!=)\s*(.+)$/;

// settled(spec, {phases, scenarios, scenarioNames, ttss, endpointTag})
// returns the k6 thresholds that judge the settled view (the whole run
// re-segmented at its end) with the same budgets as steady(): for each
// scenario of the phases,
//   'http_req_duration{endpoint:E}': ['p(95)<50'] -> 'regime_settled_p95{endpoint:E,scenario:S}': ['value<50']
//   'iteration_duration': ['p(99)<200']            -> 'regime_settled_p99{scenario:S}': ['value<200']
//   'http_req_failed': ['rate<0.01']               -> 'regime_settled_error_rate{scenario:S}': ['value<0.01']
// with p(50)/med, p(90), p(95), p(99) and max; other rules of those metrics
// throw. Keys of other metrics (checks, custom metrics) have no settled
// counterpart and are left to the online thresholds; one within 3 edits of
// a metric settled() judges throws as a likely typo, unless named in
// opts.custom (metrics of your own, such as tcp_req_duration). A scenario tag in a
// key ('http_req_duration{endpoint:claim,scenario:gameplay_api}') keeps it
// to that scenario: an endpoint that only one scenario of the phase calls
// would otherwise be required of every scenario. Endpoint budgets need
// scope: 'endpoint' in regime.configure() (the settled view keeps
// endpoints only then); endpointTag (default 'endpoint') is the tag the
// endpoints are named by, as in regime.configure(). opts.ttss (ms) adds
// 'regime_settled_ttss{scenario:S}': ['value<ttss']. The object form of a
// rule keeps its abortOnFail and delayAbortEval.
// Guards, so that no settled threshold passes on no data (a k6 gauge with
// no sample reads 0): 'regime_settled{scenario:S}': ['rate==1'] (a settled
// steady state found and held to the end, by the scenario and each of its
// endpoints) and 'regime_settled_count{...}': ['count>0'] per scenario and
// per endpoint judged. It throws when no scenario is judged.
export function settled(spec, opts = {}) {
  const scenarioNames = gatedScenarios(opts.scenarios, opts.phases || [], opts.scenarioNames);
  if (scenarioNames.length === 0) {
    throw noScenario('settled');
  }
  const endpointTag = opts.endpointTag || 'endpoint';
  const custom = opts.custom || [];
  if (!Array.isArray(custom)) {
    throw new Error(`thresholds: settled(): custom must be an array of metric names, got ${JSON.stringify(custom)}`);
  }
  const out = {};
  const guards = {};
  for (const [key, rules] of Object.entries(spec || {})) {
    if (!Array.isArray(rules)) {
      throw new Error(`thresholds: ${JSON.stringify(key)} must map to an array of threshold expressions`);
    }
    const { metric, tags } = parseKey(key);
    const endpoint = tags[endpointTag];
    const only = tags.scenario;
    const other = Object.keys(tags).filter((k) => k !== endpointTag && k !== 'scenario');
    const latency = LATENCY.has(metric) || metric === 'iteration_duration';
    if (!latency && metric !== 'http_req_failed') {
      const near = SETTLED_METRICS.find((m) => editDistance(m, metric) <= 3);
      if (near !== undefined && !custom.includes(metric)) {
        throw new Error(`thresholds: settled(): ${JSON.stringify(key)}: no metric ${JSON.stringify(metric)}; did you mean ${near}? ` +
          '(keys of other metrics, checks and custom ones, have no settled counterpart and are skipped; ' +
          `if ${metric} is a metric of your own, name it in settled()'s custom option: custom: [${JSON.stringify(metric)}])`);
      }
      continue; // no settled counterpart
    }
    if (only !== undefined && !scenarioNames.includes(only)) {
      throw new Error(`thresholds: settled(): ${JSON.stringify(key)} names scenario ${JSON.stringify(only)}, which is not judged here; judged: ${scenarioNames.join(', ')}`);
    }
    if (other.length > 0) {
      throw new Error(`thresholds: settled(): ${JSON.stringify(key)} has tags ${other.join(', ')}; the settled view is kept per scenario and ${endpointTag} only`);
    }
    if (LATENCY.has(metric) && endpoint === undefined) {
      throw new Error(`thresholds: settled(): ${JSON.stringify(key)} needs an ${endpointTag} tag (the settled view keeps requests per endpoint); ` +
        'use iteration_duration for the whole scenario');
    }
    if (metric === 'iteration_duration' && endpoint !== undefined) {
      throw new Error(`thresholds: settled(): ${JSON.stringify(key)}: iterations have no endpoint; drop the tag`);
    }
    if (metric === 'http_req_failed' && endpoint !== undefined) {
      throw new Error(`thresholds: settled(): ${JSON.stringify(key)}: the settled error rate is the scenario's; drop the endpoint tag`);
    }
    for (const rule of rules) {
      const text = typeof rule === 'string' ? rule : rule && rule.threshold;
      const m = RULE.exec(String(text));
      if (!m) {
        throw new Error(`thresholds: settled(): rule ${JSON.stringify(text)} of ${JSON.stringify(key)} is not "<aggregation><op><value>"`);
      }
      const [, agg, op, value] = m;
      let name;
      if (metric === 'http_req_failed') {
        if (agg !== 'rate') {
          throw new Error(`thresholds: settled(): ${JSON.stringify(key)} supports rate rules only, got ${JSON.stringify(agg)}`);
        }
        name = 'regime_settled_error_rate';
      } else {
        if (!(agg in SETTLED_AGG)) {
          throw new Error(`thresholds: settled(): ${JSON.stringify(agg)} in ${JSON.stringify(key)} has no settled counterpart; valid: ${Object.keys(SETTLED_AGG).join(', ')}`);
        }
        name = `regime_settled_${SETTLED_AGG[agg]}`;
      }
      const expr = `value${op}${value}`;
      const settledRule = typeof rule === 'string' ? expr : { ...rule, threshold: expr };
      for (const s of scenarioNames) {
        if (only !== undefined && s !== only) continue;
        const t = { scenario: s };
        if (endpoint !== undefined) t[endpointTag] = endpoint;
        const k = formatKey(name, t);
        out[k] = (out[k] || []).concat([settledRule]);
        guards[formatKey('regime_settled_count', t)] = ['count>0'];
      }
    }
  }
  for (const s of scenarioNames) {
    guards[formatKey('regime_settled', { scenario: s })] = ['rate==1'];
    guards[formatKey('regime_settled_count', { scenario: s })] = ['count>0'];
    if (opts.ttss !== undefined) {
      if (!(typeof opts.ttss === 'number' && opts.ttss > 0)) {
        throw new Error(`thresholds: settled(): ttss must be a positive number of milliseconds, got ${JSON.stringify(opts.ttss)}`);
      }
      out[formatKey('regime_settled_ttss', { scenario: s })] = [`value<${opts.ttss}`];
    }
  }
  return merge(out, guards);
}

// Gates against history: a run set against a profile of earlier runs
// (regime.configure(options, { profile: 'profile.json' }) or
// K6_REGIME_PROFILE). At the end of the run the extension pushes, per
// scenario (and per endpoint the profile has), the run's settled figure
// divided by the profile's: regime_profile_ttss (against the p90 of the
// profile runs' TTSS), regime_profile_p50 and regime_profile_p99 (against
// the median of their steady p50 / p99), and regime_profile_checks (how
// many figures were compared, one sample per figure, tagged figure).
//
// profiled({ttss, p50, p99}, {phases, scenarios, scenarioNames, endpoints})
// returns thresholds that fail when a figure is worse than the profile's by
// more than the given share (0.2: 20%):
//   { ttss: 0.2, p50: 0.1 } -> 'regime_profile_ttss{scenario:S}': ['value<1.2'],
//                              'regime_profile_p50{scenario:S}': ['value<1.1']
// endpoints: endpoint names to judge per endpoint as well (scope 'endpoint'),
// by the tag endpointTag (default 'endpoint').
// Guards, so that nothing passes on no data (no profile loaded, no settled
// steady state, a figure the profile lacks): 'regime_profile_checks{figure:F,...}':
// ['count>0'] per figure and scope, and 'regime_settled{scenario:S}': ['rate==1'].
const PROFILE_FIGURES = ['ttss', 'p50', 'p99'];

export function profiled(spec, opts = {}) {
  const scenarioNames = gatedScenarios(opts.scenarios, opts.phases || [], opts.scenarioNames);
  if (scenarioNames.length === 0) {
    throw new Error('thresholds: profiled(): name the scenarios to judge (phases or scenarioNames)');
  }
  const figures = Object.entries(spec || {});
  if (figures.length === 0) {
    throw new Error(`thresholds: profiled(): give at least one of ${PROFILE_FIGURES.join(', ')} (the share a figure may exceed the profile's by)`);
  }
  for (const [figure, share] of figures) {
    if (!PROFILE_FIGURES.includes(figure)) {
      throw new Error(`thresholds: profiled(): unknown figure ${JSON.stringify(figure)}; valid: ${PROFILE_FIGURES.join(', ')}`);
    }
    if (!(typeof share === 'number' && share >= 0 && Number.isFinite(share))) {
      throw new Error(`thresholds: profiled(): ${figure} must be a share >= 0 (0.2: 20% worse than the profile), got ${JSON.stringify(share)}`);
    }
  }
  const endpoints = opts.endpoints || [];
  if (!Array.isArray(endpoints)) {
    throw new Error(`thresholds: profiled(): endpoints must be an array of endpoint names, got ${JSON.stringify(endpoints)}`);
  }
  const out = {};
  for (const s of scenarioNames) {
    const tag = opts.endpointTag || 'endpoint';
    const scopes = [{ scenario: s }, ...endpoints.map((e) => ({ [tag]: e, scenario: s }))];
    for (const t of scopes) {
      for (const [figure, share] of figures) {
        if (figure === 'ttss' && t[tag] !== undefined) continue; // TTSS is the scenario's
        out[formatKey(`regime_profile_${figure}`, t)] = [`value<${+(1 + share).toFixed(6)}`];
        // the figure was compared: a profile without it (one learnt from
        // merged folders has no p99), or a run without it, gives no
        // regime_profile_<figure> sample, and k6 passes an empty Gauge's
        // value<x; this fails instead
        out[formatKey('regime_profile_checks', { ...t, figure })] = ['count>0'];
      }
    }
    out[formatKey('regime_settled', { scenario: s })] = ['rate==1'];
  }
  return out;
}

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

// steady(spec, {phases, scenarios, gate}) returns a k6 thresholds object.
// Each entry of spec is scoped to the steady samples of every phase in
// phases (one threshold per phase); entries are kept as they are when
// phases is empty but still scoped to regime:steady. gate (default true)
// adds, per gated scenario, the steady gate and the no-data guard.
export function steady(spec, opts = {}) {
  const phases = opts.phases || [];
  const gated = gatedScenarios(opts.scenarios, phases, opts.scenarioNames);
  const out = {};
  for (const [key, rules] of Object.entries(spec || {})) {
    if (!Array.isArray(rules)) {
      throw new Error(`thresholds: ${JSON.stringify(key)} must map to an array of threshold expressions`);
    }
    const { metric, tags } = parseKey(key);
    if ('regime' in tags) {
      throw new Error(`thresholds: ${JSON.stringify(key)} already names a regime; steady() adds regime:steady`);
    }
    const targets = phases.length > 0 ? phases : [undefined];
    for (const phase of targets) {
      const t = { ...tags, regime: 'steady' };
      if (phase !== undefined) t.phase = phase;
      out[formatKey(metric, t)] = rules;
    }
  }
  if (opts.gate !== false) {
    Object.assign(out, gate(gated));
  }
  return out;
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

// Phase-scoped threshold sets of scenarios/combined.js.
import { steady, merge, gate } from './index.js';

// GRPC_REQS counts the kit's gRPC calls per endpoint (k6 counts none): the
// no-data guard of the gRPC budgets.
export const GRPC_REQS = 'kit_grpc_reqs';

// Budgets on steady-state samples of the gameplay phase, per endpoint.
export const gameplayBudgets = {
  'http_req_duration{endpoint:initialize}': ['p(95)<50'],
  'http_req_duration{endpoint:set_active}': ['p(95)<50'],
  'http_req_duration{endpoint:claim}': ['p(95)<50'],
  'grpc_req_duration{endpoint:send_stat}': ['p(95)<50'],
  'http_req_failed': ['rate<0.01'],
  'checks': ['rate>0.99'],
};

// combinedThresholds returns the thresholds of combined.js for its scenarios:
// steady gameplay budgets (failing, not passing, when gameplay never reached
// steady state, or when an endpoint of a budget made no request in it); error rates per phase over all regimes; time to steady state
// and cold-start budgets for init.
//
// opts.initGate (default true): require init to reach and hold steady state
// (with its TTSS budget). Turn it off only for phases too short to settle
// (the kit's smoke profile): the TTSS budget is then dropped as well rather
// than left to pass on no data.
export function combinedThresholds(scenarios, opts = {}) {
  const initGate = opts.initGate !== false;
  const phases = new Set(Object.values(scenarios).map((s) => (s.tags || {}).phase));
  const out = merge(
    steady(gameplayBudgets, { phases: ['gameplay'], scenarios, counters: { grpc_req_duration: GRPC_REQS } }),
    { 'http_req_failed{phase:gameplay}': ['rate<0.01'] },
  );
  if (phases.has('warmup')) {
    // the gradual warm-up exists so that the cold start fails nothing
    out['http_req_failed{phase:warmup}'] = ['rate<0.01'];
  }
  if (phases.has('init')) {
    Object.assign(out, {
      'http_req_failed{phase:init}': ['rate<0.05'],
      // what init's cold iterations cost in all
      'regime_cold_start{scenario:init}': ['count<10000'],
    });
    if (initGate) {
      // init must settle, within 20 s of its start (a ramp that never settles fails here)
      out['regime_ttss{scenario:init}'] = ['max<20000'];
      Object.assign(out, gate(['init']));
    }
  }
  return out;
}

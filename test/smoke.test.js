// Smoke test of the k6/x/regime module. No network: xk6 lint (`smoke`
// check) runs it as `k6 run --no-usage-report --no-summary --quiet
// test/smoke.test.js`, and so does test/packaging. A deterministic series fed
// through regime.observe() has a cold start and then a flat level, so the
// detector must class the first iterations cold, reach steady state and hold
// it; the module's other functions must answer in their contexts.
import { check } from 'k6';
import exec from 'k6/execution';
import regime from 'k6/x/regime';

const N = 4000;

export const options = {
  scenarios: {
    smoke: { executor: 'shared-iterations', vus: 1, iterations: N, maxDuration: '30s' },
  },
  thresholds: {
    checks: ['rate==1'],
    // steady state reached and held to the end
    'regime_steady{scenario:smoke}': ['rate==1'],
    // and the tags say so: cold iterations first, steady ones later
    'iterations{regime:cold,scenario:smoke}': ['count>0'],
    'iterations{regime:steady,scenario:smoke}': ['count>0'],
  },
};

// observations without time between them: the benchmark method (windows
// of observations, not of seconds)
regime.configure(options, { scenarios: { smoke: { input: 'observe', detector: { method: 'benchmark' } } } });

// value(i): 40 cold observations decaying from 90 towards 10, then a level of
// 10 with a deterministic wobble of +-2%.
function value(i) {
  if (i < 40) return 10 + 80 * Math.exp(-i / 10);
  return 10 * (1 + 0.02 * Math.sin(i * 1.7));
}

let init = 'ok';
try {
  regime.observe(1);
  init = 'observe() in the init context did not throw';
} catch (e) {
  // expected: observe() belongs to iterations
}

export default function () {
  const i = exec.scenario.iterationInTest;
  const before = regime.current();
  regime.observe(value(i));
  check(before, {
    'a regime tag': (r) => r === 'cold' || r === 'warmup' || r === 'steady',
    'init-context misuse is an error': () => init === 'ok',
  });
  if (i === N - 1) {
    const s = regime.summary().scenarios.smoke;
    // (iteration counts reach the summary through k6's metrics engine, in
    // batches: only the detector's state is final here)
    check(s, {
      'summary: input observe': (x) => x.input === 'observe',
      'summary: steady at the end': (x) => x.regime === 'steady' && x.steady_start !== null,
    });
  }
}

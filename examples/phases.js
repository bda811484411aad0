// Phases: scenarios/lib/phases.js turns a list of phases into k6 scenarios
// that run one after the other (startTime chained) and tags every sample
// with {phase: name}. Thresholds can then be scoped to a phase and to its
// steady samples: phase:load,regime:steady.
//
//   ./k6 run examples/phases.js           # BASE_URL, default the demo service
import http from 'k6/http';
import { check } from 'k6';
import 'k6/x/regime';

import { phases } from '../scenarios/lib/phases.js';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';

const built = phases([
  // a gentle ramp that lets the service fill its pools and caches
  {
    name: 'warmup', executor: 'ramping-arrival-rate', startRate: 20, timeUnit: '1s',
    preAllocatedVUs: 5, maxVUs: 30, stages: [{ target: 100, duration: '3s' }],
  },
  // the phase that is measured
  {
    name: 'load', executor: 'constant-arrival-rate', rate: 150, timeUnit: '1s', duration: '27s',
    preAllocatedVUs: 10, maxVUs: 50,
  },
]);

export const options = {
  scenarios: built.scenarios,
  thresholds: {
    // the budget holds for the load phase's steady samples; the warm-up is
    // only required not to fail requests
    'http_req_duration{phase:load,regime:steady}': ['p(95)<250'],
    'iterations{phase:load,regime:steady}': ['count>0'],
    'http_req_failed{phase:warmup}': ['rate<0.01'],
    checks: ['rate==1'],
  },
};

export default function () {
  const res = http.get(`${BASE_URL}/api/challenges`, { tags: { endpoint: 'challenges' } });
  check(res, { 'status 200': (r) => r.status === 200 });
}

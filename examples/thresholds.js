// The thresholds helper: thresholds/index.js scopes a set of thresholds to
// the steady samples of named phases and adds, for each scenario of those
// phases, the gates that make a run fail instead of passing on no data:
// regime_steady (steady state reached and held) and a steady-iteration count.
//
//   ./k6 run examples/thresholds.js       # BASE_URL, default the demo service
import http from 'k6/http';
import { check } from 'k6';
import 'k6/x/regime';

import { phases } from '../scenarios/lib/phases.js';
import { steady, merge } from '../thresholds/index.js';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';

const { scenarios } = phases([
  {
    name: 'warmup', executor: 'ramping-arrival-rate', startRate: 20, timeUnit: '1s',
    preAllocatedVUs: 5, maxVUs: 30, stages: [{ target: 100, duration: '3s' }],
  },
  {
    name: 'load', executor: 'constant-arrival-rate', rate: 150, timeUnit: '1s', duration: '27s',
    preAllocatedVUs: 10, maxVUs: 50,
  },
]);

export const options = {
  scenarios,
  thresholds: merge(
    // http_req_duration{endpoint:challenges,phase:load,regime:steady}: p(95)<250,
    // regime_steady{scenario:load}: rate==1, iterations{regime:steady,scenario:load}: count>0
    steady({ 'http_req_duration{endpoint:challenges}': ['p(95)<250'] }, { phases: ['load'], scenarios }),
    { checks: ['rate==1'] },
  ),
};

export default function () {
  const res = http.get(`${BASE_URL}/api/challenges`, { tags: { endpoint: 'challenges' } });
  check(res, { 'status 200': (r) => r.status === 200 });
}

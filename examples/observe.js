// Observe: the detector learns from values you give it instead of the
// iteration duration. Here it is the server's time to first byte
// (timings.waiting), which leaves out connection setup and the client's own
// work; any measurement > 0 will do (a queue depth, a custom timer).
//
//   ./k6 run examples/observe.js          # BASE_URL, default the demo service
import http from 'k6/http';
import { check } from 'k6';
import regime from 'k6/x/regime';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';

export const options = {
  scenarios: {
    api: {
      executor: 'constant-arrival-rate', rate: 150, timeUnit: '1s', duration: '30s',
      preAllocatedVUs: 10, maxVUs: 50,
    },
  },
  thresholds: {
    'http_req_waiting{regime:steady}': ['p(95)<250'],
    'iterations{regime:steady}': ['count>0'],
    checks: ['rate==1'],
  },
};

// input: 'observe' for the scenario: its detector reads regime.observe() only
regime.configure(options, { scenarios: { api: { input: 'observe' } } });

export default function () {
  const res = http.get(`${BASE_URL}/api/challenges`, { tags: { endpoint: 'challenges' } });
  check(res, { 'status 200': (r) => r.status === 200 });
  if (res.timings.waiting > 0) {
    regime.observe(res.timings.waiting);
  }
}

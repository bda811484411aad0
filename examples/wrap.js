// Tagging only what you wrap: with tagging: 'wrap', the per-iteration hook is
// off and only calls of functions passed through regime.wrap() set the
// regime tag (and are timed for the detector by k6's iteration_duration as
// usual). Use it when the automatic hook's small per-iteration cost matters.
// wrap() times nothing itself: it sets the tag when the call starts, and the
// detector reads k6's iteration_duration of the whole iteration, awaited
// parts of an async function included.
//
//   ./k6 run examples/wrap.js             # BASE_URL, default the demo service
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
    'http_req_duration{regime:steady}': ['p(95)<250'],
    'iterations{regime:steady}': ['count>0'],
    checks: ['rate==1'],
  },
};

regime.configure(options, { tagging: 'wrap' });

function challenges() {
  const res = http.get(`${BASE_URL}/api/challenges`, { tags: { endpoint: 'challenges' } });
  check(res, { 'status 200': (r) => r.status === 200 });
}

// wrap() is called in the init context; the returned function sets the tag
// at each call
export default regime.wrap(challenges);

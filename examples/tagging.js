// Tagging: importing k6/x/regime is all it takes. Every sample of every
// iteration (http, checks, iterations, custom metrics) carries
// regime:cold|warmup|steady, the regime of its scenario's detector when the
// iteration started, so a threshold can judge the steady samples only.
//
//   ./bin/demo-service &                  # make build-demo; listens on 127.0.0.1:8080
//   ./k6 run examples/tagging.js          # BASE_URL to aim elsewhere
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
    // the latency budget, on steady-state samples only
    'http_req_duration{regime:steady}': ['p(95)<250'],
    // a Trend threshold passes on no sample at all: make "no steady sample" fail
    'iterations{regime:steady}': ['count>0'],
    checks: ['rate==1'],
  },
};

export default function () {
  const res = http.get(`${BASE_URL}/api/challenges`, { tags: { endpoint: 'challenges' } });
  check(res, {
    'status 200': (r) => r.status === 200,
    // the tag of the running iteration, as the samples above carry it
    'iteration has a regime': () => ['cold', 'warmup', 'steady'].includes(regime.current()),
  });
}

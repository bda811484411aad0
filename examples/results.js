// Results: from handleSummary, regime.summary() returns what the detectors
// found, regime.textSummary() the console regime table, and
// regime.saveResults() writes results/<UTC start>[-<testid>]-<random suffix>/: summary.json,
// HdrHistogram logs per regime, the iteration series and report.html.
// `k6 x regime report|compare|merge` read those folders.
//
//   ./k6 run examples/results.js          # BASE_URL, default the demo service; RESULTS_DIR, default results
import http from 'k6/http';
import { check } from 'k6';
import regime from 'k6/x/regime';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';

export const options = {
  scenarios: {
    api: {
      executor: 'constant-arrival-rate', rate: 150, timeUnit: '1s', duration: '30s',
      preAllocatedVUs: 10, maxVUs: 50, tags: { phase: 'load' },
    },
  },
  thresholds: {
    'http_req_duration{regime:steady}': ['p(95)<250'],
    'iterations{regime:steady}': ['count>0'],
  },
};

export default function () {
  const res = http.get(`${BASE_URL}/api/challenges`, { tags: { endpoint: 'challenges' } });
  check(res, { 'status 200': (r) => r.status === 200 });
}

export function handleSummary(data) {
  // k6's threshold verdicts, kept in summary.json
  const thresholds = {};
  for (const [name, m] of Object.entries(data.metrics)) {
    if (m.thresholds) {
      thresholds[name] = Object.fromEntries(Object.entries(m.thresholds).map(([e, t]) => [e, t.ok]));
    }
  }
  const dir = regime.saveResults({
    dir: __ENV.RESULTS_DIR || 'results',
    testid: __ENV.TESTID || 'example',
    thresholds,
    extra: { example: 'results.js' },
  });
  const s = regime.summary().scenarios.api;
  return {
    stdout: `${regime.textSummary()}\nsteady: ${s.steady}, time to steady state: ${s.ttss_ms} ms\nresults: ${dir}\n`,
  };
}

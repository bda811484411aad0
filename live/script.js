// The live harness's k6 script: one scenario named `live`, one GET per
// iteration against TARGET (127.0.0.1 only), the extension's defaults, and
// the steady gate written by the thresholds helper. The harness judges the
// regime tags it leaves in RESULTS_DIR.
//
// Environment (the harness sets all of it):
//   TARGET        base URL, http://127.0.0.1:PORT
//   MODEL         open (constant-arrival-rate) or closed (shared-iterations)
//   RATE          open: iterations per second
//   DURATION      open: how long, e.g. 60s
//   VUS           closed: VUs; open: preallocated VUs
//   ITERATIONS    closed: iterations in all (bounded by MAX_DURATION too)
//   MAX_DURATION  closed: the longest the scenario may run
//   RESULTS_DIR   where saveResults writes the run folder
//   TESTID        the run folder's suffix
//   WORKLOAD      get (GET TARGET/work, the default) or demo (the demo
//                 service: POST a fresh player's goals/initialize, a
//                 database write through its pool)
//   SETTINGS      optional JSON: regime.configure settings (defaults when empty)
import http from 'k6/http';
import { check } from 'k6';
import regime from 'k6/x/regime';
import { steady } from '../thresholds/index.js';

function need(name) {
  const v = __ENV[name];
  if (v === undefined || v === '') {
    throw new Error(`live/script.js: environment variable ${name} is required`);
  }
  return v;
}

const target = need('TARGET');
if (!/^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?$/.test(target)) {
  throw new Error(`live/script.js: TARGET must be http://127.0.0.1:PORT or http://localhost:PORT, got ${target}`);
}
const model = need('MODEL');
let scenario;
if (model === 'open') {
  const vus = Number(__ENV.VUS || 50);
  scenario = {
    executor: 'constant-arrival-rate',
    rate: Number(need('RATE')),
    timeUnit: '1s',
    duration: need('DURATION'),
    preAllocatedVUs: vus,
    maxVUs: vus * 4,
  };
} else if (model === 'closed') {
  scenario = {
    executor: 'shared-iterations',
    vus: Number(need('VUS')),
    iterations: Number(need('ITERATIONS')),
    maxDuration: need('MAX_DURATION'),
  };
} else {
  throw new Error(`live/script.js: MODEL must be open or closed, got ${model}`);
}
scenario.tags = { phase: 'live' };
scenario.gracefulStop = '5s';

export const options = {
  scenarios: { live: scenario },
  discardResponseBodies: true,
  summaryTrendStats: ['med', 'p(95)', 'p(99)', 'max'],
};
options.thresholds = steady({ 'http_req_duration': ['max>0'] }, { phases: ['live'], scenarios: options.scenarios });

regime.configure(options, __ENV.SETTINGS ? JSON.parse(__ENV.SETTINGS) : {});

const workload = __ENV.WORKLOAD || 'get';
if (workload !== 'get' && workload !== 'demo') {
  throw new Error(`live/script.js: WORKLOAD must be get or demo, got ${workload}`);
}
const url = `${target}/work?n=1`;

export default function () {
  if (workload === 'demo') {
    const res = http.post(`${target}/api/players/live-${__VU}-${__ITER}/goals/initialize`, null,
      { tags: { endpoint: 'initialize', name: `${target}/api/players/{id}/goals/initialize` } });
    check(res, { 'status is 2xx': (r) => r.status === 200 || r.status === 201 });
    return;
  }
  const res = http.get(url, { tags: { endpoint: 'work' } });
  check(res, { 'status is 200': (r) => r.status === 200 });
}

export function handleSummary(data) {
  const thresholds = Object.fromEntries(Object.entries(data.metrics)
    .filter(([, m]) => m.thresholds)
    .map(([n, m]) => [n, Object.fromEntries(Object.entries(m.thresholds).map(([e, t]) => [e, t.ok]))]));
  const dir = regime.saveResults({
    dir: need('RESULTS_DIR'),
    testid: __ENV.TESTID || '',
    thresholds,
    files: {
      'regime-summary.json': JSON.stringify(regime.summary(), null, 1),
      'k6-metrics.json': JSON.stringify(data.metrics, null, 1),
    },
  });
  return { stdout: `results: ${dir}\n${regime.textSummary()}` };
}

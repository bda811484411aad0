// Schedule tags vs measured tags, on one run: the same latency gate judged
// on the samples a schedule calls steady (everything after a fixed cut, what
// users do today with stages, tagWithCurrentStageProfile, Locust's
// --reset-stats or Rally's warmup-time-period) and on the samples the
// detector calls steady (regime:steady). The end-of-test table shows both
// distributions and where the two tags disagree.
//
//   make compare-schedule                      # demo service, 60 s, cut at 10 s
//   DURATION=2m CUT=20s RATE=300 make compare-schedule
//   BASE_URL=... ./k6 run scenarios/schedule-vs-measured.js
import http from 'k6/http';
import exec from 'k6/execution';
import { check } from 'k6';
import { Counter } from 'k6/metrics';
import regime from 'k6/x/regime';

import { seconds } from './lib/phases.js';

const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const DURATION = __ENV.DURATION || '60s';
const CUT = seconds(__ENV.CUT || '10s');
const RATE = Number(__ENV.RATE || 200);
const BUDGET = __ENV.P95_MS || '50';

// one count per iteration, tagged with the schedule's verdict; the
// extension adds the measured one (regime), so the sub-metrics below are the
// cross-table of the two
const iters = new Counter('schedule_iterations');
const cells = {};
for (const s of ['warmup', 'steady']) {
  for (const r of ['cold', 'warmup', 'steady']) {
    // count>=0 always holds: these thresholds only make k6 compute the cell
    cells[`schedule_iterations{regime:${r},schedule:${s}}`] = ['count>=0'];
  }
}

export const options = {
  scenarios: {
    load: {
      executor: 'constant-arrival-rate', rate: RATE, timeUnit: '1s', duration: DURATION,
      preAllocatedVUs: 20, maxVUs: 200,
    },
  },
  summaryTrendStats: ['count', 'med', 'p(95)', 'p(99)', 'max'],
  thresholds: Object.assign({
    // the same gate, on the two definitions of steady
    'http_req_duration{schedule:steady}': [`p(95)<${BUDGET}`],
    'http_req_duration{regime:steady}': [`p(95)<${BUDGET}`],
    // neither may pass on no data
    'schedule_iterations{schedule:steady}': ['count>0'],
    'schedule_iterations{regime:steady}': ['count>0'],
  }, cells),
};

regime.configure(options, {});

export default function () {
  const schedule = exec.instance.currentTestRunDuration / 1000 < CUT ? 'warmup' : 'steady';
  const res = http.get(`${BASE_URL}/api/challenges`, { tags: { endpoint: 'challenges', schedule } });
  check(res, { 'status 200': (r) => r.status === 200 });
  iters.add(1, { schedule });
}

const pad = (s, n) => String(s).padEnd(n);
const f = (v) => (v === undefined || v === null ? '-' : Number(v).toFixed(2));

export function handleSummary(data) {
  const m = data.metrics;
  const row = (label, key) => {
    const v = (m[key] || {}).values || {};
    const ok = m[key] && m[key].thresholds ? Object.values(m[key].thresholds).every((t) => t.ok) : null;
    return `  ${pad(label, 34)}${pad(v.count === undefined ? '-' : v.count, 9)}${pad(f(v.med), 9)}${pad(f(v['p(95)']), 9)}` +
      `${pad(f(v['p(99)']), 9)}${pad(f(v.max), 9)}${ok === null ? '' : ok ? 'pass' : 'FAIL'}`;
  };
  const cell = (s, r) => (((m[`schedule_iterations{regime:${r},schedule:${s}}`] || {}).values || {}).count || 0);
  const s = regime.summary().scenarios.load || {};
  const out = [
    `schedule vs measured: cut at ${CUT} s of ${DURATION}, ${RATE}/s; gate http_req_duration p(95)<${BUDGET} ms`,
    `  ${pad('samples called steady by', 34)}${pad('count', 9)}${pad('p50', 9)}${pad('p95', 9)}${pad('p99', 9)}${pad('max', 9)}gate`,
    row('the schedule (after the cut)', 'http_req_duration{schedule:steady}'),
    row('the detector (regime:steady)', 'http_req_duration{regime:steady}'),
    '',
    `  iterations by schedule x regime   ${pad('cold', 9)}${pad('warmup', 9)}steady`,
    `  ${pad('before the cut', 34)}${pad(cell('warmup', 'cold'), 9)}${pad(cell('warmup', 'warmup'), 9)}${cell('warmup', 'steady')}`,
    `  ${pad('after the cut', 34)}${pad(cell('steady', 'cold'), 9)}${pad(cell('steady', 'warmup'), 9)}${cell('steady', 'steady')}`,
    `  ${pad('iterations (k6)', 34)}${((m.iterations || {}).values || {}).count || 0}`,
    '',
    `  detector: class ${s.class}, steady to the end ${s.steady}, TTSS ${s.ttss_ms === null ? '-' : f(s.ttss_ms)} ms, relapses ${s.relapses}`,
    '',
  ];
  return { stdout: out.join('\n') };
}

// Combined HTTP + gRPC scenario of the xk6-regime kit, aimed at the demo
// service (demo/cmd/demo-service) or any service with the same API.
//
//   k6 run scenarios/combined.js                       # short profile, 127.0.0.1:8080 / :9090
//   PROFILE=full k6 run scenarios/combined.js          # the real 32.5-minute run
//   VARIANT=instant-burst k6 run scenarios/combined.js # no warm-up: straight to full rate
//
// Environment: PROFILE (short|full), VARIANT (gradual|instant-burst),
// BASE_URL, GRPC_ADDR, METRICS_URL (the target's Prometheus /metrics; empty
// disables the probe), SEED, RESULTS_DIR (default results), TESTID.
import http from 'k6/http';
import grpc from 'k6/net/grpc';
import exec from 'k6/execution';
import { check } from 'k6';
import { Counter, Gauge } from 'k6/metrics';
import regime from 'k6/x/regime';

import { phases, phaseAt } from './lib/phases.js';
import { streamFor, pick } from './lib/rng.js';
import { report } from './lib/report.js';
import { combinedThresholds, GRPC_REQS } from '../thresholds/combined.js';

const PROFILES = {
  // a real run: 30 s warm-up 10 -> 100/s, 2 min init 100 -> 300/s, 30 min gameplay (API 300/s, events 500/s)
  full: { warmup: [10, 100, '30s'], init: [100, 300, '2m'], api: 300, events: 500, gameplay: '30m', maxVUs: 300 },
  // the same shape scaled to 2 cores and about 90 s
  short: { warmup: [5, 40, '20s'], init: [40, 100, '20s'], api: 60, events: 60, gameplay: '45s', maxVUs: 60 },
  // for automated tests: the same shape in about a minute
  smoke: { warmup: [5, 40, '8s'], init: [40, 100, '14s'], api: 60, events: 60, gameplay: '40s', maxVUs: 60 },
};
const VARIANTS = ['gradual', 'instant-burst'];

const PROFILE = __ENV.PROFILE || 'short';
const VARIANT = __ENV.VARIANT || 'gradual';
if (!PROFILES[PROFILE]) {
  throw new Error(`PROFILE=${PROFILE} is not a profile; valid values: ${Object.keys(PROFILES).join(', ')}`);
}
if (!VARIANTS.includes(VARIANT)) {
  throw new Error(`VARIANT=${VARIANT} is not a variant; valid values: ${VARIANTS.join(', ')}`);
}
const P = PROFILES[PROFILE];
const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const GRPC_ADDR = __ENV.GRPC_ADDR || '127.0.0.1:9090';
const METRICS_URL = __ENV.METRICS_URL !== undefined ? __ENV.METRICS_URL : `${BASE_URL}/metrics`;
const SEED = __ENV.SEED || '42';
// SEED goes into player ids, which the demo service takes as 1-64 characters
// of [A-Za-z0-9_.:-]: with the run token and the iteration number, 32 of SEED
// leave room (a longer SEED, a commit SHA and a build number, turned every
// request into a 400)
if (!/^[A-Za-z0-9_.:-]{1,32}$/.test(SEED)) {
  throw new Error(`SEED=${SEED} is not a seed; valid values: 1-32 characters of A-Z a-z 0-9 _ . : - (it is part of the player ids)`);
}

const arrival = (start, target, duration, maxVUs) => ({
  executor: 'ramping-arrival-rate',
  startRate: start,
  timeUnit: '1s',
  preAllocatedVUs: Math.ceil(maxVUs / 3),
  maxVUs,
  stages: [{ target, duration }],
});
const constant = (rate, duration, maxVUs, execName) => ({
  executor: 'constant-arrival-rate',
  rate,
  timeUnit: '1s',
  duration,
  preAllocatedVUs: Math.ceil(maxVUs / 3),
  maxVUs,
  exec: execName,
});

const list = [];
if (VARIANT === 'gradual') {
  list.push({ name: 'warmup', ...arrival(P.warmup[0], P.warmup[1], P.warmup[2], P.maxVUs), exec: 'warmup' });
  list.push({ name: 'init', ...arrival(P.init[0], P.init[1], P.init[2], P.maxVUs), exec: 'init' });
} else {
  // instant burst: no warm-up, init straight at its full rate for the same time
  list.push({ name: 'init', ...arrival(P.init[1], P.init[1], P.init[2], P.maxVUs), exec: 'init' });
}
list.push({
  name: 'gameplay',
  parallel: [
    { name: 'gameplay_api', ...constant(P.api, P.gameplay, P.maxVUs, 'gameplayApi') },
    { name: 'gameplay_events', ...constant(P.events, P.gameplay, P.maxVUs, 'gameplayEvents') },
  ],
});
const built = phases(list);
const scenarios = built.scenarios;
const schedule = built.schedule;
const total = schedule[schedule.length - 1].end;
if (METRICS_URL) {
  // low-rate probe of the service's own pool and cache gauges over the whole run
  scenarios.probe = {
    executor: 'constant-arrival-rate', rate: 1, timeUnit: '1s', duration: `${Math.ceil(total)}s`,
    // one VU: each VU keeps its own first-scrape baseline, so a second VU
    // (a scrape slower than a second) counted the pool's growth twice; a
    // slow scrape now skips a probe iteration (dropped_iterations) instead
    preAllocatedVUs: 1, maxVUs: 1, exec: 'probe', startTime: '0s', tags: { phase: 'probe' },
  };
}

// service-side pool figures, recorded by the probe and tagged with the phase running then
const pool = {
  size: new Gauge('service_pool_size'),
  inUse: new Gauge('service_pool_in_use'),
  waited: new Counter('service_pool_waited_acquires'),
  newConns: new Counter('service_pool_new_conns'),
  timeouts: new Counter('service_pool_acquire_timeouts'),
  errors: new Counter('service_pool_acquire_errors'),
  waitMs: new Counter('service_pool_acquire_wait_ms'),
};

export const options = {
  scenarios,
  discardResponseBodies: false,
  summaryTrendStats: ['avg', 'p(50)', 'p(95)', 'p(99)', 'max'],
};
// the smoke profile's 14 s init ramp is too short to require steady state
options.thresholds = combinedThresholds(scenarios, { initGate: PROFILE !== 'smoke' });

regime.configure(options, {
  track: Object.values(pool).map((m) => m.name),
});

const grpcClient = new grpc.Client();
grpcClient.load([], 'proto/events.proto'); // a copy of demo/proto/events.proto
let grpcConnected = false;

const CHALLENGES = ['daily-login', 'win-3-matches', 'score-5000'];
const json = { headers: { 'Content-Type': 'application/json' } };

function rng() {
  return streamFor(SEED, exec.scenario.name, exec.scenario.iterationInTest);
}

function ok(res, endpoint, want) {
  check(res, {
    [`${endpoint} status ${want}`]: (r) => want.split('|').includes(String(r.status)),
    [`${endpoint} body is JSON`]: (r) => {
      try {
        return r.json() !== null;
      } catch (e) {
        return false;
      }
    },
  });
}

// URL templates as the name tag, so player ids do not make one time series per player
const NAMES = {
  challenges: '/api/challenges',
  initialize: '/api/players/{id}/goals/initialize',
  set_active: '/api/players/{id}/active-challenge',
  claim: '/api/players/{id}/rewards/claim',
};
function get(path, endpoint) {
  return http.get(`${BASE_URL}${path}`, { tags: { endpoint, name: NAMES[endpoint] } });
}
function send(method, path, body, endpoint) {
  return http.request(method, `${BASE_URL}${path}`, body === null ? null : JSON.stringify(body),
    { ...json, tags: { endpoint, name: NAMES[endpoint] } });
}

// warmup: read-mostly traffic at a gentle rate, drawing from its own stream
export function warmup() {
  const r = rng();
  ok(get('/api/challenges', 'challenges'), 'challenges', '200');
  const player = `warm-${exec.scenario.iterationInTest}`;
  if (r() < 0.5) ok(send('POST', `/api/players/${player}/goals/initialize`, null, 'initialize'), 'initialize', '200|201');
}

// setup: a token of this run for the player ids. The demo keeps what players
// claimed (in memory while it runs, in PostgreSQL for good) and refuses a
// second claim (409 already_claimed): ids of one SEED alone made every claim
// of a second run against the same service fail. The request data (the
// challenges drawn) still follows SEED.
export function setup() {
  return { run: `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}` };
}

// init: players initialize their goals and pick an active challenge
export function init(data) {
  const r = rng();
  const player = `p-${SEED}-${data.run}-${exec.scenario.iterationInTest}`;
  ok(send('POST', `/api/players/${player}/goals/initialize`, null, 'initialize'), 'initialize', '200|201');
  ok(send('PUT', `/api/players/${player}/active-challenge`, { challenge_id: pick(r, CHALLENGES) }, 'set_active'), 'set_active', '200');
}

// gameplay: a new player plays and claims a reward
export function gameplayApi(data) {
  const r = rng();
  const player = `g-${SEED}-${data.run}-${exec.scenario.iterationInTest}`;
  const challenge = pick(r, CHALLENGES);
  ok(send('POST', `/api/players/${player}/goals/initialize`, null, 'initialize'), 'initialize', '200|201');
  ok(send('PUT', `/api/players/${player}/active-challenge`, { challenge_id: challenge }, 'set_active'), 'set_active', '200');
  ok(send('POST', `/api/players/${player}/rewards/claim`, { challenge_id: challenge }, 'claim'), 'claim', '200');
  if (r() < 0.2) ok(get('/api/challenges', 'challenges'), 'challenges', '200');
}

// gameplay events over gRPC: stats and logins. k6 counts no gRPC request,
// so the kit does (GRPC_REQS, per endpoint): the gRPC budgets' guard reads
// it, so that a gRPC half that made no call fails the gameplay gate instead
// of passing its p(95) on no sample. A call k6 cannot make (the connection
// refused, say) is a failed check, not an exception that would end the
// iteration before its check.
const grpcReqs = new Counter(GRPC_REQS);
let grpcFailureLogged = false;

export function gameplayEvents() {
  const r = rng();
  const player = `g-${SEED}-${Math.floor(r() * 100000)}`;
  let res = null;
  try {
    if (!grpcConnected) {
      grpcClient.connect(GRPC_ADDR, { plaintext: true, timeout: '5s' });
      grpcConnected = true;
    }
    let endpoint;
    if (r() < 0.8) {
      endpoint = 'send_stat';
      res = grpcClient.invoke('events.v1.EventIngest/SendStat',
        { player_id: player, stat: pick(r, ['matches_won', 'score', 'kills']), value: Math.floor(r() * 100) },
        { tags: { endpoint } });
    } else {
      endpoint = 'send_login';
      res = grpcClient.invoke('events.v1.EventIngest/SendLogin',
        { player_id: player, platform: pick(r, ['ios', 'android', 'pc']) }, { tags: { endpoint } });
    }
    grpcReqs.add(1, { endpoint });
  } catch (e) {
    if (!grpcFailureLogged) { // once per VU
      grpcFailureLogged = true;
      console.error(`gameplay_events: a gRPC call to ${GRPC_ADDR} failed (counted as a failed check): ${e}`);
    }
  }
  check(res, { 'event status OK': (x) => x !== null && x.status === grpc.StatusOK });
}

// probe: scrape the target's Prometheus text format and record pool figures by phase
let last = null;
export function probe() {
  const res = http.get(METRICS_URL, { tags: { endpoint: 'metrics' } });
  if (res.status !== 200 || !String(res.headers['Content-Type'] || '').startsWith('text/plain')) {
    return; // not a Prometheus text endpoint: nothing to record
  }
  const values = {};
  for (const line of String(res.body).split('\n')) {
    if (line === '' || line[0] === '#') continue;
    const sp = line.lastIndexOf(' ');
    values[line.slice(0, sp)] = parseFloat(line.slice(sp + 1));
  }
  const phase = phaseAt(schedule, exec.instance.currentTestRunDuration / 1000);
  const tags = { phase };
  const v = (name) => values[name];
  if (v('demo_db_pool_total_conns') !== undefined) pool.size.add(v('demo_db_pool_total_conns'), tags);
  if (v('demo_db_pool_in_use_conns') !== undefined) pool.inUse.add(v('demo_db_pool_in_use_conns'), tags);
  if (last) {
    const delta = (name) => Math.max(0, (v(name) || 0) - (last[name] || 0));
    pool.waited.add(delta('demo_db_pool_waited_acquires_total'), tags);
    pool.newConns.add(delta('demo_db_pool_new_conns_total'), tags);
    pool.timeouts.add(delta('demo_db_pool_acquire_timeouts_total'), tags);
    pool.errors.add(delta('demo_db_pool_acquire_errors_total'), tags);
    pool.waitMs.add(1000 * delta('demo_db_pool_acquire_wait_seconds_total'), tags);
  } else {
    // first scrape: the counters' totals since the service started are the
    // baseline (a service used by an earlier run holds that run's too);
    // this run's growth is counted from here, in the deltas above
    pool.newConns.add(0, tags);
    pool.waited.add(0, tags);
    pool.timeouts.add(0, tags);
    pool.errors.add(0, tags);
    pool.waitMs.add(0, tags);
  }
  last = values;
}

export function handleSummary(data) {
  return report(data, { profile: PROFILE, variant: VARIANT, schedule, resultsDir: __ENV.RESULTS_DIR || 'results', testid: __ENV.TESTID });
}

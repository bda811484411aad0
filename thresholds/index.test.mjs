// Unit tests of the thresholds helper (node --test; make test runs them).
// The helper is plain JavaScript with no k6 import, so Node runs it as k6
// would; what k6 then does with the thresholds is tested end to end
// (test/e2e).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

// index.js is an ES module in a folder without package.json: imported as a
// data: URL, which Node always reads as a module (a Node before 20.19 would
// take index.js for CommonJS).
const source = readFileSync(new URL('./index.js', import.meta.url), 'utf8');
const { steady, settled, profiled, merge, parseKey, formatKey } =
  await import(`data:text/javascript,${encodeURIComponent(source)}`);

const scenarios = {
  api: { executor: 'constant-vus', tags: { phase: 'gameplay' } },
  events: { executor: 'constant-vus', tags: { phase: 'gameplay' } },
  init: { executor: 'constant-vus', tags: { phase: 'init' } },
};

test('steady scopes budgets to steady samples per phase and guards each budget and scenario', () => {
  const out = steady({
    'http_req_duration{endpoint:claim}': ['p(95)<50'],
    'grpc_req_duration{endpoint:send_stat}': ['p(95)<50'],
    http_req_failed: ['rate<0.01'],
    checks: ['rate>0.99'],
  }, { phases: ['gameplay'], scenarios, counters: { grpc_req_duration: 'kit_grpc_reqs' } });
  assert.deepEqual(out, {
    'http_req_duration{endpoint:claim,phase:gameplay,regime:steady}': ['p(95)<50'],
    'grpc_req_duration{endpoint:send_stat,phase:gameplay,regime:steady}': ['p(95)<50'],
    'http_req_failed{phase:gameplay,regime:steady}': ['rate<0.01'],
    'checks{phase:gameplay,regime:steady}': ['rate>0.99'],
    // a budget's samples exist: a misspelled endpoint, or no request at all, fails
    'http_reqs{endpoint:claim,phase:gameplay,regime:steady}': ['count>0'],
    'kit_grpc_reqs{endpoint:send_stat,phase:gameplay,regime:steady}': ['count>0'],
    'http_reqs{phase:gameplay,regime:steady}': ['count>0'],
    // the steady gate of every scenario of the phase
    'regime_steady{scenario:api}': ['rate==1'],
    'regime_steady{scenario:events}': ['rate==1'],
    'iterations{regime:steady,scenario:api}': ['count>0'],
    'iterations{regime:steady,scenario:events}': ['count>0'],
  });
});

test('steady without a counter guards a Trend budget by max>0 on its own sub-metric', () => {
  // k6 takes no count on a Trend (exit 104); an empty Trend's max is 0
  const out = steady({ 'grpc_req_duration{endpoint:send_stat}': ['p(95)<50'] }, { phases: ['gameplay'], scenarios });
  assert.deepEqual(out['grpc_req_duration{endpoint:send_stat,phase:gameplay,regime:steady}'], ['p(95)<50', 'max>0']);
  const mx = steady({ 'my_latency{endpoint:x}': ['max<50'] }, { phases: ['gameplay'], scenarios });
  assert.deepEqual(mx['my_latency{endpoint:x,phase:gameplay,regime:steady}'], ['max<50', 'max>0']);
  // a Gauge takes only value: no guard of its own
  const gauge = steady({ 'pool_size{endpoint:x}': ['value<50'] }, { phases: ['gameplay'], scenarios });
  assert.deepEqual(gauge['pool_size{endpoint:x,phase:gameplay,regime:steady}'], ['value<50']);
  // a Rate budget has no count to guard it: left to the scenario guards
  const rate = steady({ 'checks{endpoint:claim}': ['rate>0.99'] }, { phases: ['gameplay'], scenarios });
  assert.deepEqual(rate['checks{endpoint:claim,phase:gameplay,regime:steady}'], ['rate>0.99']);
});

test('steady keeps both budgets of two spellings of one sub-metric, and checks the scenario and phase a key names', () => {
  const out = steady({
    'http_req_duration{endpoint:claim}': ['p(95)<50'],
    'http_req_duration{endpoint:claim,phase:gameplay}': ['p(99)<200'],
  }, { phases: ['gameplay'], scenarios });
  assert.deepEqual(out['http_req_duration{endpoint:claim,phase:gameplay,regime:steady}'], ['p(95)<50', 'p(99)<200']);
  const two = steady({ 'http_req_duration{endpoint:claim,scenario:api}': ['p(95)<50'] }, { phases: ['gameplay', 'init'], scenarios });
  assert.deepEqual(Object.keys(two).filter((k) => k.startsWith('http_req_duration')),
    ['http_req_duration{endpoint:claim,phase:gameplay,regime:steady,scenario:api}'], 'a scenario keeps its key to its phase');
  assert.throws(() => steady({ 'checks{scenario:apii}': ['rate>0.99'] }, { phases: ['gameplay'], scenarios }),
    /names scenario "apii", which does not exist; scenarios: api, events, init/);
  assert.throws(() => steady({ 'checks{scenario:init}': ['rate>0.99'] }, { phases: ['gameplay'], scenarios }),
    /names scenario "init", whose phase "init" is not one of gameplay/);
  assert.throws(() => steady({ 'http_req_duration{phase:init}': ['p(95)<1'] }, { phases: ['gameplay'], scenarios }),
    /names phase "init", which is not one of the phases judged: gameplay/);
  assert.throws(() => steady({}, { phases: 'gameplay', scenarios }), /phases must be an array of names/);
});

test('steady refuses to gate nothing, unless told', () => {
  assert.throws(() => steady({ http_req_duration: ['p(95)<50'] }, { scenarios }), /steady\(\): no scenario to gate.*gate: false/);
  const out = steady({ http_req_duration: ['p(95)<50'] }, { scenarios, gate: false });
  assert.deepEqual(out, {
    'http_req_duration{regime:steady}': ['p(95)<50'],
    'http_reqs{regime:steady}': ['count>0'],
  });
});

test('steady names unknown phases, scenarios and keys', () => {
  assert.throws(() => steady({}, { phases: ['nope'], scenarios }), /phase "nope" matches no scenario.*phases: gameplay, init/);
  assert.throws(() => steady({}, { scenarioNames: ['nope'], scenarios }), /scenario "nope" does not exist; scenarios: api, events, init/);
  assert.throws(() => steady({ 'http_req_duration{regime:cold}': ['p(95)<1'] }, { phases: ['init'], scenarios }), /already names a regime/);
  assert.throws(() => steady({ 'http_req_duration{endpoint}': ['p(95)<1'] }, { phases: ['init'], scenarios }), /is not key:value/);
  assert.throws(() => steady({ http_req_duration: 'p(95)<1' }, { phases: ['init'], scenarios }), /must map to an array/);
});

test('settled maps budgets to the settled gauges, keeps rule options, and a scenario tag keeps a key to its scenario', () => {
  const out = settled({
    'http_req_duration{endpoint:claim,scenario:api}': ['p(95)<50', { threshold: 'p(99)<80', abortOnFail: true, delayAbortEval: '10s' }],
    iteration_duration: ['max<500'],
    http_req_failed: ['rate<0.01'],
    checks: ['rate>0.99'], // no settled counterpart
    'checks{scenario:init}': ['rate>0.99'], // skipped as well, whatever scenario it names
  }, { phases: ['gameplay'], scenarios, ttss: 20000 });
  assert.deepEqual(out, {
    'regime_settled_p95{endpoint:claim,scenario:api}': ['value<50'],
    'regime_settled_p99{endpoint:claim,scenario:api}': [{ threshold: 'value<80', abortOnFail: true, delayAbortEval: '10s' }],
    'regime_settled_max{scenario:api}': ['value<500'],
    'regime_settled_max{scenario:events}': ['value<500'],
    'regime_settled_error_rate{scenario:api}': ['value<0.01'],
    'regime_settled_error_rate{scenario:events}': ['value<0.01'],
    'regime_settled_ttss{scenario:api}': ['value<20000'],
    'regime_settled_ttss{scenario:events}': ['value<20000'],
    'regime_settled_count{endpoint:claim,scenario:api}': ['count>0'],
    'regime_settled_count{scenario:api}': ['count>0'],
    'regime_settled_count{scenario:events}': ['count>0'],
    'regime_settled{scenario:api}': ['rate==1'],
    'regime_settled{scenario:events}': ['rate==1'],
  });
});

test('settled uses the configured endpoint tag', () => {
  const out = settled({ 'http_req_duration{route:claim}': ['p(95)<50'] }, { scenarioNames: ['api'], scenarios, endpointTag: 'route' });
  assert.deepEqual(out['regime_settled_p95{route:claim,scenario:api}'], ['value<50']);
  assert.throws(() => settled({ 'http_req_duration{endpoint:claim}': ['p(95)<50'] }, { scenarioNames: ['api'], scenarios, endpointTag: 'route' }),
    /has tags endpoint; the settled view is kept per scenario and route only/);
});

test('settled names a misspelled metric instead of skipping it', () => {
  assert.throws(() => settled({ 'http_req_duraton{endpoint:x}': ['p(95)<1'] }, { phases: ['gameplay'], scenarios }),
    /no metric "http_req_duraton"; did you mean http_req_duration\?/);
  // a metric of the script's own near a judged one: named in custom, skipped
  assert.throws(() => settled({ 'tcp_req_duration': ['p(95)<5'] }, { phases: ['gameplay'], scenarios }),
    /did you mean http_req_duration\?.*custom: \["tcp_req_duration"\]/);
  assert.doesNotThrow(() => settled({ 'tcp_req_duration': ['p(95)<5'] }, { phases: ['gameplay'], scenarios, custom: ['tcp_req_duration'] }));
  assert.throws(() => settled({}, { phases: ['gameplay'], scenarios, custom: 'x' }), /custom must be an array/);
  assert.doesNotThrow(() => settled({ 'game_score': ['avg>1'] }, { phases: ['gameplay'], scenarios }));
  assert.throws(() => profiled({ p50: 0.1 }, { phases: ['gameplay'], scenarios, endpoints: 'x' }), /endpoints must be an array/);
});

test('settled refuses what it cannot judge', () => {
  assert.throws(() => settled({ iteration_duration: ['p(95)<1'] }, { scenarios }), /settled\(\): no scenario to gate/);
  assert.throws(() => settled({ 'http_req_duration{endpoint:a,scenario:init}': ['p(95)<1'] }, { phases: ['gameplay'], scenarios }),
    /names scenario "init", which is not judged here; judged: api, events/);
  assert.throws(() => settled({ http_req_duration: ['p(95)<1'] }, { phases: ['gameplay'], scenarios }), /needs an endpoint tag/);
  assert.throws(() => settled({ iteration_duration: ['avg<1'] }, { phases: ['gameplay'], scenarios }), /"avg" .* has no settled counterpart; valid: /);
  assert.throws(() => settled({ http_req_failed: ['count<1'] }, { phases: ['gameplay'], scenarios }), /supports rate rules only/);
  assert.throws(() => settled({}, { phases: ['gameplay'], scenarios, ttss: -1 }), /ttss must be a positive number/);
});

test('profiled writes ratio thresholds with a guard per figure', () => {
  const out = profiled({ ttss: 0.2, p99: 0.1 }, { scenarioNames: ['api'], scenarios, endpoints: ['claim'] });
  assert.deepEqual(out, {
    'regime_profile_ttss{scenario:api}': ['value<1.2'],
    'regime_profile_checks{figure:ttss,scenario:api}': ['count>0'],
    'regime_profile_p99{scenario:api}': ['value<1.1'],
    'regime_profile_checks{figure:p99,scenario:api}': ['count>0'],
    'regime_profile_p99{endpoint:claim,scenario:api}': ['value<1.1'],
    'regime_profile_checks{endpoint:claim,figure:p99,scenario:api}': ['count>0'],
    'regime_settled{scenario:api}': ['rate==1'],
  });
  assert.deepEqual(Object.keys(profiled({ p50: 0.1 }, { scenarioNames: ['api'], scenarios, endpoints: ['claim'], endpointTag: 'route' })).sort(),
    ['regime_profile_checks{figure:p50,route:claim,scenario:api}', 'regime_profile_checks{figure:p50,scenario:api}',
      'regime_profile_p50{route:claim,scenario:api}', 'regime_profile_p50{scenario:api}', 'regime_settled{scenario:api}']);
  assert.throws(() => profiled({ p95: 0.1 }, { scenarioNames: ['api'], scenarios }), /unknown figure "p95"; valid: ttss, p50, p99/);
});

test('keys: one spelling, and merge concatenates', () => {
  assert.deepEqual(parseKey('m{b:2, a:1}'), { metric: 'm', tags: { b: '2', a: '1' } });
  assert.equal(formatKey('m', { b: '2', a: '1' }), 'm{a:1,b:2}');
  assert.throws(() => parseKey('m-x'), /is not a metric name/);
  assert.deepEqual(merge({ a: ['x'] }, { a: ['y'], b: ['z'] }), { a: ['x', 'y'], b: ['z'] });
});

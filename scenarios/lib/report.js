// End-of-test report of the kit: writes results/<run id>/ through the Go
// results writer (summary.json, HdrHistogram logs, series, report.html) and
// prints a text summary with a regime table and the cold-start section
// (never mixed into the steady-state figures).
import regime from 'k6/x/regime';

const f = (v, d = 1) => (v === null || v === undefined ? '-' : Number(v).toFixed(d));
const pad = (s, n) => String(s).padEnd(n);

function thresholdLines(data) {
  const lines = [];
  for (const [name, m] of Object.entries(data.metrics)) {
    if (!m.thresholds) continue;
    for (const [expr, t] of Object.entries(m.thresholds)) {
      lines.push(`  ${t.ok ? 'ok  ' : 'FAIL'} ${name}: ${expr}`);
    }
  }
  return lines.sort();
}

export function text(data, rs, meta) {
  const out = [];
  out.push(`xk6-regime  profile=${meta.profile} variant=${meta.variant}  results: ${meta.dir}`);
  out.push('');
  out.push(regime.textSummary().trimEnd());
  out.push('');
  out.push('Cold start (connection pool), per phase (last new conn s: seconds after the phase\'s first request):');
  out.push(`  ${pad('phase', 12)}${pad('requests', 10)}${pad('client new conns', 18)}${pad('connect ms', 12)}${pad('last new conn s', 17)}${pad('errors', 8)}${pad('5xx', 6)}${pad('no resp', 9)}${pad('svc new conns', 15)}${pad('svc waited', 12)}svc timeouts`);
  const tr = rs.tracked || {};
  const svc = (metric, phase) => ((tr[metric] || {})[phase] || {}).sum;
  for (const [phase, c] of Object.entries(rs.connection_cold_start).sort()) {
    if (phase === 'probe') continue;
    out.push(`  ${pad(phase || '-', 12)}${pad(c.requests, 10)}${pad(c.new_connections, 18)}${pad(f(c.connect_ms, 1), 12)}` +
      `${pad(c.last_new_connection_ms === null ? '-' : f(c.last_new_connection_ms / 1000, 1), 17)}${pad(c.errors, 8)}${pad(c.status_5xx, 6)}${pad(c.no_response, 9)}` +
      `${pad(f(svc('service_pool_new_conns', phase), 0), 15)}${pad(f(svc('service_pool_waited_acquires', phase), 0), 12)}${f(svc('service_pool_acquire_timeouts', phase), 0)}`);
  }
  out.push('');
  out.push('Errors by phase and regime:');
  for (const [phase, c] of Object.entries(rs.connection_cold_start).sort()) {
    if (phase === 'probe') continue;
    const parts = Object.entries(c.errors_by_regime).map(([r, n]) => `${r || 'untagged'}=${n}`).join(' ');
    out.push(`  ${pad(phase, 12)}${parts}`);
  }
  out.push('');
  out.push('Thresholds:');
  out.push(...thresholdLines(data));
  out.push('');
  return out.join('\n');
}

// report writes the results folder and returns handleSummary's outputs.
export function report(data, meta) {
  const rs = regime.summary();
  const thresholds = Object.fromEntries(Object.entries(data.metrics)
    .filter(([, m]) => m.thresholds)
    .map(([n, m]) => [n, Object.fromEntries(Object.entries(m.thresholds).map(([e, t]) => [e, t.ok]))]));
  const dir = regime.saveResults({
    dir: meta.resultsDir,
    testid: meta.testid || '',
    thresholds,
    extra: { profile: meta.profile, variant: meta.variant, schedule: meta.schedule, state: data.state },
    files: { 'k6-metrics.json': JSON.stringify(data.metrics, null, 1) },
    // a run whose results cannot be written fails (exit 111) instead of passing quietly;
    // how the run ended (completed, interrupted, aborted by a threshold, ...) is recorded by the extension
    required: true,
  });
  return { stdout: text(data, rs, { ...meta, dir }) };
}

// Phase builder: turns a list of phases into k6 scenarios that run one after
// the other (startTime chained) and tag every sample with {phase: name}.
//
//   phases([
//     { name: 'warmup', executor: 'ramping-arrival-rate', startRate: 10, stages: [{ target: 100, duration: '30s' }], ... },
//     { name: 'init',   executor: 'ramping-arrival-rate', ... },
//     { name: 'gameplay', parallel: [ { name: 'gameplay_api', ... }, { name: 'gameplay_events', ... } ] },
//   ])
//
// A phase with `parallel` starts several scenarios together (all tagged with
// the phase's name); the next phase starts when the longest of them ends.

const UNITS = { ms: 0.001, s: 1, m: 60, h: 3600 };

// seconds parses a k6 duration string ('1m30s', '500ms', '2h').
export function seconds(d) {
  if (typeof d === 'number') return d;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;
  let total = 0;
  let matched = '';
  let m;
  while ((m = re.exec(String(d))) !== null) {
    total += parseFloat(m[1]) * UNITS[m[2]];
    matched += m[0];
  }
  if (matched === '' || matched !== String(d)) {
    throw new Error(`phases: ${JSON.stringify(d)} is not a k6 duration like '30s' or '1m30s'`);
  }
  return total;
}

// fmt writes seconds as a k6 duration.
export function fmt(s) {
  return `${Math.round(s * 1000)}ms`;
}

// length is how long a scenario runs (without gracefulStop).
export function length(sc) {
  if (sc.stages) return sc.stages.reduce((a, st) => a + seconds(st.duration), 0);
  if (sc.duration) return seconds(sc.duration);
  throw new Error(`phases: scenario ${sc.name} has neither stages nor duration`);
}

// phases returns {scenarios, schedule}: k6 scenarios, and the phase windows
// [{phase, start, end}] in seconds from the test start.
export function phases(list, { gap = 0 } = {}) {
  const scenarios = {};
  const schedule = [];
  let t = 0;
  for (const ph of list) {
    if (!ph.name) throw new Error('phases: every phase needs a name');
    const members = ph.parallel || [ph];
    let longest = 0;
    for (const sc of members) {
      const { name, parallel, ...rest } = sc;
      const scName = name || ph.name;
      if (scenarios[scName]) throw new Error(`phases: scenario ${scName} defined twice`);
      longest = Math.max(longest, length(sc));
      scenarios[scName] = {
        gracefulStop: '5s',
        ...rest,
        startTime: fmt(t),
        tags: { ...(rest.tags || {}), phase: ph.name },
      };
    }
    schedule.push({ phase: ph.name, start: t, end: t + longest });
    t += longest + gap;
  }
  return { scenarios, schedule };
}

// phaseAt returns the phase running at elapsed seconds (the last one after the end).
export function phaseAt(schedule, elapsed) {
  for (const w of schedule) if (elapsed < w.end) return w.phase;
  return schedule.length ? schedule[schedule.length - 1].phase : 'none';
}

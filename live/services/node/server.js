// The live harness's Node (V8) HTTP service: each request builds, sorts,
// serialises and parses a small catalogue and scans it with a regular
// expression, code that V8 runs interpreted first and optimises after some
// thousands of calls (Ignition, Sparkplug, TurboFan): a JIT warm-up.
//
//   node server.js [--port N] [--mix catalogue|text]   (127.0.0.1; port 0 picks a free one)
//
// Mixes: catalogue (the default, above); text: split a 3 KiB text into
// words, count them in a Map, sort the counts and build the answer with
// template strings.
//
// Prints "listening on 127.0.0.1:PORT" once it accepts connections.
// GET /health answers without work.
'use strict';
const http = require('http');

let port = 0;
let mix = 'catalogue';
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i] === '--port' && i + 1 < process.argv.length) {
    port = Number(process.argv[++i]);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      console.error(`server.js: --port must be 0..65535, got ${process.argv[i]}`);
      process.exit(2);
    }
  } else if (process.argv[i] === '--mix' && i + 1 < process.argv.length) {
    mix = process.argv[++i];
    if (mix !== 'catalogue' && mix !== 'text') {
      console.error(`server.js: --mix must be catalogue or text, got ${mix}`);
      process.exit(2);
    }
  } else {
    console.error(`server.js: unknown argument ${process.argv[i]} (valid: --port N, --mix catalogue|text)`);
    process.exit(2);
  }
}

const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];
const TAG = /^(?:[a-d]\w*)-(\d+)$/;

function catalogue(seed) {
  const items = [];
  let x = seed >>> 0 || 1;
  for (let i = 0; i < 120; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    items.push({ id: i, name: `${WORDS[x % WORDS.length]}-${x % 1000}`, score: (x % 10007) / 97, tags: [x % 7, x % 11] });
  }
  return items;
}

function handle(seed) {
  const items = catalogue(seed);
  items.sort((a, b) => b.score - a.score || a.id - b.id);
  const text = JSON.stringify(items);
  const back = JSON.parse(text);
  let matched = 0;
  let sum = 0;
  for (const it of back) {
    const m = TAG.exec(it.name);
    if (m) {
      matched++;
      sum += Number(m[1]);
    }
    sum += it.tags.reduce((a, b) => a + b, 0);
  }
  return { n: back.length, matched, sum, top: back[0].name };
}

const LOREM = [];
{
  let x = 12345;
  for (let i = 0; i < 500; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    const w = WORDS[x % WORDS.length];
    LOREM.push(i % 7 === 0 ? w.toUpperCase() : w + (x % 3 === 0 ? String(x % 50) : ''));
  }
}

function text(seed) {
  const words = LOREM.slice(seed % 100).concat(LOREM.slice(0, seed % 100)).join(' ').split(/\s+/);
  const counts = new Map();
  for (const w of words) {
    const k = w.toLowerCase().replace(/\d+$/, '');
    counts.set(k, (counts.get(k) || 0) + 1);
  }
  const top = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 8);
  return { words: words.length, distinct: counts.size, top: top.map(([w, c]) => `${w}:${c}`).join(',') };
}

let requests = 0;
const server = http.createServer((req, res) => {
  if (req.method !== 'GET') {
    res.writeHead(405, { 'Content-Type': 'text/plain' });
    res.end('GET only\n');
    return;
  }
  if (req.url === '/health') {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end('ok\n');
    return;
  }
  requests++;
  const body = JSON.stringify(mix === 'text' ? text(requests) : handle(requests));
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(body + '\n');
});
server.keepAliveTimeout = 60000;
server.on('error', (e) => {
  console.error(`server.js: ${e.message}`);
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => {
  const a = server.address();
  console.log(`listening on ${a.address}:${a.port}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => server.close(() => process.exit(0)));
}

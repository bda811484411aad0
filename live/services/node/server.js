// The live harness's Node (V8) HTTP service: each request builds, sorts,
// serialises and parses a small catalogue and scans it with a regular
// expression, code that V8 runs interpreted first and optimises after some
// thousands of calls (Ignition, Sparkplug, TurboFan): a JIT warm-up.
//
//   node server.js [--port N] [--mix catalogue|text|md]   (127.0.0.1; port 0 picks a free one)
//
// Mixes: catalogue (the default, above); text: split a 3 KiB text into
// words, count them in a Map, sort the counts and build the answer with
// template strings; md (written 2026-11-29, after the service method's last
// change: held out): render a 40-line Markdown-like document to HTML with
// a dozen regular expressions (headings, lists, emphasis, links, code
// spans, escapes through replace callbacks) and collect its headings'
// slugs: V8's regular expressions run as bytecode first and are compiled
// to native code once hot (irregexp's tier-up), beside the JIT's own.
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
    if (mix !== 'catalogue' && mix !== 'text' && mix !== 'md') {
      console.error(`server.js: --mix must be catalogue, text or md, got ${mix}`);
      process.exit(2);
    }
  } else {
    console.error(`server.js: unknown argument ${process.argv[i]} (valid: --port N, --mix catalogue|text|md)`);
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

function doc(seed) {
  const lines = [];
  let x = seed >>> 0 || 1;
  const w = () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return WORDS[x % WORDS.length]; };
  for (let i = 0; i < 40; i++) {
    switch (i % 8) {
      case 0: lines.push(`${'#'.repeat(1 + (x % 3))} ${w()} ${w()} & ${w()}`); break;
      case 1: case 2: lines.push(`- **${w()}** item with \`code_${x % 97}\` and [${w()}](https://example.invalid/${w()}?n=${x % 1000})`); break;
      case 3: lines.push(`${w()} *${w()}* <${w()}> ${w()} "${w()}" ${x % 10000} ${w()}.`); break;
      default: lines.push(`${w()} ${w()} ${w()}, ${w()} _${w()}_ ${w()} ${w()} ${w()} ${w()}.`);
    }
  }
  return lines.join('\n');
}

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
function inline(s) {
  return s.replace(/[&<>"]/g, (c) => ESC[c])
    .replace(/`([^`]+)`/g, '<code>$1</code>')
    .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>')
    .replace(/(^|\W)[*_]([^*_]+)[*_](?=\W|$)/g, '$1<em>$2</em>')
    .replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (m, t, u) => `<a href="${u.replace(/&amp;/g, '&')}">${t}</a>`);
}

function md(seed) {
  const out = [];
  const slugs = [];
  let inList = false;
  for (const line of doc(seed).split(/\r?\n/)) {
    let m;
    if ((m = /^(#{1,6})\s+(.+)$/.exec(line))) {
      if (inList) { out.push('</ul>'); inList = false; }
      const slug = m[2].toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
      slugs.push(slug);
      out.push(`<h${m[1].length} id="${slug}">${inline(m[2])}</h${m[1].length}>`);
    } else if ((m = /^[-*]\s+(.*)$/.exec(line))) {
      if (!inList) { out.push('<ul>'); inList = true; }
      out.push(`<li>${inline(m[1])}</li>`);
    } else {
      if (inList) { out.push('</ul>'); inList = false; }
      out.push(`<p>${inline(line)}</p>`);
    }
  }
  if (inList) out.push('</ul>');
  const html = out.join('\n');
  return { bytes: html.length, headings: slugs.length, first: slugs[0], links: (html.match(/<a /g) || []).length };
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
  const body = JSON.stringify(mix === 'text' ? text(requests) : mix === 'md' ? md(requests) : handle(requests));
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

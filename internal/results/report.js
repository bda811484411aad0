// Draws, per scenario, iteration duration against iteration index and
// against time (log scale) over the cold / warm-up / steady regions.
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var COLORS = { cold: '#dbe9f6', warmup: '#fde2c4', steady: '#d9f0d3', untagged: '#eeeeee' };
  var data = JSON.parse(document.getElementById('regime-data').textContent);
  var root = document.getElementById('plots');

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) {
    if (v >= 1000) return (v / 1000).toPrecision(3).replace(/\.?0+$/, '') + 's';
    if (v >= 1) return String(+v.toPrecision(3)) + 'ms';
    return String(+(v * 1000).toPrecision(3)) + 'us';
  }

  // plot draws one chart. xOf(point) gives the x value of a series point;
  // regions/transitions/windows carry their own x values (xr, xt, xw).
  function plot(sc, opts) {
    var W = 1300, H = 330, L = 62, R = 12, T = 14, B = 34;
    var pts = sc.points;
    var svg = el('svg', { 'class': 'plot ' + opts.cls, width: W, height: H, viewBox: '0 0 ' + W + ' ' + H });
    if (!pts.length) {
      el('text', { x: L, y: T + 20 }, svg).textContent = 'no iterations';
      return svg;
    }
    var x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    pts.forEach(function (p) {
      var x = opts.xOf(p);
      x0 = Math.min(x0, opts.xStart(p)); x1 = Math.max(x1, x);
      if (p[3] > 0) y0 = Math.min(y0, p[3]);
      y1 = Math.max(y1, p[5]);
    });
    sc.windows.forEach(function (w) { if (w.median > 0) { y0 = Math.min(y0, w.median); y1 = Math.max(y1, w.tail); } });
    if (!(y0 > 0)) y0 = 0.001;
    if (y1 <= y0) y1 = y0 * 10;
    var ly0 = Math.log10(y0) - 0.05, ly1 = Math.log10(y1) + 0.05;
    if (x1 <= x0) x1 = x0 + 1;
    var pw = W - L - R, ph = H - T - B;
    var X = function (x) { return L + (x - x0) / (x1 - x0) * pw; };
    var Y = function (y) { return T + (ly1 - Math.log10(Math.max(y, 1e-9))) / (ly1 - ly0) * ph; };
    var clip = function (v) { return Math.max(L, Math.min(L + pw, v)); };

    var gReg = el('g', { 'class': 'regions' }, svg);
    sc.regions.forEach(function (r) {
      var a = clip(X(opts.xr(r, 0))), b = clip(X(opts.xr(r, 1)));
      if (b - a < 0.5) b = a + 0.5;
      el('rect', { 'class': 'region region-' + r.regime, x: a.toFixed(1), y: T, width: (b - a).toFixed(1), height: ph,
        fill: COLORS[r.regime] || '#eee', 'shape-rendering': 'crispEdges' }, gReg);
    });
    // grid and axes
    var gAx = el('g', { 'class': 'axes' }, svg);
    for (var e = Math.floor(ly0); e <= Math.ceil(ly1); e++) {
      [1, 2, 5].forEach(function (m) {
        var v = m * Math.pow(10, e), yy = Y(v);
        if (yy < T || yy > T + ph) return;
        el('line', { x1: L, x2: L + pw, y1: yy, y2: yy, stroke: m === 1 ? '#999' : '#ccc', 'stroke-width': 0.5 }, gAx);
        el('text', { x: L - 4, y: yy + 4, 'text-anchor': 'end' }, gAx).textContent = fmt(v);
      });
    }
    el('rect', { x: L, y: T, width: pw, height: ph, fill: 'none', stroke: '#666' }, gAx);
    for (var i = 0; i <= 10; i++) {
      var xv = x0 + (x1 - x0) * i / 10, xx = X(xv);
      el('text', { x: xx, y: T + ph + 14, 'text-anchor': 'middle' }, gAx).textContent = opts.xLabel(xv);
    }
    el('text', { x: L + pw / 2, y: H - 4, 'text-anchor': 'middle' }, gAx).textContent = opts.title;

    // data: min-max per pixel column, and the median
    var cols = {};
    pts.forEach(function (p) {
      var c = Math.round(X(opts.xOf(p)));
      var k = cols[c];
      if (!k) { cols[c] = { lo: p[3], hi: p[5], med: p[4] * p[1], n: p[1] }; return; }
      k.lo = Math.min(k.lo, p[3]); k.hi = Math.max(k.hi, p[5]); k.med += p[4] * p[1]; k.n += p[1];
    });
    var keys = Object.keys(cols).map(Number).sort(function (a, b) { return a - b; });
    var d = [], m = [];
    keys.forEach(function (c) {
      var k = cols[c], ya = Y(k.lo), yb = Y(k.hi);
      if (ya - yb < 1) { ya += 0.5; yb -= 0.5; }
      d.push('M' + c + ' ' + ya.toFixed(1) + 'V' + yb.toFixed(1));
      m.push((m.length ? 'L' : 'M') + c + ' ' + Y(k.med / k.n).toFixed(1));
    });
    el('path', { 'class': 'data', d: d.join(''), stroke: '#1f77b4', 'stroke-width': 1, fill: 'none', 'shape-rendering': 'crispEdges' }, svg);
    el('path', { 'class': 'median', d: m.join(''), stroke: '#0b2545', 'stroke-width': 1.2, fill: 'none' }, svg);

    // window median and tail (the detector's view)
    ['median', 'tail'].forEach(function (f) {
      var s = [];
      sc.windows.forEach(function (w) {
        var a = opts.xw(w, 0), b = opts.xw(w, 1);
        if (a === null || b === null || !(w[f] > 0)) return;
        s.push('M' + clip(X(a)).toFixed(1) + ' ' + Y(w[f]).toFixed(1) + 'H' + clip(X(b)).toFixed(1));
      });
      if (s.length) el('path', { 'class': 'window-' + f, d: s.join(''), stroke: f === 'median' ? '#ff7f0e' : '#9467bd', 'stroke-width': 2, fill: 'none' }, svg);
    });

    // transitions
    sc.transitions.forEach(function (t, ti) {
      var x = opts.xt(t);
      if (x === null || x < x0 || x > x1) return;
      var xx = X(x);
      var color = t.kind === 'settled' ? '#2ca02c' : '#d62728';
      el('line', { 'class': t.kind === 'settled' ? 'transition settled' : 'transition', x1: xx, x2: xx, y1: T, y2: T + ph, stroke: color, 'stroke-width': 1.5, 'stroke-dasharray': t.kind === 'settled' ? '2,2' : '5,3' }, svg);
      el('text', { 'class': 'transition-label', x: xx + 3, y: T + 12 + 13 * (ti % 3), fill: color }, svg).textContent =
        (t.kind === 'relapse' ? 'relapse ' : '') + (t.endpoint ? t.endpoint + ' ' : '') + '\u2192 ' + t.to;
    });
    return svg;
  }

  // indexAt maps a Unix ms time to the iteration index of the first point ending at or after it.
  function indexAt(pts, ms) {
    var lo = 0, hi = pts.length - 1;
    if (!pts.length) return null;
    if (ms <= pts[0][2]) return pts[0][0];
    if (ms > pts[hi][2]) return pts[hi][0] + pts[hi][1];
    while (lo < hi) { var mid = (lo + hi) >> 1; if (pts[mid][2] < ms) lo = mid + 1; else hi = mid; }
    return pts[lo][0];
  }

  data.scenarios.forEach(function (sc) {
    var sec = document.createElement('section');
    sec.className = 'scenario';
    sec.id = 'scenario-' + sc.name;
    var h = document.createElement('h2');
    h.innerHTML = '';
    h.textContent = 'Scenario ' + sc.name + ' ';
    var small = document.createElement('small');
    small.textContent = 'class ' + sc.class + ', TTSS ' + (sc.ttss_ms === null ? '-' : Math.round(sc.ttss_ms) + ' ms') +
      ', ' + sc.iterations + ' iterations' + (sc.aggregated ? ' (plotted in buckets of iterations)' : '');
    h.appendChild(small);
    sec.appendChild(h);
    var t0 = data.start_ms || (sc.points.length ? sc.points[0][2] - sc.points[0][5] : 0);
    var pts = sc.points;
    sec.appendChild(plot(sc, {
      cls: 'by-index', title: 'iteration index (arrival order)',
      xOf: function (p) { return p[0] + p[1] - 1; }, xStart: function (p) { return p[0]; },
      xr: function (r, end) { return end ? r.to_index : r.from_index; },
      xt: function (t) { return t.index !== null && t.index !== undefined ? t.index : indexAt(pts, t.at_ms); },
      xw: function (w, end) {
        if (w.index !== null && w.index !== undefined) return end ? w.index : w.first_index;
        return indexAt(pts, end ? w.last_ms : w.first_ms);
      },
      xLabel: function (v) { return String(Math.round(v)); }
    }));
    sec.appendChild(plot(sc, {
      cls: 'by-time', title: 'time since start (s)',
      xOf: function (p) { return (p[2] - t0) / 1000; }, xStart: function (p) { return Math.max(0, (p[2] - p[5] - t0) / 1000); },
      xr: function (r, end) { return ((end ? r.to_ms : r.from_ms) - t0) / 1000; },
      xt: function (t) { return t.at_ms ? (t.at_ms - t0) / 1000 : null; },
      xw: function (w, end) { return ((end ? w.last_ms : w.first_ms) - t0) / 1000; },
      xLabel: function (v) { return v.toFixed(1); }
    }));
    root.appendChild(sec);
  });
  document.body.setAttribute('data-rendered', String(data.scenarios.length));
  // milliseconds from the start of navigation to the plots drawn (loading
  // and parsing the page included; layout and paint after it not): what
  // the soak tool and the browser test read
  if (window.performance && performance.now) {
    document.body.setAttribute('data-drawn-ms', performance.now().toFixed(1));
  }
})();

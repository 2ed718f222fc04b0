// The charts of the run, compare and group pages (templates/charts.tpl), drawn with uPlot
// (vendor/) from the JSON of /api/series (orbit/web/charts.py): one chart per metric key, one
// line per run, a mean ± std band per setting. Smoothing, log y, the x axis, the size and the
// key filter are in the page's query string (smooth, logy, x, size, keys, bands), so a view can
// be shared. Charts are drawn as they scroll into view; a live run's page asks only for the
// points after the last x it has. Everything from run files is set as text, never as markup.
(function () {
  "use strict";
  var root = document.getElementById("charts");
  if (!root || !window.uPlot) return;
  var uPlot = window.uPlot;
  var HEIGHTS = { s: 160, m: 240, l: 400 };
  var POLL_MS = 5000;
  var el = function (id) { return document.getElementById(id); };
  var ui = {
    filter: el("chart-filter"), x: el("chart-x"), smooth: el("chart-smooth"),
    smoothValue: el("chart-smooth-value"), log: el("chart-log"), size: el("chart-size"),
    bands: el("chart-bands"), bandsLabel: el("chart-bands-label"), note: el("chart-note")
  };
  var query = new URLSearchParams(location.search);
  var state = {
    smooth: Math.min(0.99, Math.max(0, parseFloat(query.get("smooth")) || 0)),
    log: query.get("logy") === "1",
    x: query.get("x") || "",
    size: HEIGHTS[query.get("size")] ? query.get("size") : "m",
    keys: query.get("keys") || "",
    bands: query.get("bands") !== "0"
  };
  var data = null;
  var figures = {}; // key -> {fig, plot, box}
  var exposed = { state: state, figures: figures, polls: [], data: function () { return data; } };
  window.orbitCharts = exposed; // for people poking at a chart, and for the browser tests

  function saveState() {
    var q = new URLSearchParams(location.search);
    var put = function (k, v, dflt) { if (v === dflt) q.delete(k); else q.set(k, v); };
    put("smooth", String(state.smooth), "0");
    put("logy", state.log ? "1" : "0", "0");
    put("x", state.x, "");
    put("size", state.size, "m");
    put("keys", state.keys, "");
    put("bands", state.bands ? "1" : "0", "1");
    var s = q.toString();
    history.replaceState(null, "", location.pathname + (s ? "?" + s : "") + location.hash);
  }

  function fetchJSON(url) {
    return fetch(url, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      return r.text();
    }).then(function (t) { return { json: JSON.parse(t), bytes: t.length }; });
  }

  // "reltime": the time axis less each run's first time (seconds since the run's start).
  var REL = "reltime";
  function timeKey() {
    return data && data.x_keys.indexOf("time") < 0 && data.x_keys.indexOf("timestamp") >= 0 ? "timestamp" : "time";
  }

  function srcURL(extra) {
    var x = state.x === REL ? timeKey() : state.x;
    return root.dataset.src + (x ? "&x=" + encodeURIComponent(x) : "") + (extra || "");
  }

  function shifted(r, xs) {
    if (state.x !== REL) return xs;
    var t0 = Infinity;
    Object.keys(r.series).forEach(function (k) { if (r.series[k][0].length) t0 = Math.min(t0, r.series[k][0][0]); });
    return xs.map(function (x) { return x - t0; });
  }

  // --- the drawn values ------------------------------------------------------------------
  function ema(ys, w) { // TensorBoard's: an exponential moving average, debiased at the start
    if (!w) return ys;
    var out = new Array(ys.length), last = 0, n = 0;
    for (var i = 0; i < ys.length; i++) {
      var y = ys[i];
      if (y === null || !isFinite(y)) { out[i] = y; continue; }
      last = last * w + (1 - w) * y;
      n++;
      out[i] = last / (1 - Math.pow(w, n));
    }
    return out;
  }

  function forLog(ys, counter) { // a log axis has no place for 0 or below: gaps, counted
    if (!state.log) return ys;
    return ys.map(function (y) {
      if (y !== null && y <= 0) { counter.hidden++; return null; }
      return y;
    });
  }

  function alpha(color, a) { return color + a; } // "#rrggbb" + "aa"

  function banded() { return state.bands && data.settings.length > 0 && state.x !== REL; }

  // Series and aligned data of one key: [x, run lines (raw faint, smoothed), bands].
  function build(key) {
    var xLabel = { label: state.x === REL ? "seconds since the start" : state.x || data.x_label };
    var tables = [], series = [xLabel], bands = [], counter = { hidden: 0 };
    var thin = banded();
    function add(label, color, width, ys, xs, extra) {
      tables.push([xs, forLog(ys, counter)]);
      series.push(Object.assign({ label: label, stroke: color, width: width, value: fmtValue,
        points: { show: xs.length === 1 } }, extra || {}));
    }
    data.runs.forEach(function (r) {
      var s = r.series[key];
      if (!s || !s[0].length) return;
      var color = thin ? alpha(r.color, "99") : r.color, xs = shifted(r, s[0]);
      if (state.smooth > 0) add(r.label + " (raw)", alpha(r.color, "40"), 1, s[1], xs);
      add(r.label, color, thin ? 1 : 1.5, ema(s[1], state.smooth), xs);
    });
    if (thin) {
      data.settings.forEach(function (st) {
        var b = st.bands[key];
        if (!b || !b[0].length) return;
        var hidden = { stroke: "transparent", width: 0, points: { show: false }, class: "band-edge" };
        add(st.label + " mean", st.color, 2.5, b[1], b[0]);
        add(st.label + " −std", st.color, 0, b[2], b[0], hidden);
        add(st.label + " +std", st.color, 0, b[3], b[0], hidden);
        var hi = series.length - 1;
        bands.push({ series: [hi, hi - 1], fill: alpha(st.color, "30") });
      });
    }
    var aligned = tables.length ? uPlot.join(tables) : [[]];
    if (!isTime(aligned)) xLabel.value = fmtValue;
    return { aligned: aligned, series: series, bands: bands, hidden: counter.hidden };
  }

  function isTime(aligned) {
    var xs = aligned[0];
    return /^(time|timestamp)$/.test(state.x || data.x_label) && xs.length > 0 &&
      xs[0] > 1e8 && xs[xs.length - 1] < 1e11; // seconds since 1970, 1973 to 5138
  }

  function yRange(u, min, max) {
    if (min == null || !isFinite(min) || !isFinite(max)) return [0, 1];
    if (state.log) return uPlot.rangeLog(min, max, 10, true);
    if (min === max) {
      var d = Math.abs(min) * 0.1 || 1;
      var lo = min - d, hi = max + d;
      return [isFinite(lo) ? lo : min, isFinite(hi) ? hi : max];
    }
    var pad = (max - min) * 0.05; // Infinity for a span beyond a float: an asinh scale then
    return isFinite(pad) && isFinite(min - pad) && isFinite(max + pad) ? [min - pad, max + pad] : [min, max];
  }

  // The y ticks of a linear scale: uPlot's own steps stop at 1e-16 and 1e16, so 1e-300 had none.
  function ySplits(u, axisIdx, min, max) {
    var span = max - min, n = Math.max(2, Math.round(HEIGHTS[state.size] / 50));
    if (!(span > 0) || !isFinite(span)) return [min, max];
    var raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; })
      .filter(function (v) { return v >= raw; })[0] || 10 * mag;
    var out = [], first = Math.ceil(min / step) * step;
    for (var i = 0; i <= n + 1; i++) {
      var v = first + i * step;
      if (v > max) break;
      out.push(v);
    }
    return out;
  }

  function xRange(u, min, max) {
    if (min == null || !isFinite(min)) return [0, 1];
    if (min === max) {
      var d = Math.abs(min) * 0.01 || 1;
      return [min - d, max + d];
    }
    return [min, max];
  }

  function fmtValue(u, v) { // the legend: every digit of a step or a count, else 6
    if (v == null) return "–";
    return Number.isInteger(v) && Math.abs(v) < 1e15 ? String(v) : String(+v.toPrecision(6));
  }

  function fmtTick(v) {
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2).replace("e+", "e");
    return String(+v.toPrecision(6));
  }

  function ticks(u, splits) { return splits.map(function (v) { return v == null ? "" : fmtTick(v); }); }

  function tickRoom(u, values) { // the y axis as wide as its longest label
    var n = 0;
    (values || []).forEach(function (s) { n = Math.max(n, String(s).length); });
    return 16 + 7 * n;
  }

  function overflows(aligned) {
    var lo = Infinity, hi = -Infinity;
    for (var s = 1; s < aligned.length; s++) {
      aligned[s].forEach(function (v) {
        if (v != null) { if (v < lo) lo = v; if (v > hi) hi = v; }
      });
    }
    return lo < hi && !isFinite(hi - lo);
  }

  // --- one chart ---------------------------------------------------------------------------
  function draw(key) {
    var f = figures[key];
    if (f.plot) { f.plot.destroy(); f.plot = null; }
    var b = build(key);
    var time = !b.series[0].value;
    var asinh = !state.log && overflows(b.aligned);
    var width = Math.max(200, f.box.clientWidth || f.fig.clientWidth - 16);
    var yAxis = { size: tickRoom, values: ticks };
    if (!state.log) yAxis.splits = asinh ? function (u, i, min, max) { return [min, 0, max]; } : ySplits;
    var opts = {
      width: width,
      height: HEIGHTS[state.size],
      series: b.series,
      bands: b.bands,
      scales: {
        x: { time: time, range: xRange },
        y: { distr: state.log ? 3 : asinh ? 4 : 1, log: 10, range: yRange }
      },
      axes: [time ? {} : { values: ticks }, yAxis],
      cursor: { drag: { x: true, y: false }, sync: { key: "orbit-charts" } },
      legend: { live: true }
    };
    f.plot = new uPlot(opts, b.aligned, f.box);
    f.fig.dataset.series = String(b.series.length - 1);
    f.fig.dataset.points = String(b.aligned[0].length);
    f.fig.dataset.hidden = String(b.hidden);
    f.fig.dataset.scale = state.log ? "log" : asinh ? "asinh" : "linear";
    var note = f.fig.querySelector(".chart-hidden");
    note.textContent = b.hidden ? b.hidden + " values ≤ 0 not shown on the log scale" : "";
  }

  function figure(key) {
    if (figures[key]) return figures[key];
    var fig = Array.prototype.find.call(root.querySelectorAll("figure.metric"),
      function (f) { return f.dataset.key === key; });
    if (!fig) {
      fig = document.createElement("figure");
      fig.className = "metric";
      fig.dataset.key = key;
      var cap = document.createElement("figcaption"), b = document.createElement("b");
      b.textContent = key;
      cap.appendChild(b);
      fig.appendChild(cap);
      root.appendChild(fig);
    }
    var box = document.createElement("div"), hidden = document.createElement("small");
    box.className = "plot";
    hidden.className = "chart-hidden muted";
    fig.appendChild(box);
    fig.appendChild(hidden);
    figures[key] = { fig: fig, box: box, plot: null, seen: false };
    watcher.observe(fig);
    return figures[key];
  }

  var watcher = new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      var f = figures[e.target.dataset.key];
      if (!f) return;
      f.seen = e.isIntersecting;
      if (e.isIntersecting && !f.plot && data) draw(e.target.dataset.key);
    });
  }, { rootMargin: "300px" });

  function redraw() { // the charts in view now, the others as they scroll in
    Object.keys(figures).forEach(function (k) {
      var f = figures[k];
      if (f.plot) { f.plot.destroy(); f.plot = null; }
      if (f.seen && !f.fig.hidden) draw(k);
    });
  }

  function matches(key) {
    var words = state.keys.toLowerCase().split(/[,\s]+/).filter(Boolean);
    return !words.length || words.some(function (w) { return key.toLowerCase().indexOf(w) >= 0; });
  }

  function applyFilter() {
    var shown = 0;
    data.keys.forEach(function (k) {
      var f = figure(k);
      f.fig.hidden = !matches(k);
      if (!f.fig.hidden) shown++;
    });
    ui.note.textContent = shown + " of " + data.keys.length + " charts" +
      (data.dropped_keys ? " (" + data.dropped_keys + " more keys not charted)" : "") +
      " · drag to zoom, double-click to reset" + previews();
  }

  // Runs whose metrics were not read to the end by the server's deadline (series.py): what
  // their charts show, from each run's `note`; a reload shows them whole once read.
  function previews() {
    var notes = data.runs.filter(function (r) { return r.note; }).map(function (r) {
      return (data.runs.length > 1 ? r.label + ": " : "") + r.note;
    });
    return notes.length ? " · " + notes.join(" · ") : "";
  }

  function fillX() {
    while (ui.x.firstChild) ui.x.removeChild(ui.x.firstChild);
    var choices = data.x_keys.slice();
    if (choices.indexOf("time") >= 0 || choices.indexOf("timestamp") >= 0 || state.x === REL) {
      choices.splice(choices.indexOf("line"), 0, REL);
    }
    if (state.x && choices.indexOf(state.x) < 0) choices.push(state.x);
    choices.forEach(function (k) {
      var o = document.createElement("option");
      o.value = k;
      o.textContent = k === REL ? "relative time" : k;
      ui.x.appendChild(o);
    });
    ui.x.value = state.x || data.x_label;
  }

  function load() {
    return fetchJSON(srcURL()).then(function (got) {
      data = got.json;
      if (!state.x) exposed.defaultX = data.x_label;
      exposed.loads = (exposed.loads || 0) + 1;
      Object.keys(figures).forEach(function (k) {
        if (data.keys.indexOf(k) < 0) figures[k].fig.hidden = true;
      });
      ui.bandsLabel.hidden = !data.settings.length;
      fillX();
      applyFilter();
      redraw();
      root.dataset.ready = String(exposed.loads);
    }).catch(function (e) { ui.note.textContent = "the charts could not be loaded (" + e.message + ")"; });
  }

  // --- live: only the points after the last x --------------------------------------------
  function lastX() {
    var m = -Infinity;
    data.runs.forEach(function (r) {
      Object.keys(r.series).forEach(function (k) {
        var xs = r.series[k][0];
        if (xs.length && xs[xs.length - 1] > m) m = xs[xs.length - 1];
      });
    });
    return m;
  }

  function append(got) {
    var changed = {};
    got.runs.forEach(function (nr, i) {
      var r = data.runs[i];
      if (!r || r.id !== nr.id) return;
      r.active = nr.active;
      Object.keys(nr.series).forEach(function (k) {
        var add = nr.series[k];
        if (!add[0].length) return;
        var s = r.series[k] || (r.series[k] = [[], []]);
        s[0] = s[0].concat(add[0]);
        s[1] = s[1].concat(add[1]);
        changed[k] = true;
        if (data.keys.indexOf(k) < 0) data.keys.push(k);
      });
    });
    applyFilter();
    Object.keys(changed).forEach(function (k) { if (figures[k].plot) draw(k); });
  }

  function poll() {
    if (!data || !data.runs.some(function (r) { return r.active; })) return;
    var since = lastX();
    var url = srcURL(isFinite(since) ? "&since=" + encodeURIComponent(since) : "");
    fetchJSON(url).then(function (got) {
      exposed.polls.push({ url: url, bytes: got.bytes });
      append(got.json);
    }).catch(function () {});
  }

  // --- the controls --------------------------------------------------------------------------
  function bind() {
    ui.filter.value = state.keys;
    ui.smooth.value = String(state.smooth);
    ui.smoothValue.textContent = String(state.smooth);
    ui.log.checked = state.log;
    ui.size.value = state.size;
    ui.bands.checked = state.bands;
    root.className = "charts size-" + state.size;
    ui.filter.addEventListener("input", function () {
      state.keys = ui.filter.value; saveState(); applyFilter(); redraw();
    });
    ui.smooth.addEventListener("input", function () {
      state.smooth = parseFloat(ui.smooth.value) || 0;
      ui.smoothValue.textContent = String(state.smooth);
      saveState(); redraw();
    });
    ui.log.addEventListener("change", function () { state.log = ui.log.checked; saveState(); redraw(); });
    ui.bands.addEventListener("change", function () { state.bands = ui.bands.checked; saveState(); redraw(); });
    ui.size.addEventListener("change", function () {
      state.size = ui.size.value;
      root.className = "charts size-" + state.size;
      saveState(); redraw();
    });
    ui.x.addEventListener("change", function () {
      state.x = ui.x.value === exposed.defaultX ? "" : ui.x.value;
      saveState(); load();
    });
    var resizing = null;
    new ResizeObserver(function () {
      clearTimeout(resizing);
      resizing = setTimeout(function () {
        Object.keys(figures).forEach(function (k) {
          var f = figures[k];
          if (f.plot) f.plot.setSize({ width: Math.max(200, f.box.clientWidth), height: HEIGHTS[state.size] });
        });
      }, 100);
    }).observe(root);
  }

  bind();
  load();
  if (root.dataset.live === "1") setInterval(poll, POLL_MS);
})();

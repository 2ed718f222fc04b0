// The run detail page: log ranges (load earlier, follow while running, filter) and live charts.
(function () {
  "use strict";
  var page = document.getElementById("run-page");
  if (!page) return;
  var runId = page.dataset.run;
  var logEl = document.getElementById("log");
  var search = document.getElementById("log-search");
  var follow = document.getElementById("log-follow");
  var earlier = document.getElementById("log-earlier");
  var count = document.getElementById("log-count");
  var info = document.getElementById("log-info");
  var start = parseInt(page.dataset.logStart, 10) || 0;
  var next = parseInt(page.dataset.logNext, 10) || 0;
  var active = page.dataset.active === "1";
  var text = logEl ? logEl.textContent : "";
  var MAX_WINDOW = 8 * 1024 * 1024; // characters kept in the page; older ones are dropped
  var busy = false;

  function api(url) {
    return fetch(url, { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); });
  }

  function size(n) {
    if (n < 1024) return n + " B";
    if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
    if (n < 1073741824) return (n / 1048576).toFixed(1) + " MiB";
    return (n / 1073741824).toFixed(1) + " GiB";
  }

  function render() {
    var q = search ? search.value : "";
    var stick = logEl.scrollTop + logEl.clientHeight >= logEl.scrollHeight - 8;
    if (!q) {
      logEl.textContent = text;
      if (count) count.textContent = "";
    } else {
      var lines = text.split("\n"), shown = [], needle = q.toLowerCase();
      for (var i = 0; i < lines.length; i++) {
        if (lines[i].toLowerCase().indexOf(needle) >= 0) shown.push(lines[i]);
      }
      logEl.textContent = shown.join("\n"); // textContent: a log line is never markup
      if (count) count.textContent = shown.length + " matching lines in the loaded window";
    }
    if (stick || (follow && follow.checked)) logEl.scrollTop = logEl.scrollHeight;
  }

  function poll() {
    if (busy || !active || !follow || !follow.checked) return;
    busy = true;
    api("/api/runs/" + encodeURIComponent(runId) + "/log?offset=" + next + "&limit=262144")
      .then(function (d) {
        if (d.reset) { text = d.text; start = d.start; }
        else text += d.text;
        if (text.length > MAX_WINDOW) { text = text.slice(text.length - MAX_WINDOW); start = -1; }
        next = d.next_offset;
        if (info) info.textContent = size(d.size);
        active = d.active;
        var st = document.getElementById("run-state");
        if (st && st.textContent !== d.state) { st.textContent = d.state; st.className = "state state-" + d.state; }
        render();
        if (!d.eof) setTimeout(poll, 50);
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }

  if (earlier) earlier.addEventListener("click", function () {
    if (start <= 0) return;
    api("/api/runs/" + encodeURIComponent(runId) + "/log?before=" + start + "&limit=262144")
      .then(function (d) {
        text = d.text + text;
        start = d.start;
        earlier.disabled = start <= 0;
        render();
      });
  });
  if (search) search.addEventListener("input", render);
  if (follow) follow.addEventListener("change", poll);
  if (logEl) logEl.scrollTop = logEl.scrollHeight;

  // Charts: re-fetched while the run is active (server-side SVG, already down-sampled).
  var charts = document.getElementById("charts");
  function refreshCharts() {
    if (!active || !charts) return;
    fetch("/runs/" + encodeURIComponent(runId) + "/charts", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { charts.innerHTML = html; hover(); } })
      .catch(function () {});
  }

  // Hover a chart: the x and y under the pointer.
  function hover() {
    var svgs = document.querySelectorAll("svg.chart");
    Array.prototype.forEach.call(svgs, function (svg) {
      var fig = svg.parentNode, tip = document.createElement("span");
      tip.className = "chart-tip";
      fig.appendChild(tip);
      var d = svg.dataset;
      svg.addEventListener("mousemove", function (e) {
        var box = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
        var px = (e.clientX - box.left) * vb.width / box.width;
        var py = (e.clientY - box.top) * vb.height / box.height;
        var fx = (px - d.left) / d.pw, fy = 1 - (py - d.top) / d.ph;
        if (fx < 0 || fx > 1 || fy < 0 || fy > 1) { tip.textContent = ""; return; }
        var x = +d.x0 + fx * (d.x1 - d.x0), y = +d.y0 + fy * (d.y1 - d.y0);
        tip.textContent = "x " + x.toPrecision(5) + "  y " + y.toPrecision(5);
      });
      svg.addEventListener("mouseleave", function () { tip.textContent = ""; });
    });
  }
  hover();
  setInterval(poll, 2000);
  setInterval(refreshCharts, 15000);
})();

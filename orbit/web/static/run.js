// The run detail page: log ranges (load earlier, follow while running, filter); the charts
// (live too) are static/charts.js's.
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
    if (follow && follow.checked) toBottom();
  }

  function atBottom() { return logEl.scrollTop + logEl.clientHeight >= logEl.scrollHeight - 8; }
  function toBottom() { logEl.scrollTop = logEl.scrollHeight; }

  function poll() {
    if (busy || !active) return;
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
  function setFollow(on) {
    if (!follow) return;
    follow.checked = on;
    if (on) { toBottom(); poll(); }
  }
  if (follow) follow.addEventListener("change", function () { setFollow(follow.checked); });
  // Scrolling up to read pauses "follow"; scrolling back to the end resumes it.
  if (logEl) logEl.addEventListener("scroll", function () {
    if (!follow || !active) return;
    var bottom = atBottom();
    if (follow.checked !== bottom) follow.checked = bottom;
  });
  if (logEl) toBottom();

  // Cancel (while the run is active): asks first.
  var cancelForm = document.getElementById("run-cancel");
  if (cancelForm) cancelForm.addEventListener("submit", function (e) {
    if (!window.confirm("Cancel run " + runId + "?")) e.preventDefault();
  });

  function jump(id) {
    return function () { var el = document.getElementById(id); if (el) el.scrollIntoView(); };
  }
  // This page's keyboard shortcuts (orbit.js dispatches them; base.tpl lists them).
  window.orbitKeys = {
    f: function () { setFollow(!(follow && follow.checked)); },
    c: function () { if (cancelForm) cancelForm.requestSubmit(); },
    l: jump("logs"),
    m: jump("metrics"),
    n: function () {
      var t = document.querySelector("#notes textarea");
      if (t) { t.scrollIntoView(); t.focus(); }
    },
    "/": function (e) { if (search) { e.preventDefault(); search.focus(); } }
  };

  setInterval(poll, 2000);
})();

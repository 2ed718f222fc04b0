// The run page's log: ranges rendered by the server, follow while running, search over the
// whole log, #L… line anchors. Lines arrive as HTML the server escaped and styled
// (orbit/web/logtext.py); this script only places them. run.js uses window.orbitLog.
(function () {
  "use strict";
  var page = document.getElementById("run-page");
  if (!page) return;
  var runId = page.dataset.run;
  var base = "/api/runs/" + encodeURIComponent(runId) + "/log";
  var logEl = document.getElementById("log");
  var search = document.getElementById("log-search");
  var follow = document.getElementById("log-follow");
  var earlier = document.getElementById("log-earlier");
  var later = document.getElementById("log-later");
  var toEnd = document.getElementById("log-end");
  var count = document.getElementById("log-count");
  var info = document.getElementById("log-info");
  var found = document.getElementById("log-found");
  var results = document.getElementById("log-results");
  var more = document.getElementById("log-more");
  var start = parseInt(page.dataset.logStart, 10) || 0;
  var next = parseInt(page.dataset.logNext, 10) || 0;
  var partialAt = page.dataset.logPartial === "1" ? next : -1;
  var active = page.dataset.active === "1";
  var atEnd = true; // the window reaches the log's end (polling extends it)
  var MAX_LINES = 50000; // lines kept in the page; older ones are dropped
  var CHUNK = 262144;
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

  function nodes(html) {
    var t = document.createElement("template");
    t.innerHTML = html; // markup the server rendered from escaped text
    return t.content;
  }

  // Merge the first line of a range into the line shown last: replace it (the line sent again
  // whole, or a progress bar's new state) or extend it (a long line's next piece).
  function merge(html, replace) {
    var last = logEl.lastElementChild, t = last && last.querySelector(".t");
    var fresh = nodes(html).firstElementChild;
    if (!t || !fresh) { logEl.appendChild(nodes(html)); return; }
    var ft = fresh.querySelector(".t");
    if (replace) t.innerHTML = ""; // emptied, then filled with the server's nodes
    while (ft.firstChild) t.appendChild(ft.firstChild);
  }

  function append(d) {
    var lines = d.lines.slice();
    if (lines.length && (d.start === partialAt || d.continued)) {
      merge(lines.shift(), d.start === partialAt || d.restarts);
    }
    if (lines.length) logEl.appendChild(nodes(lines.join("")));
    partialAt = d.partial ? d.next_offset : -1;
    while (logEl.childElementCount > MAX_LINES) { logEl.removeChild(logEl.firstElementChild); start = -1; }
  }

  function replaceAll(d) {
    logEl.textContent = "";
    logEl.appendChild(nodes(d.lines.join("")));
    start = d.start; next = d.next_offset; partialAt = d.partial ? d.next_offset : -1;
    atEnd = d.eof;
    showEnds();
  }

  function showEnds() {
    if (earlier) earlier.disabled = start <= 0;
    if (later) later.hidden = atEnd;
    if (toEnd) toEnd.hidden = atEnd;
  }

  function atBottom() { return logEl.scrollTop + logEl.clientHeight >= logEl.scrollHeight - 8; }
  function toBottom() { logEl.scrollTop = logEl.scrollHeight; }

  function state(d) {
    if (info) info.textContent = size(d.size);
    active = d.active;
    var st = document.getElementById("run-state");
    if (st && st.textContent !== d.state) { st.textContent = d.state; st.className = "state state-" + d.state; }
  }

  function poll() {
    if (busy || !active || !atEnd) return;
    busy = true;
    api(base + "?render=1&offset=" + next + "&limit=" + CHUNK)
      .then(function (d) {
        if (d.reset) replaceAll(d);
        else { append(d); next = d.next_offset; }
        state(d);
        if (follow && follow.checked) toBottom();
        if (!d.eof) setTimeout(poll, 50);
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }

  function loadLater() {
    api(base + "?render=1&offset=" + next + "&limit=" + CHUNK).then(function (d) {
      append(d); next = d.next_offset; atEnd = d.eof; state(d); showEnds();
    });
  }

  var jumped = false; // a line was asked for: a late renumbering must not replace its window
  function loadTail(tries) {
    return api(base + "?render=1&offset=-1&limit=65536").then(function (d) {
      if (tries > 0 && jumped) return;
      replaceAll(d); state(d); toBottom();
      // A log not yet counted this far shows no numbers: ask again, the count goes on.
      if (d.first_line === null && d.lines.length && tries > 0) setTimeout(function () { loadTail(tries - 1); }, 300);
    });
  }

  if (earlier) earlier.addEventListener("click", function () {
    if (start <= 0) return;
    api(base + "?render=1&before=" + start + "&limit=" + CHUNK)
      .then(function (d) {
        var lines = d.lines.slice(), top = logEl.firstElementChild;
        // The shown text began inside a line: that line's start joins it.
        var n = d.first_line === null ? null : d.first_line + lines.length - 1;
        if (top && n !== null && lines.length && top.id === "L" + n) {
          var t = top.querySelector(".t"), head = nodes(lines.pop()).firstElementChild;
          if (t && head) t.insertBefore(head.querySelector(".t"), t.firstChild);
        }
        logEl.insertBefore(nodes(lines.join("")), logEl.firstChild);
        start = d.start;
        showEnds();
      });
  });
  if (later) later.addEventListener("click", loadLater);
  if (toEnd) toEnd.addEventListener("click", function () { loadTail(0); });

  // A line: scrolled to and marked; fetched first when it is not in the page.
  function mark(el) {
    var old = logEl.querySelector(".l.target");
    if (old) old.classList.remove("target");
    el.classList.add("target");
    logEl.scrollTop = el.offsetTop - logEl.offsetTop - 40;
  }
  function goLine(n) {
    jumped = true;
    var el = document.getElementById("L" + n);
    if (el) { setFollow(false); mark(el); return; }
    api(base + "?render=1&line=" + n + "&limit=" + CHUNK).then(function (d) {
      setFollow(false);
      replaceAll(d);
      var at = document.getElementById("L" + n);
      if (at) mark(at);
    }).catch(function () { if (count) count.textContent = "line " + n + " is not in the log"; });
  }
  function fromHash() {
    var m = /^#L(\d+)$/.exec(window.location.hash);
    if (m) goLine(parseInt(m[1], 10));
  }
  window.addEventListener("hashchange", fromHash);

  // Search: the server reads the whole log; a result links to its line.
  var query = "", from = 1, shown = 0;
  function runSearch(fresh) {
    if (fresh) { query = search.value.trim(); from = 1; shown = 0; results.textContent = ""; }
    if (!query) { found.hidden = true; if (count) count.textContent = ""; return; }
    var asked = query;
    api(base + "/search?q=" + encodeURIComponent(query) + "&from=" + from).then(function (d) {
      if (asked !== query) return;
      d.matches.forEach(function (m) {
        var li = document.createElement("li"), a = document.createElement("a");
        a.href = "#L" + m.line; a.textContent = "L" + m.line;
        var span = document.createElement("span");
        span.textContent = m.text; // a log line is never markup here
        li.appendChild(a); li.appendChild(document.createTextNode(" ")); li.appendChild(span);
        results.appendChild(li);
      });
      shown += d.matches.length;
      from = d.next_line || from;
      found.hidden = shown === 0;
      more.hidden = d.done;
      if (count) count.textContent = shown + " matching line" + (shown === 1 ? "" : "s") +
        (d.done ? " in the whole log" : " so far, searched to line " + from);
      // Nothing found yet in this request's time: go on by itself (each request is bounded).
      if (!d.done && d.matches.length === 0) runSearch(false);
    });
  }
  if (search) {
    var timer = null;
    search.form.addEventListener("submit", function (e) { e.preventDefault(); runSearch(true); });
    search.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { runSearch(true); }, 300);
    });
  }
  if (more) more.addEventListener("click", function () { runSearch(false); });
  if (results) results.addEventListener("click", function (e) {
    var a = e.target.closest("a");
    if (!a) return;
    e.preventDefault();
    var n = parseInt(a.getAttribute("href").slice(2), 10);
    history.replaceState(null, "", "#L" + n);
    goLine(n);
  });

  // A long line's "show all".
  logEl.addEventListener("click", function (e) {
    var b = e.target.closest("button.show-all");
    if (!b) return;
    var rest = b.previousElementSibling;
    if (rest) rest.hidden = false;
    b.remove();
  });

  function setFollow(on) {
    if (!follow) return;
    follow.checked = on;
    if (on && !atEnd) { loadTail(0).then(poll); return; }
    if (on) { toBottom(); poll(); }
  }
  if (follow) follow.addEventListener("change", function () { setFollow(follow.checked); });
  // Scrolling up to read pauses "follow"; scrolling back to the end resumes it.
  if (logEl) logEl.addEventListener("scroll", function () {
    if (!follow || !active || !atEnd) return;
    var bottom = atBottom();
    if (follow.checked !== bottom) follow.checked = bottom;
  });
  if (logEl) toBottom();
  if (page.dataset.logCounted === "0" && logEl.childElementCount) {
    setTimeout(function () { loadTail(10); }, 300); // numbered once the server counted the lines
  }
  fromHash();

  setInterval(poll, 2000);

  window.orbitLog = {
    active: function () { return active; },
    toggleFollow: function () { setFollow(!(follow && follow.checked)); },
    focusSearch: function (e) { if (search) { e.preventDefault(); search.focus(); } }
  };
})();

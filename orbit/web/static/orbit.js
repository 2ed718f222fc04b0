// Orbit web view: live states, multi-select actions and keyboard shortcuts. No build step.
(function () {
  "use strict";
  var keys = document.getElementById("keys");
  function toggleKeys() { keys.hidden = !keys.hidden; }
  var show = document.getElementById("show-keys");
  if (show) show.addEventListener("click", function (e) { e.preventDefault(); toggleKeys(); });

  var rows = function () { return Array.prototype.slice.call(document.querySelectorAll("tr.run")); };
  var selected = function () {
    return Array.prototype.slice.call(document.querySelectorAll("tr.run input[name=ids]:checked"))
      .map(function (b) { return b.value; });
  };

  // --- multi-select -------------------------------------------------------------------------
  var all = document.getElementById("select-all");
  if (all) all.addEventListener("change", function () {
    document.querySelectorAll("tr.run input[name=ids]").forEach(function (b) { b.checked = all.checked; });
  });
  var COMPARE_MAX = 10; // orbit/web/compare.py
  function say(text) {
    var note = document.getElementById("actions-note");
    if (note) note.textContent = text;
  }
  function compare() {
    var ids = selected();
    if (!ids.length) say("Select runs to compare first (x or the checkboxes).");
    else if (ids.length > COMPARE_MAX) say("Compare at most " + COMPARE_MAX + " runs at once.");
    else window.location.href = "/compare?ids=" + ids.map(encodeURIComponent).join(",");
  }
  var cmp = document.getElementById("compare");
  if (cmp) cmp.addEventListener("click", compare);
  var form = document.getElementById("runs-form");
  if (form) form.addEventListener("submit", function (e) {
    var ids = selected();
    if (!ids.length) say("Select runs to cancel first (x or the checkboxes).");
    if (!ids.length || !window.confirm("Cancel " + ids.length + " run(s): " + ids.join(", ") + "?")) e.preventDefault();
  });

  // --- live state: poll the JSON endpoint and update the state cells ------------------------
  function refresh() {
    var shown = rows().map(function (r) { return r.dataset.id; });
    if (!shown.length || document.hidden) return;
    fetch("/api/runs?ids=" + shown.map(encodeURIComponent).join(","),
          { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        rows().forEach(function (row) {
          var run = data.runs[row.dataset.id];
          if (!run || run.error) return;
          ["state", "reason", "duration", "metric"].forEach(function (f) {
            var cell = row.querySelector("[data-field=" + f + "]");
            if (cell && cell.textContent !== (run[f] || "")) {
              cell.textContent = run[f] || "";  // text, never HTML
              if (f === "state") cell.className = "state state-" + run.state;
            }
          });
        });
      })
      .catch(function () {});
  }
  if (rows().length) setInterval(refresh, 2500);

  // --- keyboard shortcuts ------------------------------------------------------------------
  var current = -1;
  function focusRow(i) {
    var list = rows();
    if (!list.length) return;
    current = Math.max(0, Math.min(list.length - 1, i));
    list.forEach(function (r, j) { r.classList.toggle("current", j === current); });
    list[current].scrollIntoView({ block: "nearest" });
  }
  // Keys typed into a text field are text; a focused checkbox, radio or button (after a click)
  // must not swallow the shortcuts.
  var NOT_TEXT = ["checkbox", "radio", "button", "submit", "reset", "range", "color", "file"];
  function typing(t) {
    if (!t || !t.tagName) return false;
    if (t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable) return true;
    return t.tagName === "INPUT" && NOT_TEXT.indexOf((t.type || "").toLowerCase()) < 0;
  }
  function listKey(e) {
    var list = rows();
    if (e.key === "j") focusRow(current + 1);
    else if (e.key === "k") focusRow(current - 1);
    else if ((e.key === "o" || e.key === "Enter") && list[current]) {
      window.location.href = "/runs/" + encodeURIComponent(list[current].dataset.id);
    } else if (e.key === "l" && list[current]) {
      window.location.href = "/runs/" + encodeURIComponent(list[current].dataset.id) + "#logs";
    } else if (e.key === "x" && list[current]) {
      var box = list[current].querySelector("input[name=ids]");
      if (box) box.checked = !box.checked;
    } else if (e.key === "c") compare();
    else if (e.key === "/") {
      var s = document.getElementById("search");
      if (!s) return false;
      e.preventDefault();
      s.focus();
    } else return false;
    return true;
  }
  function compareKey(e) {
    var n = parseInt(e.key, 10), links = document.querySelectorAll("p.legend a");
    if (!(n >= 1 && n <= links.length)) return false;
    window.location.href = links[n - 1].href;
    return true;
  }
  var pageKeys = { listing: listKey, compare: compareKey, compare_group: compareKey };
  var pending = 0; // the time "g" was pressed: "g r" goes to the runs, "g b" to the bench
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (typing(t)) {
      if (e.key === "Escape") t.blur();
      return;
    }
    var goto = { r: "/", b: "/bench" }; // "g r" the runs, "g b" the bench jobs
    if (pending && Date.now() - pending < 1500 && goto.hasOwnProperty(e.key)) {
      pending = 0;
      window.location.href = goto[e.key];
      return;
    }
    pending = e.key === "g" ? Date.now() : 0;
    if (e.key === "?") { toggleKeys(); return; }
    if (e.key === "Escape" && !keys.hidden) { keys.hidden = true; return; }
    var own = pageKeys[document.body.dataset.page];
    if (own && own(e)) return;
    // Keys of a page's own script (run.js): a function per key.
    var extra = window.orbitKeys || {};
    if (Object.prototype.hasOwnProperty.call(extra, e.key)) extra[e.key](e);
  });
})();

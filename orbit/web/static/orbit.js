// Orbit web view: live states, multi-select actions and keyboard shortcuts. No build step.
(function () {
  "use strict";
  var keys = document.getElementById("keys");
  function toggleKeys() { keys.hidden = !keys.hidden; }
  var show = document.getElementById("show-keys");
  if (show) show.addEventListener("click", function (e) { e.preventDefault(); toggleKeys(); });

  var rows = function () { return Array.prototype.slice.call(document.querySelectorAll("tr.run")); };
  var boxes = function () {
    return Array.prototype.slice.call(document.querySelectorAll("tr.run input[name=ids]"));
  };
  var ticked = function () {
    return boxes().filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
  };

  // --- multi-select: any number of runs, kept in the URL (sel=1,2,3) across pages and sorts --
  var selField = document.getElementById("sel");
  var chosen = selField && selField.value ? selField.value.split(",") : [];
  var selected = function () { return chosen.slice(); };
  function withSel(href) {
    var url = new URL(href, window.location.href);
    if (chosen.length) url.searchParams.set("sel", chosen.join(","));
    else url.searchParams.delete("sel");
    return url.pathname + url.search + url.hash;
  }
  function syncSelection() {
    var onPage = {};
    boxes().forEach(function (b) {
      onPage[b.value] = true;
      var at = chosen.indexOf(b.value);
      if (b.checked && at < 0) chosen.push(b.value);
      if (!b.checked && at >= 0) chosen.splice(at, 1);
    });
    if (selField) selField.value = chosen.join(",");
    var count = document.getElementById("selected-count");
    if (count) count.textContent = chosen.length ? chosen.length + " selected" : "";
    if (selField) window.history.replaceState(null, "", withSel(window.location.href));
  }
  boxes().forEach(function (b) { b.addEventListener("change", syncSelection); });
  // Links to another view of the list (sort, pages, groups) carry the selection along.
  document.addEventListener("click", function (e) {
    var a = e.target.closest ? e.target.closest("a[href^='/?'], a[href='/']") : null;
    if (a && selField && chosen.length) a.href = withSel(a.getAttribute("href"));
  });
  var all = document.getElementById("select-all");
  function selectAll(on) {
    boxes().forEach(function (b) { b.checked = on; });
    if (all) all.checked = on;
    syncSelection();
  }
  if (all) all.addEventListener("change", function () { selectAll(all.checked); });
  if (selField) syncSelection();
  function say(text) {
    var note = document.getElementById("actions-note");
    if (note) note.textContent = text;
  }
  function compare() {
    var ids = selected();
    if (!ids.length) say("Select runs to compare first (x or the checkboxes).");
    else window.location.href = "/compare?ids=" + ids.map(encodeURIComponent).join(",");
  }
  var cmp = document.getElementById("compare");
  if (cmp) cmp.addEventListener("click", compare);
  var form = document.getElementById("runs-form");
  if (form) form.addEventListener("submit", function (e) {
    var ids = ticked(); // the form sends the ticked boxes of this page
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
      if (box) { box.checked = !box.checked; syncSelection(); }
    } else if (e.key === "a") {
      selectAll(!boxes().every(function (b) { return b.checked; }));
    } else if (e.key === "c") compare();
    else if (e.key === "w" && document.getElementById("where")) {
      e.preventDefault();
      document.getElementById("where").focus();
    }
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

// The run detail page: cancel, keyboard shortcuts and live charts (the log: log.js).
(function () {
  "use strict";
  var page = document.getElementById("run-page");
  if (!page) return;
  var runId = page.dataset.run;
  var log = window.orbitLog;
  function isActive() { return log ? log.active() : page.dataset.active === "1"; }

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
    f: function () { if (log) log.toggleFollow(); },
    c: function () { if (cancelForm) cancelForm.requestSubmit(); },
    l: jump("logs"),
    m: jump("metrics"),
    n: function () {
      var t = document.querySelector("#notes textarea");
      if (t) { t.scrollIntoView(); t.focus(); }
    },
    "/": function (e) { if (log) log.focusSearch(e); }
  };

  // Charts: re-fetched while the run is active (server-side SVG, already down-sampled).
  var charts = document.getElementById("charts");
  function refreshCharts() {
    if (!isActive() || !charts) return;
    fetch("/runs/" + encodeURIComponent(runId) + "/charts", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { charts.innerHTML = html; if (window.orbitCharts) window.orbitCharts(charts); } })
      .catch(function () {});
  }

  setInterval(refreshCharts, 15000);
})();

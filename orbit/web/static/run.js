// The run detail page: cancel and keyboard shortcuts (the log: log.js; the charts, live
// too: charts.js).
(function () {
  "use strict";
  var page = document.getElementById("run-page");
  if (!page) return;
  var runId = page.dataset.run;
  var log = window.orbitLog;

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
})();

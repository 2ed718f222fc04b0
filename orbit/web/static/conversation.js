// The conversation view (orbit/web/session.py): expand or collapse every entry, page keys.
(function () {
  "use strict";
  function entries() { return Array.prototype.slice.call(document.querySelectorAll("#conversation details")); }
  function toggleAll() {
    var list = entries(), open = list.some(function (d) { return !d.open; });
    list.forEach(function (d) { d.open = open; });
    document.querySelectorAll(".conv-toggle").forEach(function (b) {
      b.textContent = open ? "collapse all" : "expand all";
    });
  }
  document.querySelectorAll(".conv-toggle").forEach(function (b) { b.addEventListener("click", toggleAll); });
  function go(id) {
    return function () { var a = document.getElementById(id); if (a) window.location.href = a.href; };
  }
  window.orbitKeys = { "]": go("conv-next"), "[": go("conv-prev"), e: toggleAll };
})();

// Every <time datetime="…"> of a page (orbit/web/times.py) in the reader's local time with its
// age: "14:03 · 3 min ago", the exact local time (and zone) on hover. Ages refresh each minute.
(function () {
  "use strict";
  var UNITS = [["year", 31536000], ["month", 2592000], ["day", 86400], ["h", 3600], ["min", 60]];

  function age(seconds) {
    var s = Math.abs(seconds), suffix = seconds >= 0 ? " ago" : " from now";
    if (s < 45) return seconds >= 0 ? "just now" : "in a moment";
    for (var i = 0; i < UNITS.length; i++) {
      var n = Math.round(s / UNITS[i][1]);
      if (n >= 1) {
        var unit = UNITS[i][0], plural = n > 1 && unit !== "h" && unit !== "min" ? "s" : "";
        return n + " " + unit + plural + suffix;
      }
    }
    return "just now";
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function local(d, now) {
    var hm = pad(d.getHours()) + ":" + pad(d.getMinutes());
    if (d.toDateString() === now.toDateString()) return hm;
    var day = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate());
    return day + " " + hm;
  }

  function exact(d) {
    return d.toLocaleString(undefined, {
      year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
      second: "2-digit", timeZoneName: "short"
    });
  }

  function localise(root) {
    var now = new Date();
    var all = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < all.length; i++) {
      var el = all[i], d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      el.textContent = local(d, now) + " · " + age((now - d) / 1000);
      el.title = exact(d);
      el.classList.add("localised");
    }
  }

  window.orbitTimes = localise; // for parts of a page that arrive later
  localise(document);
  setInterval(function () { localise(document); }, 60000);
})();

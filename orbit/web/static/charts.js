// Chart hover (run and compare pages): the data point nearest the pointer's x on each line,
// read from the values the server put on each polyline (data-x, data-y), never from the
// pointer's height.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function numbers(s) { return (s || "").split(" ").filter(Boolean).map(Number); }
  function nearest(xs, x) {
    var best = 0;
    for (var i = 1; i < xs.length; i++) {
      if (Math.abs(xs[i] - x) < Math.abs(xs[best] - x)) best = i;
    }
    return best;
  }
  function show(v) { return String(+v.toPrecision(6)); }

  function bind(svg) {
    if (svg.dataset.hover) return;
    svg.dataset.hover = "1";
    var d = svg.dataset, fig = svg.parentNode;
    var x0 = +d.x0, x1 = +d.x1, y0 = +d.y0, y1 = +d.y1;
    var left = +d.left, top = +d.top, pw = +d.pw, ph = +d.ph;
    var tip = document.createElement("span");
    tip.className = "chart-tip";
    fig.appendChild(tip);
    var cursor = document.createElementNS(SVG, "line");
    cursor.setAttribute("class", "cursor");
    cursor.setAttribute("y1", top);
    cursor.setAttribute("y2", top + ph);
    cursor.style.display = "none";
    svg.appendChild(cursor);
    var lines = Array.prototype.map.call(svg.querySelectorAll("polyline[data-x]"), function (p) {
      var dot = document.createElementNS(SVG, "circle");
      dot.setAttribute("r", "3");
      dot.setAttribute("fill", p.getAttribute("stroke"));
      dot.style.display = "none";
      svg.appendChild(dot);
      return { label: p.dataset.label, xs: numbers(p.dataset.x), ys: numbers(p.dataset.y), dot: dot };
    });
    function hide() {
      tip.textContent = "";
      cursor.style.display = "none";
      lines.forEach(function (ln) { ln.dot.style.display = "none"; });
    }
    svg.addEventListener("mousemove", function (e) {
      var box = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
      var fx = ((e.clientX - box.left) * vb.width / box.width - left) / pw;
      if (fx < 0 || fx > 1 || !lines.length) { hide(); return; }
      var x = x0 + fx * (x1 - x0), parts = [], shownX = null;
      lines.forEach(function (ln) {
        if (!ln.xs.length) return;
        var i = nearest(ln.xs, x), px = ln.xs[i], py = ln.ys[i];
        if (shownX === null) shownX = px;
        parts.push(ln.label + " " + show(py));
        ln.dot.setAttribute("cx", left + (px - x0) / (x1 - x0) * pw);
        ln.dot.setAttribute("cy", top + ph - (py - y0) / (y1 - y0) * ph);
        ln.dot.style.display = "";
      });
      var cx = left + (shownX - x0) / (x1 - x0) * pw;
      cursor.setAttribute("x1", cx);
      cursor.setAttribute("x2", cx);
      cursor.style.display = "";
      tip.textContent = d.xlabel + " " + show(shownX) + " · " + parts.join(" · ");
    });
    svg.addEventListener("mouseleave", hide);
  }

  window.orbitCharts = function (root) {
    Array.prototype.forEach.call((root || document).querySelectorAll("svg.chart"), bind);
  };
  window.orbitCharts(document);
})();

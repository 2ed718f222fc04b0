"""Server-side SVG line charts: one chart per metric key, one polyline per run.

The charts are plain markup (no script needed to see them), every label is escaped, and the
points are already down-sampled (orbit.review.series), so a chart is a few tens of kilobytes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from orbit.human import fmt_metric, human_bytes

WIDTH, HEIGHT = 560, 200
LEFT, RIGHT, TOP, BOTTOM = 58, 10, 10, 26
COLORS = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)  # fmt: skip


@dataclass
class Line:
    label: str
    x: Sequence[float]
    y: Sequence[float]
    color: str


def fmt(v: float | None) -> str:
    return "" if v is None else fmt_metric(v)


def _num(v: float) -> str:
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else repr(float(v))


def _widened(lo: float, hi: float) -> tuple[float, float]:
    """A range that is not empty: a single value gets a margin relative to its size (1e18 - 1
    is 1e18), kept within the floats; halved, the span is still above 0 (5e-324 is not)."""
    if hi / 2 - lo / 2 > 0:
        return lo, hi
    d = max(abs(lo) * 1e-6, 1.0)
    lo, hi = max(lo - d, -sys.float_info.max), min(hi + d, sys.float_info.max)
    return lo, hi


def svg_chart(title: str, lines: Sequence[Line], x_label: str) -> str:
    """An SVG line chart of `lines` (markup, escaped)."""
    xs = [v for ln in lines for v in (ln.x[0], ln.x[-1]) if len(ln.x)]
    ys = [v for ln in lines for v in (min(ln.y), max(ln.y)) if len(ln.y)]
    if not xs or not ys:
        return ""
    x0, x1 = _widened(min(xs), max(xs))
    y0, y1 = _widened(min(ys), max(ys))
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    # Halved, so that a span from -1e308 to 1e308 does not overflow to inf.
    sx, sy = pw / (x1 / 2 - x0 / 2), ph / (y1 / 2 - y0 / 2)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" data-x0="{x0}" data-x1="{x1}" data-y0="{y0}" '
        f'data-y1="{y1}" data-left="{LEFT}" data-top="{TOP}" data-pw="{pw}" data-ph="{ph}" '
        f'data-xlabel="{escape(x_label)}">',
        f"<title>{escape(title)} against {escape(x_label)}</title>",
        f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}"/>',
    ]
    for frac in (0.0, 0.5, 1.0):
        yv = y0 * (1 - frac) + y1 * frac
        py = TOP + ph - (yv / 2 - y0 / 2) * sy
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{LEFT + pw}" y1="{py:.1f}" y2="{py:.1f}"/>'
        )
        parts.append(
            f'<text class="tick" x="{LEFT - 4}" y="{py + 4:.1f}" text-anchor="end">'
            f"{escape(fmt(yv))}</text>"
        )
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        xv = x0 * (1 - frac) + x1 * frac
        px = LEFT + pw * frac
        parts.append(
            f'<text class="tick" x="{px:.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">'
            f"{escape(fmt(xv))}</text>"
        )
    for ln in lines:
        pts = " ".join(
            f"{LEFT + (x / 2 - x0 / 2) * sx:.1f},{TOP + ph - (y / 2 - y0 / 2) * sy:.1f}"
            for x, y in zip(ln.x, ln.y, strict=False)
        )
        label = escape(ln.label)
        if len(ln.x) == 1:
            cx, cy = pts.split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{ln.color}"/>')
        # The values themselves, for the hover (orbit/web/static/charts.js): the points above
        # are rounded to pixels.
        data_x = " ".join(_num(v) for v in ln.x)
        data_y = " ".join(_num(v) for v in ln.y)
        parts.append(
            f'<polyline fill="none" stroke="{ln.color}" stroke-width="1.4" '
            f'data-label="{label}" data-x="{data_x}" data-y="{data_y}" points="{pts}">'
            f"<title>{label}</title></polyline>"
        )
    parts.append("</svg>")
    return "".join(parts)


def fmt_size(n: int) -> str:
    """A file or memory size on a page: "1.5 KiB", "0 B"."""
    return human_bytes(n, zero="0 B")

"""A run's or a group's metric curves as a PNG, drawn here with Pillow, for the Feishu cards.

    curves_png(runs, metric=…, maximize=…) -> bytes | None

One run: small multiples of its main metric and up to MAX_PANELS - 1 others, each with its
axes, the minimum and maximum of the y axis, the first and last x, and the final value. A group:
its main metric, one line per run for the best MAX_LINES runs by their final value, or, when no
run has more than one point, a bar per run of its final value. None when there is nothing to
draw. The image is WIDTH × HEIGHT (about a phone's screen, turned: Feishu shows it at the card's
width), a few tens of kilobytes.

The metrics are read as `orbit show` and the web's charts read them (review/series.py), with a
deadline: a huge metrics.jsonl costs at most READ_BUDGET_S (the image then shows a sample of the
file, evenly spaced, and says so). The main metric is chosen as the plain-text message's
(message.py: the group's objective, declared or picked, review/objective.py).
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from PIL import Image, ImageDraw, ImageFont

from orbit.human import fmt_metric
from orbit.notify.fit import cut
from orbit.review.best import AXES
from orbit.review.objective import resolve
from orbit.review.parse import Metrics, Series
from orbit.review.series import read_metrics
from orbit.store.groups import Declared
from orbit.store.model import METRICS, Run

WIDTH, HEIGHT = 900, 500
MAX_PANELS = 4  # a run's curves: the main metric and up to three others
MAX_LINES = 5  # a group's curves: the best runs by the main metric's final value
MAX_BARS = 12
POINTS = 300  # per curve: what a 900-pixel-wide image can show
READ_BUDGET_S = 3.0  # for all the metrics files one image reads
BACKGROUND = (255, 255, 255)
INK = (31, 35, 41)
SOFT = (100, 106, 115)
GRID = (222, 224, 227)
# Feishu's own palette, roughly: blue, green, orange, violet, red.
COLOURS = [(51, 112, 255), (52, 199, 36), (255, 136, 0), (127, 59, 245), (245, 74, 69)]


@dataclass
class Line:
    label: str
    x: list[float]
    y: list[float]
    last: float


@dataclass
class Panel:
    title: str
    lines: list[Line]
    x_label: str = "step"
    lo: float | None = None  # the minimum and maximum of every point (not only those drawn)
    hi: float | None = None
    notes: list[str] = field(default_factory=list)


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow before 10.1: the fixed bitmap font
        return ImageFont.load_default()


def deadline(budget_s: float = READ_BUDGET_S) -> float:
    return time.monotonic() + budget_s


def read(run: Run, deadline: float) -> Metrics:
    """The run's metrics, down-sampled to POINTS a key, by `deadline` (time.monotonic())."""
    return read_metrics(run.path(METRICS), max_points=POINTS, deadline=deadline)


def main_metric(
    runs: Sequence[Run],
    metrics: dict[str, Metrics],
    metric: str | None,
    maximize: bool | None,
    declared: Declared | None,
) -> tuple[str | None, bool]:
    """The metric the curves are of and whether higher is better: `metric` when given, else
    the group's objective (declared, else picked from the final values)."""
    latest = [{k: s.last for k, s in m.series.items()} for m in metrics.values()]
    direction = None if maximize is None else ("max" if maximize else "min")
    group = runs[0].group if runs else None
    o = resolve(latest, metric=metric, direction=direction, declared=declared, group=group)
    if o.metric:
        return o.metric, o.maximize
    return metric, True if maximize is None else maximize


def curves_png(
    runs: Sequence[Run],
    *,
    metric: str | None = None,
    maximize: bool | None = None,
    declared: Declared | None = None,
    budget_s: float = READ_BUDGET_S,
) -> bytes | None:
    """The PNG of one run's curves, or of a group's main metric when `runs` are several;
    None when there is nothing to draw (no metrics, or none that is a number). Never raises on
    a damaged or missing metrics file: what cannot be read is left out."""
    deadline = time.monotonic() + budget_s
    # Past the budget the other runs are left out (each late read would start a reader in
    # the background): a group of many runs with big files shows those read in time.
    metrics = {r.id: read(r, deadline) if time.monotonic() < deadline else Metrics() for r in runs}
    main, maximize = main_metric(runs, metrics, metric, maximize, declared)
    if len(runs) == 1:
        panels = run_panels(metrics[runs[0].id], main)
    else:
        panels = group_panels(runs, metrics, main, maximize)
    return draw(panels) if panels else None


def _preview_note(m: Metrics) -> list[str]:
    return [] if m.complete else ["a sample of a large metrics file"]


def run_panels(m: Metrics, main: str | None) -> list[Panel]:
    """One run: the main metric first, then the others in the file's order."""
    keys = [k for k, s in m.series.items() if k not in AXES and s.y]
    if main in keys:
        keys = [main, *(k for k in keys if k != main)]
    panels = []
    for key in keys[:MAX_PANELS]:
        s = m.series[key]
        panel = Panel(key, [Line(key, s.x, s.y, s.last)], m.x_label, s.min, s.max)
        panel.notes = _preview_note(m)
        panels.append(panel)
    return panels


def group_panels(
    runs: Sequence[Run], metrics: dict[str, Metrics], main: str | None, maximize: bool
) -> list[Panel]:
    """A group: the best MAX_LINES runs' curves of `main`, or a bar of every run's final
    value when no run has a curve (one point each)."""
    if main is None:
        return []
    having: list[tuple[Run, Series]] = [
        (r, metrics[r.id].series[main]) for r in runs if main in metrics[r.id].series
    ]
    having = [(r, s) for r, s in having if s.y]
    if not having:
        return []
    sign = -1.0 if maximize else 1.0
    having.sort(key=lambda rs: (sign * rs[1].last, rs[0].id))
    way = "highest" if maximize else "lowest"
    if all(s.count <= 1 for _, s in having):
        shown = having[:MAX_BARS]
        lines = [Line(r.label, [0.0], [s.last], s.last) for r, s in shown]
        title = f"{main}: final value of {len(shown)} of {len(runs)} runs ({way} first)"
        return [Panel(title, lines, "bar")]
    shown = having[:MAX_LINES]
    lines = [Line(r.label, s.x, s.y, s.last) for r, s in shown]
    title = f"{main}: the best {len(shown)} of {len(runs)} runs ({way} is better)"
    if len(shown) == len(runs):
        title = f"{main} of {len(runs)} runs ({way} is better)"
    x_label = next(iter(metrics.values())).x_label
    lo = min(s.min for _, s in shown)
    hi = max(s.max for _, s in shown)
    panel = Panel(title, lines, x_label, lo, hi)
    if not all(metrics[r.id].complete for r, _ in shown):
        panel.notes.append("some from a sample of a large metrics file")
    return [panel]


# --- drawing ------------------------------------------------------------------------------
def draw(panels: list[Panel]) -> bytes:
    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    pen = ImageDraw.Draw(image)
    cols = 1 if len(panels) == 1 else 2
    rows = math.ceil(len(panels) / cols)
    w, h = WIDTH // cols, HEIGHT // rows
    for i, panel in enumerate(panels):
        x0, y0 = (i % cols) * w, (i // cols) * h
        box = (x0 + 8, y0 + 6, x0 + w - 8, y0 + h - 6)
        if panel.x_label == "bar":
            _bars(pen, box, panel)
        else:
            _curves(pen, box, panel, legend=len(panel.lines) > 1)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _span(lo: float, hi: float) -> tuple[float, float]:
    if hi > lo:
        return lo, hi
    pad = abs(lo) * 0.05 or 1.0
    return lo - pad, hi + pad


def _curves(pen: ImageDraw.ImageDraw, box: tuple[int, int, int, int], panel: Panel,
            *, legend: bool) -> None:  # fmt: skip
    title_font, font, small = _font(20), _font(15), _font(13)
    left, top, right, bottom = box
    one = panel.lines[0]
    title = panel.title if legend else f"{panel.title}   last {fmt_metric(one.last)}"
    pen.text((left, top), title, fill=INK, font=title_font)
    if panel.notes:
        pen.text((left, top + 24), "; ".join(panel.notes), fill=SOFT, font=small)
    legend_w = 190 if legend else 0
    plot = (left + 78, top + 44, right - 12 - legend_w, bottom - 26)
    xs = [x for line in panel.lines for x in line.x]
    ys = [y for line in panel.lines for y in line.y]
    x_lo, x_hi = _span(min(xs), max(xs))
    lo = panel.lo if panel.lo is not None else min(ys)
    hi = panel.hi if panel.hi is not None else max(ys)
    y_lo, y_hi = _span(lo, hi)

    def at(x: float, y: float) -> tuple[float, float]:
        px = plot[0] + (x - x_lo) / (x_hi - x_lo) * (plot[2] - plot[0])
        py = plot[3] - (y - y_lo) / (y_hi - y_lo) * (plot[3] - plot[1])
        return px, py

    pen.rectangle(plot, outline=GRID, width=1)
    for y, word in ((hi, "max"), (lo, "min")):
        py = at(x_lo, y)[1]
        pen.line((plot[0], py, plot[2], py), fill=GRID, width=1)
        label = f"{fmt_metric(y)}"
        pen.text((plot[0] - 6, py), label, fill=SOFT, font=font, anchor="rm")
        pen.text((plot[0] - 6, py + (14 if word == "min" else -14)), word, fill=SOFT,
                 font=small, anchor="rm")  # fmt: skip
    pen.text((plot[0], plot[3] + 6), fmt_metric(min(xs)), fill=SOFT, font=font, anchor="la")
    pen.text((plot[2], plot[3] + 6), fmt_metric(max(xs)), fill=SOFT, font=font, anchor="ra")
    pen.text(((plot[0] + plot[2]) / 2, plot[3] + 6), panel.x_label, fill=SOFT, font=small,
             anchor="ma")  # fmt: skip
    for i, line in enumerate(panel.lines):
        colour = COLOURS[i % len(COLOURS)]
        points = [at(x, y) for x, y in zip(line.x, line.y, strict=False)]
        if len(points) > 1:
            pen.line(points, fill=colour, width=3, joint="curve")
        ex, ey = points[-1]
        pen.ellipse((ex - 5, ey - 5, ex + 5, ey + 5), fill=colour)
        if legend:
            ly = plot[1] + 4 + i * 40
            lx = plot[2] + 16
            pen.rectangle((lx, ly + 4, lx + 14, ly + 18), fill=colour)
            pen.text((lx + 20, ly), cut(line.label, 20), fill=INK, font=font)
            pen.text((lx + 20, ly + 19), f"last {fmt_metric(line.last)}", fill=SOFT, font=small)
        else:
            anchor = "rb" if ex > (plot[0] + plot[2]) / 2 else "lb"
            pen.text((ex, ey - 8), fmt_metric(line.last), fill=colour, font=font, anchor=anchor)


def _bars(pen: ImageDraw.ImageDraw, box: tuple[int, int, int, int], panel: Panel) -> None:
    title_font, font = _font(20), _font(15)
    left, top, right, bottom = box
    pen.text((left, top), panel.title, fill=INK, font=title_font)
    plot_top = top + 40
    n = len(panel.lines)
    row = min(34, (bottom - plot_top) // max(n, 1))
    values = [line.last for line in panel.lines]
    lo, hi = min(0.0, *values), max(0.0, *values)
    lo, hi = _span(lo, hi)
    label_w, value_w = 220, 90
    x0, x1 = left + label_w, right - value_w
    zero = x0 + (0 - lo) / (hi - lo) * (x1 - x0)
    for i, line in enumerate(panel.lines):
        y = plot_top + i * row
        px = x0 + (line.last - lo) / (hi - lo) * (x1 - x0)
        colour = COLOURS[0] if i else COLOURS[1]  # the best one green
        pen.rectangle((min(zero, px), y + 4, max(zero, px) + 1, y + row - 6), fill=colour)
        pen.text((x0 - 8, y + row / 2 - 1), cut(line.label, 26), fill=INK, font=font,
                 anchor="rm")  # fmt: skip
        pen.text((x1 + 8, y + row / 2 - 1), fmt_metric(line.last), fill=SOFT, font=font,
                 anchor="lm")  # fmt: skip

"""The charts' data: what static/charts.js draws with uPlot (static/vendor/), as JSON.

One chart per metric key; on it one line per run and, for each setting whose runs differ only in
the seed-like keys (the runs' params without those, grouped as `orbit best --by-params` does:
orbit/review/best.py), its mean ± the sample standard deviation across them as a band. The
points are already down-sampled (orbit/review/series.py), fewer per run as runs are added, so
a chart of 50 runs stays well under a megabyte; `since` sends only the points after an x, for
a page that follows a live run.
"""

from __future__ import annotations

import colorsys
import json
import math
import statistics
from bisect import bisect_left
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from orbit.human import fmt_metric, human_bytes
from orbit.review.best import Setting, by_params, params_text
from orbit.review.series import Metrics, read_metrics
from orbit.store.model import METRICS, Run

COLORS = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)  # fmt: skip
POINTS_DEFAULT = 1000  # per run and key (the run page's own read, so its parse is shared)
POINTS_MAX = 2000  # per run and key, whatever the request asks
POINTS_BUDGET = 5000  # per key over every run: 50 runs get 100 points each, 250 runs 20
POINTS_MIN = 20
BAND_POINTS = 100  # the grid a setting's runs are interpolated on for its band
X_AXES = ("step", "time", "timestamp", "line")  # offered first; any logged key too

Pairs = list[list[float]]  # [[x...], [y...]]


def color(i: int) -> str:
    """The i-th line's colour ("#rrggbb", as charts.js appends an alpha to it): the palette
    first, then hues a golden angle apart, so 50 runs are not 5 runs of each colour."""
    if i < len(COLORS):
        return COLORS[i]
    r, g, b = colorsys.hls_to_rgb((i * 0.381966) % 1.0, 0.42, 0.65)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def fmt(v: float | None) -> str:
    return "" if v is None else fmt_metric(v)


def fmt_size(n: int) -> str:
    """A file or memory size on a page: "1.5 KiB", "0 B"."""
    return human_bytes(n, zero="0 B")


def points_per_run(n_runs: int, asked: int | None = None) -> int:
    """The points of each run's line: `asked` (at most POINTS_MAX) or POINTS_DEFAULT for one
    run, fewer as runs are added so a chart's weight stays about the same."""
    cap = POINTS_DEFAULT if asked is None else max(10, min(POINTS_MAX, asked))
    return min(cap, max(POINTS_MIN, POINTS_BUDGET // max(1, n_runs)))


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _after(xs: Sequence[float], ys: Sequence[float], since: float | None) -> Pairs:
    if since is None:
        return [list(xs), list(ys)]
    keep = [i for i, x in enumerate(xs) if x > since]
    return [[xs[i] for i in keep], [ys[i] for i in keep]]


def _at(xs: Sequence[float], ys: Sequence[float], x: float) -> float | None:
    """The line through (xs, ys) (xs sorted) at x, by linear interpolation; None outside it."""
    i = bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return ys[i]
    if i == 0 or i == len(xs):
        return None
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    try:
        return _finite(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    except (OverflowError, ZeroDivisionError):
        return None


def _grid(lines: list[Pairs]) -> list[float]:
    """BAND_POINTS x values where every line has points (their common range)."""
    lo = max(min(ln[0]) for ln in lines)
    hi = min(max(ln[0]) for ln in lines)
    if not lo <= hi:
        return []
    if lo == hi or not math.isfinite(hi - lo):
        return [lo]
    step = (hi - lo) / (BAND_POINTS - 1)
    return [lo + i * step for i in range(BAND_POINTS - 1)] + [hi]


def _stats(values: list[float]) -> tuple[float, float] | None:
    try:
        mean, std = statistics.fmean(values), statistics.stdev(values)
    except (OverflowError, ValueError, statistics.StatisticsError):
        return None
    return (mean, std) if math.isfinite(mean) and math.isfinite(std) else None


def band(lines: list[Pairs]) -> list[list[float | None]]:
    """[x, mean, mean - std, mean + std] of `lines` (each [[x...], [y...]], two or more) on a
    common grid; a point where they cannot be combined (an overflow) is None, a gap."""
    lines = [_sorted(ln) for ln in lines if ln[0]]
    if len(lines) < 2:
        return [[], [], [], []]
    xs = _grid(lines)
    out: list[list[float | None]] = [[], [], [], []]
    for x in xs:
        values = [_at(ln[0], ln[1], x) for ln in lines]
        got = _stats([v for v in values if v is not None]) if None not in values else None
        mean = lo = hi = None
        if got is not None:
            mean, std = got
            lo, hi = _finite(mean - std), _finite(mean + std)
        for column, v in zip(out, (x, mean, lo, hi), strict=True):
            column.append(v if column is out[0] else _round(v))
    return out


def _round(v: float | None) -> float | None:
    """7 significant digits: a band is a summary, drawn, not read to the last digit."""
    return None if v is None else float(f"{v:.7g}")


def _sorted(line: Pairs) -> Pairs:
    xs, ys = line
    if all(a <= b for a, b in pairwise(xs)):
        return line
    pairs = sorted(zip(xs, ys, strict=True))
    return [[p[0] for p in pairs], [p[1] for p in pairs]]


def x_choices(metrics: Sequence[Metrics]) -> list[str]:
    """The x axes a chart can use: step, time, timestamp and line, then every logged key."""
    keys = [m.x_label for m in metrics] + [k for m in metrics for k in m.series]
    found = [a for a in X_AXES if a in keys or a == "line"]
    return found + [k for k in dict.fromkeys(keys) if k not in found]


def settings_of(runs: list[Run]) -> list[Setting]:
    """The settings among `runs` that have a band: two runs or more whose params differ only
    in the seed-like keys (runs without params are no seeds of anything)."""
    if len(runs) < 2:
        return []
    params = {
        r.id: json.dumps(r.spec.get("params") or {}, sort_keys=True, default=str) for r in runs
    }
    settings = by_params(runs, "", True, values={})
    return [s for s in settings if len({params[i] for i in s.run_ids}) > 1]


def run_colors(runs: list[Run]) -> tuple[list[str], list[Setting]]:
    """Each run's colour, and the settings with a band (settings_of): when there are some, a
    run takes its setting's colour (so do the band and its mean), else its own by position."""
    settings = settings_of(runs)
    setting_of = {rid: i for i, s in enumerate(settings) for rid in s.run_ids}
    colors = [
        color(setting_of.get(r.id, len(settings) + i) if settings else i)
        for i, r in enumerate(runs)
    ]
    return colors, settings


def chart_data(
    runs: list[Run],
    *,
    x_key: str | None = None,
    since: float | None = None,
    points: int | None = None,
    deadline: float | None = None,
) -> dict[str, Any]:
    """The charts of `runs` as static/charts.js reads them: every run's points per key and,
    without `since`, each multi-run setting's band per key. With a `deadline`
    (series.read_metrics), a file not read by then is a preview: its run has a `note`."""
    per_run = points_per_run(len(runs), points)
    axis = "" if x_key == "line" else x_key  # read_metrics: "" is the line number
    metrics = [
        read_metrics(r.path(METRICS), max_points=per_run, x_key=axis, deadline=deadline)
        for r in runs
    ]
    keys = list(dict.fromkeys(k for m in metrics for k in m.series))
    colors, settings = run_colors(runs)
    setting_of = {rid: i for i, s in enumerate(settings) for rid in s.run_ids}
    out_runs = [
        {
            "id": r.id,
            "label": r.label,
            "color": colors[i],
            "active": not r.state.finished,
            "setting": setting_of.get(r.id),
            "series": {k: _after(s.x, s.y, since) for k, s in m.series.items()},
            "counts": {k: s.count for k, s in m.series.items()},
            "note": m.note,
        }
        for i, (r, m) in enumerate(zip(runs, metrics, strict=True))
    ]
    return {
        "x_label": next((m.x_label for m in metrics if m.series), x_key or "step"),
        "x_keys": x_choices(metrics),
        "keys": keys,
        "points": per_run,
        "dropped_keys": max((m.dropped_keys for m in metrics), default=0),
        "runs": out_runs,
        "settings": [] if since is not None else _bands(settings, out_runs, keys),
    }


def _bands(settings: list[Setting], runs: list[dict[str, Any]], keys: list[str]) -> list[Any]:
    by_id = {r["id"]: r for r in runs}
    out = []
    for i, s in enumerate(settings):
        members = [by_id[rid] for rid in s.run_ids if rid in by_id]
        bands = {}
        for k in keys:
            lines = [m["series"][k] for m in members if k in m["series"]]
            if len(lines) >= 2:
                bands[k] = band(lines)
        out.append(
            {
                "setting": i,
                "label": params_text(s.params),
                "color": color(i),
                "runs": [m["id"] for m in members],
                "bands": bands,
            }
        )
    return out

"""The compare page: up to ten runs, metrics overlaid, parameters and results side by side.

GET /compare?ids=1,2,3
"""

from __future__ import annotations

from typing import Any

import bottle

from orbit.human import human_seconds
from orbit.review.series import read_metrics
from orbit.store.describe import describe, latest_metrics
from orbit.store.model import METRICS, Run
from orbit.web.charts import COLORS, Line, fmt, fmt_size, svg_chart
from orbit.web.context import Route, WebContext, current, load_run
from orbit.web.run_page import PAGE_CHARTS

COMPARE_MAX = 10  # also in static/orbit.js

Row = tuple[str, list[str], bool]  # name, the value of each run, whether they differ


def compare() -> str:
    ctx = current()
    raw = bottle.request.query.getunicode("ids", "") or ""
    ids = list(dict.fromkeys(i.strip() for i in raw.split(",") if i.strip()))
    if not ids:
        bottle.abort(400, "choose runs to compare: /compare?ids=1,2")
    if len(ids) > COMPARE_MAX:
        bottle.abort(400, f"compare at most {COMPARE_MAX} runs at once")
    runs = [load_run(ctx, i) for i in ids]
    return ctx.render("compare", title="compare " + ", ".join(ids), **compare_data(ctx, runs))


def _row(name: str, values: list[Any]) -> Row:
    shown = ["" if v is None else fmt(v) if isinstance(v, float) else str(v) for v in values]
    return name, shown, len(set(shown)) > 1


def _union(infos: list[dict[str, Any]], field: str) -> list[str]:
    names: list[str] = []
    for info in infos:
        names.extend(k for k in (info.get(field) or {}) if k not in names)
    return names


def _charts(runs: list[Run]) -> tuple[list[tuple[str, str]], int]:
    """One chart per metric key (the first PAGE_CHARTS), and how many keys are left out."""
    # Fewer points per run as runs are added, so the page stays small with ten runs.
    points = max(150, 1500 // len(runs))
    metrics = [read_metrics(r.path(METRICS), max_points=points) for r in runs]
    keys: list[str] = []
    for m in metrics:
        keys.extend(k for k in m.series if k not in keys)
    charts = []
    for key in keys[:PAGE_CHARTS]:
        lines = [
            Line(runs[i].label, m.series[key].x, m.series[key].y, COLORS[i % len(COLORS)])
            for i, m in enumerate(metrics)
            if key in m.series
        ]
        x_label = next((m.x_label for m in metrics if key in m.series), "line")
        charts.append((key, svg_chart(key, lines, x_label)))
    return charts, max(0, len(keys) - PAGE_CHARTS)


def _results(infos: list[dict[str, Any]]) -> list[Row]:
    def peak(i: dict[str, Any], key: str) -> Any:
        return (i["peaks"] or {}).get(key)

    return [
        _row("state", [i["state"] for i in infos]),
        _row("reason", [i["reason"] for i in infos]),
        _row("exit code", [i["exit_code"] for i in infos]),
        _row("duration", [_duration(i["duration_s"]) for i in infos]),
        _row("peak memory", [_peak_mem(i) for i in infos]),
        _row("peak CPU cores", [peak(i, "cpu_cores") for i in infos]),
        _row("CPU seconds", [peak(i, "cpu_seconds") for i in infos]),
    ]


def compare_data(ctx: WebContext, runs: list[Run]) -> dict[str, Any]:
    infos = [describe(ctx.store, r, notes=False) for r in runs]
    charts, more_keys = _charts(runs)
    params = [_row(k, [(i["params"] or {}).get(k) for i in infos]) for k in _union(infos, "params")]
    tags = [_row(k, [(i["tags"] or {}).get(k) for i in infos]) for k in _union(infos, "tags")]
    resources = [
        _row(k, [(i["resources"] or {}).get(k) for i in infos]) for k in _union(infos, "resources")
    ]
    resources.append(_row("image", [i["image"] for i in infos]))
    resources.append(_row("command", [" ".join(map(str, i["command"])) for i in infos]))
    finals = [latest_metrics(r)[0] for r in runs]
    final_keys: list[str] = []
    for f in finals:
        final_keys.extend(k for k in f if k not in final_keys)
    final_rows = [_row(k, [f.get(k) for f in finals]) for k in final_keys[:200]]
    return {
        "runs": runs,
        "labels": [r.label for r in runs],
        "colors": [COLORS[i % len(COLORS)] for i in range(len(runs))],
        "charts": charts,
        "more_keys": more_keys,
        "sections": [
            ("Parameters", params),
            ("Tags", tags),
            ("Resources", resources),
            ("Results", _results(infos)),
            ("Final metric values", final_rows),
        ],
    }


def _duration(seconds: float | None) -> str | None:
    return None if seconds is None else human_seconds(seconds)


def _peak_mem(info: dict[str, Any]) -> str | None:
    b = (info.get("peaks") or {}).get("mem_bytes")
    return fmt_size(int(b)) if isinstance(b, int | float) else None


ROUTES: list[Route] = [("GET", "/compare", compare)]

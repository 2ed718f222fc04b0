"""The compare page: up to ten runs, metrics overlaid, parameters and results side by side.
Its tables are orbit/review/compare.py's, the rows of `orbit compare` turned on their side.

GET /compare?ids=1,2,3
GET /api/compare?ids=1,2,3   `orbit compare --json` of those runs
"""

from __future__ import annotations

from typing import Any

import bottle

from orbit.errors import UsageError
from orbit.review.compare import Column, Comparison, parse_metric, parse_result
from orbit.review.compare import compare as review_compare
from orbit.review.series import read_metrics
from orbit.store.model import METRICS, Run
from orbit.web.charts import COLORS, Line, svg_chart
from orbit.web.context import Route, WebContext, current, load_run
from orbit.web.run_page import PAGE_CHARTS

COMPARE_MAX = 10  # also in static/orbit.js

Row = tuple[str, list[str], bool]  # name, the value of each run, whether they differ


def compare() -> str:
    ctx = current()
    ids = _ids()
    runs = [load_run(ctx, i) for i in ids]
    return ctx.render("compare", title="compare " + ", ".join(ids), **compare_data(ctx, runs))


def api_compare() -> dict[str, Any]:
    """`orbit compare --json` for ?ids=1,2,3 (at most COMPARE_MAX runs), with the CLI's
    ?metric=NAME[:min|max] and ?result=PATH:KEY (each repeatable or comma-separated)."""
    ctx = current()
    runs = [load_run(ctx, i) for i in _ids()]
    query = bottle.request.query
    try:
        metrics = [parse_metric(t) for v in query.getall("metric") for t in v.split(",") if t]
        results = [parse_result(v) for v in query.getall("result") if v]
    except UsageError as exc:
        bottle.abort(400, str(exc))
    return review_compare(runs, metrics, results).to_json()


def _ids() -> list[str]:
    raw = bottle.request.query.getunicode("ids", "") or ""
    ids = list(dict.fromkeys(i.strip() for i in raw.split(",") if i.strip()))
    if not ids:
        bottle.abort(400, "choose runs to compare: /compare?ids=1,2")
    if len(ids) > COMPARE_MAX:
        bottle.abort(400, f"compare at most {COMPARE_MAX} runs at once")
    return ids


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


_SECTIONS = (  # title, which columns of the comparison (by key prefix or key)
    ("Parameters", ("params.",)),
    ("Tags", ("tags.",)),
    ("Resources", ("image", "cpus", "mem_gb", "gpus", "group", "folder")),
    ("Results", ("state", "reason", "exit_code", "duration_s", "peak_")),
)


def _sections(cmp: Comparison, runs: list[Run]) -> list[tuple[str, list[Row]]]:
    """The comparison's columns as rows (one value per run), grouped; the rest are the
    metrics and result keys."""
    n = len(cmp.rows)

    def row(col: Column) -> Row:
        values = [cmp.text(i, col) for i in range(n)]
        title = col.key.partition(".")[2] if col.key.startswith(("tags.", "params.")) else None
        return title or col.title, values, len(set(values)) > 1

    placed: set[str] = {"id", "name"}
    out: list[tuple[str, list[Row]]] = []
    for title, keys in _SECTIONS:
        cols = [c for c in cmp.columns if c.key not in placed and c.key.startswith(keys)]
        placed.update(c.key for c in cols)
        rows = [row(c) for c in cols]
        if title == "Resources":
            commands = [" ".join(map(str, r.spec.get("command") or [])) for r in runs]
            rows.append(("command", commands, len(set(commands)) > 1))
        out.append((title, rows))
    rest = [row(c) for c in cmp.columns if c.key not in placed]
    out.append((f"Metrics (last, min, max, {cmp.x_label} of the best)", rest))
    return out


def compare_data(ctx: WebContext, runs: list[Run]) -> dict[str, Any]:
    charts, more_keys = _charts(runs)
    cmp = review_compare(runs)
    return {
        "runs": runs,
        "labels": [r.label for r in runs],
        "colors": [COLORS[i % len(COLORS)] for i in range(len(runs))],
        "charts": charts,
        "more_keys": more_keys,
        "sections": _sections(cmp, runs),
    }


ROUTES: list[Route] = [("GET", "/compare", compare), ("GET", "/api/compare", api_compare)]

"""The compare page: up to ten runs, metrics overlaid, parameters and results side by side.
Its tables are orbit/review/compare.py's, the rows of `orbit compare` turned on their side.
A group's page ranks every setting of its params first, as `orbit best --by-params` does
(orbit/review/best.py), then shows the best run of each of the first ten side by side.

GET /compare?ids=1,2,3
GET /api/compare?ids=1,2,3   `orbit compare --json` of those runs
GET /compare?group=G         (&metric=NAME&order=max|min) the settings ranked, then the runs
GET /api/compare?group=G     `orbit best -g G --by-params --json`
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import bottle

from orbit.errors import NotFoundError, UsageError
from orbit.human import fmt_metric
from orbit.review.best import (
    SEED_KEYS,
    Setting,
    by_params,
    finals,
    objective_of,
    params_text,
    settings_json,
)
from orbit.review.compare import Column, Comparison, parse_metric, parse_result
from orbit.review.compare import compare as review_compare
from orbit.review.objective import Objective, declared_of, logged_keys
from orbit.review.series import read_metrics
from orbit.store.model import METRICS, Run
from orbit.store.runs import Broken, id_key
from orbit.web import objective
from orbit.web.charts import COLORS, Line, svg_chart
from orbit.web.context import Route, WebContext, current, load_run
from orbit.web.run_page import PAGE_CHARTS, metrics_deadline

COMPARE_MAX = 10  # a group's settings page shows the best runs of this many settings

Row = tuple[str, list[str], bool]  # name, the value of each run, whether they differ


def compare() -> str:
    ctx = current()
    group = _group()
    if group is not None:
        return _group_page(ctx, group)
    ids = _ids()
    runs = [load_run(ctx, i) for i in ids]
    return ctx.render("compare", title="compare " + ", ".join(ids), **compare_data(ctx, runs))


def api_compare() -> dict[str, Any]:
    """`orbit compare --json` for ?ids=1,2,3 (any number of runs), with the CLI's
    ?metric=NAME[:min|max] and ?result=PATH:KEY (each repeatable or comma-separated); for
    ?group=G, `orbit best -g G --by-params --json` (?metric=NAME&order=max|min), a ranking
    that cannot be given a 404 or 400 as the CLI's exit code says."""
    ctx = current()
    group = _group()
    if group is not None:
        ranked = rank_group(ctx, group, objective.asked())
        try:
            ranked.objective.require()
        except NotFoundError as exc:
            bottle.abort(404, str(exc))
        except UsageError as exc:
            bottle.abort(400, str(exc))
        return settings_json(group, ranked.objective, ranked.settings, SEED_KEYS)
    runs = [load_run(ctx, i) for i in _ids()]
    query = bottle.request.query
    try:
        metrics = [parse_metric(t) for v in query.getall("metric") for t in v.split(",") if t]
        results = [parse_result(v) for v in query.getall("result") if v]
    except UsageError as exc:
        bottle.abort(400, str(exc))
    return review_compare(runs, metrics, results, deadline=metrics_deadline()).to_json()


def _group() -> str | None:
    q = bottle.request.query
    group = (q.getunicode("group", "") or "").strip() or None
    if group is not None and (q.getunicode("ids", "") or "").strip():
        bottle.abort(400, "compare runs or a group: /compare?ids=1,2 or /compare?group=NAME")
    return group


def _ids() -> list[str]:
    raw = bottle.request.query.getunicode("ids", "") or ""
    ids = list(dict.fromkeys(i.strip() for i in raw.split(",") if i.strip()))
    if not ids:
        bottle.abort(400, "choose runs to compare: /compare?ids=1,2 or /compare?group=NAME")
    return ids


def _charts(runs: list[Run], deadline: float) -> tuple[list[tuple[str, str]], int, list[str]]:
    """One chart per metric key (the first PAGE_CHARTS), how many keys are left out, and the
    note of each run whose metrics are not read to the end yet."""
    # Fewer points per run as runs are added, so the page stays small with ten runs.
    points = max(150, 1500 // len(runs))
    metrics = [read_metrics(r.path(METRICS), max_points=points, deadline=deadline) for r in runs]
    notes = [f"{r.label}: {m.note}" for r, m in zip(runs, metrics, strict=True) if m.note]
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
    return charts, max(0, len(keys) - PAGE_CHARTS), notes


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
    deadline = metrics_deadline()
    charts, more_keys, notes = _charts(runs, deadline)
    cmp = review_compare(runs, deadline=deadline)
    return {
        "runs": runs,
        "labels": [r.label for r in runs],
        "colors": [COLORS[i % len(COLORS)] for i in range(len(runs))],
        "charts": charts,
        "more_keys": more_keys,
        "metrics_notes": notes,
        "sections": _sections(cmp, runs),
    }


# --- a group: its settings ranked -------------------------------------------------------------
@dataclass
class GroupRanking:
    """A group's settings as `orbit best --by-params` ranks them (none when the objective
    cannot rank), and what the page shows beside them."""

    group: str
    runs: list[Run]
    unreadable: int
    objective: Objective
    settings: list[Setting]
    logged: dict[str, int]  # the keys the succeeded runs logged: what the control offers
    damaged: str | None  # why the group's declared objective cannot be read


def rank_group(ctx: WebContext, group: str, wanted: objective.Asked) -> GroupRanking:
    """The group's readable runs ranked by setting; a 404 when no run names the group."""
    ids, unreadable = [], 0
    for row in ctx.store.list_rows():
        if isinstance(row, Broken):
            unreadable += row.group == group
        elif row.get("group") == group:
            ids.append(str(row["id"]))
    if not ids and not unreadable:
        bottle.abort(404, f"no runs in group {group!r}")
    loaded = ctx.store.load_many(ids)
    runs = [r for r in loaded if isinstance(r, Run)]
    declared, damaged = declared_of(ctx.home, group)
    read = finals(runs)
    o, values = objective_of(
        runs,
        metric=wanted.metric,
        direction=wanted.direction,
        declared=declared,
        group=group,
        read=read,
    )
    settings = by_params(runs, o.metric, o.maximize, values=values) if o.ok and o.metric else []
    damaged = damaged.replace(str(ctx.home.root), "ORBIT_HOME") if damaged else None
    return GroupRanking(
        group,
        runs,
        unreadable + len(loaded) - len(runs),
        o,
        settings,
        logged_keys(list(read.values())),
        damaged,
    )


def _setting_rows(settings: list[Setting]) -> list[dict[str, Any]]:
    rows = []
    for i, s in enumerate(settings, 1):
        spread = f" ± {fmt_metric(s.std)}" if s.std is not None else ""
        rows.append(
            {
                "rank": str(i) if s.mean is not None else "-",
                "setting": params_text(s.params),
                "mean": f"{fmt_metric(s.mean)}{spread}" if s.mean is not None else "-",
                "n": f"{s.n}/{len(s.run_ids)}",
                "failed": s.failed,
                "best_run": s.best_run,
                "best": s.best,
            }
        )
    return rows


def _group_page(ctx: WebContext, group: str) -> str:
    wanted = objective.asked()
    ranked = rank_group(ctx, group, wanted)
    o = ranked.objective
    status = objective.refused(o, wanted)
    if status is not None:  # the page still shows, with the control to ask again
        bottle.response.status = status
    oc = objective.control(
        o, ranked.logged, wanted, "/compare", {"group": group}, (ranked.damaged,)
    )
    runs: list[Run] = []
    if ranked.settings:  # the best run of each setting, best setting first
        shown = [s.best_run for s in ranked.settings if s.best_run][:COMPARE_MAX]
        by_id = {r.id: r for r in ranked.runs}
        runs = [by_id[i] for i in shown]
    elif status is None:  # nothing qualifies: what the runs logged, to choose a metric from
        runs = sorted(ranked.runs, key=lambda r: id_key(r.id))[:COMPARE_MAX]
    top = ranked.settings[0] if ranked.settings and ranked.settings[0].best else None
    return ctx.render(
        "compare_group",
        title=f"settings · group {group}",
        group=group,
        ranked=ranked,
        oc=oc,
        rows=_setting_rows(ranked.settings),
        top=_setting_rows([top])[0] if top else None,
        lessons_href=objective.href("/lessons", wanted, group=group),
        side_by_side=compare_data(ctx, runs) if runs else None,
        seed_keys=SEED_KEYS,
        q=quote,
    )


ROUTES: list[Route] = [("GET", "/compare", compare), ("GET", "/api/compare", api_compare)]

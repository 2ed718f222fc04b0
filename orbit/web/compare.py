"""The compare page: any number of runs, metrics overlaid, parameters and results side by
side. Its tables are orbit/review/compare.py's, the rows of `orbit compare` turned on their
side. A group's page ranks every setting of its params first, as `orbit best --by-params` does
(orbit/review/best.py), charts every run of the group with a mean ± std band per setting, then
shows the best run of each of the first ten settings side by side.

GET /compare?ids=1,2,3
GET /api/compare?ids=1,2,3   `orbit compare --json` of those runs
GET /compare?group=G         (&metric=NAME&order=max|min) the settings ranked, then the runs
GET /api/compare?group=G     `orbit best -g G --by-params --json`
GET /api/series?ids=1,2,3    the charts' data (web/charts.py): ?group=G for a group's runs,
                             &x=KEY (step, time, line or any logged key), &since=X (only the
                             points after x = X), &points=N (per run, at most 2000)
"""

from __future__ import annotations

import math
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
from orbit.store.model import Run
from orbit.store.runs import Broken, id_key
from orbit.web import objective
from orbit.web.charts import chart_data, run_colors
from orbit.web.context import Route, WebContext, current, load_run
from orbit.web.run_page import metrics_deadline

SIDE_BY_SIDE = 10  # settings whose best runs a group's page shows side by side
X_KEY_MAX = 200  # characters of an x axis name

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


def compare_data(ctx: WebContext, runs: list[Run], charted: bool = True) -> dict[str, Any]:
    """What compare_runs.tpl shows of `runs`; `charted`: with their charts."""
    cmp = review_compare(runs, deadline=metrics_deadline())
    ids = ",".join(quote(r.id, safe="") for r in runs)
    return {
        "runs": runs,
        "labels": [r.label for r in runs],
        "colors": run_colors(runs)[0],
        "chart_src": f"/api/series?ids={ids}" if charted else None,
        "sections": _sections(cmp, runs),
    }


def series_api() -> dict[str, Any]:
    """The charts' data of ?ids=… or ?group=G (web/charts.py `chart_data`)."""
    ctx = current()
    q = bottle.request.query
    group = _group()
    runs = group_runs(ctx, group)[0] if group is not None else [load_run(ctx, i) for i in _ids()]
    x_key = (q.getunicode("x", "") or "").strip() or None
    try:
        since = float(q["since"]) if q.get("since") not in (None, "") else None
        points = int(q["points"]) if q.get("points") not in (None, "") else None
    except ValueError:
        bottle.abort(400, "since must be a number and points an integer")
    if x_key is not None and len(x_key) > X_KEY_MAX:
        bottle.abort(400, f"an x axis name is at most {X_KEY_MAX} characters")
    if since is not None and not math.isfinite(since):
        since = None
    if group is not None:
        runs.sort(key=lambda r: id_key(r.id))
    return chart_data(runs, x_key=x_key, since=since, points=points, deadline=metrics_deadline())


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


def group_runs(ctx: WebContext, group: str) -> tuple[list[Run], int]:
    """The group's readable runs and how many cannot be read; a 404 when no run names it."""
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
    return runs, unreadable + len(loaded) - len(runs)


def rank_group(ctx: WebContext, group: str, wanted: objective.Asked) -> GroupRanking:
    """The group's readable runs ranked by setting; a 404 when no run names the group."""
    runs, unreadable = group_runs(ctx, group)
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
        unreadable,
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
        shown = [s.best_run for s in ranked.settings if s.best_run][:SIDE_BY_SIDE]
        by_id = {r.id: r for r in ranked.runs}
        runs = [by_id[i] for i in shown]
    elif status is None:  # nothing qualifies: what the runs logged, to choose a metric from
        runs = sorted(ranked.runs, key=lambda r: id_key(r.id))[:SIDE_BY_SIDE]
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
        side_by_side=compare_data(ctx, runs, charted=False) if runs else None,
        chart_src=f"/api/series?group={quote(group, safe='')}" if ranked.runs else None,
        seed_keys=SEED_KEYS,
        q=quote,
    )


ROUTES: list[Route] = [
    ("GET", "/compare", compare),
    ("GET", "/api/compare", api_compare),
    ("GET", "/api/series", series_api),
]

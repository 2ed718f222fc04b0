"""The lessons page: the digest of a group or a project (orbit/review/lessons.py), as the
CLI's `orbit lessons` gives it; without either, the groups to choose from.

GET /lessons                    the groups: runs, states, declared objective, links
GET /lessons?group=G            (or ?project=PATH) the page; &metric=NAME&order=max|min
GET /api/lessons?group=G        the digest as JSON, as `orbit lessons --json`
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import quote

import bottle

from orbit.errors import NotFoundError
from orbit.human import fmt_metric
from orbit.review.best import params_text
from orbit.review.lessons import Scope, digest
from orbit.review.lessons_page import render
from orbit.review.objective import Objective, declared_of
from orbit.store.runs import id_key
from orbit.web import objective
from orbit.web.context import Route, WebContext, current


def _scope() -> Scope | None:
    """The group or project the URL names; None for neither (the page lists the groups)."""
    q = bottle.request.query
    group = q.getunicode("group")
    project = q.getunicode("project")
    if group and project:
        bottle.abort(400, "name one group or one project: /lessons?group=NAME")
    if not (group or project):
        return None
    return Scope(group=group) if group else Scope(project=project)


def _digest(scope: Scope, wanted: objective.Asked) -> dict[str, Any]:
    try:
        return digest(current().store, scope, metric=wanted.metric, direction=wanted.direction)
    except NotFoundError as exc:
        bottle.abort(404, str(exc))
    raise AssertionError("unreachable")


def lessons_page() -> str:
    ctx = current()
    scope = _scope()
    if scope is None:
        return ctx.render("lessons_groups", title="Lessons", groups=group_index(ctx), q=quote)
    wanted = objective.asked()
    d = _digest(scope, wanted)
    o = Objective.from_json(d["objective"], scope.group)
    status = objective.refused(o, wanted)
    if status is not None:  # the page still shows, with the control to ask again
        bottle.response.status = status
    hidden = {"group": scope.group or "", "project": scope.project or ""}
    damaged = tuple(_no_host(ctx, g.get("warning")) for g in d.get("groups") or [])
    oc = objective.control(o, d.get("metrics_logged") or {}, wanted, "/lessons", hidden, damaged)
    return ctx.render(
        "lessons",
        title=f"lessons · {scope.title}",
        heading=scope.title,
        d=d,
        oc=oc,
        compare_href=objective.href("/compare", wanted, group=scope.group) if scope.group else None,
        text=render(d),
        params_text=params_text,
        fmt=fmt_metric,
        q=quote,
    )


def lessons_api() -> dict[str, Any]:
    """The digest; a ranking the URL asks for that cannot be given is an error, as with
    `orbit lessons --metric` (400 or 404, its problem as the message)."""
    scope = _scope()
    if scope is None:
        bottle.abort(400, "name one group or one project: /api/lessons?group=NAME")
        raise AssertionError("unreachable")
    wanted = objective.asked()
    d = _digest(scope, wanted)
    o = Objective.from_json(d["objective"], scope.group)
    status = objective.refused(o, wanted)
    if status is not None:
        bottle.abort(status, o.problem)
    return d


def _no_host(ctx: WebContext, text: str | None) -> str | None:
    """`text` with the home's path named, not spelled out (pages name no host path)."""
    return text.replace(str(ctx.home.root), "ORBIT_HOME") if text else text


def group_index(ctx: WebContext) -> list[dict[str, Any]]:
    """Every group in the listing index, newest run first: its runs by state, its newest run
    and its declared objective (or why group.yaml cannot be read). Reads no run directory."""
    states: dict[str, Counter[str]] = {}
    newest: dict[str, str] = {}
    for row in ctx.store.list_rows():
        if not isinstance(row, dict) or not row.get("group"):
            continue
        name, run_id = str(row["group"]), str(row["id"])
        states.setdefault(name, Counter())[str(row.get("state"))] += 1
        if name not in newest or id_key(run_id) > id_key(newest[name]):
            newest[name] = run_id
    out = []
    for name in sorted(states, key=lambda g: id_key(newest[g]), reverse=True):
        declared, warning = declared_of(ctx.home, name)
        out.append(
            {
                "group": name,
                "runs": sum(states[name].values()),
                "states": ", ".join(f"{n} {s}" for s, n in states[name].most_common()),
                "newest": newest[name],
                "objective": f"{declared.metric}:{declared.direction}" if declared else None,
                "warning": _no_host(ctx, warning),
            }
        )
    return out


ROUTES: list[Route] = [
    ("GET", "/lessons", lessons_page),
    ("GET", "/api/lessons", lessons_api),
]

"""The lessons page: the digest of a group or a project (orbit/review/lessons.py), as the
CLI's `orbit lessons` gives it.

GET /lessons?group=G            (or ?project=PATH) the page
GET /api/lessons?group=G        the digest as JSON, as `orbit lessons --json`
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import bottle

from orbit.errors import NotFoundError
from orbit.human import fmt_metric
from orbit.review.best import params_text
from orbit.review.lessons import Scope, digest, render
from orbit.web.context import Route, current


def _scope() -> Scope:
    q = bottle.request.query
    group = q.getunicode("group")
    project = q.getunicode("project")
    if bool(group) == bool(project):
        bottle.abort(400, "name one group or one project: /lessons?group=NAME")
    return Scope(group=group) if group else Scope(project=project)


def _metric() -> tuple[str | None, str | None]:
    q = bottle.request.query
    way = q.get("order")
    if way not in (None, "", "max", "min"):
        bottle.abort(400, "order is max or min")
    return q.getunicode("metric") or None, way or None


def _digest() -> dict[str, Any]:
    scope = _scope()
    metric, direction = _metric()
    try:
        return digest(current().store, scope, metric=metric, direction=direction)
    except NotFoundError as exc:
        bottle.abort(404, str(exc))
    raise AssertionError("unreachable")


def lessons_page() -> str:
    d = _digest()
    scope = d["scope"]
    title = f"group {scope['group']}" if scope.get("group") else f"project {scope['project']}"
    return current().render(
        "lessons",
        title=f"lessons · {title}",
        heading=title,
        d=d,
        text=render(d),
        params_text=params_text,
        fmt=fmt_metric,
        q=quote,
    )


def lessons_api() -> dict[str, Any]:
    return _digest()


ROUTES: list[Route] = [
    ("GET", "/lessons", lessons_page),
    ("GET", "/api/lessons", lessons_api),
]

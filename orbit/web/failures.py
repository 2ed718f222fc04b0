"""The failures page: failed runs grouped by cause (orbit/review/signatures.py).

GET /failures?group=G&folder=F   the causes, most frequent first, with an example excerpt
GET /api/failures?group=G&folder=F   the same as JSON (`orbit failures --json`'s shape)
"""

from __future__ import annotations

from typing import Any

import bottle

from orbit.errors import NotFoundError
from orbit.review.signatures import Failure, failed_in_scope, failures
from orbit.web.context import Route, current


def _found() -> tuple[list[Failure], str | None, str | None]:
    q = bottle.request.query
    group = (q.getunicode("group", "") or "").strip() or None
    folder = (q.getunicode("folder", "") or "").strip() or None
    try:
        runs, considered = failed_in_scope(current().store, group, folder)
    except NotFoundError as exc:
        bottle.abort(404, str(exc))
    return failures(runs, considered), group, folder


def failures_page() -> str:
    found, group, folder = _found()
    scope = " · ".join(x for x in (group and f"group {group}", folder and f"under {folder}") if x)
    title = "Failures" + (f" · {scope}" if scope else "")
    return current().render("failures", title=title, failures=found, group=group, folder=folder)


def failures_api() -> dict[str, Any]:
    return {"failures": [f.to_json() for f in _found()[0]]}


ROUTES: list[Route] = [
    ("GET", "/failures", failures_page),
    ("GET", "/api/failures", failures_api),
]

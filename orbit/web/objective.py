"""Which metric and which direction a page ranks by (the lessons page, a group's settings on
/compare?group=G): what the URL asks, the status of a page that cannot give it, and the
control that asks again (templates/objective.tpl). The rule itself is review/objective.py's.

?metric=NAME (or NAME:max, NAME:min, as the CLI's --metric) and ?order=max|min (as --max and
--min); neither means the objective of the runs: declared for the group, else picked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import bottle

from orbit.errors import NotFoundError, UsageError
from orbit.review.objective import Objective, parse_metric_option, way_text


@dataclass(frozen=True)
class Asked:
    metric: str | None = None
    direction: str | None = None

    @property
    def any(self) -> bool:
        return self.metric is not None or self.direction is not None


def asked() -> Asked:
    """The metric and direction the URL asks for; a 400 for an order that is neither max nor
    min, or a metric whose own direction disagrees with it."""
    q = bottle.request.query
    order = (q.getunicode("order") or "").strip() or None
    if order not in (None, "max", "min"):
        bottle.abort(400, "order is max or min")
    text = (q.getunicode("metric") or "").strip() or None
    try:
        metric, direction = parse_metric_option(text, None if order is None else order == "max")
    except UsageError as exc:  # worded as the CLI's --metric and --max/--min, which these are
        bottle.abort(400, str(exc))
    return Asked(metric, direction)


def href(path: str, wanted: Asked, **scope: str | None) -> str:
    """`path` for `scope` (group=G), asking for the same metric and direction as `wanted`."""
    query = {**scope, "metric": wanted.metric, "order": wanted.direction}
    return path + "?" + urlencode({k: v for k, v in query.items() if v})


def refused(o: Objective, wanted: Asked) -> int | None:
    """The status of a page whose URL asked for a ranking that cannot be given, as the CLI's
    exit code says: 400 for a metric whose name says no direction, 404 for one no succeeded
    run logged. None when it can be given, or when the URL asked for nothing (then the page
    answers "not ranked: …" with a 200: that is the answer about these runs)."""
    if not wanted.any:
        return None
    try:
        o.require()
    except UsageError:
        return 400
    except NotFoundError:
        return 404
    return None


def control(
    o: Objective,
    logged: Mapping[str, int],
    wanted: Asked,
    action: str,
    hidden: Mapping[str, str],
    warnings: tuple[str | None, ...] = (),
) -> dict[str, Any]:
    """What templates/objective.tpl shows: the objective in one line (or why nothing is
    ranked), its warnings, the keys a pick passed over, and the form (a metric from `logged`,
    the keys the succeeded runs logged, and a direction) that reloads `action`."""
    if o.ok:
        line = f"Ranked by the final {o.text()}"
    else:
        problem = o.problem or "nothing to rank by"
        line = problem if problem.startswith("not ranked") else f"not ranked: {problem}"
    metrics = [("", "the objective's (default)", wanted.metric is None)]
    metrics += [(k, k, k == wanted.metric) for k in logged]
    if wanted.metric is not None and wanted.metric not in logged:
        metrics.append((wanted.metric, f"{wanted.metric} (logged by no succeeded run)", True))
    orders = [("", "the objective's (default)", wanted.direction is None)]
    orders += [(w, f"{w}: {way_text(w)}", w == wanted.direction) for w in ("max", "min")]
    passed = ""
    if o.ok and o.metric_why == "picked" and o.passed_over:
        passed = "; ".join(f"{k}: {why}" for k, why in o.passed_over.items())
    return {
        "line": line,
        "ok": o.ok,
        "warnings": [w for w in (o.warning, *warnings) if w],
        "passed": passed,
        "action": action,
        "hidden": [(k, v) for k, v in hidden.items() if v],
        "metrics": metrics,
        "orders": orders,
    }

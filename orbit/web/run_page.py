"""The run detail page and what it fetches while the run is active; notes.

GET  /runs/<id>                 overview, log tail, charts, artifacts, diff, notes, sessions
                                (a run on another node: its output/ is listed through the node)
GET  /api/runs/<id>/log         ?offset=N&limit=BYTES (or ?before=N, ?line=N): a range of log.txt
                                (&render=1: as the page shows it, orbit.web.loglines.window)
GET  /api/runs/<id>/log/search  ?q=TEXT&from=LINE: the matching lines of the whole log
GET  /api/runs/<id>/metrics     down-sampled series as JSON (?points=N, at most 2000)
                                (the charts read /api/series?ids=<id>: web/compare.py)
POST /runs/<id>/notes           add a note (RunStore.add_note)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import bottle

from orbit.errors import NotFoundError
from orbit.human import human_seconds
from orbit.review.series import Metrics, read_metrics
from orbit.store.describe import describe
from orbit.store.model import CODE_DIFF, LOG, METRICS, OUTPUT, RunState
from orbit.web import loglines, logtext, remote, runfiles, session
from orbit.web.charts import fmt, fmt_size
from orbit.web.context import Route, current, header, load_run

LOG_TAIL = 64 << 10
PAGE_COUNT_S = 0.1  # time the page may spend counting a log's lines (the API: LOG_COUNT_S)
LOG_COUNT_S = 0.5
ERROR_TAIL_BYTES = 16 << 10  # read for the last lines of a failed run's log
ERROR_LINES = 10
NOTE_MAX = 64 << 10
LISTED = 200  # entries of output/ and session/ listed on the page
PARSE_BUDGET_S = 1.0  # a page waits this long for a metrics file; then a preview and a note


def metrics_deadline() -> float:
    """When a page's metrics must be read by (series.read_metrics `deadline`)."""
    return time.monotonic() + PARSE_BUDGET_S


def chart_keys(metrics: Metrics) -> list[tuple[str, str]]:
    """Each charted key and its summary, for the figures the page shows before its charts
    are drawn (static/charts.js)."""
    return [
        (
            key,
            f"last {fmt(s.last)} · min {fmt(s.min)} · max {fmt(s.max)} · {s.count} points"
            + (" (down-sampled)" if len(s.x) < s.count else ""),
        )
        for key, s in metrics.series.items()
    ]


def error_tail(log_path: Path) -> list[str]:
    """The last non-empty lines of the log (read from its last 16 KiB only)."""
    text = runfiles.read_log(log_path, -1, ERROR_TAIL_BYTES)["text"]
    return [line for line in text.splitlines() if line.strip()][-ERROR_LINES:]


def _summary(metrics: Metrics) -> dict[str, Any]:
    return {
        "x_label": metrics.x_label,
        "lines": metrics.lines,
        "keys": list(metrics.series),
        "dropped_keys": metrics.dropped_keys,
        "skipped_bytes": metrics.skipped_bytes,
        "note": metrics.note,
        "complete": metrics.complete,
    }


def _listing(run_dir: Path, folder: str) -> tuple[list[runfiles.Entry], int] | tuple[None, int]:
    try:
        with runfiles.opened(run_dir, folder, "") as (fd, _):
            entries, total = runfiles.list_dir(fd)
    except (runfiles.Refused, NotFoundError, OSError):
        return None, 0
    return entries[:LISTED], total


def _node_listing(node: remote.NodeView) -> tuple[list[runfiles.Entry], int] | tuple[None, int]:
    """The top of output/ as the node listed it; (None, 0) when it could not be read."""
    listing = remote.folder(node.files, "") if node.files is not None else None
    if listing is None:
        return None, 0
    entries, total = listing
    return entries[:LISTED], total


def run_page(run_id: str) -> str:
    ctx = current()
    run = load_run(ctx, run_id)
    metrics = read_metrics(run.path(METRICS), deadline=metrics_deadline())
    diff, diff_cut = runfiles.diff_lines(run.path(CODE_DIFF))
    node = remote.view(ctx.home, run)  # output/ of a run on another node stays there
    output, n_output = _listing(run.dir, OUTPUT) if node is None else _node_listing(node)
    session_entries, n_session = _listing(run.dir, "session")
    failed = run.state in (RunState.FAILED, RunState.LOST)
    info = describe(ctx.store, run)
    error_lines: list[str] = []
    if failed:  # the error excerpt when the log has one, else its last lines
        excerpt = info["error_excerpt"]
        error_lines = excerpt.split("\n") if excerpt else error_tail(run.path(LOG))
    return ctx.render(
        "run",
        title=f"run {run.label}",
        run=run,
        info=info,
        spec=run.spec,
        status=run.status,
        events=ctx.store.events(run.id),
        log=loglines.window(run.path(LOG), -1, LOG_TAIL, budget=PAGE_COUNT_S),
        error_lines=error_lines,
        chart_keys=chart_keys(metrics),
        error_html=logtext.block_html(error_lines),
        metrics=_summary(metrics),
        has_diff=run.path(CODE_DIFF).exists(),
        diff=diff,
        diff_cut=diff_cut,
        output=output,
        n_output=n_output,
        node=node,
        session=session_entries,
        n_session=n_session,
        transcripts=session.transcript_rows(run.dir),
        formats=session.formats(),
        fmt=fmt,
        fmt_size=fmt_size,
        human_seconds=human_seconds,
        q=quote,
    )


LOG_INTS = "offset, limit, before and line must be integers"


def _int_query(name: str, problem: str = LOG_INTS) -> int | None:
    """The query parameter `name` as an integer (None when it is missing or empty); a 400
    saying `problem` when it is no integer."""
    value = bottle.request.query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        bottle.abort(400, problem)
    raise AssertionError("unreachable")


def _log_answer(path: Path) -> dict[str, Any]:
    offset, limit = _int_query("offset"), _int_query("limit")
    before, line = _int_query("before"), _int_query("line")
    offset = -1 if offset is None else offset
    limit = LOG_TAIL if limit is None else limit
    if line is not None:
        found = loglines.around_line(path, line, limit, LOG_COUNT_S)
        if found is None:
            bottle.abort(404, f"the log has no line {line} (or it is not counted yet: retry)")
        return found or {}
    if bottle.request.query.get("render") == "1":
        return loglines.window(path, offset, limit, before=before, budget=LOG_COUNT_S)
    return runfiles.read_log(path, offset, limit, before=before)


def log_api(run_id: str) -> dict[str, Any]:
    run = load_run(current(), run_id)
    out = _log_answer(run.path(LOG))
    out["state"] = run.status.get("state")
    out["active"] = not run.state.finished
    return out


def log_search_api(run_id: str) -> dict[str, Any]:
    run = load_run(current(), run_id)
    query = (bottle.request.query.getunicode("q") or "").strip()
    if not query:
        bottle.abort(400, "q: what to search the log for")
    if len(query) > 1000:
        bottle.abort(400, "q is at most 1000 characters")
    start = _int_query("from", "from must be a line number")
    return loglines.search(run.path(LOG), query, max(1, start or 1))


def metrics_api(run_id: str) -> dict[str, Any]:
    run = load_run(current(), run_id)
    try:
        points = max(10, min(2000, int(bottle.request.query.get("points", "1000"))))
    except ValueError:
        bottle.abort(400, "points must be an integer")
    return read_metrics(run.path(METRICS), max_points=points, deadline=metrics_deadline()).to_json()


def add_note(run_id: str) -> Any:
    ctx = current()
    ctx.check_csrf()
    run = load_run(ctx, run_id)
    # Browsers send a textarea's newlines as CRLF: counted and kept as the "\n" typed.
    text = (bottle.request.forms.getunicode("text") or "").replace("\r\n", "\n").strip()
    if not text:
        bottle.abort(400, "a note needs some text")
    if len(text.encode()) > NOTE_MAX:
        bottle.abort(413, f"a note is at most {NOTE_MAX // 1024} KiB")
    note = ctx.store.add_note(run.id, text, ctx.actor)
    if "application/json" in (header("Accept") or ""):
        return note
    bottle.redirect(f"/runs/{run.id}#notes", 303)


ROUTES: list[Route] = [
    ("GET", "/runs/<run_id>", run_page),
    ("GET", "/api/runs/<run_id>/log", log_api),
    ("GET", "/api/runs/<run_id>/log/search", log_search_api),
    ("GET", "/api/runs/<run_id>/metrics", metrics_api),
    ("POST", "/runs/<run_id>/notes", add_note),
]

"""The run detail page, its log/metrics/files endpoints, notes, and the compare page.

Routes (all behind the login token; the POST also checks it in the form or header):

    GET  /runs/<id>                     overview, log tail, charts, artifacts, diff, notes
    GET  /api/runs/<id>/log             ?offset=N&limit=BYTES (or ?before=N): a range of log.txt
    GET  /api/runs/<id>/metrics         down-sampled series as JSON (?points=N, at most 2000)
    GET  /runs/<id>/charts              the charts as an HTML fragment (live refresh)
    GET  /runs/<id>/files/<path>        output/: folder listing or preview; ?raw=1 the bytes
    GET  /runs/<id>/session/<path>      session/, the same way
    GET  /runs/<id>/code.diff           the diff as text
    POST /runs/<id>/notes               add a note (RunStore.add_note)
    GET  /compare?ids=1,2,3             metrics overlaid, parameters and results side by side
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import bottle

from orbit.errors import CorruptError, NotFoundError
from orbit.human import human_bytes
from orbit.store.describe import describe, latest_metrics
from orbit.store.model import Run
from orbit.web import runfiles
from orbit.web.charts import COLORS, Line, fmt, svg_chart
from orbit.web.context import WebContext, header
from orbit.web.series import Metrics, read_metrics

RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
LOG_TAIL = 64 << 10
PAGE_CHARTS = 32  # charts on one page; the rest are named, and in /api/runs/<id>/metrics
COMPARE_MAX = 10
NOTE_MAX = 64 << 10
AREAS = {"files": "output", "session": "session"}


def load_run(ctx: WebContext, run_id: str) -> Run:
    if not RUN_ID.match(run_id):
        bottle.abort(404, f"no run {run_id!r}")
    try:
        return ctx.store.load(run_id)
    except NotFoundError as exc:
        bottle.abort(404, str(exc))
    except CorruptError as exc:
        bottle.abort(404, f"run {run_id} cannot be read: {exc}")
    raise AssertionError("unreachable")


def charts_html(metrics: Metrics, limit: int = PAGE_CHARTS) -> str:
    out = []
    for i, (key, s) in enumerate(metrics.series.items()):
        if i >= limit:
            break
        chart = svg_chart(key, [Line(key, s.x, s.y, COLORS[0])], metrics.x_label)
        out.append(
            f'<figure class="metric"><figcaption><b>{_e(key)}</b> '
            f"<small>last {_e(fmt(s.last))} · min {_e(fmt(s.min))} · max {_e(fmt(s.max))}"
            f" · {s.count} points{' (down-sampled)' if len(s.x) < s.count else ''}"
            f"</small></figcaption>{chart}</figure>"
        )
    return "".join(out)


def _e(text: str) -> str:
    from html import escape

    return escape(text)


def _summary(metrics: Metrics) -> dict[str, Any]:
    return {
        "x_label": metrics.x_label,
        "lines": metrics.lines,
        "keys": list(metrics.series),
        "dropped_keys": metrics.dropped_keys,
        "skipped_bytes": metrics.skipped_bytes,
    }


def register(app: bottle.Bottle, ctx: WebContext) -> None:
    @app.get("/runs/<run_id>")
    @ctx.require_auth
    def run_page(run_id: str) -> str:
        run = load_run(ctx, run_id)
        info = describe(ctx.store, run)
        log = runfiles.read_log(run.path("log.txt"), -1, LOG_TAIL)
        metrics = read_metrics(run.path("metrics.jsonl"))
        diff, diff_cut = runfiles.diff_lines(run.path("code.diff"))
        output, n_output = _listing(run.dir, "output")
        session, n_session = _listing(run.dir, "session")
        return ctx.render(
            "run",
            title=f"run {run.label}",
            run=run,
            info=info,
            spec=run.spec,
            status=run.status,
            events=ctx.store.events(run.id),
            log=log,
            charts=charts_html(metrics),
            metrics=_summary(metrics),
            page_charts=PAGE_CHARTS,
            has_diff=run.path("code.diff").exists(),
            diff=diff,
            diff_cut=diff_cut,
            output=output,
            n_output=n_output,
            session=session,
            n_session=n_session,
            fmt=fmt,
            fmt_size=fmt_size,
            q=quote,
        )

    @app.get("/api/runs/<run_id>/log")
    @ctx.require_auth
    def log_api(run_id: str) -> dict[str, Any]:
        run = load_run(ctx, run_id)
        q = bottle.request.query
        try:
            offset = int(q.get("offset", "-1"))
            limit = int(q.get("limit", str(LOG_TAIL)))
            before = int(q["before"]) if q.get("before") not in (None, "") else None
        except ValueError:
            bottle.abort(400, "offset, limit and before must be integers")
        out = runfiles.read_log(run.path("log.txt"), offset, limit, before=before)
        out["state"] = run.status.get("state")
        out["active"] = not run.state.finished
        return out

    @app.get("/api/runs/<run_id>/metrics")
    @ctx.require_auth
    def metrics_api(run_id: str) -> dict[str, Any]:
        run = load_run(ctx, run_id)
        try:
            points = max(10, min(2000, int(bottle.request.query.get("points", "1000"))))
        except ValueError:
            bottle.abort(400, "points must be an integer")
        return read_metrics(run.path("metrics.jsonl"), max_points=points).to_json()

    @app.get("/runs/<run_id>/charts")
    @ctx.require_auth
    def charts_fragment(run_id: str) -> str:
        run = load_run(ctx, run_id)
        return charts_html(read_metrics(run.path("metrics.jsonl")))

    def browse(run_id: str, area: str, path: str) -> Any:
        run = load_run(ctx, run_id)
        folder = AREAS[area]
        rel = path.strip("/")
        entries: list[Any] = []
        total, preview = 0, None
        # Opened first, checked after, read through the descriptor (runfiles.opened).
        try:
            with runfiles.opened(run.dir, folder, path) as (fd, st):
                if stat.S_ISREG(st.st_mode):
                    if bottle.request.query.get("raw"):
                        return _raw(fd, st.st_size, rel or folder)
                    with runfiles.read_file(fd) as fh:
                        preview = runfiles.preview(fh, rel)
                elif stat.S_ISDIR(st.st_mode):
                    entries, total = runfiles.list_dir(fd)
                else:
                    bottle.abort(404, f"{folder}/{rel} is not a regular file")
        except runfiles.Refused as exc:
            bottle.abort(403, str(exc))
        except NotFoundError as exc:
            bottle.abort(404, str(exc))
        return ctx.render(
            "run_files",
            title=f"run {run.label}: {folder}/{rel}",
            run=run,
            area=area,
            folder=folder,
            rel=rel,
            entries=entries,
            total=total,
            preview=preview,
            fmt_size=fmt_size,
            q=quote,
        )

    for area in AREAS:

        def route_root(run_id: str, area: str = area) -> Any:
            return browse(run_id, area, "")

        def route_path(run_id: str, path: str, area: str = area) -> Any:
            return browse(run_id, area, path)

        app.get(f"/runs/<run_id>/{area}")(ctx.require_auth(route_root))
        app.get(f"/runs/<run_id>/{area}/")(ctx.require_auth(route_root))
        app.get(f"/runs/<run_id>/{area}/<path:path>")(ctx.require_auth(route_path))

    @app.get("/runs/<run_id>/code.diff")
    @ctx.require_auth
    def code_diff(run_id: str) -> Any:
        run = load_run(ctx, run_id)
        try:
            fd = os.open(run.path("code.diff"), os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            bottle.abort(404, "this run has no code.diff")
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                bottle.abort(404, "this run has no code.diff")
            return _raw(fd, st.st_size, "code.diff")
        finally:
            os.close(fd)

    @app.post("/runs/<run_id>/notes")
    @ctx.require_auth
    def add_note(run_id: str) -> Any:
        ctx.check_csrf()
        run = load_run(ctx, run_id)
        text = (bottle.request.forms.getunicode("text") or "").strip()
        if not text:
            bottle.abort(400, "a note needs some text")
        if len(text.encode()) > NOTE_MAX:
            bottle.abort(400, f"a note is at most {NOTE_MAX // 1024} KiB")
        note = ctx.store.add_note(run.id, text, ctx.actor)
        if "application/json" in (header("Accept") or ""):
            return note
        bottle.redirect(f"/runs/{run.id}#notes", 303)

    @app.get("/compare")
    @ctx.require_auth
    def compare() -> str:
        raw = bottle.request.query.getunicode("ids", "") or ""
        ids = list(dict.fromkeys(i.strip() for i in raw.split(",") if i.strip()))
        if not ids:
            bottle.abort(400, "choose runs to compare: /compare?ids=1,2")
        if len(ids) > COMPARE_MAX:
            bottle.abort(400, f"compare at most {COMPARE_MAX} runs at once")
        runs = [load_run(ctx, i) for i in ids]
        return ctx.render("compare", title="compare " + ", ".join(ids), **compare_data(ctx, runs))


def _listing(run_dir: Path, folder: str) -> tuple[list[runfiles.Entry], int] | tuple[None, int]:
    try:
        with runfiles.opened(run_dir, folder, "") as (fd, _):
            entries, total = runfiles.list_dir(fd)
    except (runfiles.Refused, NotFoundError, OSError):
        return None, 0
    return entries[:200], total


def _raw(path_fd: int, size: int, name: str) -> Any:
    """The bytes of the regular file behind `path_fd` (at most `size` of them), with a
    sandboxing CSP that the site-wide headers leave in place."""
    ctype, download = runfiles.raw_type(name)
    fh = runfiles.read_file(path_fd)
    resp = bottle.response
    resp.set_header("Content-Type", ctype)
    resp.set_header("Content-Length", str(size))
    resp.set_header("Content-Security-Policy", "sandbox; default-src 'none'")
    if download:
        filename = quote(PurePosixPath(name).name)
        resp.set_header("Content-Disposition", f"attachment; filename*=UTF-8''{filename}")
    if bottle.request.method == "HEAD":
        fh.close()
        return b""
    if "wsgi.file_wrapper" in bottle.request.environ:
        # Bottle hands a file to the server's file_wrapper: waitress then sends it from its
        # event loop, at most Content-Length bytes. A worker thread that wrote the bytes itself
        # would wait for a client that stops reading, forever: eight such downloads of a file
        # over 16 MiB froze the server for everyone.
        return _NoShortRead(fh)
    return _chunks(fh, size)


class _NoShortRead:
    """A file for waitress's file_wrapper whose read() fails where the file ended too early.
    waitress sends min(size, Content-Length) bytes; if the file then shrinks (a run rewrote
    it), a plain read() returns b"" and waitress retries it without end, spinning a CPU. The
    error instead makes it close the connection (the client sees a cut download)."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh
        self.seek = fh.seek
        self.tell = fh.tell
        self.seekable = fh.seekable
        self.close = fh.close

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._fh.read(n)
        if not data and n != 0:
            raise OSError(errno.EIO, "the file became shorter while it was sent")
        return data


def _chunks(fh: Any, size: int) -> Iterator[bytes]:
    # Exactly `size` bytes (the Content-Length) even if the file grows meanwhile.
    with fh:
        left = size
        while left > 0:
            data = fh.read(min(left, 256 << 10))
            if not data:
                return
            left -= len(data)
            yield data


def fmt_size(n: int) -> str:
    return human_bytes(n, zero="0 B")


def compare_data(ctx: WebContext, runs: list[Run]) -> dict[str, Any]:
    infos = [describe(ctx.store, r, notes=False) for r in runs]
    # Fewer points per run as runs are added, so the page stays small with ten runs.
    points = max(150, 1500 // len(runs))
    metrics = [read_metrics(r.path("metrics.jsonl"), max_points=points) for r in runs]
    labels = [r.label for r in runs]
    keys: list[str] = []
    for m in metrics:
        keys.extend(k for k in m.series if k not in keys)
    charts = []
    for key in keys[:PAGE_CHARTS]:
        lines = [
            Line(labels[i], m.series[key].x, m.series[key].y, COLORS[i % len(COLORS)])
            for i, m in enumerate(metrics)
            if key in m.series
        ]
        x_label = next((m.x_label for m in metrics if key in m.series), "line")
        charts.append((key, svg_chart(key, lines, x_label)))

    def row(name: str, values: list[Any]) -> tuple[str, list[str], bool]:
        shown = ["" if v is None else fmt(v) if isinstance(v, float) else str(v) for v in values]
        return name, shown, len(set(shown)) > 1

    def union(field: str) -> list[str]:
        names: list[str] = []
        for info in infos:
            names.extend(k for k in (info.get(field) or {}) if k not in names)
        return names

    params = [row(k, [(i["params"] or {}).get(k) for i in infos]) for k in union("params")]
    tags = [row(k, [(i["tags"] or {}).get(k) for i in infos]) for k in union("tags")]
    resources = [row(k, [(i["resources"] or {}).get(k) for i in infos]) for k in union("resources")]
    resources.append(row("image", [i["image"] for i in infos]))
    resources.append(row("command", [" ".join(map(str, i["command"])) for i in infos]))
    results = [
        row("state", [i["state"] for i in infos]),
        row("reason", [i["reason"] for i in infos]),
        row("exit code", [i["exit_code"] for i in infos]),
        row("duration (s)", [i["duration_s"] for i in infos]),
        row("peak memory", [_peak_mem(i) for i in infos]),
        row("peak CPU cores", [(i["peaks"] or {}).get("cpu_cores") for i in infos]),
        row("CPU seconds", [(i["peaks"] or {}).get("cpu_seconds") for i in infos]),
    ]
    finals = [latest_metrics(r)[0] for r in runs]
    final_keys: list[str] = []
    for f in finals:
        final_keys.extend(k for k in f if k not in final_keys)
    final_rows = [row(k, [f.get(k) for f in finals]) for k in final_keys[:200]]
    return {
        "runs": runs,
        "labels": labels,
        "colors": [COLORS[i % len(COLORS)] for i in range(len(runs))],
        "charts": charts,
        "more_keys": max(0, len(keys) - PAGE_CHARTS),
        "sections": [
            ("Parameters", params),
            ("Tags", tags),
            ("Resources", resources),
            ("Results", results),
            ("Final metric values", final_rows),
        ],
    }


def _peak_mem(info: dict[str, Any]) -> str | None:
    b = (info.get("peaks") or {}).get("mem_bytes")
    return fmt_size(int(b)) if isinstance(b, int | float) else None

"""A run's files: output/ and session/ (folder listings, previews, raw bytes) and code.diff.

Every path is opened first and checked after, then read only through that descriptor
(orbit.web.runfiles.opened): a container that swaps a folder for a symlink meanwhile gets
nothing outside its folder served.

    GET /runs/<id>/files/<path>     output/: a folder listing or a preview; ?raw=1 the bytes
    GET /runs/<id>/session/<path>   session/, the same way
    GET /runs/<id>/code.diff        the diff as text

The output/ of a run on another node stays there: its listing and files are read through the
node (orbit.web.remote), after the path was checked here (no `..`, not absolute).
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

import bottle

from orbit.errors import NotFoundError, OrbitError
from orbit.nodes.client import MAX_READ
from orbit.store.model import CODE_DIFF, OUTPUT, Run
from orbit.web import remote, runfiles
from orbit.web.charts import fmt_size
from orbit.web.context import Route, WebContext, current, load_run

AREAS = {"files": OUTPUT, "session": "session"}


def browse(run_id: str, area: str, path: str = "") -> Any:
    """`/runs/<id>/<area><path>`: `path` is empty (the folder itself) or starts with "/"."""
    ctx = current()
    run = load_run(ctx, run_id)
    folder = AREAS[area]
    path = path[1:]  # the "/" after the area
    if area == "files" and run.status.get("node"):
        return node_browse(ctx, run, path)
    rel = path.strip("/")
    entries: list[Any] = []
    total, preview = 0, None
    try:
        with runfiles.opened(run.dir, folder, path) as (fd, st):
            if stat.S_ISREG(st.st_mode):
                if bottle.request.query.get("raw"):
                    return raw(fd, st.st_size, rel or folder)
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
        node=None,
        fmt_size=fmt_size,
        q=quote,
    )


def node_browse(ctx: WebContext, run: Run, path: str) -> Any:
    """output/ of a run on another node, read through the node. The path is checked before
    the node hears of it, and a file is read only once the node's listing has it."""
    try:
        rel = "/".join(runfiles.check_rel(path))
    except runfiles.Refused as exc:
        bottle.abort(403, str(exc))
    node = remote.view(ctx.home, run)
    assert node is not None  # the caller saw status.node
    if node.files is None:
        raise bottle.HTTPError(502 if node.error else 404, node.unreadable)
    entries: list[Any] = []
    total, preview = 0, None
    size = remote.find(node.files, rel)
    if size is not None:
        if bottle.request.query.get("raw"):
            return _node_raw(ctx, run, node, rel, size)
        preview = _node_preview(ctx, run, node, rel, size)
    else:
        listing = remote.folder(node.files, rel)
        if listing is None:
            raise bottle.HTTPError(404, f"no file output/{rel} on node {node.name}")
        entries, total = listing
    return ctx.render(
        "run_files",
        title=f"run {run.label}: output/{rel}",
        run=run,
        area="files",
        folder=OUTPUT,
        rel=rel,
        entries=entries,
        total=total,
        preview=preview,
        node=node,
        fmt_size=fmt_size,
        q=quote,
    )


def _fetch(ctx: WebContext, run: Run, node: remote.NodeView, rel: str) -> bytes:
    try:
        return remote.fetch(ctx.home, run, rel)
    except OrbitError as exc:
        text = f"output/{rel} is on node {node.name} and cannot be read now: {exc}"
        raise bottle.HTTPError(502, text) from None


def _node_preview(
    ctx: WebContext, run: Run, node: remote.NodeView, rel: str, size: int
) -> runfiles.Preview:
    if PurePosixPath(rel).suffix.lower() in runfiles.IMAGE_TYPES:
        return runfiles.Preview("image", size)  # the page shows it from ?raw=1
    if size > remote.PREVIEW_FETCH_MAX:
        return runfiles.Preview("large", size)
    data = _fetch(ctx, run, node, rel)
    return runfiles.preview(io.BytesIO(data), rel, len(data))


def _node_raw(ctx: WebContext, run: Run, node: remote.NodeView, rel: str, size: int) -> Any:
    if size > MAX_READ:
        bottle.abort(
            403, f"output/{rel} is larger than {MAX_READ >> 20} MiB: read it on node {node.name}"
        )
    data = _fetch(ctx, run, node, rel)
    raw_headers(len(data), rel)
    return b"" if bottle.request.method == "HEAD" else data


def code_diff(run_id: str) -> Any:
    run = load_run(current(), run_id)
    try:
        fd = os.open(run.path(CODE_DIFF), os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        bottle.abort(404, "this run has no code.diff")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            bottle.abort(404, "this run has no code.diff")
        return raw(fd, st.st_size, CODE_DIFF)
    finally:
        os.close(fd)


def raw(path_fd: int, size: int, name: str) -> Any:
    """The bytes of the regular file behind `path_fd` (at most `size` of them), with a
    sandboxing CSP that the site-wide headers leave in place."""
    fh = runfiles.read_file(path_fd)
    raw_headers(size, name)
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


def raw_headers(size: int, name: str) -> None:
    """The headers of a raw file: its type (text never as HTML), its length, a sandboxing CSP
    that the site-wide headers leave in place, and a download where the type asks for one."""
    ctype, download = runfiles.raw_type(name)
    resp = bottle.response
    resp.set_header("Content-Type", ctype)
    resp.set_header("Content-Length", str(size))
    resp.set_header("Content-Security-Policy", "sandbox; default-src 'none'")
    if download:
        filename = quote(PurePosixPath(name).name)
        resp.set_header("Content-Disposition", f"attachment; filename*=UTF-8''{filename}")


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


# `<area>` is files or session; `<path>` is "" or "/…" (so `files`, `files/` and `files/a/b`).
ROUTES: list[Route] = [
    ("GET", "/runs/<run_id>/<area:re:files|session><path:re:(?:/.*)?>", browse),
    ("GET", "/runs/<run_id>/code.diff", code_diff),
]

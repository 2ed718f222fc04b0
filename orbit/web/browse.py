"""A run's files: output/ and session/ (folder listings, previews, raw bytes) and code.diff.

Every path is opened first and checked after, then read only through that descriptor
(orbit.web.runfiles.opened): a container that swaps a folder for a symlink meanwhile gets
nothing outside its folder served.

    GET /runs/<id>/files/<path>     output/: a folder listing or a preview; ?raw=1 the bytes
    GET /runs/<id>/session/<path>   session/, the same way
    GET /runs/<id>/code.diff        the diff as text
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

import bottle

from orbit.errors import NotFoundError
from orbit.store.model import CODE_DIFF
from orbit.web import runfiles
from orbit.web.charts import fmt_size
from orbit.web.context import Route, current, load_run

AREAS = {"files": "output", "session": "session"}


def browse(run_id: str, area: str, path: str = "") -> Any:
    """`/runs/<id>/<area><path>`: `path` is empty (the folder itself) or starts with "/"."""
    ctx = current()
    run = load_run(ctx, run_id)
    folder = AREAS[area]
    path = path[1:]  # the "/" after the area
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
        fmt_size=fmt_size,
        q=quote,
    )


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


# `<area>` is files or session; `<path>` is "" or "/…" (so `files`, `files/` and `files/a/b`).
ROUTES: list[Route] = [
    ("GET", "/runs/<run_id>/<area:re:files|session><path:re:(?:/.*)?>", browse),
    ("GET", "/runs/<run_id>/code.diff", code_diff),
]

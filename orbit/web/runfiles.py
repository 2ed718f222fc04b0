"""The files of one run as the web view reads them: confined opens, byte ranges and previews.

A run's container writes its output/ while the server reads it, so a path that was checked may
be a symlink a moment later. Every path from a request is therefore opened first and checked
after, and then read only through that descriptor (`open_beneath`): with openat2's
RESOLVE_BENEATH where the kernel has it (symlinks that stay inside the folder work), else a walk
one component at a time with O_NOFOLLOW (every symlink is refused). Nothing here reads a whole
file of unknown size: logs are read by byte range, previews by a capped prefix.
"""

from __future__ import annotations

import csv
import io
import json
import mimetypes
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from orbit.errors import NotFoundError as NotFoundError
from orbit.review.conversation import line_kind
from orbit.store.beneath import Refused as Refused
from orbit.store.beneath import _openat2_state as _openat2_state
from orbit.store.beneath import check_rel as check_rel
from orbit.store.beneath import open_beneath as open_beneath
from orbit.store.beneath import opened as opened
from orbit.store.beneath import read_file as read_file
from orbit.store.beneath import reopen as reopen
from orbit.store.dirlist import Entry as Entry
from orbit.store.dirlist import scan_dir

LOG_LIMIT_MAX = 1 << 20  # one log request returns at most 1 MiB
PREVIEW_BYTES = 256 << 10
JSON_PRETTY_MAX = 4 << 20
CSV_ROWS = 200
CSV_BYTES = 1 << 20
CSV_COLUMNS = 100
LISTING_MAX = 2000
DIFF_BYTES = 512 << 10

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".ico": "image/x-icon",
    ".svg": "image/svg+xml",
}
TEXT_SUFFIXES = {
    ".txt", ".log", ".md", ".py", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".sh", ".jsonl",
    ".json", ".csv", ".tsv", ".diff", ".patch", ".html", ".xml", ".js", ".css", ".tex", ".rst",
}  # fmt: skip


# --- logs ---------------------------------------------------------------------------------
@dataclass
class LogRange:
    """Bytes of a log: data is [start, end) of a file of `size` bytes."""

    data: bytes
    start: int
    end: int
    size: int
    reset: bool


def log_range(path: Path, offset: int, limit: int, *, before: int | None = None) -> LogRange:
    """Up to `limit` bytes of the log from `offset` (a negative offset: the last `limit`
    bytes; `before`: the bytes that end there), cut at line boundaries where possible.

    When the file became shorter than `offset` (a shepherd cut back its unconfirmed tail)
    `reset` is set and the range is the end window again.
    """
    limit = max(1, min(int(limit), LOG_LIMIT_MAX))
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    reset = False
    if before is not None:
        end = max(0, min(int(before), size))
        start = max(0, end - limit)
    else:
        if offset > size:
            reset, offset = True, -1
        start = max(0, size - limit) if offset < 0 else offset
        end = min(size, start + limit)
    data = b""
    if end > start:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(end - start)
            end = start + len(data)
    if start > 0 and (before is not None or offset < 0):
        nl = data.find(b"\n")
        if 0 <= nl < len(data) - 1:
            data = data[nl + 1 :]
            start = end - len(data)
    if end < size and before is None:
        nl = data.rfind(b"\n")
        if nl >= 0:
            data = data[: nl + 1]
            end = start + len(data)
    return LogRange(data, start, end, size, reset)


def read_log(path: Path, offset: int, limit: int, *, before: int | None = None) -> dict[str, Any]:
    """The log_range as the log API's JSON: `text`, `start` (where it begins), `next_offset`
    (where the following request should start), `size`, `eof`, `reset`."""
    r = log_range(path, offset, limit, before=before)
    return {
        "start": r.start,
        "next_offset": r.end,
        "size": r.size,
        "eof": r.end >= r.size,
        "reset": r.reset,
        "text": r.data.decode("utf-8", errors="replace"),
    }


def read_head(path: Path, limit: int) -> tuple[str, bool]:
    """The first `limit` bytes as text and whether the file is longer."""
    try:
        with open(path, "rb") as fh:
            return _head(fh, limit)
    except OSError:
        return "", False


def diff_lines(path: Path) -> tuple[list[tuple[str, str]], bool]:
    """code.diff as (css class, line) pairs from its first DIFF_BYTES, and whether it is cut."""
    text, cut = read_head(path, DIFF_BYTES)
    return [(line_kind(line), line) for line in text.splitlines()], cut


# --- folders and previews -----------------------------------------------------------------
def list_dir(path_fd: int) -> tuple[list[Entry], int]:
    """The entries of the folder behind an O_PATH descriptor (folders first, by name), at most
    LISTING_MAX, and how many there are (counted up to SCAN_MAX). Links are not followed."""
    dir_fd = reopen(path_fd, os.O_RDONLY | os.O_DIRECTORY)
    try:  # scandir works on a copy: dir_fd stays ours to close
        return scan_dir(dir_fd, LISTING_MAX)
    finally:
        os.close(dir_fd)


@dataclass
class Preview:
    kind: str  # image, json, csv, text, binary, empty; large (on a node, not fetched)
    size: int
    text: str = ""
    truncated: bool = False
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""


def _head(fh: IO[bytes], limit: int) -> tuple[str, bool]:
    fh.seek(0)
    data = fh.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def preview(fh: IO[bytes], name: str, size: int | None = None) -> Preview:
    """A preview of an open regular file named `name` (read only through `fh`), of `size`
    bytes (default: the size of the file behind `fh`)."""
    if size is None:
        size = os.fstat(fh.fileno()).st_size
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in IMAGE_TYPES:
        return Preview("image", size)
    if size == 0:
        return Preview("empty", 0)
    head, cut = _head(fh, PREVIEW_BYTES)
    fh.seek(0)
    if b"\x00" in fh.read(8192):
        return Preview("binary", size)
    if suffix == ".json":
        if size <= JSON_PRETTY_MAX:
            fh.seek(0)
            try:
                pretty = json.dumps(
                    json.loads(fh.read(JSON_PRETTY_MAX)), indent=2, ensure_ascii=False
                )
            except ValueError as exc:
                return Preview("text", size, head, cut, note=f"not valid JSON: {exc}")
            except RecursionError:
                return Preview("text", size, head, cut, note="JSON nested too deeply to show")
            text = pretty[:PREVIEW_BYTES]
            return Preview("json", size, text, len(pretty) > len(text))
        return Preview("text", size, head, cut, note="too large to pretty-print")
    if suffix in (".csv", ".tsv"):
        return _csv_preview(fh, size, "\t" if suffix == ".tsv" else ",")
    return Preview("text", size, head, cut)


def _csv_preview(fh: IO[bytes], size: int, delimiter: str) -> Preview:
    # Parsed from a capped prefix: a CSV that is one 2 GB line must not be read whole.
    text, cut = _head(fh, CSV_BYTES)
    if cut and "\n" in text:
        text = text[: text.rindex("\n") + 1]
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter):
            if len(rows) > CSV_ROWS:  # the header and CSV_ROWS rows
                break
            rows.append([cell[:500] for cell in row[:CSV_COLUMNS]])
    except csv.Error as exc:
        head, cut = _head(fh, PREVIEW_BYTES)
        return Preview("text", size, head, cut, note=f"not valid CSV: {exc}")
    truncated = len(rows) > CSV_ROWS or cut
    return Preview("csv", size, rows=rows[: CSV_ROWS + 1], truncated=truncated)


def raw_type(name: str) -> tuple[str, bool]:
    """The content type a raw file is served with, and whether it must be a download.

    Only images keep their own type; text of any kind is served as text/plain (so an HTML or
    JavaScript file an experiment wrote can never run as this site's page or script); SVG
    renders in an <img> but downloads when opened directly.
    """
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in IMAGE_TYPES:
        return IMAGE_TYPES[suffix], suffix == ".svg"
    guessed, _ = mimetypes.guess_type(name)
    if suffix in TEXT_SUFFIXES or (guessed or "").startswith("text/"):
        return "text/plain; charset=utf-8", False
    return "application/octet-stream", True

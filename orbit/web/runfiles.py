"""The files of one run as the web view reads them: confined paths, byte ranges and previews.

Every path that comes from a request goes through `confined`: no `..`, no absolute path, and
after resolving symlinks it must still lie under the folder it was asked of. Nothing here reads
a whole file of unknown size: logs are read by byte range, previews by a capped prefix.
"""

from __future__ import annotations

import csv
import io
import json
import mimetypes
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from orbit.errors import NotFoundError, OrbitError

LOG_LIMIT_MAX = 1 << 20  # one log request returns at most 1 MiB
PREVIEW_BYTES = 256 << 10
JSON_PRETTY_MAX = 4 << 20
CSV_ROWS = 200
CSV_BYTES = 1 << 20
SCAN_MAX = 20000  # entries of one folder looked at; a listing says when there are more
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


class Refused(OrbitError):
    """A request path that leaves its folder (`..`, absolute, or a symlink out)."""


def confined(root: Path, rel: str) -> Path:
    """`root/rel` resolved, refused unless it stays under `root` (which must exist)."""
    if "\x00" in rel or "\\" in rel:
        raise Refused(f"refused path {rel!r}")
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or any(p == ".." for p in parts):
        raise Refused(f"refused path {rel!r}: it leaves the run directory")
    try:
        base = root.resolve(strict=True)
        target = (base / rel).resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise NotFoundError(f"no file {rel!r}") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise Refused(f"refused path {rel!r}: {exc}") from None
    if target != base and base not in target.parents:
        raise Refused(f"refused path {rel!r}: it points outside the run directory")
    return target


def area_root(run_dir: Path, area: str) -> Path:
    """The folder of a browsable area (output/ or session/), itself confined to the run."""
    return confined(run_dir, area)


# --- logs ---------------------------------------------------------------------------------
def read_log(path: Path, offset: int, limit: int, *, before: int | None = None) -> dict[str, Any]:
    """Up to `limit` bytes of the log from `offset` (a negative offset: the last `limit`
    bytes; `before`: the bytes that end there), cut at line boundaries where possible.

    `next_offset` is where the following request should start; `start` where this text
    begins. When the file became shorter than `offset` (a shepherd cut back its unconfirmed
    tail) the answer has `reset: true` and starts from the end window again.
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
    head_cut = start > 0 and (before is not None or offset < 0)
    if head_cut:
        nl = data.find(b"\n")
        if 0 <= nl < len(data) - 1:
            data = data[nl + 1 :]
            start = end - len(data)
    if end < size and before is None:
        nl = data.rfind(b"\n")
        if nl >= 0:
            data = data[: nl + 1]
            end = start + len(data)
    return {
        "start": start,
        "next_offset": end,
        "size": size,
        "eof": end >= size,
        "reset": reset,
        "text": data.decode("utf-8", errors="replace"),
    }


def read_head(path: Path, limit: int) -> tuple[str, bool]:
    """The first `limit` bytes as text and whether the file is longer."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        return "", False
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def diff_lines(path: Path) -> tuple[list[tuple[str, str]], bool]:
    """code.diff as (css class, line) pairs from its first DIFF_BYTES, and whether it is cut."""
    text, cut = read_head(path, DIFF_BYTES)
    out = []
    for line in text.splitlines():
        if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted file")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = ""
        out.append((kind, line))
    return out, cut


# --- folders and previews -----------------------------------------------------------------
@dataclass
class Entry:
    name: str
    is_dir: bool
    size: int
    link: bool


def list_dir(path: Path) -> tuple[list[Entry], int]:
    """The entries of a folder (folders first, by name), at most LISTING_MAX, and how many
    there are (counted up to SCAN_MAX)."""
    entries = []
    with os.scandir(path) as it:
        for n, e in enumerate(it):
            if n >= SCAN_MAX:
                break
            try:
                is_dir = e.is_dir()
                size = 0 if is_dir else e.stat().st_size
            except OSError:
                is_dir, size = False, 0  # a dangling link
            entries.append(Entry(e.name, is_dir, size, e.is_symlink()))
    entries.sort(key=lambda e: (not e.is_dir, e.name))
    return entries[:LISTING_MAX], len(entries)


@dataclass
class Preview:
    kind: str  # image, json, csv, text, binary, empty
    size: int
    text: str = ""
    truncated: bool = False
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""


def preview(path: Path) -> Preview:
    size = path.stat().st_size
    suffix = path.suffix.lower()
    if suffix in IMAGE_TYPES:
        return Preview("image", size)
    if size == 0:
        return Preview("empty", 0)
    head, cut = read_head(path, PREVIEW_BYTES)
    with open(path, "rb") as fh:
        if b"\x00" in fh.read(8192):
            return Preview("binary", size)
    if suffix == ".json":
        if size <= JSON_PRETTY_MAX:
            try:
                pretty = json.dumps(json.loads(path.read_bytes()), indent=2, ensure_ascii=False)
            except ValueError as exc:
                return Preview("text", size, head, cut, note=f"not valid JSON: {exc}")
            text = pretty[:PREVIEW_BYTES]
            return Preview("json", size, text, len(pretty) > len(text))
        return Preview("text", size, head, cut, note="too large to pretty-print")
    if suffix in (".csv", ".tsv"):
        return _csv_preview(path, size, "\t" if suffix == ".tsv" else ",")
    return Preview("text", size, head, cut)


def _csv_preview(path: Path, size: int, delimiter: str) -> Preview:
    # Parsed from a capped prefix: a CSV that is one 2 GB line must not be read whole.
    text, cut = read_head(path, CSV_BYTES)
    if cut and "\n" in text:
        text = text[: text.rindex("\n") + 1]
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter):
            if len(rows) > CSV_ROWS:  # the header and CSV_ROWS rows
                break
            rows.append([cell[:500] for cell in row[:CSV_COLUMNS]])
    except csv.Error as exc:
        head, cut = read_head(path, PREVIEW_BYTES)
        return Preview("text", size, head, cut, note=f"not valid CSV: {exc}")
    truncated = len(rows) > CSV_ROWS or cut
    return Preview("csv", size, rows=rows[: CSV_ROWS + 1], truncated=truncated)


def raw_type(path: Path) -> tuple[str, bool]:
    """The content type a raw file is served with, and whether it must be a download.

    Only images keep their own type; text of any kind is served as text/plain (so an HTML or
    JavaScript file an experiment wrote can never run as this site's page or script); SVG
    renders in an <img> but downloads when opened directly.
    """
    suffix = path.suffix.lower()
    if suffix in IMAGE_TYPES:
        return IMAGE_TYPES[suffix], suffix == ".svg"
    guessed, _ = mimetypes.guess_type(path.name)
    if suffix in TEXT_SUFFIXES or (guessed or "").startswith("text/"):
        return "text/plain; charset=utf-8", False
    return "application/octet-stream", True

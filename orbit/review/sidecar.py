"""metrics.summary.json: the summary of a run's metrics.jsonl up to a byte offset, kept by the
shepherd while the run goes (docs/run-directory.md#metricssummaryjson).

This module knows the file, not the parse: it reads a sidecar and says whether it still
describes the metrics file beside it (same format, offset within the file, the bytes at the
start and just before the offset unchanged), and writes one. series.py turns its `state` into
a parse and back.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

from orbit.store.files import atomic_write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

log = logging.getLogger(__name__)

SIDECAR = "metrics.summary.json"
FORMAT = 1
CHECK_BYTES = 64  # bytes compared at the file's start and before the offset
MAX_SIDECAR_BYTES = 64 << 20  # a bigger one is not ours (64 keys x 2,000 points is ~10 MB)
SUMMARY_READ = 64 << 10  # read_summary's first read: the header and 64 keys' summaries fit


def sidecar_path(metrics: Path) -> Path:
    return metrics.with_name(SIDECAR)


def read(metrics: Path, fh: IO[bytes], size: int) -> dict[str, Any] | None:
    """The sidecar of `metrics` (open as `fh`, `size` bytes now) when it describes a prefix of
    that file; None when it is missing, damaged, of another format, or stale (the file was
    truncated or replaced since: it is shorter than the offset, or its first bytes or those
    before the offset differ). Its `state` is checked by the caller."""
    path = sidecar_path(metrics)
    try:
        with open(path, "rb") as sfh:
            raw = sfh.read(MAX_SIDECAR_BYTES + 1)
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    if len(raw) > MAX_SIDECAR_BYTES or not isinstance(data, dict):
        return None
    return data if _describes(data, fh, size) else None


def read_summary(metrics: Path, fh: IO[bytes], size: int) -> dict[str, Any] | None:
    """Like `read`, but only the members up to `summary` (`format`, `offset`, `head`, `tail`,
    `summary`): the pyramids after them, most of the file, are neither read nor parsed when
    `write` put `summary` first (a sidecar written before that is read whole)."""
    path = sidecar_path(metrics)
    try:
        with open(path, "rb") as sfh:
            raw = sfh.read(SUMMARY_READ)
            data = _leading(raw, "summary")
            if data is None and len(raw) == SUMMARY_READ:
                raw += sfh.read(MAX_SIDECAR_BYTES + 1 - SUMMARY_READ)
                data = _leading(raw, "summary")
    except (OSError, ValueError, RecursionError):
        return None
    if data is None or len(raw) > MAX_SIDECAR_BYTES:
        return None
    return data if _describes(data, fh, size) else None


def _leading(raw: bytes, last: str) -> dict[str, Any] | None:
    """The members of the JSON object `raw` begins with, up to and including `last`; None
    when `raw` ends first (or is no object)."""
    text = raw.decode("utf-8", "replace")
    decode = json.JSONDecoder().raw_decode
    out: dict[str, Any] = {}
    at = _skip(text, 0)
    if text[at : at + 1] != "{":
        return None
    at += 1
    while True:
        try:
            key, at = decode(text, _skip(text, at))
            at = _skip(text, at)
            if text[at : at + 1] != ":":
                return None
            value, at = decode(text, _skip(text, at + 1))
        except ValueError:
            return None
        out[key] = value
        at = _skip(text, at)
        if key == last:
            return out
        if text[at : at + 1] != ",":
            return None
        at += 1


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _describes(data: dict[str, Any], fh: IO[bytes], size: int) -> bool:
    """Whether the sidecar `data` still describes the metrics file open as `fh`."""
    offset = data.get("offset")
    if data.get("format") != FORMAT or type(offset) is not int or not 0 < offset <= size:
        return False
    try:
        head = base64.b64decode(data.get("head", ""), validate=True)
        tail = base64.b64decode(data.get("tail", ""), validate=True)
    except (ValueError, TypeError):
        return False
    if len(head) != min(CHECK_BYTES, offset) or len(tail) != min(CHECK_BYTES, offset):
        return False
    fh.seek(0)
    if fh.read(len(head)) != head:
        return False
    fh.seek(offset - len(tail))
    return fh.read(len(tail)) == tail


def write(metrics: Path, offset: int, head: bytes, tail: bytes, state: dict[str, Any]) -> None:
    """Replace the sidecar (atomically, not fsynced: it can always be rebuilt from the file).
    Raises OSError."""
    data = {
        "format": FORMAT,
        "offset": offset,
        "head": base64.b64encode(head[:CHECK_BYTES]).decode(),
        "tail": base64.b64encode(tail[-CHECK_BYTES:]).decode(),
        "summary": state.get("summary"),  # first of the state: read_summary stops after it
        **state,
    }
    text = json.dumps(data, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    atomic_write(sidecar_path(metrics), text.encode(), durable=False)

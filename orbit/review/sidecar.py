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
    offset = data.get("offset")
    if data.get("format") != FORMAT or type(offset) is not int or not 0 < offset <= size:
        return None
    try:
        head = base64.b64decode(data.get("head", ""), validate=True)
        tail = base64.b64decode(data.get("tail", ""), validate=True)
    except (ValueError, TypeError):
        return None
    if len(head) != min(CHECK_BYTES, offset) or len(tail) != min(CHECK_BYTES, offset):
        return None
    fh.seek(0)
    if fh.read(len(head)) != head:
        return None
    fh.seek(offset - len(tail))
    if fh.read(len(tail)) != tail:
        return None
    return data


def write(metrics: Path, offset: int, head: bytes, tail: bytes, state: dict[str, Any]) -> None:
    """Replace the sidecar (atomically, not fsynced: it can always be rebuilt from the file).
    Raises OSError."""
    data = {
        "format": FORMAT,
        "offset": offset,
        "head": base64.b64encode(head[:CHECK_BYTES]).decode(),
        "tail": base64.b64encode(tail[-CHECK_BYTES:]).decode(),
        **state,
    }
    text = json.dumps(data, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    atomic_write(sidecar_path(metrics), text.encode(), durable=False)

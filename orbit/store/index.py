"""index.jsonl: a listing cache so `ps -a` never opens 10,000 run directories.

One JSON line per change of a run (last line per id wins; `"removed": true` is a tombstone).
Each row remembers the stamp (mtime, size, inode) of the status.yaml it was made from; a row
whose file changed since (a crash between the two writes, a hand edit) is ignored and the run
read from disk.
The index is never the truth: deleting it loses nothing.
A row written by an older Orbit, which lacks a key of today's rows (`ROW_KEYS`), is ignored
the same way, so a new field reaches every row on the next listing, each run read once.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from orbit.store.excerpt import key_line
from orbit.store.files import append_jsonl, atomic_write
from orbit.store.lognote import log_note
from orbit.store.model import STATUS_YAML, Run, folder_of, stamp_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Keys added to the row after its first version: a row without one is from an older Orbit.
ROW_KEYS = ("params", "error_line", "log_note")


def row_for(run: Run, stamp: list[int] | None) -> dict[str, Any]:
    spec, status = run.spec, run.status
    resources = spec.get("resources") or {}
    return {
        "id": run.id,
        "name": spec.get("name"),
        "group": spec.get("group"),
        "folder": folder_of(spec, status),  # `orbit mv` changes it in status.yaml
        "tags": spec.get("tags") or {},
        "params": spec.get("params") or {},
        "image": spec.get("image"),
        "command": spec.get("command") or [],
        "cpus": resources.get("cpus"),
        "mem_gb": resources.get("mem_gb"),
        "gpus": resources.get("gpus") or 0,
        "state": status.get("state"),
        "reason": status.get("reason"),
        "exit_code": status.get("exit_code"),
        "error_line": key_line(status.get("error_excerpt")),
        "log_note": log_note(status),
        "submitted_at": status.get("submitted_at"),
        "started_at": status.get("started_at"),
        "finished_at": status.get("finished_at"),
        "st": stamp,
    }


def append(path: Path, row: dict[str, Any]) -> None:
    append_jsonl(path, row)


def read(path: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """The latest row per run id, and the number of lines read (for compaction)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, 0
    rows: dict[str, dict[str, Any]] = {}
    return rows, _apply(raw, rows)


def apply_lines(raw: bytes) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The latest row per run id among the lines of `raw` (a part of the index), and the id
    of every line, a removed run's included."""
    rows: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    _apply(raw, rows, seen)
    return rows, seen


def _apply(raw: bytes, rows: dict[str, dict[str, Any]], seen: set[str] | None = None) -> int:
    """Apply the lines of `raw` to `rows` (last line per id wins); the number of lines.
    `seen`, when given, gets the id of every line (a tombstone's too)."""
    lines = raw.splitlines()
    try:
        parsed = json.loads(b"[" + b",".join(line for line in lines if line.strip()) + b"]")
    except ValueError:
        parsed = []  # a torn line somewhere: fall back to line by line
        for line in lines:
            try:
                parsed.append(json.loads(line))
            except ValueError:
                continue
    for row in parsed:
        if not isinstance(row, dict) or "id" not in row:
            continue
        if seen is not None:
            seen.add(str(row["id"]))
        if row.get("removed"):
            rows.pop(row["id"], None)
        elif all(key in row for key in ROW_KEYS):
            rows[row["id"]] = row
        else:  # an older Orbit's row: the run is read from disk and a current row appended
            rows.pop(row["id"], None)
    return len(lines)


class IndexCache:
    """`read` for a long-lived process (the web server): keeps the parsed rows and the byte
    offset read so far, and on each call parses only the bytes appended since.

    index.jsonl is append-only between compactions, and a compaction replaces the file
    atomically (a new inode), so the cache is keyed on (device, inode); a file that shrank or
    whose bytes just before the offset changed (an inode number reused) is read again whole.
    Only whole lines are consumed: a torn last line (an append in progress) is applied to the
    answer but read again next time. Thread-safe; the rows returned are the caller's.
    """

    _CHECK = 64  # bytes before the offset compared on each call

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, key: tuple[int, int] | None) -> None:
        self._key = key
        self._offset = 0
        self._tail = b""  # the last bytes consumed, up to _CHECK of them
        self._rows: dict[str, dict[str, Any]] = {}
        self._lines = 0

    def read(self, path: Path) -> tuple[dict[str, dict[str, Any]], int]:
        with self._lock:
            try:
                fh = open(path, "rb")  # noqa: SIM115 - closed by the with-block below
            except FileNotFoundError:
                self._reset(None)
                return {}, 0
            with fh:
                st = os.fstat(fh.fileno())
                key = (st.st_dev, st.st_ino)
                if key != self._key or st.st_size < self._offset or not self._tail_matches(fh):
                    self._reset(key)
                fh.seek(self._offset)
                new = fh.read(max(0, st.st_size - self._offset))
            cut = new.rfind(b"\n") + 1
            if cut:
                self._lines += _apply(new[:cut], self._rows)
                self._offset += cut
                self._tail = (self._tail + new[:cut])[-self._CHECK :]
            rows = dict(self._rows)
            lines = self._lines
            torn = new[cut:]
        if torn.strip():
            lines += _apply(torn, rows)  # a last line without its newline (yet)
        return rows, lines

    def _tail_matches(self, fh: Any) -> bool:
        if not self._tail:
            return True
        fh.seek(self._offset - len(self._tail))
        return bool(fh.read(len(self._tail)) == self._tail)


def rewrite(path: Path, rows: dict[str, dict[str, Any]]) -> None:
    """Replace the index with one line per run (compaction); atomic."""
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows.values())
    atomic_write(path, data.encode(), durable=False)


def status_stamp(run_dir: Path) -> list[int] | None:
    """What identifies one version of status.yaml: every atomic rewrite changes the inode."""
    try:
        st = os.stat(run_dir / STATUS_YAML)
    except OSError:
        return None
    return stamp_of(st)

"""index.jsonl: a listing cache so `ps -a` never opens 10,000 run directories.

One JSON line per change of a run (last line per id wins; `"removed": true` is a tombstone).
Each row remembers the stamp (mtime, size, inode) of the status.yaml it was made from; a row
whose file changed since (a crash between the two writes, a hand edit) is ignored and the run
read from disk.
The index is never the truth: deleting it loses nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from orbit.store.files import append_jsonl, atomic_write
from orbit.store.folders import of_status
from orbit.store.model import Run

# Fields of a row, so readers know what they can rely on (docs/run-directory.md).
ROW_KEYS = (
    "id",
    "name",
    "group",
    "folder",
    "tags",
    "image",
    "command",
    "cpus",
    "mem_gb",
    "gpus",
    "state",
    "reason",
    "exit_code",
    "submitted_at",
    "started_at",
    "finished_at",
)


def row_for(run: Run, stamp: list[int] | None) -> dict[str, Any]:
    spec, status = run.spec, run.status
    resources = spec.get("resources") or {}
    return {
        "id": run.id,
        "name": spec.get("name"),
        "group": spec.get("group"),
        "folder": of_status(spec, status),  # `orbit mv` changes it in status.yaml
        "tags": spec.get("tags") or {},
        "image": spec.get("image"),
        "command": spec.get("command") or [],
        "cpus": resources.get("cpus"),
        "mem_gb": resources.get("mem_gb"),
        "gpus": resources.get("gpus") or 0,
        "state": status.get("state"),
        "reason": status.get("reason"),
        "exit_code": status.get("exit_code"),
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
    lines = raw.splitlines()
    rows: dict[str, dict[str, Any]] = {}
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
        if row.get("removed"):
            rows.pop(row["id"], None)
        else:
            rows[row["id"]] = row
    return rows, len(lines)


def rewrite(path: Path, rows: dict[str, dict[str, Any]]) -> None:
    """Replace the index with one line per run (compaction); atomic."""
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows.values())
    atomic_write(path, data.encode(), durable=False)


def status_stamp(run_dir: Path) -> list[int] | None:
    """What identifies one version of status.yaml: every atomic rewrite changes the inode."""
    try:
        st = os.stat(run_dir / "status.yaml")
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]

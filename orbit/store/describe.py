"""What `orbit show`, `orbit run --json` and the web view say about one run."""

from __future__ import annotations

import json
import os
from typing import Any

from orbit.errors import CorruptError
from orbit.store.dirlist import scan_dir
from orbit.store.excerpt import run_excerpt
from orbit.store.files import open_regular
from orbit.store.folders import of_run
from orbit.store.model import METRICS, OUTPUT, Run, parse_iso
from orbit.store.notes import group_notes
from orbit.store.runs import RunStore

METRICS_TAIL_BYTES = 64 * 1024
OUTPUT_LISTED = 100  # entries of output/ in `orbit show --json`


def latest_metrics(run: Run) -> tuple[dict[str, Any], int | None]:
    """The last value of each key in metrics.jsonl (read from the file's tail) and the
    number of lines when the file is small enough to count cheaply."""
    path = run.path(METRICS)
    try:
        with open_regular(path) as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - METRICS_TAIL_BYTES))
            tail = fh.read()
    except (OSError, CorruptError):
        return {}, 0
    lines = tail.splitlines()
    if size > METRICS_TAIL_BYTES and lines:
        lines = lines[1:]  # the first one is probably cut
    latest: dict[str, Any] = {}
    for obj in _parse_lines(lines):
        if isinstance(obj, dict):
            latest.update(obj)
    count = len(lines) if size <= METRICS_TAIL_BYTES else None
    return latest, count


def _parse_lines(lines: list[bytes]) -> list[Any]:
    """The JSON values of `lines`, skipping those that do not parse: one parse of them all as
    an array (a third of the time of a parse per line), line by line when that fails or
    finds another number of values than lines (a line with a comma between two values)."""
    kept = [line for line in lines if line.strip()]
    try:
        values = json.loads(b"[" + b",".join(kept) + b"]")
        if len(values) == len(kept):
            return list(values)
    except ValueError:
        pass
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def duration_s(status: dict[str, Any]) -> float | None:
    start = parse_iso(status.get("started_at"))
    end = parse_iso(status.get("finished_at"))
    if start is None:
        return None
    if end is None:
        from datetime import UTC, datetime

        end = datetime.now(UTC)
    return round((end - start).total_seconds(), 3)


def output_files(run: Run) -> dict[str, Any]:
    """The top level of the run's output/: up to OUTPUT_LISTED entries (folders first, by
    name; links not followed) and how many there are (counted up to dirlist.SCAN_MAX)."""
    try:
        entries, count = scan_dir(run.path(OUTPUT), OUTPUT_LISTED)
    except OSError:  # no output/ (yet), or not readable
        return {"files": [], "count": 0}
    files = [
        {"name": e.name, "type": e.kind, "size": e.size if e.kind == "file" else None}
        for e in entries
    ]
    return {"files": files, "count": count}


def describe(
    store: RunStore,
    run: Run,
    *,
    notes: bool = True,
    metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`metrics`: more keys for the `metrics` entry (the summaries of orbit/review/metrics.py,
    which this layer cannot import: `orbit show --json` and `orbit run --json` pass them)."""
    spec, status = run.spec, run.status
    latest, count = latest_metrics(run)
    out: dict[str, Any] = {
        "id": run.id,
        "name": spec.get("name"),
        "group": spec.get("group"),
        "folder": of_run(run),  # `orbit mv` changes it in status.yaml
        "tags": spec.get("tags") or {},
        "params": spec.get("params") or {},
        "state": status.get("state"),
        "reason": status.get("reason"),
        "exit_code": status.get("exit_code"),
        "error_excerpt": run_excerpt(run),
        "oom_killed": bool(status.get("oom_killed")),
        "image": spec.get("image"),
        "command": spec.get("command") or [],
        "resources": spec.get("resources") or {},
        "lease": status.get("lease"),
        "peaks": status.get("peaks") or {},
        "timeout_min": spec.get("timeout_min"),
        "project": spec.get("project") or {},
        "datasets": spec.get("datasets") or [],  # [{name, path, target, rw}] (`-d`)
        "submitted_at": status.get("submitted_at"),
        "started_at": status.get("started_at"),
        "finished_at": status.get("finished_at"),
        "duration_s": duration_s(status),
        "container": status.get("container"),
        "metrics": {"latest": latest, "lines": count, **(metrics or {})},
        "output": output_files(run),
        "dir": str(run.dir),
    }
    if notes:
        out["notes"] = store.notes(run.id)
        out["group_notes"] = group_notes(store.home, run.group)  # stored once for the group
    return out

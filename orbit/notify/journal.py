"""The delivery log, notify/log.jsonl: one line per attempt, for `orbit notify log`.

    {"time", "profile", "key", "title", "outcome": sent|retrying|given up|failed, "attempt",
     "detail": the endpoint's answer (masked: never a URL or a secret)}

A queue file set aside as damaged (queue.set_aside) is a line too: outcome "given up
(damaged)", the file's name as its title, why and where it is kept as its detail; so is a
damaged outbox event that cannot be rebuilt (fanout.py), under the profile "outbox".

Whole lines are appended; past MAX_LINES the file is cut to its last KEEP_LINES by an atomic
replace (only the sender does that, under its lock), so it stays small forever.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orbit.store.files import append_jsonl, atomic_write, read_jsonl
from orbit.store.home import Home
from orbit.store.model import now_iso
from orbit.store.outbox import notify_dir

MAX_LINES = 2000
KEEP_LINES = 1000


def path_of(home: Home) -> Path:
    return notify_dir(home) / "log.jsonl"


def note(
    home: Home, profile: str, key: str, title: str, outcome: str, attempt: int, detail: str
) -> None:
    path = path_of(home)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = {
        "time": now_iso(),
        "profile": profile,
        "key": key,
        "title": title,
        "outcome": outcome,
        "attempt": attempt,
        "detail": detail,
    }
    append_jsonl(path, line)


def bound(home: Home) -> None:
    """Cut the log to its last KEEP_LINES once it has more than MAX_LINES (sender only)."""
    path = path_of(home)
    try:
        size = path.stat().st_size
    except OSError:
        return
    if size < MAX_LINES * 100:  # too short to hold MAX_LINES: no need to count
        return
    lines = path.read_bytes().splitlines(keepends=True)
    if len(lines) > MAX_LINES:
        atomic_write(path, b"".join(lines[-KEEP_LINES:]))


def recent(home: Home, profile: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
    try:
        rows = read_jsonl(path_of(home))
    except (OSError, ValueError):
        return []
    if profile:
        rows = [r for r in rows if r.get("profile") == profile]
    return rows[-limit:]


def last_by_profile(home: Home) -> dict[str, dict[str, Any]]:
    """Each profile's newest line of the log (its last delivery attempt), by profile name."""
    return {str(row.get("profile")): row for row in recent(home, limit=MAX_LINES)}

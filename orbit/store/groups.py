"""What Orbit keeps of a group besides its runs: its objective and its launches.

ORBIT_HOME/groups/<safe name>/ (the folder of notes.jsonl, store/notes.py) holds:

    group.yaml      format: 1, group, objective: {metric, direction, set_at, set_by} (or
                    absent); replaced atomically under the group's lock
    launches.jsonl  one line per `orbit sweep` or `orbit run -g` of the group, appended whole
                    once its batch is recorded (store/batches.py), before its runs are
                    written; its time is the batch's created_at: {time, by, kind, count,
                    argv (the run options as a command line), params (key → values),
                    command (the template), project, max_running, request (image,
                    dockerfile, resources, timeout_min, network: what the options came to),
                    group}; what `orbit sweep --like GROUP` repeats
    interrupted.jsonl  one line per batch of the group whose writer was killed before its
                    runs appeared, written by the tick that cleared it (store/creation.py
                    `recover`): {time, count, ids, created_at (when the batch began)}

The folder name is the group name with anything but letters, digits, `.`, `_` and `-`
replaced, plus a short hash of the exact name, so two names that differ only in such
characters never share a folder.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbit.errors import CorruptError, UsageError
from orbit.store.files import append_jsonl, read_jsonl, read_yaml, write_yaml
from orbit.store.home import Home
from orbit.store.locks import locked
from orbit.store.model import now_iso

GROUPS_DIR = "groups"
GROUP_FILE = "group.yaml"
LAUNCHES = "launches.jsonl"
INTERRUPTED = "interrupted.jsonl"
FORMAT = 1
DIRECTIONS = ("max", "min")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def group_dir(home: Home, group: str) -> Path:
    safe = _UNSAFE.sub("_", group).strip("._")[:80] or "group"
    digest = hashlib.sha256(group.encode()).hexdigest()[:8]
    return home.root / GROUPS_DIR / f"{safe}-{digest}"


@dataclass(frozen=True)
class Declared:
    """A group's declared objective: the metric it is judged by and which way is better."""

    metric: str
    direction: str  # max or min
    set_at: str | None = None
    set_by: str | None = None

    @property
    def maximize(self) -> bool:
        return self.direction == "max"

    @property
    def text(self) -> str:
        return f"{self.metric}:{self.direction}"

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "direction": self.direction,
            "set_at": self.set_at,
            "set_by": self.set_by,
        }


def parse_objective(text: str, what: str = "--objective") -> tuple[str, str | None]:
    """`test_acc:max`, `loss:min` or a bare `loss`: the metric and the direction given (None
    when only the name is)."""
    name, sep, way = text.strip().rpartition(":")
    if not sep:
        name, way = text.strip(), ""
    name = name.strip()
    if not name or way not in ("", *DIRECTIONS) or any(c.isspace() for c in name):
        raise UsageError(f"{what} {text!r}: give METRIC, METRIC:max or METRIC:min")
    return name, way or None


def _read(home: Home, group: str) -> dict[str, Any]:
    path = group_dir(home, group) / GROUP_FILE
    if not path.exists():
        return {}
    data = read_yaml(path)
    if data.get("format") != FORMAT:
        raise CorruptError(f"{path}: unknown format {data.get('format')!r} (expected {FORMAT})")
    return data


def objective(home: Home, group: str | None) -> Declared | None:
    """The group's declared objective; None for no group or none declared. A damaged
    group.yaml raises CorruptError naming the file."""
    if not group:
        return None
    raw = _read(home, group).get("objective")
    if raw is None:
        return None
    path = group_dir(home, group) / GROUP_FILE
    if not isinstance(raw, dict):
        raise CorruptError(f"{path}: objective is not a mapping")
    metric, direction = raw.get("metric"), raw.get("direction")
    if not isinstance(metric, str) or not metric or direction not in DIRECTIONS:
        raise CorruptError(f"{path}: objective needs a metric and a direction (max or min)")
    set_at, set_by = raw.get("set_at"), raw.get("set_by")
    return Declared(
        metric,
        str(direction),
        set_at if isinstance(set_at, str) else None,
        set_by if isinstance(set_by, str) else None,
    )


def set_objective(
    home: Home, group: str, metric: str | None, direction: str | None, actor: str
) -> Declared | None:
    """Declare (or with `metric` None, clear) the group's objective; the one now in force."""
    if metric is not None and direction not in DIRECTIONS:
        raise UsageError(f"the objective's direction is max or min, not {direction!r}")
    folder = group_dir(home, group)
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / ".lock"):
        try:
            data = _read(home, group)
        except CorruptError:
            data = {}  # replaced whole: declaring again is how a damaged file is repaired
        data = {"format": FORMAT, "group": group, **data}
        declared = None
        if metric is None:
            data.pop("objective", None)
        else:
            declared = Declared(metric, str(direction), now_iso(), actor)
            data["objective"] = declared.to_json()
        write_yaml(folder / GROUP_FILE, data)
    return declared


def record_launch(
    home: Home, group: str, launch: dict[str, Any], at: str | None = None
) -> dict[str, Any]:
    """Append one launch (what was asked for), at `at`: the time of its batch, whose record
    exists by then (so a launch line always has a batch, written, being written or noted in
    interrupted.jsonl, and a launch killed before its batch leaves no line)."""
    folder = group_dir(home, group)
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"time": at or now_iso(), **launch, "group": group}
    append_jsonl(folder / LAUNCHES, entry)
    return entry


def launches(home: Home, group: str | None) -> list[dict[str, Any]]:
    """The group's launches, oldest first (lines that do not parse are skipped)."""
    if not group:
        return []
    out = read_jsonl(group_dir(home, group) / LAUNCHES)
    return [x for x in out if isinstance(x, dict) and x.get("group", group) == group]


def record_interrupted(home: Home, group: str, ids: list[str], created_at: str) -> None:
    """Note that a batch of the group was killed before its runs appeared (and was cleared)."""
    folder = group_dir(home, group)
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"time": now_iso(), "count": len(ids), "ids": ids, "created_at": created_at}
    append_jsonl(folder / INTERRUPTED, entry)


def interrupted(home: Home, group: str | None) -> list[dict[str, Any]]:
    """The group's interrupted batches that no later launch of the group (`orbit sweep`,
    `orbit run -g`: launches.jsonl) has followed; each {time, count, ids, created_at}. A
    batch's own launch line has its created_at as time, so it does not hide it."""
    if not group:
        return []
    found = [
        x
        for x in read_jsonl(group_dir(home, group) / INTERRUPTED)
        if isinstance(x, dict) and isinstance(x.get("count"), int)
    ]
    if not found:
        return []
    times = [str(x.get("time") or "") for x in launches(home, group)]
    last = max(times, default="")
    return [x for x in found if str(x.get("created_at") or "") >= last]


def interrupted_text(group: str, gone: list[dict[str, Any]]) -> str:
    """`group sw: a launch of 200 runs was killed before they were written; …` (one line)."""
    n = sum(int(x["count"]) for x in gone)
    runs = f"{n} run{'' if n == 1 else 's'}"
    what = f"a launch of {runs} was" if len(gone) == 1 else f"{len(gone)} launches ({runs}) were"
    return (
        f"group {group}: {what} killed before its runs were written, so the group lacks them; "
        f"launch again (`orbit sweep --like {shlex.quote(group)}` repeats its last sweep)"
    )


def command_line(launch: Mapping[str, Any], group: str) -> str:
    """The whole command that repeats `launch` (for a reader, and for `--like`'s record)."""
    kind = "sweep" if launch.get("kind") == "sweep" else "run"
    words = ["orbit", kind, *[str(a) for a in launch.get("argv") or []], "-g", group]
    if launch.get("max_running"):
        words += ["--max-running", str(launch["max_running"])]
    for key, values in (launch.get("params") or {}).items():
        words += ["-p", f"{key}={','.join(str(v) for v in values)}"]
    words += ["--", *[str(c) for c in launch.get("command") or []]]
    return shlex.join(words)


def like_command(launch: Mapping[str, Any], group: str) -> str:
    """`orbit sweep --like GROUP -p KEY=…`: the short form that extends the sweep."""
    keys = list(launch.get("params") or {})
    example = f" -p {keys[0]}=…" if keys else " -p KEY=V1,V2"
    return f"orbit sweep --like {shlex.quote(group)}{example}"


def go_on(home: Home, group: str) -> dict[str, Any] | None:
    """How to go on from the group's newest launch: what it asked for, the command that
    repeats it and the short one that extends it; None when no launch was recorded."""
    found = launches(home, group)
    if not found:
        return None
    last = found[-1]
    sweep = last.get("kind") == "sweep"
    return {
        "time": last.get("time"),
        "kind": last.get("kind"),
        "count": last.get("count"),
        "launches": len(found),
        "request": last.get("request") or {},
        "command": last.get("command") or [],
        "params": last.get("params") or {},
        "project": last.get("project"),
        "command_line": command_line(last, group),
        "like": like_command(last, group) if sweep else None,
    }

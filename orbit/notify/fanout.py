"""From outbox events to deliveries: which profile gets which message, and when a group is done.

An event (store/outbox.py) says "run N is settled as STATE". It is acted on only once the run's
status.yaml agrees; then each profile that wants the run (by --on and -g) gets the run's
message queued, and, when the run belongs to a group none of whose runs is queued, starting or
running any more (and none of whose batches is being written or was interrupted before its
runs appeared: store/batches.py), each profile that wants groups gets the group's summary.
The event file is removed last, so a sender killed in between does it again: queueing is
idempotent by the message's key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from orbit.notify import queue
from orbit.notify.message import Message, group_message, run_message
from orbit.notify.profiles import Profile
from orbit.review.objective import declared_of
from orbit.store import batches
from orbit.store.files import unlink_quiet
from orbit.store.groups import interrupted
from orbit.store.home import Home
from orbit.store.model import ACTIVE, Run, RunState
from orbit.store.outbox import FINISHED, Event, outbox_dir, read_event, run_state
from orbit.store.runs import Broken, RunStore

log = logging.getLogger(__name__)

OUTBOX = "outbox"  # damaged events are set aside in notify/damaged/outbox/, logged as this


@dataclass
class Groups:
    """Group membership read once per pass (a listing is O(runs), not O(events))."""

    store: RunStore
    _rows: dict[str, list[str]] | None = None
    _busy: set[str] = field(default_factory=set)

    def _read(self) -> dict[str, list[str]]:
        if self._rows is None:
            self._rows = {}
            for row in self.store.list_rows():
                if isinstance(row, Broken):
                    continue  # unreadable: neither blocks nor joins a summary
                group = row.get("group")
                if not group:
                    continue
                self._rows.setdefault(str(group), []).append(str(row["id"]))
                if RunState(str(row.get("state"))) in ACTIVE:
                    self._busy.add(str(group))
        return self._rows

    def finished_runs(self, group: str) -> list[Run] | None:
        """The runs of `group` when it is finished, else None."""
        ids = self._read().get(group, [])
        if not ids or group in self._busy:
            return None
        home = self.store.home
        if batches.pending(home, group) or interrupted(home, group):
            return None  # runs are still being written, or some never were: not finished
        runs = [r for r in self.store.load_many(ids) if isinstance(r, Run)]
        if any(r.state.active for r in runs):  # settled since the listing? then not yet
            return None
        return runs


def events(home: Home) -> list[Path]:
    try:
        return sorted(
            (p for p in outbox_dir(home).iterdir() if not p.name.endswith(".tmp")),
            key=lambda p: p.stat().st_mtime_ns,
        )
    except OSError:
        return []


def fan_out(
    home: Home, profiles: dict[str, Profile], web_url: str | None, warned: set[Path] | None = None
) -> int:
    """Turn every ready event into deliveries; how many messages were queued. The runs'
    messages are queued first, then the summaries of the groups they finish (so a summary
    follows the runs it sums up), and the events are removed last. An event file that cannot
    be read now is left in place (named once in the log: `warned` holds those named)."""
    store = RunStore(home)
    groups = Groups(store)
    queued = 0
    ready: list[tuple[Path, Run]] = []
    for path in events(home):
        event = _ready_event(home, path, set() if warned is None else warned)
        if event is None:
            continue
        try:
            run = store.load(event.run)
        except Exception as exc:  # damaged since: nothing to say about it
            log.warning("run %s cannot be read (%s): no message", event.run, exc)
            unlink_quiet(path)
            continue
        queued += _for_run(home, run, profiles, web_url)
        ready.append((path, run))
    for _, run in ready:
        queued += _for_group(home, run, profiles, web_url, groups)
    for path, _ in ready:
        unlink_quiet(path)
    return queued


def _ready_event(home: Home, path: Path, warned: set[Path]) -> Event | None:
    """The event in `path` when its run is settled as it says; else None, and the file is
    left (unreadable now, or pending), removed (gone or stale) or, damaged and not agreeing
    with its run, set aside in notify/damaged/outbox/. A file is never deleted unread."""
    try:
        event = read_event(path)
    except OSError as exc:
        if path not in warned:
            warned.add(path)
            log.warning("cannot read %s (%s): left in place, read again later", path, exc)
        return None
    if event is None:
        return None
    state = run_state(home, event.run) if event.run else None
    if state is not None and state not in FINISHED:
        return None  # pending: written just before a status write that has not happened yet
    if event.damaged and state != event.state:
        _set_aside(home, path, event, state)
        return None
    if state != event.state:
        unlink_quiet(path)  # the run is gone, or settled otherwise (that event covers it)
        return None
    if event.damaged:
        log.warning("outbox event %s is damaged (%s): rebuilt from its name", path.name,
                    event.damaged)  # fmt: skip
    return event


def _set_aside(home: Home, path: Path, event: Event, state: str | None) -> None:
    if not event.run:
        why = f"{event.damaged}; its name is not an outbox event's"
    else:
        found = f"is {state}" if state else "is gone or unreadable"
        why = f"{event.damaged}; run {event.run} {found}, not {event.state}: not rebuilt"
    key = f"run-{event.run}-{event.state}" if event.run else ""
    if not queue.set_aside(home, OUTBOX, path, why, key):
        log.warning("outbox event %s is damaged (%s) and cannot be moved aside", path.name, why)


def _for_run(home: Home, run: Run, profiles: dict[str, Profile], web_url: str | None) -> int:
    wanting = [p for p in profiles.values() if p.wants_run(run.state.value, run.group)]
    if not wanting:
        return 0
    message = run_message(run, web_url, declared=declared_of(home, run.group)[0])
    return sum(queue.enqueue(home, p.name, message) for p in wanting)


def _for_group(
    home: Home, run: Run, profiles: dict[str, Profile], web_url: str | None, groups: Groups
) -> int:
    """The summary of the run's group, to each profile that wants it, once the group is done."""
    group = run.group
    summarizing = [p for p in profiles.values() if group and p.wants_group(group)]
    if not group or not summarizing:
        return 0
    members = groups.finished_runs(group)
    if not members:
        return 0
    queued = 0
    made: dict[tuple[str | None, str | None], Message] = {}
    declared = declared_of(home, group)[0]
    for p in summarizing:
        how = (p.metric, p.metric_direction)
        if how not in made:
            # Its key names the runs and their states: a group that gains runs and finishes
            # again is announced again, one that is looked at twice is not.
            made[how] = group_message(
                group,
                members,
                web_url,
                metric=p.metric,
                direction=p.metric_direction,
                declared=declared,
            )
        queued += queue.enqueue(home, p.name, made[how])
    return queued

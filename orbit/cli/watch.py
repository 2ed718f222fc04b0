"""Waiting on runs and following logs: poll the files, tick now and then to repair."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, TextIO

from orbit.cli.common import side_tick
from orbit.env import Env
from orbit.store.model import LOG, STATUS_YAML, Run, RunState, parse_iso
from orbit.store.runs import RunStore

POLL_SECONDS = 0.02
TICK_EVERY_SECONDS = 5.0


def needs_repair(run: Run) -> bool:
    """A started run whose shepherd is gone (lock free), past the start-up grace period."""
    from orbit.store.runs import shepherd_alive

    if run.state is RunState.RUNNING:
        return not shepherd_alive(run.dir)
    if run.state is RunState.STARTING:
        admitted = parse_iso(run.status.get("admitted_at"))
        old = admitted is None or (datetime.now(UTC) - admitted).total_seconds() > 10
        return old and not shepherd_alive(run.dir)
    return False


class StatusWatch:
    """Reloads a run only when its status.yaml changed."""

    def __init__(self, store: RunStore, run: Run) -> None:
        self.store = store
        self.run = run
        self._mtime = self._stat()

    def _stat(self) -> int:
        try:
            return os.stat(self.run.path(STATUS_YAML)).st_mtime_ns
        except OSError:
            return 0

    def refresh(self) -> Run:
        mtime = self._stat()
        if mtime != self._mtime:
            self._mtime = mtime
            self.run = self.store.load(self.run.id)
        return self.run


# A waiting run's reason carries figures that jitter from tick to tick (`load 1.5 of 2`, `0.49
# reserved`): a line is said again when the reason changes in kind (its numbers aside), and a
# reason that only changed its figures is said again at most every REPEAT_SECONDS.
REPEAT_SECONDS = 60.0
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def reason_kind(text: str) -> str:
    """`text` with every number replaced by `#`: what the reason says, its figures aside."""
    return _NUMBER.sub("#", text)


class QueueNotes:
    """Says on stderr that a run waits in the queue and why, one line
    `orbit: run 4 (b) queued: waiting for 2 CPUs: 4 of 4 leased`; again when the reason changes
    in kind, and when only its figures changed, at most every `every_s` with the current text.
    The same for a run whose node cannot be reached now (`orbit: run 4 unknown: node b cannot
    be reached …`), and for a running run held by something outside it (`orbit: run 4 running:
    Docker is not answering since 12:03:05`, `… waiting: disk full under …`: its shepherd's
    reason; `orbit: run 4 running` when that ends). Nothing for other states. `say` is the rule
    for any waiting thing with a label and a line (a bench job's verify run, say); `show`
    applies it to a Run."""

    SHOWN = (RunState.QUEUED, RunState.UNKNOWN)

    def __init__(
        self,
        out: TextIO,
        *,
        every_s: float = REPEAT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.every_s = every_s
        self.clock = clock
        self.said: dict[str, tuple[str, float]] = {}  # key -> (the line last said, when)

    def show(self, run: Run) -> None:
        if run.state is RunState.RUNNING:
            if run.reason:
                self.say(run.id, f"run {run.label}", f"running: {run.reason}")
            elif run.id in self.said:  # what held it has ended
                self.say(run.id, f"run {run.label}", "running")
        elif run.state in self.SHOWN:
            self.say(run.id, f"run {run.label}", f"{run.state.value}: {run.reason or 'waiting'}")

    def say(self, key: str, label: str, line: str) -> None:
        """Print `orbit: LABEL LINE` unless it was said for `key` already, or it differs from
        what was said only in its figures and was said less than `every_s` ago."""
        last = self.said.get(key)
        if last is not None and last[0] == line:
            return
        now = self.clock()
        if last is not None:
            figures_only = reason_kind(last[0]) == reason_kind(line)
            if figures_only and now - last[1] < self.every_s:
                return
        self.said[key] = (line, now)
        print(f"orbit: {label} {line}", file=self.out, flush=True)


class SideTicks:
    """A side tick every TICK_EVERY_SECONDS; a failure is reported once, not every time."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.last = time.monotonic()
        self.warned = False  # the tick failed (disk full…) and that was said once
        self.warned_stuck = float("-inf")

    def maybe(self) -> None:
        if time.monotonic() - self.last >= TICK_EVERY_SECONDS:
            self.last = time.monotonic()
            report = side_tick(self.env, warn=not self.warned)
            if report is None:
                self.warned = True
                return
            # A stuck scheduler lock stalls the wait: say so, at most every 30 s.
            stuck = [p for p in getattr(report, "problems", []) if p.startswith("scheduler lock")]
            if stuck and self.last - self.warned_stuck >= 30:
                self.warned_stuck = self.last
                print(f"orbit: warning: {stuck[0]}", file=self.env.stderr, flush=True)


def copy_new(path: Path, offset: int, out: BinaryIO) -> int:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return offset
    if data:
        out.write(data)
        out.flush()
    return offset + len(data)


def follow_until_done(
    env: Env,
    store: RunStore,
    run: Run,
    *,
    offset: int = 0,
    out: BinaryIO | None = None,
    on_change: Callable[[Run], None] | None = None,
    queued: QueueNotes | None = None,
) -> Run:
    """Block until the run is finished; with `out`, copy its log there as it grows; with
    `queued`, say while it waits in the queue and why."""
    watch = StatusWatch(store, run)
    ticker = SideTicks(env)
    log_path = run.path(LOG)
    last_state = run.state
    while True:
        run = watch.refresh()
        if queued is not None:
            queued.show(run)
        if out is not None:
            offset = copy_new(log_path, offset, out)
        if run.state != last_state:
            last_state = run.state
            if on_change:
                on_change(run)
        if run.state.finished:
            if out is not None:
                copy_new(log_path, offset, out)
            return run
        ticker.maybe()
        time.sleep(POLL_SECONDS)

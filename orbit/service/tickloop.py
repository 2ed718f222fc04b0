"""The tick on a clock, in a process of its own: the one loop of `orbit scheduler run`
(service/foreground.py, until stopped) and of the ticker (service/ticker.py, until nothing
waits), and how either describes itself while it holds its lock.

A plain loop in the process's main thread, no scheduler library: the first tick at once, the
next one `interval` after the previous one began (at once when that tick took longer), one at a
time. Missed ticks (a slow tick, a suspended machine) are never replayed in a burst: the loop
only ever knows the next one. A stop request (store/worker.stop_on_signals) lets the tick in
flight finish its writes and ends the wait at once.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orbit.service.units import Data, holder_info
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.model import now_iso

if TYPE_CHECKING:
    from orbit.sched.tick import TickReport


class TickLoop:
    """Ticks `home` as `actor` every `interval(home)` seconds (a fresh Home each time, so
    config.yaml changes apply from the next tick on) until `stop` is set or `ended()` names a
    reason, looked at before and after every tick. `on_tick` gets every TickReport, `on_error`
    every exception a tick raised: the loop goes on."""

    def __init__(
        self,
        home: Home,
        actor: str,
        stop: threading.Event,
        interval: Callable[[Home], float],
        on_tick: Callable[[TickReport], None],
        on_error: Callable[[Exception], None],
        ended: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.home, self.actor, self.stop = home, actor, stop
        self.interval, self.on_tick, self.on_error, self.ended = interval, on_tick, on_error, ended

    def run(self) -> str:
        """Tick until stopped or ended; why it stopped."""
        from orbit.execute.spawn import spawn
        from orbit.sched.tick import tick

        while not self.stop.is_set():
            why = self.ended()
            if why:
                return why
            began = time.monotonic()
            home = Home(self.home.root, self.home.environ)
            try:
                report = tick(home, spawn=spawn, actor=self.actor)
            except Exception as exc:  # the next tick tries again
                self.on_error(exc)
            else:
                self.on_tick(report)
            why = self.ended()
            if why:
                return why
            self.stop.wait(max(0.0, began + self.interval(home) - time.monotonic()))
        return "stopped by a signal"


def describe(path: Path, interval_s: float) -> None:
    """Write what `loop_status` reads: `{"format": 1, "pid", "started_at", "interval_s"}`."""
    info = {"format": 1, "pid": os.getpid(), "started_at": now_iso(), "interval_s": interval_s}
    atomic_write(path, json.dumps(info).encode(), durable=False)


@dataclass
class LoopStatus(Data):
    state: str
    running: bool
    pid: int | None
    interval_s: float | None
    started_at: str | None


def loop_status(lock: Path, info: Path) -> LoopStatus:
    """A loop holds its lock for as long as it lives: the lock is the liveness, `info` (written
    by `describe`) the details; `starting` in the instant before it is written."""
    data = holder_info(lock, info)
    if data is None:
        return LoopStatus("not running", False, None, None, None)
    pid, since, interval = data.get("pid"), data.get("started_at"), data.get("interval_s")
    if pid is None:
        return LoopStatus("starting", True, None, None, None)
    every = f", every {interval:g} s" if isinstance(interval, int | float) else ""
    state = f"running (pid {pid}, since {since}{every})"
    return LoopStatus(state, True, pid, interval, since)

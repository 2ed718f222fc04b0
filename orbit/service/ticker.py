"""The ticker: one short-lived process per home that moves a waiting queue when nothing else
ticks it on a clock. No daemon: it exists only while runs wait.

Started by sched/clock.py:keep_moving (at the end of a tick that leaves runs queued, when no
timer, cron line or `orbit scheduler run` ticks this home), it is a worker of store/worker.py:
`python -m orbit.service.ticker` in a new session with only the lock (descriptor 3) and stdio on
runtime/ticker.log. It holds locks/ticker.lock for its whole life (the lock is its liveness, as a
shepherd's is), describes itself in runtime/ticker.json, ticks every few seconds in the loop of
service/tickloop.py and exits once no run is queued, when a clock takes over, or when its home
is gone.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING

from orbit.detach import exit_from
from orbit.errors import CorruptError
from orbit.sched.clock import TICKER_INFO, clock_ticks, queued, ticker_lock, ticker_worker
from orbit.service.tickloop import LoopStatus, TickLoop, describe, loop_status
from orbit.store.files import unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.worker import worker_main

if TYPE_CHECKING:
    from orbit.sched.tick import TickReport

log = logging.getLogger(__name__)

# Seconds between ticks: this, or scheduler_interval_s when that is shorter.
TICKER_INTERVAL_S = 3.0
MIN_INTERVAL_S = 1.0


def info_path(home: Home) -> Path:
    return home.runtime_dir / TICKER_INFO


def ticker_status(home: Home) -> LoopStatus:
    return loop_status(ticker_lock(home), info_path(home))


def interval_of(home: Home) -> float:
    try:
        configured = home.settings.scheduler_interval_s
    except CorruptError:  # a broken config.yaml: the tick reports it; keep the default pace
        configured = TICKER_INTERVAL_S
    return max(MIN_INTERVAL_S, min(TICKER_INTERVAL_S, configured))


class Ticker:
    """The loop, with the lock `handle` already held, until there is nothing to do or `stop`
    is set."""

    def __init__(self, home: Home, handle: IO[str], stop: threading.Event) -> None:
        self.home = home
        self.handle: IO[str] | None = handle
        self.stop = stop
        self.inode = os.fstat(handle.fileno()).st_ino

    def run(self) -> str:
        """Tick until there is nothing to do; why it stopped.

        The exit cannot strand a run: a run queued after the ticker's last look is seen either
        by the ticker or by the tick that queued it. A submit writes the queue marker, then
        ticks, and that tick (or the tick holding the scheduler lock for it) ends with
        `keep_moving`, which starts a ticker unless one holds the ticker lock. The ticker
        releases its lock first and only then looks at the queue once more. So if `keep_moving`
        found the lock held, the marker was written before the release, hence before that last
        look, which sees it: the ticker takes its lock again and goes on (or, when another
        ticker took it meanwhile, leaves the queue to that one). If `keep_moving` found the lock
        free, it started a new ticker itself.
        """
        while True:
            why = self._loop()
            self.close()
            if why not in ("queue empty",) or not queued(self.home) or clock_ticks(self.home):
                return why
            handle = try_lock(ticker_lock(self.home))
            if handle is None:
                return "another ticker took over"
            self.handle, self.inode = handle, os.fstat(handle.fileno()).st_ino
            log.info("a run was queued as the ticker stopped: ticking on")

    def _loop(self) -> str:
        describe(info_path(self.home), interval_of(self.home))
        actor = f"ticker:{os.getpid()}"
        loop = TickLoop(self.home, actor, self.stop, interval_of, _said, _failed, self._ended)
        return loop.run()

    def _ended(self) -> str | None:
        """Why the ticker is done: its home is gone, a clock ticks it, or nothing waits."""
        gone = self._home_gone()
        if gone:
            return gone
        clock = clock_ticks(self.home)
        if clock:
            return f"{clock} ticks this home"
        return None if queued(self.home) else "queue empty"

    def _home_gone(self) -> str | None:
        """Why this ticker's home is no longer the one it ticks: deleted (a test's temporary
        home), or its lock file replaced (then another ticker could hold the new one)."""
        try:
            same = os.stat(ticker_lock(self.home)).st_ino == self.inode
        except OSError:
            same = False
        return None if same and self.home.queue_dir.is_dir() else "its home is gone"

    def close(self) -> None:
        """Remove runtime/ticker.json (unless the home is gone), then give up the lock.
        Idempotent."""
        if self.handle is None:
            return
        if not self._home_gone():
            unlink_quiet(info_path(self.home))
        release(self.handle)
        self.handle = None


def _said(report: TickReport) -> None:
    if report.admitted or report.repaired:
        log.info("admitted %s, repaired %s", report.admitted, report.repaired)


def _failed(exc: Exception) -> None:
    log.warning("tick failed: %s", exc)


def _tick_queue(home: Home, handle: IO[str], stop: threading.Event) -> str:
    loop = Ticker(home, handle, stop)
    log.info("ticking %s", home.root)
    try:
        return f"stopped: {loop.run()}"
    finally:
        loop.close()


def main(argv: list[str]) -> int:
    """`python -m orbit.service.ticker`: tick ORBIT_HOME's queue until it is empty."""
    return worker_main(ticker_worker, _tick_queue)


if __name__ == "__main__":
    exit_from(main)

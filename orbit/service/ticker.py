"""The ticker: one short-lived process per home that moves a waiting queue when nothing else
ticks it on a clock. No daemon: it exists only while runs wait.

Started by sched/clock.py:keep_moving (at the end of a tick that leaves runs queued, when no
timer, cron line or `orbit scheduler run` ticks this home), it holds locks/ticker.lock for its
whole life (the lock is its liveness, as a shepherd's is), describes itself in
runtime/ticker.json, ticks every few seconds and exits once no run is queued, when a clock takes
over, or when its home is gone. Its starter runs it as `python -m orbit.service.ticker` in a new
session with only the lock (descriptor 3) and stdio on runtime/ticker.log.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from orbit.errors import CorruptError
from orbit.sched.clock import (
    TICKER_INFO,
    clock_ticks,
    queued,
    ticker_lock,
)
from orbit.service.units import Data, holder_info
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import adopt_lock, release, try_lock
from orbit.store.model import now_iso

log = logging.getLogger(__name__)

# Seconds between ticks: this, or scheduler_interval_s when that is shorter.
TICKER_INTERVAL_S = 3.0
MIN_INTERVAL_S = 1.0


def info_path(home: Home) -> Path:
    return home.runtime_dir / TICKER_INFO


@dataclass
class TickerStatus(Data):
    state: str
    running: bool
    pid: int | None
    started_at: str | None
    interval_s: float | None


def ticker_status(home: Home) -> TickerStatus:
    """The ticker holds its lock for as long as it lives: the lock is the liveness."""
    info = holder_info(ticker_lock(home), info_path(home))
    if info is None:
        return TickerStatus("not running", False, None, None, None)
    pid, since, interval = info.get("pid"), info.get("started_at"), info.get("interval_s")
    if pid is None:
        return TickerStatus("starting", True, None, None, None)
    state = f"running (pid {pid}, since {since}, every {interval:g} s)"
    return TickerStatus(state, True, pid, since, interval)


def interval_of(home: Home) -> float:
    try:
        configured = home.settings.scheduler_interval_s
    except CorruptError:  # a broken config.yaml: the tick reports it; keep the default pace
        configured = TICKER_INTERVAL_S
    return max(MIN_INTERVAL_S, min(TICKER_INTERVAL_S, configured))


class Ticker:
    """The loop, with the lock `handle` already held."""

    def __init__(self, home: Home, handle: IO[str]) -> None:
        self.home = home
        self.handle: IO[str] | None = handle
        self.stop = threading.Event()
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
        from orbit.execute.spawn import spawn
        from orbit.sched.tick import tick

        self._describe()
        while not self.stop.is_set():
            gone = self._home_gone()
            if gone:
                return gone
            clock = clock_ticks(self.home)
            if clock:
                return f"{clock} ticks this home"
            home = Home(self.home.root, self.home.environ)  # config changes apply at once
            try:
                report = tick(home, spawn=spawn, actor=f"ticker:{os.getpid()}")
                if report.admitted or report.repaired:
                    log.info("admitted %s, repaired %s", report.admitted, report.repaired)
            except Exception as exc:  # the next tick tries again, as `scheduler run` does
                log.warning("tick failed: %s", exc)
            if not queued(self.home):
                return "queue empty"
            self.stop.wait(interval_of(home))
        return "stopped by a signal"

    def _describe(self) -> None:
        info = {
            "format": 1,
            "pid": os.getpid(),
            "started_at": now_iso(),
            "interval_s": interval_of(self.home),
        }
        atomic_write(info_path(self.home), json.dumps(info).encode(), durable=False)

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


def main() -> None:
    """`python -m orbit.service.ticker`: tick ORBIT_HOME's queue until it is empty."""
    home = Home.from_environ(os.environ)
    home.apply_umask()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s ticker %(process)d %(message)s")
    handle = adopt_lock(ticker_lock(home))
    if handle is None:
        return  # another ticker moves this queue
    ticker = Ticker(home, handle)

    def stop(signum: int, frame: Any) -> None:
        ticker.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # no terminal may end it
    log.info("ticking %s", home.root)
    try:
        why = ticker.run()
    finally:
        ticker.close()
    log.info("stopped: %s", why)


if __name__ == "__main__":
    main()

"""Who moves this home's queue between commands: a clock, or else the short-lived ticker.

Every orbit command and every shepherd's exit ticks inline. On a clock, three things tick: the
systemd timer and the cron line (both run `orbit scheduler tick --clock S`, which notes each
tick in runtime/clock.json) and `orbit scheduler run` (alive while it holds
locks/scheduler-run.lock). When none of them ticks this home, a tick that leaves runs queued
starts the ticker (orbit/service/ticker.py): one detached process per home (a worker of
store/worker.py), alive while it holds locks/ticker.lock, that ticks every few seconds until
the queue is empty and then exits.

This module decides and starts; it never imports the ticker (a layer above): the ticker is a
fresh `python -m orbit.service.ticker` process.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.locks import is_locked
from orbit.store.worker import Worker

FOREGROUND_LOCK = "scheduler-run.lock"  # in locks/: held by `orbit scheduler run`
TICKER_LOCK = "ticker.lock"  # in locks/: held by the ticker for its whole life
TICKER_INFO = "ticker.json"  # in runtime/: the ticker's pid and start, for people
TICKER_LOG = "ticker.log"  # in runtime/: the ticker's stdout and stderr
CLOCK_RECORD = "clock.json"  # in runtime/: the last tick of the timer or the cron line
TICKER_MODULE = "orbit.service.ticker"  # the ticker process: `python -m` this
# A clock tick is expected every `every_s`: one that missed two of them (plus a margin for a
# slow tick) no longer counts, so a timer that stopped (or units left behind) moves nothing.
CLOCK_GRACE_S = 30.0


def foreground_lock(home: Home) -> Path:
    return home.locks_dir / FOREGROUND_LOCK


def ticker_lock(home: Home) -> Path:
    return home.locks_dir / TICKER_LOCK


def note_clock_tick(home: Home, every_s: float) -> None:
    """Record a tick of the timer or the cron line, which come every `every_s`."""
    data = {"at": time.time(), "every_s": every_s, "pid": os.getpid()}
    atomic_write(home.runtime_dir / CLOCK_RECORD, json.dumps(data).encode(), durable=False)


@dataclass
class ClockTick:
    at: float  # epoch seconds
    every_s: float

    def fresh(self, now: float) -> bool:
        return now - self.at <= 2 * self.every_s + CLOCK_GRACE_S


def last_clock_tick(home: Home) -> ClockTick | None:
    try:
        data = json.loads((home.runtime_dir / CLOCK_RECORD).read_text())
        return ClockTick(float(data["at"]), float(data["every_s"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clock_ticks(home: Home, now: float | None = None) -> str | None:
    """What ticks this home on a clock right now ("orbit scheduler run", or "a timer or cron
    line" whose last tick is recent), or None."""
    if is_locked(foreground_lock(home)):
        return "orbit scheduler run"
    last = last_clock_tick(home)
    if last is not None and last.fresh(time.time() if now is None else now):
        return "a timer or cron line"
    return None


def queued(home: Home) -> bool:
    """Some run has a queue marker."""
    try:
        with os.scandir(home.queue_dir) as entries:
            return any(not e.name.startswith(".") for e in entries)
    except OSError:
        return False


def ticker_worker(home: Home) -> Worker:
    """The ticker, as store/worker.py starts it."""
    lock, log_path = ticker_lock(home), home.runtime_dir / TICKER_LOG
    return Worker("ticker", "the ticker", TICKER_MODULE, lock, log_path)


def keep_moving(home: Home) -> bool:
    """Start the ticker when runs are queued, nothing ticks this home on a clock and no ticker
    lives; True when one was started. Cheap otherwise: a directory listing and two lock checks.
    A failure to start is logged, never raised: the inline ticks still move the queue."""
    return queued(home) and ticker_worker(home).wake(home, needed=lambda: not clock_ticks(home))

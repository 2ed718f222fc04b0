"""`orbit scheduler run`: the tick on an APScheduler interval, in the foreground.

The loop holds `locks/scheduler-run.lock` for as long as it lives (the lock is its liveness,
like a shepherd's) and describes itself in `runtime/scheduler-run.json`. When it stops with runs
still queued, it hands the queue to the ticker (sched/clock.py), so nothing is stranded.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orbit.errors import ConflictError
from orbit.sched.clock import foreground_lock, keep_moving
from orbit.service.units import Data, holder_info
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.model import now_iso


def _run_info(home: Home) -> Path:
    return home.runtime_dir / "scheduler-run.json"


@dataclass
class ForegroundStatus(Data):
    state: str
    running: bool
    pid: int | None
    interval_s: float | None
    started_at: str | None


def foreground_status(home: Home) -> ForegroundStatus:
    """A foreground loop holds its lock for as long as it lives: the lock is the liveness."""
    info = holder_info(foreground_lock(home), _run_info(home))
    if info is None:
        return ForegroundStatus("not running", False, None, None, None)
    interval = info.get("interval_s")
    state = f"running (pid {info.get('pid', '?')}, every {interval:g} s)" if interval else "running"
    return ForegroundStatus(state, True, info.get("pid"), interval, info.get("started_at"))


class _Stop(Exception):
    """A stop signal that came before the scheduler was running."""


def run_foreground(
    home: Home,
    interval_s: float,
    on_tick: Callable[[Any], None],
    on_error: Callable[[Exception], None],
) -> None:
    """Tick every `interval_s` until SIGINT or SIGTERM, then return once any tick in flight
    has finished.

    Ticks run in APScheduler's worker thread, so shepherds are started in exec mode (forking a
    threaded process to run Python in the child is unsafe). One tick at a time
    (max_instances=1); a tick due while another runs is skipped, and ticks missed by more than
    one interval (a suspended machine) are coalesced into one, never replayed. `on_tick` gets
    every TickReport, `on_error` every exception a tick raised (the loop goes on). Raises
    ConflictError when another foreground loop ticks this home.
    """
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.base import SchedulerNotRunningError
    from apscheduler.schedulers.blocking import BlockingScheduler

    from orbit.execute.spawn import spawn
    from orbit.sched.tick import tick

    home.ensure()
    handle = try_lock(foreground_lock(home), 0.0)
    if handle is None:
        raise ConflictError(
            f"`orbit scheduler run` already ticks this home ({foreground_status(home).state})"
        )
    busy = threading.Lock()  # held while a tick runs, so a stop can wait for it

    def job() -> None:
        with busy:
            try:
                # A fresh Home each time: config.yaml changes apply from the next tick on.
                report = tick(
                    Home(home.root, home.environ),
                    spawn=spawn,
                    actor=f"scheduler:{os.getpid()}",
                )
            except Exception as exc:
                on_error(exc)
                return
        on_tick(report)

    scheduler = BlockingScheduler(executors={"default": ThreadPoolExecutor(1)}, timezone=UTC)
    scheduler.add_job(
        job,
        "interval",
        seconds=interval_s,
        id="tick",
        next_run_time=datetime.now(UTC),
        coalesce=True,
        max_instances=1,
        misfire_grace_time=max(1, int(interval_s)),
    )

    stopping = threading.Event()

    def stop(signum: int, frame: object) -> None:
        if stopping.is_set():
            return
        stopping.set()
        try:
            scheduler.shutdown(wait=False)
        except SchedulerNotRunningError:
            raise _Stop from None  # not started yet: unwind out of start()

    info = {"format": 1, "pid": os.getpid(), "interval_s": interval_s, "started_at": now_iso()}
    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, stop)
        # Written once a stop signal is ours: whoever sees the file may stop the loop.
        atomic_write(_run_info(home), json.dumps(info).encode(), durable=False)
        if not stopping.is_set():
            scheduler.start()  # blocks until stop() shuts it down
    except _Stop:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if busy.acquire(timeout=120):  # let a tick in flight finish its writes
            busy.release()
        unlink_quiet(_run_info(home))
        release(handle)
    keep_moving(home)  # runs still queued: the ticker moves them from now on

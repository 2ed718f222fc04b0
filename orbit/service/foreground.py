"""`orbit scheduler run`: the tick on a clock, in the foreground, until stopped.

The loop (service/tickloop.py, the ticker's too) holds `locks/scheduler-run.lock` for as long
as it lives (the lock is its liveness, like a shepherd's) and describes itself in
`runtime/scheduler-run.json`. When it stops with runs still queued, it hands the queue to the
ticker (sched/clock.py), so nothing is stranded.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from orbit.errors import ConflictError
from orbit.sched.clock import foreground_lock, keep_moving
from orbit.service.tickloop import LoopStatus, TickLoop, describe, loop_status
from orbit.store.files import unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.worker import stop_on_signals

if TYPE_CHECKING:
    from orbit.sched.tick import TickReport


def _run_info(home: Home) -> Path:
    return home.runtime_dir / "scheduler-run.json"


def foreground_status(home: Home) -> LoopStatus:
    return loop_status(foreground_lock(home), _run_info(home))


def run_foreground(
    home: Home,
    interval_s: float,
    on_tick: Callable[[TickReport], None],
    on_error: Callable[[Exception], None],
) -> None:
    """Tick every `interval_s` until SIGINT or SIGTERM, then return once the tick in flight has
    finished (a second signal ends the process at once). `on_tick` gets every TickReport,
    `on_error` every exception a tick raised (the loop goes on). Raises ConflictError when
    another foreground loop ticks this home."""
    home.ensure()
    handle = try_lock(foreground_lock(home), 0.0)
    if handle is None:
        raise ConflictError(
            f"`orbit scheduler run` already ticks this home ({foreground_status(home).state})"
        )
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        # Written once a stop signal is ours: whoever sees the file may stop the loop.
        describe(_run_info(home), interval_s)
        actor = f"scheduler:{os.getpid()}"
        TickLoop(home, actor, stop, lambda _: interval_s, on_tick, on_error).run()
    finally:
        restore()
        unlink_quiet(_run_info(home))
        release(handle)
    keep_moving(home)  # runs still queued: the ticker moves them from now on

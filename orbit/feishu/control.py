"""Starting, stopping and watching a Feishu bot's process from a command (init, check, rm, the
tick): the process itself is orbit/feishu/bot.py, its files store/feishu.py."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from orbit.errors import OrbitError
from orbit.store.feishu import bot_worker, read_connection
from orbit.store.home import Home
from orbit.store.locks import lock_holder

SETTLED = ("connected", "refused", "failed", "stopped")  # states a waiter stops at


def start(home: Home, name: str) -> bool:
    """Start the bot of profile `name` unless it lives; True when one was started."""
    return bot_worker(home, name).wake(home)


def stop(home: Home, name: str, timeout: float = 10.0) -> bool:
    """Stop the bot of profile `name`; False when none was running. An OrbitError when it
    does not stop within `timeout` seconds."""
    worker = bot_worker(home, name)
    holder = lock_holder(worker.lock)
    if holder is None:
        return False
    deadline = time.monotonic() + timeout
    signalled: set[int] = set()
    while holder is not None:
        # Just after a start the kernel still names the starter (this process, if it started
        # the bot) as the lock's holder, until the bot adopts the lock: never signal oneself.
        if holder.pid and holder.pid != os.getpid() and holder.pid not in signalled:
            signalled.add(holder.pid)
            try:
                os.kill(holder.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise OrbitError(f"{worker.what} (pid {holder.pid}) did not stop within {timeout:g} s")
        time.sleep(0.05)
        holder = lock_holder(worker.lock)
    return True


def wait_state(
    home: Home, name: str, timeout: float, since: float = 0.0, states: tuple[str, ...] = SETTLED
) -> dict[str, Any] | None:
    """The bot's connection record once it is in one of `states` (written at or after the
    epoch time `since`), or the last one seen (None if none) when `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    seen = None
    while True:
        record = read_connection(home, name)
        if record is not None and float(record.get("at", 0)) >= since:
            seen = record
            if record["state"] in states:
                return record
        if time.monotonic() >= deadline:
            return seen
        time.sleep(0.1)

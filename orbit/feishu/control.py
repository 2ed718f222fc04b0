"""Starting, stopping and watching a Feishu bot's process from a command (init, check, rm, the
tick): the process itself is orbit/feishu/bot.py, its files store/feishu.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from orbit.errors import OrbitError
from orbit.store.feishu import BOT_MODULE, bot_worker, read_connection, start_bot
from orbit.store.home import Home
from orbit.store.locks import lock_holder

SETTLED = ("connected", "refused", "failed", "stopped")  # states a waiter stops at


def start(home: Home, name: str) -> bool:
    """Start the bot of profile `name` unless it lives; True when one was started."""
    return start_bot(home, name)


def stop(home: Home, name: str, timeout: float = 10.0) -> bool:
    """Stop the bot of profile `name`; False when none was running. An OrbitError when it
    does not stop within `timeout` seconds.

    Only a process running the bot with the lock open is signalled, never this one: until the
    bot adopts its lock (store/locks.adopt_lock) the kernel names its starter as the holder
    (this process, or a command long gone whose pid may be another's now). The processes are
    looked for again while waiting, for a bot that was still starting."""
    worker = bot_worker(home, name)
    if not worker.alive():
        return False
    deadline = time.monotonic() + timeout
    signalled: set[int] = set()
    while worker.alive():
        pids = _running(worker.lock)
        holder = lock_holder(worker.lock)
        if not pids and holder and holder.pid and BOT_MODULE in (holder.command or ""):
            pids = [holder.pid]  # no /proc to look through: the kernel's holder, if it is the bot
        for pid in set(pids) - signalled - {os.getpid()}:
            signalled.add(pid)
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            shown = ", ".join(map(str, sorted(signalled))) or "not found"
            raise OrbitError(f"{worker.what} (pid {shown}) did not stop within {timeout:g} s")
        time.sleep(0.05)
    return True


def _running(lock: Path) -> list[int]:
    """The processes (of this user's, but this one) running the bot with `lock` open."""
    try:
        st = os.stat(lock)
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    found = []
    for entry in entries:
        pid = int(entry)
        if pid == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if BOT_MODULE.encode() not in argv:
                continue
            for fd in os.scandir(f"/proc/{pid}/fd"):
                held = os.stat(fd.path)
                if (held.st_ino, held.st_dev) == (st.st_ino, st.st_dev):
                    found.append(pid)
                    break
        except OSError:  # gone, or another user's
            continue
    return found


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

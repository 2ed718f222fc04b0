"""File locks (portalocker/flock). The kernel drops a lock when its holder dies, so a held lock
is also a liveness signal: the shepherd holds its run's lock for as long as it lives."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from orbit.errors import ExitCode, OrbitError


class LockTimeout(OrbitError):
    exit_code = ExitCode.CONFLICT


def try_lock(path: Path, timeout: float = 0.0) -> IO[str] | None:
    """An open file holding an exclusive lock on `path`, or None when another holds it."""
    import portalocker  # imported here: it costs ~45 ms and many commands take no lock

    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a")  # noqa: SIM115 - the caller owns the handle for the lock's lifetime
    deadline = time.monotonic() + timeout
    while True:
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
            return handle
        except portalocker.LockException:
            if time.monotonic() >= deadline:
                handle.close()
                return None
            time.sleep(0.01)


def release(handle: IO[str]) -> None:
    import portalocker

    try:
        portalocker.unlock(handle)
    finally:
        handle.close()


@contextmanager
def locked(path: Path, timeout: float = 30.0) -> Iterator[None]:
    handle = try_lock(path, timeout)
    if handle is None:
        raise LockTimeout(f"could not lock {path} within {timeout:g} s; is another orbit stuck?")
    try:
        yield
    finally:
        release(handle)


def is_locked(path: Path) -> bool:
    """True when some live process holds the lock on `path`."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True  # a lock this user may not open (another user's run): left to its owner
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)

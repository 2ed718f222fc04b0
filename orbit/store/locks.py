"""File locks (flock). The kernel drops a lock when its holder dies, so a held lock
is also a liveness signal: the shepherd holds its run's lock for as long as it lives.

flock needs only a descriptor open for reading, so a lock file anyone else may open is a lock
anyone else may hold: another user of a shared home could then keep `orbit web`, the tick or
a shepherd from ever starting. Every lock file is therefore 0600, whatever the umask or the
home's mode, and one found with wider bits (made by an older Orbit, or a `chmod -R`) is
narrowed when its owner next takes it."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orbit.detach import LOCK_FD
from orbit.errors import ExitCode, OrbitError
from orbit.record import Record
from orbit.store.files import atomic_write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO


class LockTimeout(OrbitError):
    exit_code = ExitCode.CONFLICT


def try_lock(path: Path, timeout: float = 0.0, *, make_parent: bool = True) -> IO[str] | None:
    """An open file holding an exclusive lock on `path`, or None when another holds it.
    Without `make_parent`, a missing folder is FileNotFoundError (a run's own lock must never
    bring back the directory of a run that was removed)."""
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    handle = open_private(path)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                return None
            time.sleep(0.01)


def open_private(path: Path) -> IO[str]:
    """`path` opened for appending, created 0600; made 0600 when it is this user's and wider.
    The handle's `name` is the path (callers unlink it by that name)."""
    handle = open(path, "a", opener=_private_opener)  # noqa: SIM115 - the caller owns it
    try:
        st = os.fstat(handle.fileno())
        if st.st_mode & 0o077 and st.st_uid == os.geteuid():
            os.fchmod(handle.fileno(), 0o600)
    except OSError:
        handle.close()
        raise
    return handle


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_CLOEXEC, 0o600)


def release(handle: IO[str]) -> None:
    try:
        fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def adopt_lock(path: Path) -> IO[str] | None:
    """This process's own lock on `path`, or None when another process holds it.

    A process started by detach.start_with_lock finds its starter's lock at LOCK_FD. The
    kernel names the process that took a flock as its holder (/proc/locks), so the lock is
    swapped for one of this process's own: people and the status commands then see its pid.
    A starter that took the lock in the instant between wins; this process leaves.
    """
    try:
        inherited = os.fstat(LOCK_FD).st_ino == os.stat(path).st_ino
    except OSError:
        inherited = False
    if inherited:
        release(os.fdopen(LOCK_FD, "a"))
    return try_lock(path)


@contextmanager
def locked(path: Path, timeout: float = 30.0, *, make_parent: bool = True) -> Iterator[None]:
    handle = try_lock(path, timeout, make_parent=make_parent)
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


# --- who holds a lock -------------------------------------------------------------------------
# The kernel knows who holds a flock (/proc/locks) but not since when or why: a holder that
# matters (the scheduler tick) writes that next to the lock, in `<lock>.holder`.

SCHEDULER_LOCK = "scheduler.lock"
# A tick holds the scheduler lock for a fraction of a second: one held longer than this is stuck
# (stopped, or hung in a system call) and is named wherever the queue's state is shown.
STUCK_AFTER_S = 30.0

PROCESS_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "waiting for I/O",
    "T": "stopped",
    "t": "stopped by a debugger",
    "Z": "exiting",
}


class Holder(Record):
    """Who holds a lock, as far as can be told, and for how long; compared by value."""

    __slots__ = ("command", "held_s", "pid", "state")

    def __init__(
        self, pid: int | None, command: str | None, state: str | None, held_s: float
    ) -> None:
        self.pid = pid
        self.command = command
        self.state = state
        self.held_s = held_s

    def describe(self, what: str) -> str:
        """`scheduler lock held by pid 4242 (orbit scheduler tick, stopped) for 45 s`."""
        who = f"pid {self.pid}" if self.pid else "another process"
        detail = ", ".join(x for x in (self.command, self.state) if x)
        return f"{what} held by {who}{f' ({detail})' if detail else ''} for {self.held_s:.0f} s"


def holder_path(path: Path) -> Path:
    return path.with_name(path.name + ".holder")


def note_holder(path: Path, command: str) -> None:
    """Record this process as the holder of the lock on `path` (call it once the lock is held)."""
    data = {"pid": os.getpid(), "since": time.time(), "command": command}
    atomic_write(holder_path(path), json.dumps(data).encode(), durable=False)


def lock_holder(path: Path) -> Holder | None:
    """Who holds the lock on `path` and for how long, or None when it is free.

    The pid is the kernel's; the command and start come from the holder's note when the note
    is that process's, else from the process itself (for a foreign holder, such as `flock`,
    the time since it started).
    """
    if not is_locked(path):
        return None
    try:
        note = json.loads(holder_path(path).read_text())
    except (OSError, ValueError):
        note = {}
    if not isinstance(note, dict):
        note = {}
    pid = _flock_pid(path)
    if pid is None and isinstance(note.get("pid"), int):
        pid = note["pid"]
    started, state, command = _process(pid) if pid else (None, None, None)
    since = note.get("since") if note.get("pid") == pid else None
    if isinstance(since, int | float) and (started is None or started <= since + 1):
        command = str(note.get("command") or command)
    else:
        since = started
    held = max(0.0, time.time() - since) if isinstance(since, int | float) else 0.0
    return Holder(pid, command, state, held)


def _flock_pid(path: Path) -> int | None:
    """The pid that holds a flock on `path`, from /proc/locks (None when not found)."""
    try:
        st = os.stat(path)
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in table.splitlines():
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
            continue  # a waiter, or a lock of another kind
        pid, where = parts[4], parts[5].split(":")
        if len(where) == 3 and where[2] == str(st.st_ino) and pid.isdigit() and int(pid) > 0:
            return int(pid)
    return None


def _process(pid: int) -> tuple[float | None, str | None, str | None]:
    """(start time as epoch seconds, state, command line) of a process; Nones when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        fields = stat.rsplit(b")", 1)[1].split()
        state = PROCESS_STATES.get(fields[0].decode(), fields[0].decode())
        ticks = int(fields[19])  # stat field 22, starttime
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        started: float | None = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None, None, None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        command: str | None = " ".join(a.decode(errors="replace") for a in argv)[:80] or None
    except OSError:
        command = None
    return started, state, command


def stuck_scheduler(locks_dir: Path) -> str | None:
    """`scheduler lock held by pid N (…) for 45 s; …` when the scheduler lock has been held
    longer than STUCK_AFTER_S (nothing is admitted meanwhile), else None."""
    held = lock_holder(locks_dir / SCHEDULER_LOCK)
    if held is None or held.held_s <= STUCK_AFTER_S:
        return None
    pid = held.pid or "PID"
    if held.state and "stopped" in held.state:
        hint = f"resume it with `kill -CONT {pid}`, or end it"
    else:
        hint = f"if it hangs, end it with `kill {pid}`"
    return f"{held.describe('scheduler lock')}; nothing is admitted until it is released: {hint}"

"""Start a detached shepherd for a run: a fresh, lean interpreter.

A shepherd lives as long as its run, and a busy machine has a hundred of them, so each is a
new process (`python -S -m orbit.execute.shepherd_main HOME ID`, named `orbit-shepherd`) that
imports only what following one container needs: never a fork of the command that started
it, which would carry that command's imports, memory and command line. `-S` skips the site
module (the interpreter's `.pth` files); the caller's import path is passed on in PYTHONPATH
instead, so the shepherd finds exactly the modules its starter found.

`Prespawned` starts that interpreter before its run exists, while `orbit run` or `orbit
sweep` is still writing: it imports meanwhile, then waits on a pipe for the id of the first
run the command's tick admits. A command that admits none closes the pipe and the process
exits.

`Successor` is what a shepherd whose run has ended ticks with: the first run that tick admits
becomes this process's next run (shepherd_main follows it as a fresh shepherd would), so a
queue of short runs is not one new interpreter per run. Its shepherd.lock is taken at once,
under the tick's scheduler lock: no tick ever sees the admitted run without a live shepherd,
and if this process dies, the lock goes with it and the next tick starts a fresh one.

The shepherd keeps only the part of the caller's environment it needs (`store/childenv.py`):
whatever else the submitter had set (cloud keys, tokens, `--pass-env` values) has no business
there. The secrets reach the container through `runtime/secrets/<id>.json`, never through the
shepherd's environment.
"""

from __future__ import annotations

import fcntl
import os
import sys

from orbit.detach import LOCK_FD
from orbit.store.childenv import lean_environ
from orbit.store.home import Home
from orbit.store.locks import try_lock
from orbit.store.model import SHEPHERD_LOCK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

PROCESS_NAME = "orbit-shepherd"
ENTRY = "orbit.execute.shepherd_main"
LOCKED = "--locked"  # the last argument of a shepherd started holding its run's lock


def set_process_name() -> None:
    """Name this process `orbit-shepherd` (what `ps` and `top` show)."""
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write(PROCESS_NAME)
    except OSError:
        pass


def shepherd_environ(home: Home) -> dict[str, str]:
    """The scrubbed environment, with this process's import path on PYTHONPATH (the shepherd
    skips the site module, which would otherwise add the site directories)."""
    return lean_environ(home)


def _start(home: Home, args: list[str], stdin: int | None, lock: int | None = None) -> None:
    """Start the shepherd's interpreter in a new session, with stdin on the pipe (if any) or
    /dev/null, stdout and stderr appended to the run's shepherd.log (or /dev/null), and the
    descriptor `lock` (if any) at detach.LOCK_FD.

    posix_spawn instead of a double fork: no copy of this process is made (a fork costs a
    large caller milliseconds), and nothing is waited for. Only descriptors marked
    inheritable reach the child, which Python's own never are: no lock of the caller's
    travels with it but the one handed over. The child is this process's until this process
    ends; `_reap` collects the ones that ended meanwhile, so a long-lived caller keeps no
    zombies.
    """
    _reap()
    log_path = str(home.runs_dir / args[0] / "shepherd.log") if args else os.devnull
    argv = [sys.executable, "-S", "-m", ENTRY, str(home.root), *args]
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_DUP2, stdin, 0)
        if stdin is not None
        else (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    if lock is not None:
        actions.append((os.POSIX_SPAWN_DUP2, lock, LOCK_FD))
    env = shepherd_environ(home)
    try:
        pid = os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)
    except OSError:  # the log cannot be opened (a full disk, a removed run directory)
        actions[1] = (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)
        pid = os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)
    _children.append(pid)


_children: list[int] = []


def _reap() -> None:
    for pid in list(_children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _children.remove(pid)


def spawn(home: Home, run_id: str) -> None:
    """Start a shepherd for `run_id` (the tick's Spawner). The run's shepherd.lock is taken
    here and handed to it (`LOCKED`), so that no tick finds the run without a live shepherd
    while the new interpreter starts and imports, and starts a second one. When another
    process holds that lock, it is the run's shepherd, and none is started."""
    try:
        lock = try_lock(home.runs_dir / run_id / SHEPHERD_LOCK, make_parent=False)
    except OSError:  # its directory is gone or unwritable: the shepherd reports it
        _start(home, [run_id], None)
        return
    if lock is None:
        return
    try:
        # Above the descriptors the child's file actions write (0-2 and LOCK_FD).
        fd = fcntl.fcntl(lock.fileno(), fcntl.F_DUPFD_CLOEXEC, LOCK_FD + 1)
        try:
            _start(home, [run_id, LOCKED], None, fd)
        finally:
            os.close(fd)
    finally:
        lock.close()  # closed, never unlocked: the child's copy keeps the lock


class Prespawned:
    """A shepherd started ahead of its run (see the module's docstring); a Spawner. The first
    call hands it the run; later calls, or calls for another home, start new shepherds."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.pipe: int | None
        read, self.pipe = os.pipe()
        try:
            _start(home, [], read)
        finally:
            os.close(read)

    def __call__(self, home: Home, run_id: str) -> None:
        if self.pipe is None or home.root != self.home.root:
            spawn(home, run_id)
            return
        pipe, self.pipe = self.pipe, None
        try:
            os.write(pipe, f"{run_id}\n".encode())
        except OSError:  # it died meanwhile
            spawn(home, run_id)
        finally:
            os.close(pipe)

    def close(self) -> None:
        """Let the waiting process go (it exits) if no run was handed to it."""
        if self.pipe is not None:
            os.close(self.pipe)
            self.pipe = None


class Successor:
    """The Spawner of a shepherd whose run has ended (see the module's docstring): the first
    run handed to it in this home is kept, its shepherd.lock held, as `run_id` and `lock`, for
    this process to follow next; later calls, and calls for another home, go to `spawn`."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.run_id: str | None = None
        self.lock: IO[str] | None = None

    def __call__(self, home: Home, run_id: str) -> None:
        if self.run_id is not None or home.root != self.home.root:
            spawn(home, run_id)
            return
        try:
            lock = try_lock(home.runs_dir / run_id / SHEPHERD_LOCK, make_parent=False)
        except OSError:  # its directory is gone or unwritable: a fresh shepherd reports it
            spawn(home, run_id)
            return
        if lock is not None:  # (held by another process: that one is its shepherd)
            self.run_id, self.lock = run_id, lock

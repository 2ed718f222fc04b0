"""Detaching a process from the command that starts it (no Orbit imports).

The shepherd and the single-instance workers (store/worker.py: the ticker, the notification
sender, a node's probe, a bench job's driver) outlive the command that starts them:
each is the grandchild of a double fork, in a new session (no terminal can hang it up, no
zombie is left), with stdin on /dev/null, stdout and stderr on its own log, and none of the
caller's descriptors, which could hold the caller's locks.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn


def double_fork() -> bool:
    """Fork twice: True in the detached grandchild, False in the caller once the short-lived
    middle child has exited. The grandchild must end with `os._exit`."""
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return False
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
    except BaseException:
        os._exit(1)
    return True


def detach_stdio(log_path: str, mode: int = 0o600) -> None:
    """stdin from /dev/null, stdout and stderr appended to `log_path`, or to /dev/null when it
    cannot be opened: nothing a detached process writes may reach the caller's terminal."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, mode)
    except OSError:
        out = null
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    if out > 2:
        os.close(out)
    if null > 2 and null != out:
        os.close(null)


def close_inherited(keep: int = 2) -> None:
    """Close every descriptor above `keep`."""
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(keep + 1, 1024))
    for fd in fds:
        if fd > keep:
            try:
                os.close(fd)
            except OSError:
                pass


LOCK_FD = 3  # where a process started by start_with_lock finds the lock its starter took


def start_with_lock(argv: list[str], env: dict[str, str], log_path: str, cwd: str,
                    lock_fd: int, log_mode: int = 0o600) -> None:  # fmt: skip
    """Exec `argv` detached (double fork, new session, stdio on `log_path`, created with
    `log_mode`) with none of the
    caller's descriptors but the lock open at `lock_fd`, handed over as LOCK_FD: of racing
    starters, only the one that took the lock starts a process. Returns in the caller once
    the short-lived middle child has exited; the started process adopts the lock
    (store/locks.adopt_lock)."""
    if not double_fork():
        return
    try:
        detach_stdio(log_path, log_mode)
        if lock_fd == LOCK_FD:
            os.set_inheritable(LOCK_FD, True)
        else:
            os.dup2(lock_fd, LOCK_FD)  # a dup2 copy is inheritable
        close_inherited(keep=LOCK_FD)
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    except BaseException:
        pass
    os._exit(1)


def release_memory() -> None:
    """Give the memory freed so far back to the system (glibc's `malloc_trim`): what
    importing left behind would otherwise stay in a long-lived process's private memory."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def logged(what: str, work: Callable[[], object]) -> int:
    """Run `work`; 0, or 1 with its traceback in the log (a detached process's stderr) when it
    raised: what a shepherd's, a mirror's or a Slurm job's process returns."""
    try:
        work()
    except BaseException:
        import logging

        logging.exception("%s failed", what)
        return 1
    return 0


def exit_from(main: Callable[[list[str]], int]) -> NoReturn:
    """`main(argv)`, then exit at once with its code: a process started by Orbit (`-m`) skips
    the interpreter's teardown, which could only wait on threads or flush what is written."""
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)

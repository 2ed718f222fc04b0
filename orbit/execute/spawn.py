"""Start a detached shepherd for a run.

`fork` mode (the default from the CLI) double-forks the current process: the grandchild, in a
new session, closes every inherited descriptor (so it cannot keep the caller's locks) and runs
the shepherd without paying for a fresh interpreter. `exec` mode starts `python -m orbit
_shepherd ID` instead, for long-lived threaded callers (`orbit scheduler run`).

Either way the shepherd keeps only the part of the caller's environment it needs
(`store/childenv.py`): it lives as long as the run, and whatever else the submitter had set
(cloud keys, tokens, `--pass-env` values) has no business there. The secrets reach the container
through `runtime/secrets/<id>.json`, never through the shepherd's environment.
"""

from __future__ import annotations

import logging
import os
import sys

from orbit.detach import close_inherited, detach_stdio, double_fork
from orbit.store.childenv import child_environ
from orbit.store.home import Home

log = logging.getLogger(__name__)

PROCESS_NAME = "orbit-shepherd"


def set_process_name() -> None:
    """Name this process `orbit-shepherd` (what `ps` and `top` show); exec resets the name,
    so an exec'd shepherd calls this itself."""
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write(PROCESS_NAME)
    except OSError:
        pass


def _replace_environ(env: dict[str, str]) -> None:
    """Make `env` this forked process's whole environment, also in /proc/<pid>/environ.

    The kernel shows there the bytes the environment had at exec time, wherever libc's
    `environ` points now. Once every variable is unset and the kept ones set again (libc
    copies them to the heap), nothing refers to those bytes: they are overwritten with the kept
    variables, as many as fit, and zeros.
    """
    import ctypes

    os.environ.clear()
    os.environ.update(env)
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (stat fields 50, 51)
    except (OSError, IndexError, ValueError):
        return
    if not 0 < start < end:
        return
    kept = b""
    for key, value in env.items():
        entry = f"{key}={value}".encode() + b"\0"
        if len(kept) + len(entry) <= end - start:
            kept += entry
    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, kept, len(kept))


def _spawn(home: Home, run_id: str, *, in_place: bool) -> None:
    log_path = str(home.runs_dir / run_id / "shepherd.log")
    env = child_environ(home)
    if not double_fork():
        return
    code = 1
    detached = False
    try:
        close_inherited()
        detach_stdio(log_path, 0o666)  # the home's umask decides
        detached = True
        if not in_place:
            os.execve(sys.executable, [sys.executable, "-m", "orbit", "_shepherd", run_id], env)
        set_process_name()
        _replace_environ(env)
        for handler in list(logging.root.handlers):
            logging.root.removeHandler(handler)
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s shepherd %(process)d %(message)s"
        )
        from orbit.execute.shepherd import run_shepherd

        run_shepherd(Home(home.root, child_environ(home, home.environ)), run_id, spawner=spawn_fork)
        code = 0
    except BaseException:
        if detached:  # before that, stderr is still the caller's terminal
            try:
                logging.exception("shepherd for run %s failed", run_id)
            except BaseException:
                pass
    os._exit(code)


def spawn_fork(home: Home, run_id: str) -> None:
    _spawn(home, run_id, in_place=True)


def spawn_exec(home: Home, run_id: str) -> None:
    _spawn(home, run_id, in_place=False)

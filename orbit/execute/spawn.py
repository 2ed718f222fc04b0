"""Start a detached shepherd for a run.

`fork` mode (the default from the CLI) double-forks the current process: the grandchild, in a
new session, closes every inherited descriptor (so it cannot keep the caller's locks) and runs
the shepherd without paying for a fresh interpreter. `exec` mode starts `python -m orbit
_shepherd ID` instead, for long-lived threaded callers (`orbit scheduler run`).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from orbit.store.home import Home

log = logging.getLogger(__name__)


def _detach_stdio(log_path: str) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)


def _close_inherited() -> None:
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass


def _spawn(home: Home, run_id: str, *, in_place: bool) -> None:
    log_path = str(home.runs_dir / run_id / "shepherd.log")
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)  # the middle child exits at once; no zombie is left
        return
    code = 1
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        _close_inherited()
        _detach_stdio(log_path)
        try:
            with open("/proc/self/comm", "w") as comm:
                comm.write("orbit-shepherd")
        except OSError:
            pass
        if not in_place:
            # The package's parent on PYTHONPATH: `python orbit.py` works without an install.
            package_parent = str(Path(__file__).resolve().parents[2])
            path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)
            env = {**os.environ, "ORBIT_HOME": str(home.root), "PYTHONPATH": path}
            for name in ("ORBIT_DATA", "ORBIT_FAKE_GPUS", "ORBIT_GPUS"):  # as the tick saw them
                if home.environ.get(name):
                    env[name] = home.environ[name]
            os.execve(sys.executable, [sys.executable, "-m", "orbit", "_shepherd", run_id], env)
        for handler in list(logging.root.handlers):
            logging.root.removeHandler(handler)
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s shepherd %(process)d %(message)s"
        )
        from orbit.execute.shepherd import run_shepherd

        run_shepherd(Home(home.root, dict(home.environ)), run_id, spawner=spawn_fork)
        code = 0
    except BaseException:
        try:
            logging.exception("shepherd for run %s failed", run_id)
        except BaseException:
            pass
    os._exit(code)


def spawn_fork(home: Home, run_id: str) -> None:
    _spawn(home, run_id, in_place=True)


def spawn_exec(home: Home, run_id: str) -> None:
    _spawn(home, run_id, in_place=False)

"""Single-instance background workers: started detached by whoever finds work for them, alive
while they hold their lock, gone once the work is done. No daemon.

Four processes follow this one pattern (docs/architecture.md#processes): the ticker
(sched/clock.py → service/ticker.py), the notification sender (store/outbox.py →
notify/sender.py), a node's probe (sched/remote.py → nodes/probe.py) and a bench job's driver
(bench/jobs.py → bench/driver.py). Each is a `Worker`: a lock, a module run as `python -m`, its
arguments and a log.

- **Starting** (`Worker.wake`, the parent side): unless some process holds the lock, take it,
  start `python -m MODULE ARGS` detached (detach.start_with_lock: a double fork, a new
  session, stdio on the log, the scrubbed environment of store/childenv.py, only the lock
  handed over as detach.LOCK_FD), then drop this process's descriptor. Of any number of racing
  callers exactly one starts a worker; a failure to start is logged, never raised.
- **Running** (`worker_main`, the child side): the home from ORBIT_HOME, its umask, logging to
  the log (`TIME NAME PID message`), the lock adopted (store/locks.adopt_lock; when another
  process holds it, this one leaves at once), SIGTERM and SIGINT as a stop request, SIGHUP
  ignored; then the worker's body, whose last word is the log's last line.
- **Restart-safe**: the lock is the liveness (the kernel drops it when its holder dies, however
  it dies), so the next caller that finds work starts a new worker; a worker's state is in the
  home's files, never in its memory.
"""

from __future__ import annotations

import logging
import os
import sys

from orbit.detach import start_with_lock
from orbit.errors import OrbitError
from orbit.record import Frozen
from orbit.store.childenv import child_environ
from orbit.store.home import Home
from orbit.store.locks import adopt_lock, is_locked, try_lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from typing import IO

    # A worker's body: the home, the lock it holds (its own to release) and the stop request;
    # returns the log's last line.
    Body = Callable[[Home, IO[str], threading.Event], str]

log = logging.getLogger(__name__)


class Worker(Frozen):
    """One single-instance process: `name` heads its log lines, `what` names it in messages
    ("the notification sender"); it runs `python -m module *args` and holds `lock` for its whole
    life, with stdout and stderr appended to `log` (created with `log_mode`, less the umask)."""

    __slots__ = ("args", "lock", "log", "log_mode", "module", "name", "what")
    name: str
    what: str
    module: str
    lock: Path
    log: Path
    args: tuple[str, ...]
    log_mode: int

    def __init__(self, name: str, what: str, module: str, lock: Path, log: Path,
                 args: tuple[str, ...] = (), log_mode: int = 0o600) -> None:  # fmt: skip
        self._init(
            name=name, what=what, module=module, lock=lock, log=log, args=args, log_mode=log_mode
        )

    def alive(self) -> bool:
        return is_locked(self.lock)

    def wake(
        self,
        home: Home,
        environ: Mapping[str, str] | None = None,
        needed: Callable[[], bool] | None = None,
    ) -> bool:
        """Start this worker unless one lives (or `needed` says there is nothing for one); True
        when one was started. Cheap when one lives: a lock check. `environ` (default: the
        home's) is scrubbed (store/childenv.py). OSError is logged, never raised."""
        try:
            if self.alive() or (needed is not None and not needed()):
                return False
            handle = try_lock(self.lock)
            if handle is None:
                return False  # another caller is starting one this instant
            try:
                argv = [sys.executable, "-m", self.module, *self.args]
                env = child_environ(home, home.environ if environ is None else environ)
                start_with_lock(argv, env, str(self.log), str(home.root), handle.fileno(),
                                self.log_mode)  # fmt: skip
            finally:
                handle.close()  # only this process's descriptor: the worker's copy keeps the lock
        except OSError as exc:  # a full disk, a home this user may not write
            log.warning("could not start %s: %s", self.what, exc)
            return False
        return True


def worker_main(
    worker_of: Callable[[Home], Worker],
    body: Body,
    home: Home | None = None,
    *,
    stoppable: bool = True,
) -> int:
    """The child side of a worker: run `body` while holding the lock of `worker_of(home)`; 0,
    or the exit code of the OrbitError that ended it.

    `home` defaults to ORBIT_HOME's. Without `stoppable`, SIGTERM and SIGINT keep their default
    action (the body has no stop to honour) instead of setting the stop request."""
    import threading

    home = Home.from_environ(os.environ) if home is None else home
    home.apply_umask()
    worker = worker_of(home)
    fmt = f"%(asctime)s {worker.name} %(process)d %(message)s"
    logging.basicConfig(level=logging.INFO, format=fmt)
    handle = adopt_lock(worker.lock)
    if handle is None:
        return 0  # another one does this work
    stop = threading.Event()
    if stoppable:
        stop_on_signals(stop)
    ignore_hangup()
    try:
        log.info("%s", body(home, handle, stop))
    except OrbitError as exc:  # said in one line, as a command would (a bug keeps its traceback)
        log.warning("stopped: %s", exc)
        return int(exc.exit_code)
    return 0


def ignore_hangup() -> None:
    """No terminal may end a detached process."""
    import signal

    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def stop_on_signals(stop: threading.Event) -> Callable[[], None]:
    """Make SIGTERM and SIGINT set `stop`; a second one, once stopping, is handled as it would
    have been before (the process ends at once, even in the middle of a tick). Returns what
    puts the previous handlers back."""
    import signal

    previous: dict[int, signal._HANDLER] = {}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def on_signal(signum: int, frame: object) -> None:
        if not stop.is_set():
            stop.set()
            return
        restore()
        signal.raise_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        before = signal.signal(signum, on_signal)
        previous[signum] = signal.SIG_DFL if before is None else before
    return restore

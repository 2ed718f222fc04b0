"""`python -S -m orbit.execute.shepherd_main HOME [ID [--locked]]`: a shepherd's process
(see spawn.py). With `--locked`, the run's shepherd.lock comes open at detach.LOCK_FD (spawn
took it) and is adopted (store/locks.adopt_lock).

Without ID, the run's id comes as one line on stdin (a Prespawned shepherd): the imports are
done while the starter writes the run; end of file without a line means no run was admitted,
and the process exits. Only what following one container needs is imported.

When the run has ended, the first run its tick admits is followed by this same process
(shepherd.run_shepherd's `carry_on`, spawn.Successor), its output in that run's shepherd.log:
one shepherd per running container still, but not one interpreter per run.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from orbit.detach import detach_stdio, exit_from, logged, release_memory
from orbit.errors import OrbitError
from orbit.execute.shepherd import cpu_seconds, run_shepherd
from orbit.execute.spawn import LOCKED, Successor, set_process_name, spawn
from orbit.store.files import read_yaml
from orbit.store.home import Home
from orbit.store.locks import adopt_lock
from orbit.store.model import SHEPHERD_LOCK, STATUS_YAML

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

MIRROR = "orbit.nodes.mirror"  # a layer above: started as a process, never imported


def _on_a_node(home: Home, run_id: str) -> bool:
    """The run was placed on another node (status.yaml `node`, docs/nodes.md)."""
    try:
        return bool(read_yaml(home.runs_dir / run_id / STATUS_YAML).get("node"))
    except OrbitError:
        return False  # the shepherd reports what is wrong with the run


def _follow(
    home: Home, run_id: str, lock: IO[str] | None, cpu_base: float
) -> tuple[int, Successor | None]:
    """Follow one run (logged's exit code), and the run its tick admitted for this process."""
    following: list[Successor | None] = [None]

    def follow() -> None:
        following[0] = run_shepherd(
            home, run_id, spawner=spawn, lock=lock, carry_on=True, cpu_base=cpu_base
        )

    return logged(f"shepherd for run {run_id}", follow), following[0]


def main(argv: list[str]) -> int:
    set_process_name()
    if len(argv) == 1:
        run_id = sys.stdin.readline().strip()
        if not run_id:
            return 0
        home = Home(Path(argv[0]), os.environ)
        detach_stdio(str(home.runs_dir / run_id / "shepherd.log"), 0o666)
    elif len(argv) in (2, 3) and argv[2:] in ([], [LOCKED]):
        home, run_id = Home(Path(argv[0]), os.environ), argv[1]
    else:
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s shepherd %(process)d %(message)s")
    lock: IO[str] | None = None
    if argv[2:] == [LOCKED]:  # spawn() took the run's lock for this process
        lock = adopt_lock(home.runs_dir / run_id / SHEPHERD_LOCK)
        if lock is None:
            logging.info("another shepherd holds run %s", run_id)
            return 0
    cpu_base = 0.0  # the first run's CPU includes this interpreter's start, as it always did
    while True:
        if _on_a_node(home, run_id):
            # Its container runs on another node: this process becomes the run's mirror there
            # (a lock this process took is closed by the exec, and the mirror takes it).
            argv = [sys.executable, "-S", "-m", MIRROR, str(home.root), run_id]
            os.execv(sys.executable, argv)
        release_memory()
        code, nxt = _follow(home, run_id, lock, cpu_base)
        if code or nxt is None or nxt.run_id is None:
            return code
        # The run its tick admitted is this process's now, as a fresh shepherd's would be.
        run_id, lock, cpu_base = nxt.run_id, nxt.lock, cpu_seconds()
        detach_stdio(str(home.runs_dir / run_id / "shepherd.log"), 0o666)


if __name__ == "__main__":
    exit_from(main)

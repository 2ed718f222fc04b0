"""`python -S -m orbit.execute.shepherd_main HOME [ID]`: a shepherd's process (see spawn.py).

Without ID, the run's id comes as one line on stdin (a Prespawned shepherd): the imports are
done while the starter writes the run; end of file without a line means no run was admitted,
and the process exits. Only what following one container needs is imported.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from orbit.detach import detach_stdio, exit_from, logged, release_memory
from orbit.errors import OrbitError
from orbit.execute.shepherd import run_shepherd
from orbit.execute.spawn import set_process_name, spawn
from orbit.store.files import read_yaml
from orbit.store.home import Home
from orbit.store.model import STATUS_YAML

MIRROR = "orbit.nodes.mirror"  # a layer above: started as a process, never imported


def _on_a_node(home: Home, run_id: str) -> bool:
    """The run was placed on another node (status.yaml `node`, docs/nodes.md)."""
    try:
        return bool(read_yaml(home.runs_dir / run_id / STATUS_YAML).get("node"))
    except OrbitError:
        return False  # the shepherd reports what is wrong with the run


def main(argv: list[str]) -> int:
    set_process_name()
    if len(argv) == 1:
        run_id = sys.stdin.readline().strip()
        if not run_id:
            return 0
        home = Home(Path(argv[0]), os.environ)
        detach_stdio(str(home.runs_dir / run_id / "shepherd.log"), 0o666)
    elif len(argv) == 2:
        home, run_id = Home(Path(argv[0]), os.environ), argv[1]
    else:
        return 2
    if _on_a_node(home, run_id):
        # Its container runs on another node: this process becomes the run's mirror there.
        argv = [sys.executable, "-S", "-m", MIRROR, str(home.root), run_id]
        os.execv(sys.executable, argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s shepherd %(process)d %(message)s")
    release_memory()
    return logged(f"shepherd for run {run_id}", lambda: run_shepherd(home, run_id, spawner=spawn))


if __name__ == "__main__":
    exit_from(main)

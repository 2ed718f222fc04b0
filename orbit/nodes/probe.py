"""Read one node and remember it: `orbit _node info` over SSH into nodes/<name>.json.

Started by the tick (sched/remote.py) when a node's reading is stale and runs may go there, as
`python -m orbit.nodes.probe HOME NAME`, a worker of store/worker.py, holding
locks/node-<name>.probe.lock for its life (one probe per node at a time). After writing the
reading it ticks, so a run waiting for that node is placed at once.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from orbit.detach import exit_from
from orbit.errors import NodeError, NodeUnreachable
from orbit.execute.spawn import spawn
from orbit.nodes import ssh
from orbit.sched.remote import probe_worker
from orbit.sched.tick import tick
from orbit.store import nodes
from orbit.store.home import Home
from orbit.store.locks import release
from orbit.store.worker import worker_main

if TYPE_CHECKING:
    from orbit.store.worker import Body

PROBE_TIMEOUT_S = 30.0


def read_node(home: Home, node: nodes.Node, timeout: float = PROBE_TIMEOUT_S) -> nodes.NodeState:
    """Ask the node for its reading and record the answer (or that there was none)."""
    try:
        # A home named with --home must be there already (never made by a probe).
        args = ["existing"] if node.home else []
        raw = ssh.call(node, home.environ, "info", args, timeout=timeout)
        info: dict[str, Any] = json.loads(raw)
        if not isinstance(info, dict) or "pool" not in info:
            raise NodeError(f"node {node.name}: unexpected answer to `_node info`")
    except NodeUnreachable as exc:
        return nodes.write_state(home, node.name, error=str(exc))
    except (NodeError, ValueError) as exc:
        return nodes.write_state(home, node.name, error=str(exc).splitlines()[0])
    return nodes.write_state(home, node.name, info=info)


def _probe(name: str) -> Body:
    def body(home: Home, handle: IO[str], stop: threading.Event) -> str:
        try:  # an unknown node (an OrbitError) ends it, said in the log
            node = nodes.get(home, name)
            state = read_node(home, node)
        finally:
            release(handle)  # before the tick, which may start the next probe
        tick(home, spawn=spawn, actor=f"probe:{name}")
        return f"node {node.name}: {'reachable' if state.ok else state.error}"

    return body


def main(argv: list[str]) -> int:
    """`python -m orbit.nodes.probe HOME NAME`: read node NAME into HOME's nodes/NAME.json,
    then tick."""
    if len(argv) != 2:
        return 2
    home, name = Home(Path(argv[0]), os.environ), argv[1]
    return worker_main(lambda h: probe_worker(h, name), _probe(name), home, stoppable=False)


if __name__ == "__main__":
    exit_from(main)

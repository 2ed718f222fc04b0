"""Read one node and remember it: `orbit _node info` over SSH into nodes/<name>.json.

Started by the tick (sched/remote.py) when a node's reading is stale and runs may go there, as
`python -m orbit.nodes.probe HOME NAME`, detached, holding locks/node-<name>.probe.lock for
its life (one probe per node at a time). After writing the reading it ticks, so a run waiting
for that node is placed at once.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from orbit.errors import NodeError, NodeUnreachable, OrbitError
from orbit.execute.spawn import spawn
from orbit.nodes import ssh
from orbit.sched.tick import tick
from orbit.store import nodes
from orbit.store.home import Home
from orbit.store.locks import adopt_lock, release

log = logging.getLogger(__name__)

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


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s probe %(process)d %(message)s")
    home = Home(Path(argv[0]), os.environ)
    handle = adopt_lock(nodes.probe_lock(home, argv[1]))
    if handle is None:
        return 0
    try:
        node = nodes.get(home, argv[1])
        state = read_node(home, node)
        log.info("node %s: %s", node.name, "reachable" if state.ok else state.error)
    except OrbitError as exc:
        log.warning("%s", exc)
        return 1
    finally:
        release(handle)
    tick(home, spawn=spawn, actor=f"probe:{argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What the primary asks a node about one of its runs there: its output/ (which stays on the
node, docs/nodes.md), read through the node when `orbit show` or the web view needs it."""

from __future__ import annotations

import json
from typing import Any

from orbit.errors import NodeError, NotFoundError
from orbit.nodes import ssh
from orbit.store import nodes
from orbit.store.home import Home
from orbit.store.model import Run

MAX_READ = 64 << 20  # the most of one output file read through a node at once


def where(home: Home, run: Run) -> tuple[nodes.Node, str] | None:
    """The node a run of this home was sent to and its id there; None for a run here (or one
    not sent yet). NotFoundError when that node was removed from this home."""
    name = run.status.get("node")
    remote_id = (run.status.get("remote") or {}).get("id")
    if not name or not remote_id:
        return None
    return nodes.get(home, str(name)), str(remote_id)


def outputs(home: Home, run: Run, *, timeout: float = 30.0) -> list[dict[str, Any]] | None:
    """The files of the run's output/ on its node (path and size), or None for a run here;
    NodeUnreachable when the node does not answer within `timeout` seconds."""
    found = where(home, run)
    if found is None:
        return None
    node, remote_id = found
    answer = ssh.call(node, home.environ, "outputs", [remote_id], timeout=timeout)
    try:
        return [
            {"path": str(f["path"]), "size": int(f["size"])} for f in json.loads(answer)["files"]
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise NodeError(
            f"node {node.name}: an output listing that cannot be read ({exc})"
        ) from None


def read_output(home: Home, run: Run, path: str, *, timeout: float = 120.0) -> bytes:
    """One file of the run's output/ on its node (`path` relative to output/, checked there
    too: nodes/agent.py `output_file`)."""
    found = where(home, run)
    if found is None:
        raise NotFoundError(f"run {run.label} is not on another node")
    node, remote_id = found
    data = ssh.call(node, home.environ, "cat", [remote_id, path], timeout=timeout)
    if len(data) > MAX_READ:
        raise NodeError(f"node {node.name}: {path} is larger than {MAX_READ >> 20} MiB")
    return data

"""What is known of each node, as one row: `orbit node ls`, `orbit resources` and the web view's
resources page show the same row. Built from a node's last reading (nodes/<name>.json); reaching
the node is the caller's choice (`orbit node ls` reads each one over SSH first; the resources
report only wakes the node's probe when the reading is stale, so it never waits on a node)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from orbit.errors import OrbitError
from orbit.sched.nodeplace import pool_from_dict
from orbit.sched.remote import placed_on, wake_probe
from orbit.store import nodes
from orbit.store.home import Home
from orbit.store.model import Run


def free_of(info: dict[str, Any]) -> dict[str, Any]:
    """Free and total CPUs, memory and GPUs from a node's reading (`[free, total]` each)."""
    try:
        pool = pool_from_dict(info.get("pool") or {})
    except ValueError:
        return {}
    total, leased, outside = pool.totals, pool.leased, pool.outside
    return {
        "cpus": [round(total.cpus - leased.cpus - outside.cpus, 2), total.cpus],
        "mem_gb": [round(total.mem_gb - leased.mem_gb - outside.mem_gb, 2), total.mem_gb],
        "gpus": [sum(1 for g in pool.gpus if g.allowed and not g.holder), len(pool.gpus)],
    }


def node_row(node: nodes.Node, state: nodes.NodeState | None, runs: list[str]) -> dict[str, Any]:
    """The node, its last reading and `runs`, this home's active runs on it."""
    row: dict[str, Any] = {"name": node.name, "url": node.url, "home": node.home}
    if state is None:
        row.update(reachable=None, error="never reached")
    else:
        row.update(reachable=state.ok, checked_at=state.at.isoformat() if state.at else None)
        if not state.ok:
            row["error"] = state.error
            row["since"] = state.since.isoformat() if state.since else None
    info = state.info if state else {}
    row["version"] = info.get("version")
    row["executor"] = info.get("executor")
    row["free"] = free_of(info)
    row["datasets"] = sorted((info.get("datasets") or {}).keys())
    row["runs"] = {"here": runs, "there": info.get("runs") or {}}
    return row


def runs_on_nodes(runs: Iterable[Run]) -> dict[str, list[str]]:
    """The active runs among `runs` by the node this home sent them to."""
    out: dict[str, list[str]] = {}
    for run in runs:
        node = placed_on(run)
        if node and run.state.active:
            out.setdefault(node, []).append(run.id)
    return out


def cached_rows(
    home: Home, runs: Iterable[Run], now: datetime
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every node's row from its last reading, with `age_s` (seconds since it was read; None
    when never), and problems (a damaged nodes.yaml). A reading older than nodes.FRESH_S wakes
    the node's probe, which reads it again in the background: the next look is fresh."""
    try:
        registry = nodes.load(home)
    except OrbitError as exc:
        return [], [str(exc)]
    placed = runs_on_nodes(runs)
    rows = []
    for name, node in registry.items():
        state = nodes.read_state(home, name)
        if state is None or not state.fresh(now):
            wake_probe(home, name)
        row = node_row(node, state, placed.get(name, []))
        row["age_s"] = round(state.age_s(now), 1) if state and state.at else None
        rows.append(row)
    return rows, []

"""Placing queued runs on other nodes: the same admission rules, against each node's pool.

A node's pool is what its own tick would see (its `orbit _node info`, kept in
nodes/<name>.json), less what this home has placed there since that was read. A run that waits
here is offered to the nodes in the order they were added; the first whose pool admits it gets
it. One that no node takes waits with every node's reason, e.g.

    waiting for a node: vm: 1 GPU: GPU 0 leased to run 3; gpu-b: 1 GPU: GPU 0 leased to
    run 7; gpu-c: unreachable since 12:03

Nothing here touches a file or a node: the tick reads, calls `place`, acts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from orbit.record import Frozen
from orbit.sched.plan import Admit, Demand, GpuSlot, Pool, Wait, plan
from orbit.sched.resources import Amount

# A reachable node's pool is used for this long after it was read; the tick asks for a new
# reading well before (store/nodes.py FRESH_S).
USABLE_S = 120.0


def pool_to_dict(pool: Pool) -> dict[str, Any]:
    return {
        "totals": [pool.totals.cpus, pool.totals.mem_gb],
        "leased": [pool.leased.cpus, pool.leased.mem_gb],
        "outside": [pool.outside.cpus, pool.outside.mem_gb],
        "outside_cpu_note": pool.outside_cpu_note,
        "outside_mem_note": pool.outside_mem_note,
        "gpus": [
            [g.index, g.uuid, g.mem_total, g.mem_free, g.allowed, g.holder] for g in pool.gpus
        ],
    }


def pool_from_dict(doc: dict[str, Any]) -> Pool:
    """The pool a node reported; ValueError when it is not one."""
    try:
        return Pool(
            totals=Amount(*map(float, doc["totals"])),
            leased=Amount(*map(float, doc["leased"])),
            outside=Amount(*map(float, doc["outside"])),
            outside_cpu_note=str(doc.get("outside_cpu_note") or ""),
            outside_mem_note=str(doc.get("outside_mem_note") or ""),
            gpus=tuple(
                GpuSlot(int(i), str(u), int(t), int(f), bool(a), h)
                for i, u, t, f, a, h in doc["gpus"]
            ),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a pool: {exc}") from None


class Target(Frozen):
    """A node runs may be placed on, as the tick knows it now."""

    __slots__ = ("error", "name", "pinned_only", "pool", "sending")
    name: str
    pool: Pool | None  # None: not usable now, and `error` says why
    error: str
    pinned_only: bool  # a Slurm node: takes only runs that name it
    sending: tuple[Demand, ...]  # placed there since its pool was read

    def __init__(
        self,
        name: str,
        pool: Pool | None,
        error: str = "",
        pinned_only: bool = False,
        sending: tuple[Demand, ...] = (),
    ) -> None:
        self._init(name=name, pool=pool, error=error, pinned_only=pinned_only, sending=sending)


class Place(Frozen):
    """Send this run to that node."""

    __slots__ = ("node", "run_id")
    run_id: str
    node: str

    def __init__(self, run_id: str, node: str) -> None:
        self._init(run_id=run_id, node=node)


def _less(pool: Pool, sending: Sequence[Demand], group_running: dict[str, int]) -> Pool:
    """The pool without what is on its way there; GPUs taken lowest first."""
    leased = pool.leased
    gpus = list(pool.gpus)
    for d in sending:
        leased = leased + d.need
        left = d.gpus
        for i, g in enumerate(gpus):
            if left and g.allowed and not g.holder:
                gpus[i] = GpuSlot(
                    g.index, g.uuid, g.mem_total, g.mem_free, g.allowed, f"going to run {d.label}"
                )
                left -= 1
    return Pool(
        totals=pool.totals,
        leased=leased,
        outside=pool.outside,
        outside_cpu_note=pool.outside_cpu_note,
        outside_mem_note=pool.outside_mem_note,
        gpus=tuple(gpus),
        group_running=group_running,
    )


def _offered(
    left: Sequence[tuple[Demand, Wait, str | None]],
    target: Target,
    avoid: dict[str, set[str]],
    reasons: dict[str, list[str]],
) -> list[tuple[Demand, Wait]]:
    """The runs the target may be offered: those naming it, or (not for a Slurm node) none;
    never one it would not take before."""
    out = []
    for d, w, pin in left:
        if not (pin == target.name or (pin is None and not target.pinned_only)):
            continue
        if target.name in avoid.get(d.run_id, ()):
            reasons[d.run_id].append(f"{target.name}: did not take it")
            continue
        out.append((d, w))
    return out


def _with_datasets(
    offered: list[tuple[Demand, Wait]],
    name: str,
    needs: dict[str, set[str]],
    datasets: dict[str, set[str]],
    reasons: dict[str, list[str]],
) -> list[tuple[Demand, Wait]]:
    """The offered runs whose datasets node `name` has; the others get its reason."""
    kept = []
    for d, w in offered:
        lacking = needs.get(d.run_id, set()) - datasets.get(name, set())
        if lacking:
            reasons[d.run_id].append(f"{name}: has no dataset {', '.join(sorted(lacking))}")
        else:
            kept.append((d, w))
    return kept


def _why(reason: str) -> str:
    return reason.removeprefix("waiting for ")


def place(
    waiting: Sequence[tuple[Demand, Wait, str | None]],
    here: str,
    targets: Sequence[Target],
    group_running: dict[str, int],
    now: datetime,
    reserve_after_s: float,
    needs: dict[str, set[str]] | None = None,
    datasets: dict[str, set[str]] | None = None,
    avoid: dict[str, set[str]] | None = None,
) -> list[Place | Wait]:
    """Decisions for runs that cannot start here: (demand, its Wait here, the node it names
    or None). A run naming a node is offered to that node only; a run that names datasets
    (`needs`, by run id) only to nodes that have them all (`datasets`, by node)."""
    needs = needs or {}
    datasets = datasets or {}
    avoid = avoid or {}
    left = list(waiting)
    reasons: dict[str, list[str]] = {d.run_id: [] for d, _, _ in waiting}
    placed: dict[str, str] = {}
    for target in targets:
        offered = _offered(left, target, avoid, reasons)
        if target.pool is not None:
            offered = _with_datasets(offered, target.name, needs, datasets, reasons)
        if not offered:
            continue
        if target.pool is None:
            for d, _ in offered:
                reasons[d.run_id].append(f"{target.name}: {target.error}")
            continue
        if target.pinned_only:  # Slurm: it queues and schedules what it is sent itself
            placed.update((d.run_id, target.name) for d, _ in offered)
            left = [item for item in left if item[0].run_id not in placed]
            continue
        pool = _less(target.pool, target.sending, group_running)
        decisions = plan([d for d, _ in offered], pool, now, reserve_after_s)
        for decision in decisions:
            if isinstance(decision, Admit):
                placed[decision.run_id] = target.name
                if any(d.run_id == decision.run_id and d.group for d, _ in offered):
                    group = next(d.group for d, _ in offered if d.run_id == decision.run_id)
                    if group:
                        group_running[group] = group_running.get(group, 0) + 1
            else:
                reasons[decision.run_id].append(f"{target.name}: {_why(decision.reason)}")
        left = [item for item in left if item[0].run_id not in placed]
    out: list[Place | Wait] = []
    for d, w, pin in waiting:
        if d.run_id in placed:
            out.append(Place(d.run_id, placed[d.run_id]))
            continue
        parts = reasons[d.run_id]
        if pin is not None and pin != here:
            text = "; ".join(parts) if parts else f"{pin}: not a node of this home"
            out.append(Wait(d.run_id, f"waiting for node {text}"))
        elif parts:
            out.append(
                Wait(d.run_id, f"waiting for a node: {here}: {_why(w.reason)}; " + "; ".join(parts))
            )
        else:
            out.append(w)
    return out

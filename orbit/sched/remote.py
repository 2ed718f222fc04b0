"""What the tick does for other nodes: offer them the runs that wait here, and keep their
readings fresh. It never reaches a node itself: it reads nodes/<name>.json (store/nodes.py),
and when a reading is stale it starts that node's probe (`python -m orbit.nodes.probe HOME
NAME`, one per node at a time, a worker of store/worker.py), which reads the node over SSH,
writes the file and ticks. So no tick ever waits on a slow or vanished node.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from orbit.errors import OrbitError
from orbit.sched.nodeplace import USABLE_S, Place, Target, place, pool_from_dict
from orbit.sched.plan import Admit, Demand, Wait
from orbit.sched.resources import Amount
from orbit.store import nodes
from orbit.store.home import Home
from orbit.store.model import Run, parse_iso
from orbit.store.worker import Worker

PROBE_MODULE = "orbit.nodes.probe"  # a node's probe process: `python -m` this, HOME NAME
RETRY_S = 3.0  # an unreachable node is tried again this often while runs may go to it


def demand_of(run: Run) -> Demand:
    res = run.resources
    return Demand(
        run_id=run.id,
        need=Amount(res.cpus, res.mem_gb),
        gpus=res.gpus,
        gpu_mem_gb=res.gpu_mem_gb,
        gpu_ids=res.gpu_ids,
        group=run.group,
        group_cap=run.spec.get("group_cap"),
        submitted_at=parse_iso(run.status.get("submitted_at")),
        label=run.label,
    )


def pinned(run: Run) -> str | None:
    """The node a run must run on (`orbit run --node`), or None."""
    value = run.spec.get("pin_node")
    return str(value) if value else None


def not_here(run: Run) -> set[str]:
    """The datasets the run names that this machine does not have (run.yaml `datasets`
    entries without a path: docs/nodes.md)."""
    return {
        str(d.get("name"))
        for d in run.spec.get("datasets") or []
        if isinstance(d, dict) and not d.get("path")
    }


def placed_on(run: Run) -> str | None:
    """The node this home sent the run to, or None when it runs here."""
    value = run.status.get("node")
    return str(value) if value else None


def portable(run: Run) -> str | None:
    """Why the run can only run on this machine, or None when a node may take it."""
    if run.spec.get("dockerfile"):
        return "it is built from a Dockerfile here"
    data = {str(d.get("target")) for d in run.spec.get("datasets") or [] if isinstance(d, dict)}
    if any(str(m.get("target")) not in data for m in run.spec.get("mounts") or []):
        return "it mounts paths of this machine (-m)"
    if run.spec.get("auth"):
        return "its agent's login is on this machine"
    if (run.project or {}).get("mode") == "mount":
        return "it mounts the repository of this machine"
    return None


def probe_worker(home: Home, name: str) -> Worker:
    """The node's probe, as store/worker.py starts it."""
    lock, log_path = nodes.probe_lock(home, name), home.runtime_dir / f"probe-{name}.log"
    args = (str(home.root), name)
    return Worker("probe", f"the probe of node {name}", PROBE_MODULE, lock, log_path, args)


def wake_probe(home: Home, name: str) -> None:
    """Start the node's probe unless one is running. Never raises."""
    probe_worker(home, name).wake(home)


def _since(state: nodes.NodeState) -> str:
    when = state.since or state.at
    return when.astimezone().strftime("%H:%M") if when else "?"


def targets(
    home: Home, leased: Sequence[Run], now: datetime
) -> tuple[list[Target], dict[str, set[str]], list[str]]:
    """The nodes as targets, the datasets each has, and problems (a damaged nodes.yaml)."""
    try:
        registry = nodes.load(home)
    except OrbitError as exc:
        return [], {}, [str(exc)]
    out: list[Target] = []
    datasets: dict[str, set[str]] = {}
    for name, node in registry.items():
        state = nodes.read_state(home, name)
        if state is None or not state.fresh(now) or (not state.ok and state.age_s(now) > RETRY_S):
            wake_probe(home, name)
        slurm = node.kind == "slurm"
        if state is None:
            out.append(Target(name, None, "not reached yet", slurm))
            continue
        if not state.ok:
            out.append(Target(name, None, f"unreachable since {_since(state)}", slurm))
            continue
        if state.age_s(now) > USABLE_S:
            out.append(Target(name, None, "no recent reading", slurm))
            continue
        info = state.info
        datasets[name] = set((info.get("datasets") or {}).keys())
        queued = int((info.get("runs") or {}).get("queued") or 0)
        if queued and not slurm:
            out.append(Target(name, None, f"{queued} runs queued there", slurm))
            continue
        try:
            pool = pool_from_dict(info.get("pool") or {})
        except ValueError as exc:
            out.append(Target(name, None, f"unreadable reading ({exc})", slurm))
            continue
        sending = tuple(demand_of(r) for r in leased if placed_on(r) == name and _unseen(r, state))
        out.append(Target(name, pool, "", slurm, sending))
    return out, datasets, []


def _unseen(run: Run, state: nodes.NodeState) -> bool:
    """A run placed on the node that its reading cannot count yet: not written there yet, or
    placed after the reading was taken."""
    return not (run.status.get("remote") or {}).get("id") or _after(run, state)


def _after(run: Run, state: nodes.NodeState) -> bool:
    placed = parse_iso(run.status.get("placed_at"))
    return placed is None or state.at is None or placed >= state.at


def offer(
    home: Home,
    queued: Sequence[Run],
    decisions: list[Admit | Wait],
    leased: Sequence[Run],
    group_running: dict[str, int],
    now: datetime,
    reserve_after_s: float,
) -> tuple[list[Admit | Wait | Place], list[str]]:
    """The decisions with the runs that wait here (or name another node) offered to the nodes."""
    here = nodes.local_name(home)
    by_id = {r.id: r for r in queued}
    waiting: list[tuple[Demand, Wait, str | None]] = []
    kept: list[Admit | Wait | Place] = []
    for decision in decisions:
        run = by_id[decision.run_id]
        if isinstance(decision, Wait) and pinned(run) is None and portable(run) is None:
            waiting.append((demand_of(run), decision, None))
        else:
            kept.append(decision)
    for run in queued:
        pin = pinned(run)
        if pin is not None and pin != here:
            waiting.append((demand_of(run), Wait(run.id, ""), pin))
    if not waiting:
        return kept, []
    found, datasets, problems = targets(home, leased, now)
    needs = {d.run_id: _datasets_of(by_id[d.run_id]) for d, _, _ in waiting}
    avoid = {d.run_id: set(by_id[d.run_id].status.get("refused_by") or []) for d, _, _ in waiting}
    placed = place(
        waiting, here, found, dict(group_running), now, reserve_after_s, needs, datasets, avoid
    )
    return [*kept, *placed], problems


def _datasets_of(run: Run) -> set[str]:
    return {str(d.get("name")) for d in run.spec.get("datasets") or [] if isinstance(d, dict)}

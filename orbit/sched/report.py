"""The resources report: who holds the GPUs, CPUs and memory, why queued runs wait, and the
other nodes as last read (sched/noderows.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from orbit.human import fmt_cpus
from orbit.sched import pool
from orbit.sched.gpus import GIB
from orbit.sched.noderows import cached_rows
from orbit.sched.tick import unreadable_lease
from orbit.store.home import Home
from orbit.store.locks import stuck_scheduler
from orbit.store.model import LEASED, RunState
from orbit.store.runs import Broken, RunStore


def report(home: Home) -> dict[str, Any]:
    """What `orbit resources` and the web view show."""

    store = RunStore(home)
    loaded = store.load_many(store.active_ids())
    runs = [r for r in loaded if not isinstance(r, Broken)]
    leased = [r for r in runs if r.state in LEASED]
    queued = [r for r in runs if r.state is RunState.QUEUED]
    problems: list[str] = []
    for broken in (r for r in loaded if isinstance(r, Broken)):
        assumed, problem = unreadable_lease(home, store, broken)
        if assumed is not None:  # its container may be running: count it, as the tick does
            leased.append(assumed)
            problems.append(problem)
    stuck = stuck_scheduler(home.locks_dir)
    if stuck:
        problems.append(stuck)
    reading = pool.build(home, leased)
    node_rows, node_problems = cached_rows(home, runs, datetime.now(UTC))
    slots = {s.index: s for s in reading.pool.gpus}
    gpus = []
    for g in reading.gpus:
        slot = slots.get(g.index)
        gpus.append(
            {
                "index": g.index,
                "uuid": g.uuid,
                "name": g.name,
                "memory_total_gb": round(g.mem_total / GIB, 2),
                "memory_used_gb": round(g.mem_used / GIB, 2),
                "utilization": g.utilization,
                "allowed": slot.allowed if slot else True,
                "holder": slot.holder if slot else None,
                "free": bool(slot and slot.allowed and slot.holder is None),
                "processes": [
                    {
                        "pid": p.pid,
                        "name": p.name,
                        "user": p.user,
                        "memory_gb": round(p.mem_bytes / GIB, 2),
                        "container": p.container_id,
                    }
                    for p in g.processes
                ],
            }
        )
    return {
        "executor": home.settings.executor,
        "slurm_partition": home.settings.slurm_partition,
        "gpu_source": reading.gpu_kind,
        "gpus": gpus,
        "gpus_free": sum(1 for g in gpus if g["free"]),
        **_cpus_and_memory(reading),
        "leases": [
            {
                "id": r.id,
                "name": r.name or None,
                "state": r.state.value,
                "cpus": pool.lease_of(r).cpus,
                "mem_gb": pool.lease_of(r).mem_gb,
                "gpus": [g.get("index") for g in pool.leased_gpus(r)],
                "user": _user_of(r.spec),
            }
            for r in leased
        ],
        "queue": [{"id": r.id, "name": r.name or None, "reason": r.reason} for r in queued],
        "nodes": node_rows,
        "problems": reading.problems + problems + node_problems,
    }


def _user_of(spec: dict[str, Any]) -> str | None:
    """Who submitted the run (run.yaml's `submitted_by.user`), None when it does not say."""
    by = spec.get("submitted_by")
    user = by.get("user") if isinstance(by, dict) else None
    return str(user) if user else None


def _cpus_and_memory(reading: pool.Reading) -> dict[str, Any]:
    """Totals, leases, what admission would give now (`free`: total − leased − counted
    outside use), and the use outside Orbit: `measured: false` and nulls where Orbit does not
    measure (count_outside_use: false; the CPU until a second sample), never a made-up 0."""
    p, out = reading.pool, reading.outside
    cpu_known = out.measured and out.cpu_measured
    return {
        "cpus": {
            "total": p.totals.cpus,
            "leased": p.leased.cpus,
            "free": round(max(0.0, p.totals.cpus - p.leased.cpus - p.outside.cpus), 2),
            "measured": cpu_known,
            "outside": round(out.cpu_cores, 2) if cpu_known else None,
            "outside_counted": round(p.outside.cpus, 2),
            "load": round(out.load, 2) if cpu_known else None,
        },
        "memory": {
            "total_gb": round(p.totals.mem_gb, 2),
            "leased_gb": p.leased.mem_gb,
            "free_gb": round(max(0.0, p.totals.mem_gb - p.leased.mem_gb - p.outside.mem_gb), 2),
            "measured": out.measured,
            "outside_gb": round(out.mem_gb, 2) if out.measured else None,
            "outside_counted_gb": round(p.outside.mem_gb, 2),
        },
    }


# --- the report as text: `orbit resources` and the Feishu bot's /gpu say it in these words ---
def executor_line(data: dict[str, Any]) -> str | None:
    """A Slurm home's line (Slurm places the runs: this machine's GPUs, CPUs and memory are
    not what they lease); None when runs run here."""
    if data["executor"] != "slurm":
        return None
    partition = data["slurm_partition"]
    where = f"partition {partition}" if partition else "the default partition"
    return f"Executor: Slurm ({where}); runs lease what their job was granted"


def gpu_source(data: dict[str, Any]) -> str:
    return {"fake": "stand-in", "nvml": "NVML", "none": "none found"}[data["gpu_source"]]


def gpu_line(g: dict[str, Any]) -> str:
    """`0  A100  3.2/80.0 GiB used, 40% busy  leased to run 12 (lr)`."""
    util = f", {g['utilization']}% busy" if g["utilization"] is not None else ""
    state = g["holder"] or ("free" if g["allowed"] else "not allowed (ORBIT_GPUS)")
    return (
        f"{g['index']}  {g['name']}  {g['memory_used_gb']:.1f}/{g['memory_total_gb']:.1f}"
        f" GiB used{util}  {state}"
    )


def cpu_memory_lines(data: dict[str, Any]) -> list[str]:
    """`CPUs: 1 of 2 leased, 1 free; 0.4 busy outside Orbit` and the memory line; "not
    measured" where the report has no figure (count_outside_use: false, no CPU sample yet)."""
    c, m = data["cpus"], data["memory"]
    mem_out = "use outside Orbit not measured (count_outside_use: false)"
    cpu_out = mem_out if not m["measured"] else "use outside Orbit not measured yet (first sample)"
    if c["outside"] is not None:
        cpu_out = f"{c['outside']:.1f} busy outside Orbit (load {c['load']:g})"
    if m["outside_gb"] is not None:
        mem_out = f"{m['outside_gb']:.1f} GiB in use outside Orbit"
    return [
        f"CPUs:   {c['leased']:g} of {c['total']:g} leased, {c['free']:g} free; {cpu_out}",
        f"Memory: {m['leased_gb']:g} of {m['total_gb']:g} GiB leased, {m['free_gb']:g} GiB free; "
        f"{mem_out}",
    ]


def lease_line(lease: dict[str, Any]) -> str:
    """`12 (lr)  running  2 CPUs, 8 GiB, GPU 0,1`."""
    label = f"{lease['id']} ({lease['name']})" if lease["name"] else lease["id"]
    gpu_txt = f", GPU {','.join(str(i) for i in lease['gpus'])}" if lease["gpus"] else ""
    return f"{label}  {lease['state']}  {fmt_cpus(lease['cpus'])}, {lease['mem_gb']:g} GiB{gpu_txt}"


def queue_line(q: dict[str, Any]) -> str:
    """`13 (lr2)  waiting for 1 GPU: …`."""
    label = f"{q['id']} ({q['name']})" if q["name"] else q["id"]
    return f"{label}  {q['reason']}"

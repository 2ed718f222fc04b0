"""The resources report: who holds the GPUs, CPUs and memory, why queued runs wait, and the
other nodes as last read (sched/noderows.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

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
            }
            for r in leased
        ],
        "queue": [{"id": r.id, "name": r.name or None, "reason": r.reason} for r in queued],
        "nodes": node_rows,
        "problems": reading.problems + problems + node_problems,
    }


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

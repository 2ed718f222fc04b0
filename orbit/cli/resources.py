"""orbit resources: GPUs, CPUs and memory, who holds them, and the queue with its reasons."""

from __future__ import annotations

import argparse
from typing import Any

from orbit.cli.common import add_json, print_json
from orbit.env import Env


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resources", help="GPUs, CPUs, memory, leases and the queue")
    add_json(p)
    p.set_defaults(func=run)


def collect(env: Env) -> dict[str, Any]:
    """The data behind `orbit resources` (also what the web view shows)."""
    from orbit.sched import pool
    from orbit.sched.gpus import GIB
    from orbit.sched.tick import unreadable_lease
    from orbit.store.locks import stuck_scheduler
    from orbit.store.model import LEASED, RunState
    from orbit.store.runs import Broken, RunStore

    store = RunStore(env.home)
    loaded = store.load_many(store.active_ids())
    runs = [r for r in loaded if not isinstance(r, Broken)]
    leased = [r for r in runs if r.state in LEASED]
    queued = [r for r in runs if r.state is RunState.QUEUED]
    problems: list[str] = []
    for broken in (r for r in loaded if isinstance(r, Broken)):
        assumed, problem = unreadable_lease(env.home, store, broken)
        if assumed is not None:  # its container may be running: count it, as the tick does
            leased.append(assumed)
            problems.append(problem)
    stuck = stuck_scheduler(env.home.locks_dir)
    if stuck:
        problems.append(stuck)
    snap = pool.build(env.home, leased)
    slots = {s.index: s for s in snap.pool.gpus}
    gpus = []
    for g in snap.gpus:
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
    p, out = snap.pool, snap.outside
    return {
        "gpu_source": snap.gpu_kind,
        "gpus": gpus,
        "cpus": {
            "total": p.totals.cpus,
            "leased": p.leased.cpus,
            "outside": round(out.cpu_cores, 2),
            "outside_counted": round(p.outside.cpus, 2),
            "load": round(out.load, 2),
        },
        "memory": {
            "total_gb": round(p.totals.mem_gb, 2),
            "leased_gb": p.leased.mem_gb,
            "outside_gb": round(out.mem_gb, 2),
            "outside_counted_gb": round(p.outside.mem_gb, 2),
        },
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
        "queue": [
            {"id": r.id, "name": r.name or None, "reason": r.status.get("reason")} for r in queued
        ],
        "problems": snap.problems + problems,
    }


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.sched.plan import fmt_cpus

    data = collect(env)
    if args.json:
        print_json(env, data)
        return 0
    w = env.stdout.write
    gpus = data["gpus"]
    source = {"fake": "stand-in", "nvml": "NVML", "none": "none found"}[data["gpu_source"]]
    w(f"GPUs ({source}):\n" if gpus else f"GPUs: {source}\n")
    for g in gpus:
        util = f", {g['utilization']}% busy" if g["utilization"] is not None else ""
        state = g["holder"] or ("free" if g["allowed"] else "not allowed (ORBIT_GPUS)")
        w(
            f"  {g['index']}  {g['name']}  {g['memory_used_gb']:.1f}/{g['memory_total_gb']:.1f}"
            f" GiB used{util}  {state}\n"
        )
    c, m = data["cpus"], data["memory"]
    w(f"CPUs:   {c['leased']:g} of {c['total']:g} leased; {c['outside']:.1f} busy outside Orbit\n")
    w(
        f"Memory: {m['leased_gb']:g} of {m['total_gb']:g} GiB leased; "
        f"{m['outside_gb']:.1f} GiB in use outside Orbit\n"
    )
    w("Leases:\n" if data["leases"] else "Leases: none\n")
    for lease in data["leases"]:
        label = f"{lease['id']} ({lease['name']})" if lease["name"] else lease["id"]
        gpu_txt = f", GPU {','.join(str(i) for i in lease['gpus'])}" if lease["gpus"] else ""
        amounts = f"{fmt_cpus(lease['cpus'])}, {lease['mem_gb']:g} GiB{gpu_txt}"
        w(f"  {label}  {lease['state']}  {amounts}\n")
    w("Queue:\n" if data["queue"] else "Queue: empty\n")
    for q in data["queue"]:
        label = f"{q['id']} ({q['name']})" if q["name"] else q["id"]
        w(f"  {label}  {q['reason']}\n")
    for problem in data["problems"]:
        w(f"problem: {problem}\n")
    return 0

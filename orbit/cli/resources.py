"""orbit resources: GPUs, CPUs and memory, who holds them, and the queue with its reasons."""

from __future__ import annotations

import argparse
import io
from typing import Any

from orbit.cli.common import add_json, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.human import ago, fmt_cpus


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resources", help="GPUs, CPUs, memory, leases and the queue")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.sched.report import report

    data = report(env.home)
    if args.json:
        print_json(env, data)
        return ExitCode.OK
    w = env.stdout.write
    if data["executor"] == "slurm":
        # Slurm places the runs: this machine's GPUs, CPUs and memory are not what they lease.
        partition = data["slurm_partition"]
        where = f"partition {partition}" if partition else "the default partition"
        w(f"Executor: Slurm ({where}); runs lease what their job was granted\n")
    else:
        _machine(env, data)
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
    _nodes(env, data["nodes"])
    for problem in data["problems"]:
        w(f"problem: {problem}\n")
    return ExitCode.OK


def _nodes(env: Env, rows: list[dict[str, Any]]) -> None:
    """The other nodes as last read, with the reading's age (a home without nodes: nothing)."""
    from orbit.cli.node import NODE_HEADERS, node_cells

    if not rows:
        return
    env.stdout.write("Nodes (last readings; `orbit node ls` reads them now):\n")
    body = [[*node_cells(r), ago(r.get("checked_at"))] for r in rows]
    out = io.StringIO()
    table(out, [*NODE_HEADERS, "RUNS HERE", "READ"], body)
    env.stdout.write("".join(f"  {line}\n" for line in out.getvalue().splitlines()))


def _machine(env: Env, data: dict[str, Any]) -> None:
    """This machine's GPUs, CPUs and memory (a home whose runs run here)."""
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
    for line in cpu_memory_lines(data):
        w(line + "\n")


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

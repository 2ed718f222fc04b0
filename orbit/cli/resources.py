"""orbit resources: GPUs, CPUs and memory, who holds them, and the queue with its reasons."""

from __future__ import annotations

import argparse
import io
from typing import Any

from orbit.cli.common import add_json, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.human import ago


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resources", help="GPUs, CPUs, memory, leases and the queue")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.sched.report import executor_line, lease_line, queue_line, report

    data = report(env.home)
    if args.json:
        print_json(env, data)
        return ExitCode.OK
    w = env.stdout.write
    slurm = executor_line(data)
    if slurm is not None:
        w(slurm + "\n")
    else:
        _machine(env, data)
    w("Leases:\n" if data["leases"] else "Leases: none\n")
    for lease in data["leases"]:
        w(f"  {lease_line(lease)}\n")
    w("Queue:\n" if data["queue"] else "Queue: empty\n")
    for q in data["queue"]:
        w(f"  {queue_line(q)}\n")
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
    from orbit.sched.report import cpu_memory_lines, gpu_line, gpu_source

    w = env.stdout.write
    source = gpu_source(data)
    w(f"GPUs ({source}):\n" if data["gpus"] else f"GPUs: {source}\n")
    for g in data["gpus"]:
        w(f"  {gpu_line(g)}\n")
    for line in cpu_memory_lines(data):
        w(line + "\n")

"""orbit _node OP …: what a primary runs on this node over SSH (nodes/agent.py); not for people."""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any

from orbit.env import Env
from orbit.errors import ExitCode, UsageError

OPS = (
    "info",
    "submit",
    "has-snapshot",
    "put-snapshot",
    "follow",
    "status",
    "cancel",
    "outputs",
    "cat",
    "data",
    "configure-slurm",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("_node")  # hidden: no help text in the command list
    p.add_argument("op", choices=OPS)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def _binary(stream: IO[Any], fallback: IO[bytes]) -> IO[bytes]:
    return getattr(stream, "buffer", None) or fallback


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.nodes import agent, snapsend

    home = env.home
    out = _binary(env.stdout, sys.stdout.buffer)
    stdin = _binary(env.stdin, sys.stdin.buffer)
    a = args.args
    if args.op == "data":  # `orbit data …` in this home, for `orbit data --node` there
        from orbit.cli import main

        return main(["data", *a], env)
    needs = {"info": 0, "submit": 0, "has-snapshot": 1, "put-snapshot": 1, "follow": 3,
             "status": 1, "cancel": 1, "outputs": 1, "cat": 2, "configure-slurm": 2}  # fmt: skip
    if args.op == "info" and a == ["existing"]:  # a home named with --home: never made here
        out.write(json.dumps(agent.info(home, must_exist=True)).encode() + b"\n")
        out.flush()
        return ExitCode.OK
    if len(a) != needs[args.op]:
        raise UsageError(f"_node {args.op} takes {needs[args.op]} arguments")
    answer: Any
    if args.op == "info":
        answer = agent.info(home)
    elif args.op == "submit":
        answer = agent.submit(home, json.loads(stdin.read()))
    elif args.op == "has-snapshot":
        answer = {"has": snapsend.has(home, a[0])}
    elif args.op == "put-snapshot":
        home.ensure()
        answer = {"files": snapsend.receive(home, a[0], stdin)}
    elif args.op == "follow":
        agent.follow(home, a[0], int(a[1]), int(a[2]), out)
        return ExitCode.OK
    elif args.op == "status":
        answer = agent.status(home, a[0])
    elif args.op == "cancel":
        answer = agent.cancel(home, a[0], actor=f"node:{env.environ.get('USER') or 'primary'}")
    elif args.op == "configure-slurm":
        answer = agent.configure_slurm(home, a[0], a[1])
    elif args.op == "outputs":
        answer = agent.outputs(home, a[0])
    else:
        agent.copy_output(home, a[0], a[1], out)
        return ExitCode.OK
    out.write(json.dumps(answer).encode() + b"\n")
    out.flush()
    return ExitCode.OK

"""orbit logs ID [-f] [--tail BYTES]: the run's combined output (log.txt)."""

from __future__ import annotations

import argparse
import os

from orbit.cli.common import add_json, print_json, runs_argument
from orbit.cli.run import binary_stdout
from orbit.cli.watch import copy_new, follow_until_done
from orbit.env import Env


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("logs", help="show a run's output")
    runs_argument(p, nargs=None)  # type: ignore[arg-type]
    p.add_argument("-f", "--follow", action="store_true", help="follow until the run ends")
    p.add_argument("--tail", type=int, metavar="BYTES", help="start this many bytes from the end")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    run = store.resolve(args.runs)
    path = run.path("log.txt")
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    offset = 0
    if args.tail is not None:
        if args.tail < 0:
            from orbit.errors import UsageError

            raise UsageError("--tail expects a number of bytes ≥ 0")
        offset = max(0, size - args.tail)
    if args.json:
        if args.follow:
            run = follow_until_done(env, store, run)
        with open(path, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode("utf-8", "replace")
        print_json(env, {"id": run.id, "state": run.state.value, "offset": offset, "log": text})
        return 0
    out = binary_stdout(env)
    if args.follow:
        follow_until_done(env, store, run, offset=offset, out=out)
    else:
        copy_new(path, offset, out)
    return 0

"""orbit _shepherd ID: the per-run monitor, started detached by the tick (not for people)."""

from __future__ import annotations

import argparse
import logging

from orbit.env import Env
from orbit.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("_shepherd")  # hidden: no help text in the command list
    p.add_argument("run_id")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.execute.shepherd import run_shepherd
    from orbit.execute.spawn import set_process_name, spawn

    set_process_name()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s shepherd %(process)d %(message)s")
    run_shepherd(env.home, args.run_id, spawner=spawn)
    return ExitCode.OK

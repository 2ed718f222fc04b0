"""orbit scheduler tick: run one tick now (the supervisor commands come with scheduling)."""

from __future__ import annotations

import argparse

from orbit.cli.common import add_json, print_json
from orbit.env import Env


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scheduler", help="the scheduler tick")
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    t = ssub.add_parser("tick", help="reconcile runs and admit queued ones, once")
    add_json(t)
    t.set_defaults(func=tick)


def tick(args: argparse.Namespace, env: Env) -> int:
    from orbit.sched.tick import TickReport

    report = env.tick()
    assert isinstance(report, TickReport)
    if args.json:
        print_json(env, report.as_dict())
        return 0
    if not report.ran:
        print("another tick is running; it will include this one", file=env.stdout)
        return 0
    print(
        f"admitted {len(report.admitted)}, waiting {len(report.waiting)}, "
        f"repaired {len(report.repaired)}",
        file=env.stdout,
    )
    for problem in report.problems:
        print(f"problem: {problem}", file=env.stdout)
    return 0

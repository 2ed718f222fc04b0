"""orbit cancel ID…: cancel queued runs at once; stop started ones (state `cancelled`)."""

from __future__ import annotations

import argparse
import time

from orbit.cli.common import add_json, print_json, runs_argument, side_tick
from orbit.cli.watch import StatusWatch
from orbit.env import Env
from orbit.errors import ExitCode

STOP_WAIT_SECONDS = 30.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cancel", help="cancel runs")
    runs_argument(p)
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.execute.control import request_cancel
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    ids = [store.resolve_id(ref) for ref in args.runs]  # a damaged run is rebuilt, then stopped
    watches = [StatusWatch(store, request_cancel(store, i, actor=env.actor)) for i in ids]
    side_tick(env)  # a started run whose shepherd died gets a new one, which sees the request
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    while time.monotonic() < deadline and not all(w.refresh().state.finished for w in watches):
        time.sleep(0.1)
    result = [{"id": w.run.id, "state": w.run.state.value, "reason": w.run.reason} for w in watches]
    if args.json:
        print_json(env, {"runs": result})
    else:
        for w in watches:
            extra = " (stopping)" if w.run.state.active else ""
            print(f"run {w.run.label} {w.run.state.value}{extra}", file=env.stdout)
    return ExitCode.OK

"""orbit wait ID… | -g GROUP: block until the runs finish; exit 1 if any did not succeed."""

from __future__ import annotations

import argparse
import time
from typing import Any

from orbit.cli.common import add_json, group_option, print_json, runs_argument
from orbit.cli.watch import POLL_SECONDS, StatusWatch, Ticker
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("wait", help="wait for runs to finish")
    runs_argument(p, nargs="*")
    group_option(p, "wait for every run of this group")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    if bool(args.runs) == bool(args.group):
        raise UsageError("give run ids or -g GROUP")
    if args.group:
        ids = [
            r["id"]
            for r in store.list_rows()
            if isinstance(r, dict) and r.get("group") == args.group
        ]
        if not ids:
            raise NotFoundError(f"no runs in group {args.group!r}")
    else:
        ids = [store.resolve(ref).id for ref in args.runs]
    watches = [StatusWatch(store, store.load(i)) for i in dict.fromkeys(ids)]
    ticker = Ticker(env)
    while True:
        runs = [w.refresh() for w in watches]
        if all(r.state.finished for r in runs):
            break
        ticker.maybe()
        time.sleep(POLL_SECONDS * 4)
    results: list[dict[str, Any]] = [
        {
            "id": r.id,
            "name": r.name or None,
            "state": r.state.value,
            "reason": r.status.get("reason"),
            "exit_code": r.status.get("exit_code"),
        }
        for r in runs
    ]
    ok = all(r["state"] == "succeeded" for r in results)
    if args.json:
        print_json(env, {"ok": ok, "runs": results})
    else:
        for r in results:
            reason = f": {r['reason']}" if r.get("reason") else ""
            label = f"{r['id']} ({r['name']})" if r.get("name") else r["id"]
            print(f"run {label} {r['state']}{reason}", file=env.stdout)
    return int(ExitCode.OK if ok else ExitCode.RUN_FAILED)

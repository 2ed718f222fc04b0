"""orbit folders: the folder tree with run counts (a folder counts its subfolders' runs)."""

from __future__ import annotations

import argparse

from orbit.cli.common import add_json, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("folders", help="list folders with their run counts")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.folders import tree
    from orbit.store.runs import RunStore

    rows = RunStore(env.home).list_rows()
    counts, top_level = tree(r.get("folder") for r in rows if isinstance(r, dict))
    if args.json:
        folders = [{"path": c.path, "runs": c.runs, "direct": c.direct} for c in counts]
        print_json(env, {"folders": folders, "top_level": top_level})
        return ExitCode.OK
    if not counts:
        print(
            f"no folders ({top_level} run(s) at the top level); file runs with "
            "`orbit run --folder PATH` or `orbit mv ID… PATH`",
            file=env.stdout,
        )
        return ExitCode.OK
    body = []
    for c in counts:
        depth = c.path.count("/")
        name = "  " * depth + c.path.rsplit("/", 1)[-1] + "/"
        body.append([name, str(c.runs), str(c.direct)])
    body.append(["(top level)", str(top_level), str(top_level)])
    # RUNS counts the subfolders' runs too; HERE only the runs filed in exactly that folder.
    table(env.stdout, ["FOLDER", "RUNS", "HERE"], body)
    return ExitCode.OK

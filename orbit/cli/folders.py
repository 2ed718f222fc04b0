"""orbit folders: the folder tree with run counts (a folder counts its subfolders' runs) and
the bench jobs filed in each."""

from __future__ import annotations

import argparse

from orbit.cli.common import add_json, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("folders", help="list folders with their run and bench job counts")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.cli.mv import job_folders
    from orbit.store.folders import tree
    from orbit.store.runs import RunStore

    rows = RunStore(env.home).list_rows()
    jobs = job_folders(env.home)
    counts, top_level = tree((r.get("folder") for r in rows if isinstance(r, dict)), jobs)
    top_jobs = sum(1 for f in jobs if not f)
    if args.json:
        folders = [
            {"path": c.path, "runs": c.runs, "direct": c.direct, "jobs": c.jobs,
             "direct_jobs": c.direct_jobs}
            for c in counts
        ]  # fmt: skip
        print_json(env, {"folders": folders, "top_level": top_level, "top_level_jobs": top_jobs})
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
        body.append([name, str(c.runs), str(c.direct), str(c.jobs)])
    body.append(["(top level)", str(top_level), str(top_level), str(top_jobs)])
    # RUNS counts the subfolders' runs too; HERE only the runs filed in exactly that folder;
    # BENCH JOBS the jobs in the folder and its subfolders (a home without jobs: no column).
    headers = ["FOLDER", "RUNS", "HERE", "BENCH JOBS"]
    if not jobs:
        headers, body = headers[:3], [row[:3] for row in body]
    table(env.stdout, headers, body)
    return ExitCode.OK

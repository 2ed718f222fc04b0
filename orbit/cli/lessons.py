"""orbit lessons [PROJECT-DIR | -g GROUP]: the digest of what was tried, what worked, what
failed and why, and the notes (orbit/review/lessons.py); read it before starting."""

from __future__ import annotations

import argparse
from pathlib import Path

from orbit.cli.common import add_json, group_option, metric_options, print_json
from orbit.env import Env
from orbit.errors import ExitCode, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lessons",
        help="a one-page digest of a project's or group's runs",
        description="What was tried (params, states), the best settings by the main metric "
        "(its final values, averaged over seeds), failure signatures with their causes, and "
        "the notes. Default: the runs of the current directory's Git repository.",
    )
    p.add_argument("project", nargs="?", metavar="PROJECT-DIR", help="a repository (its root)")
    group_option(p, "the digest of one group instead")
    metric_options(
        p,
        "rank by this metric (default: the group's objective: declared, else picked from "
        "what the runs logged)",
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.review.lessons import Scope, digest
    from orbit.review.lessons_page import render
    from orbit.review.objective import Objective, parse_metric_option
    from orbit.store.runs import RunStore

    metric, direction = parse_metric_option(args.metric, args.maximize)
    if args.group and args.project:
        raise UsageError("give a project directory or -g GROUP, not both")
    if args.group:
        scope = Scope(group=args.group)
    else:
        scope = Scope(project=str(_project_root(env, args.project)))
    d = digest(RunStore(env.home), scope, metric=metric, direction=direction)
    if metric is not None or direction is not None:
        Objective.from_json(d["objective"]).require()  # the ranking asked for cannot be given
    warning = d["objective"].get("warning")
    if warning and not args.json:
        print(f"orbit: warning: {warning}", file=env.stderr)
    if args.json:
        print_json(env, d)
    else:
        env.stdout.write(render(d))
    return ExitCode.OK


def _project_root(env: Env, given: str | None) -> Path:
    from orbit.execute.snapshot import repo_root

    path = (env.cwd / given).resolve() if given else env.cwd
    try:
        return repo_root(path)
    except UsageError:
        if given:  # a directory outside Git: runs made with `--no-snapshot` from it
            return path
        raise UsageError(
            f"{path} is not inside a Git repository: give PROJECT-DIR or -g GROUP"
        ) from None

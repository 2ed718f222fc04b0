"""orbit compare ID…|-g GROUP|--folder F: runs side by side (params, outcome, peaks, metrics)."""

from __future__ import annotations

import argparse
import shutil
from typing import TYPE_CHECKING

from orbit.cli.common import add_json, group_members, group_option, print_json, runs_argument
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, UsageError

if TYPE_CHECKING:
    from orbit.review.objective import Objective
    from orbit.store.model import Run
    from orbit.store.runs import RunStore


def add_parser(sub: argparse._SubParsersAction) -> None:
    from orbit.cli.mv import complete_folders

    p = sub.add_parser(
        "compare",
        help="runs side by side: params, outcome, peaks, metrics",
        description="One row per run: id, params, state and reason, duration, peaks and for "
        "each metric its last, min and max value and the step of the best. Columns equal in "
        "every row are listed once above the table.",
    )
    runs_argument(p, nargs="*", help="run ids, unique id prefixes, names or unique name prefixes")
    group_option(p, "the runs of this group")
    action = p.add_argument("--folder", help="the runs of this folder and its subfolders")
    action.completer = complete_folders
    p.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME[:min|max]",
        help="compare this metric (repeat or comma-separate; default: the group's objective, "
        "then the first numeric keys, 8 in all); :max or :min says which way is better "
        "(default: the name's, e.g. acc max, loss min; none for a name that does not say)",
    )
    p.add_argument(
        "--result",
        action="append",
        default=[],
        metavar="PATH:KEY",
        help="a value from a JSON file in each run's output/, e.g. output/result.json:test_loss",
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.review.compare import compare, parse_metric, parse_result, render, spec_of
    from orbit.store.runs import RunStore

    metrics = [parse_metric(t) for arg in args.metric for t in arg.split(",") if t.strip()]
    results = [parse_result(t) for t in args.result]
    if not (args.runs or args.group or args.folder):
        raise UsageError("give run ids, -g GROUP or --folder FOLDER")
    store = RunStore(env.home)
    runs = _select(store, env, args)
    o = _objective(env, args.group, runs) if args.group else None
    spec = spec_of(o.metric, o.direction, o.why) if o is not None and o.ok and o.metric else None
    cmp = compare(runs, metrics, results, objective=spec)
    if args.json:
        print_json(env, {**cmp.to_json(), "objective": o.to_json() if o else None})
        return ExitCode.OK
    if o is not None and o.ok:  # compare ranks nothing: only a usable objective is named
        print(f"objective: {o.text()}", file=env.stdout)
        if o.warning:
            print(f"orbit: warning: {o.warning}", file=env.stderr)
    env.stdout.write("".join(line + "\n" for line in render(cmp, _width(env))))
    return ExitCode.OK


def _objective(env: Env, group: str, runs: list[Run]) -> Objective:
    from orbit.review.best import objective_of
    from orbit.review.objective import declared_of

    declared, damaged = declared_of(env.home, group)
    if damaged:
        print(f"orbit: warning: {damaged}", file=env.stderr)
    return objective_of([r for r in runs if r.group == group], declared=declared, group=group)[0]


def _width(env: Env) -> int:
    """COLUMNS of the command's environment, else the terminal's width, else 100."""
    text = env.environ.get("COLUMNS", "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    return shutil.get_terminal_size((100, 24)).columns


def _select(store: RunStore, env: Env, args: argparse.Namespace) -> list[Run]:
    """The runs named, then those of the group, then those of the folder (each once, in id
    order within a group or folder). An unreadable run of a group or folder is named on
    stderr and left out."""
    from orbit.store.folders import normalize, within
    from orbit.store.runs import id_key

    ids = [store.resolve_id(ref) for ref in args.runs]
    if args.group:
        members, broken = group_members(store, args.group, unknown_group_too=False)
        ids += sorted(members, key=id_key)
        for b in broken:
            print(f"orbit: warning: run {b.id} left out: {b.problem}", file=env.stderr)
    if args.folder:
        top = normalize(args.folder)
        if top is None:
            raise UsageError("--folder: name a folder (the top level holds every run)")
        rows = store.list_rows()
        found = [r["id"] for r in rows if isinstance(r, dict) and within(r.get("folder"), top)]
        if not found:
            raise NotFoundError(f"no runs in folder {top!r}")
        ids += sorted(found, key=id_key)
    return [store.load(i) for i in dict.fromkeys(ids)]

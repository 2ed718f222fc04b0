"""orbit group show|objective GROUP: what Orbit keeps of a group besides its runs (its
objective, notes and launches; orbit/store/groups.py) and how to go on from it."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from orbit.cli.common import add_json, complete_groups, group_members, print_json
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "group",
        help="a group's objective, notes and launches, and how to go on",
        description="A group is named by its runs (-g on run and sweep). Orbit keeps its "
        "declared objective, its notes and how it was launched (ORBIT_HOME/groups/).",
    )
    p.set_defaults(func=no_action)
    gsub = p.add_subparsers(dest="action", metavar="ACTION")
    s = gsub.add_parser(
        "show", help="runs, objective, notes (whole), launches and the command to go on"
    )
    _group_argument(s)
    add_json(s)
    s.set_defaults(func=show)
    o = gsub.add_parser(
        "objective",
        help="show or declare the metric the group is judged by and which way is better",
        description="Without METRIC, the objective in force and why (declared, or picked from "
        "what the runs logged). With METRIC[:max|min], declare it (the direction defaults to "
        "the name's). best, compare, lessons, ps --sort, notifications and the web use it.",
    )
    _group_argument(o)
    o.add_argument("objective", nargs="?", metavar="METRIC[:max|min]")
    o.add_argument("--clear", action="store_true", help="forget the declared objective")
    add_json(o)
    o.set_defaults(func=objective)


def _group_argument(p: argparse.ArgumentParser) -> None:
    action = p.add_argument("group", metavar="GROUP")
    action.completer = complete_groups  # type: ignore[attr-defined]


def no_action(args: argparse.Namespace, env: Env) -> int:
    raise UsageError("choose an action: show or objective (see `orbit group --help`)")


def _in_force(env: Env, group: str) -> tuple[Any, list[Any]]:
    """The objective in force for the group's runs (review/objective.py) and the runs."""
    from orbit.review.best import objective_of
    from orbit.review.objective import declared_of
    from orbit.store.model import Run
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    ids, _ = group_members(store, group, unknown_group_too=False)
    runs = [r for r in store.load_many(ids) if isinstance(r, Run)]
    declared, damaged = declared_of(env.home, group)
    if damaged:
        print(f"orbit: warning: {damaged}", file=env.stderr)
    o, _ = objective_of(runs, declared=declared, group=group)
    return o, runs


def objective(args: argparse.Namespace, env: Env) -> int:
    from orbit.cli.run import objective_option
    from orbit.store.groups import set_objective

    if args.clear and args.objective:
        raise UsageError("give METRIC[:max|min] or --clear, not both")
    if args.clear:
        set_objective(env.home, args.group, None, None, env.actor)
    elif args.objective:
        objective_option(argparse.Namespace(objective=args.objective, group=args.group), env)()
    try:
        o, _ = _in_force(env, args.group)
    except NotFoundError:  # a group with no runs yet: only what was declared
        if not (args.objective or args.clear):
            raise
        o = None
    if args.json:
        print_json(env, {"group": args.group, "objective": o.to_json() if o else None})
        return ExitCode.OK
    if o is None:
        what = f"objective {args.objective} declared" if args.objective else "objective cleared"
        print(f"group {args.group}: {what} (no runs yet)", file=env.stdout)
    else:
        print(f"group {args.group}: {o.text()}", file=env.stdout)
        if o.warning:
            print(f"  warning: {o.warning}", file=env.stdout)
    return ExitCode.OK


def show(args: argparse.Namespace, env: Env) -> int:
    from orbit.review.lessons_page import go_on_lines
    from orbit.store.groups import go_on, launches
    from orbit.store.notes import group_notes

    o, runs = _in_force(env, args.group)
    states = dict(Counter(r.state.value for r in runs).most_common())
    notes = group_notes(env.home, args.group)
    found = launches(env.home, args.group)
    step = go_on(env.home, args.group)
    if args.json:
        print_json(
            env,
            {
                "group": args.group,
                "runs": len(runs),
                "states": states,
                "objective": o.to_json(),
                "notes": notes,
                "launches": found,
                "go_on": step,
            },
        )
        return ExitCode.OK
    out = env.stdout
    counts = ", ".join(f"{n} {s}" for s, n in states.items())
    print(f"group {args.group}: {len(runs)} runs ({counts})", file=out)
    print(f"objective: {o.text()}", file=out)
    if o.warning:
        print(f"  warning: {o.warning}", file=out)
    for note in notes:
        stamp = str(note.get("time") or "")[:16].replace("T", " ")
        print(f"\nnote ({stamp}, {note.get('author')}):\n{note.get('text')}", file=out)
    if step is None:
        print("\nno launch recorded (runs made before Orbit recorded launches)", file=out)
        return ExitCode.OK
    print("", file=out)
    for line in go_on_lines(step, args.group):
        print(line, file=out)
    return ExitCode.OK

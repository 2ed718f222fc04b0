"""What `orbit sweep` and `orbit run -g` keep of how a group was launched, and
`orbit sweep --like GROUP`, which launches again with the same request.

A launch (store/groups.py) records the run options as the command line that gives them
(`argv`: the options of add_run_options that differ from their defaults, in the parser's
order, with the project as an absolute `--project`), the params (key → values), the command
template and the number of runs. `--like` parses that command line again and takes from it
every run option the new command line leaves at its default; new `-p` keys replace old ones,
the others keep their values; a new command replaces the old one.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orbit.cli.runopts import add_run_options, parse_params
from orbit.env import Env
from orbit.errors import NotFoundError, UsageError

# Run options a launch does not repeat: the group is the launch's own, and a --like command
# names its group itself.
NOT_KEPT = frozenset({"group", "objective"})


def run_options() -> list[argparse.Action]:
    """The actions of add_run_options (built on a scratch parser: its order and defaults)."""
    scratch = argparse.ArgumentParser(add_help=False)
    add_run_options(scratch)
    return [a for a in scratch._actions if a.option_strings and a.dest not in NOT_KEPT]


def _text(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 2:  # -t KEY=VALUE
        return f"{value[0]}={value[1]}"
    if isinstance(value, list):  # --gpu-ids 0,2
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def options_argv(args: argparse.Namespace, project: str | None) -> list[str]:
    """The run options of `args` that differ from their defaults, as a command line."""
    out: list[str] = []
    for action in run_options():
        value = getattr(args, action.dest, action.default)
        if action.dest == "project":
            value = project if not getattr(args, "no_project", False) else None
        if value == action.default or value is None:
            continue
        flag = max(action.option_strings, key=len)  # --mem, not -m
        if isinstance(action, argparse._StoreTrueAction):
            out.append(flag)
        elif isinstance(action, argparse._AppendAction):
            for item in value:
                out += [flag, _text(item)]
        else:
            out += [flag, _text(value)]
    return out


def record(
    env: Env,
    group: str,
    kind: str,
    args: argparse.Namespace,
    *,
    project: str | None,
    params: Mapping[str, list[str]],
    command: Sequence[str],
    count: int,
    max_running: int | None = None,
    request: Mapping[str, Any] | None = None,
    at: str | None = None,
) -> None:
    """Append the launch to the group's launches.jsonl, at `at` (its batch's time: called
    once the batch is recorded, before its runs are written). `request`: what the options
    came to (image, resources, timeout), for a reader."""
    from orbit.store.groups import record_launch

    record_launch(
        env.home,
        group,
        {
            "by": env.actor,
            "kind": kind,
            "count": count,
            "argv": options_argv(args, project),
            "params": {k: list(v) for k, v in params.items()},
            "command": list(command),
            "project": project,
            "max_running": max_running,
            "request": request,
        },
        at,
    )


def newest(env: Env, group: str) -> dict[str, Any]:
    from orbit.store.groups import launches

    found = launches(env.home, group)
    if not found:
        raise NotFoundError(
            f"group {group!r} has no recorded launch to repeat (groups launched before Orbit "
            "recorded launches: give the options again)"
        )
    return found[-1]


def apply_like(args: argparse.Namespace, env: Env) -> tuple[dict[str, list[str]], list[str]]:
    """Fill `args` from the newest launch of group `args.like`: each run option left at its
    default takes the launch's value. Returns the params (the launch's, with the keys given
    on the command line replaced) and the command (the one given, else the launch's)."""
    launch = newest(env, args.like)
    scratch = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    add_run_options(scratch)
    try:
        old = scratch.parse_args([str(a) for a in launch.get("argv") or []])
    except (argparse.ArgumentError, SystemExit):
        raise UsageError(f"group {args.like!r}: its recorded launch cannot be read again") from None
    given_project = args.project is not None or args.no_project
    for action in run_options():
        if action.dest in ("project", "no_project") and given_project:
            continue
        mine = getattr(args, action.dest, action.default)
        if mine == action.default or mine is None:
            setattr(args, action.dest, getattr(old, action.dest, action.default))
    if args.project and not Path(args.project).is_dir():
        raise UsageError(
            f"group {args.like!r} was launched from {args.project}, which is gone: "
            "give --project DIR (or --no-project)"
        )
    params = {str(k): [str(v) for v in vs] for k, vs in (launch.get("params") or {}).items()}
    params.update(parse_params(args.param) if args.param else {})
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    command = cmd or [str(c) for c in launch.get("command") or []]
    if args.max_running is None and isinstance(launch.get("max_running"), int):
        args.max_running = launch["max_running"]
    if not args.group:
        args.group = args.like
    return params, command

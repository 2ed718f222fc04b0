"""orbit logs ID [-f] [--tail BYTES]: the run's combined output (log.txt)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from orbit.cli.common import add_json, print_json, runs_argument
from orbit.cli.run import binary_stdout
from orbit.cli.watch import copy_new, follow_until_done
from orbit.env import Env
from orbit.errors import CorruptError, ExitCode, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("logs", help="show a run's output")
    runs_argument(p, nargs=None)  # type: ignore[arg-type]
    p.add_argument("-f", "--follow", action="store_true", help="follow until the run ends")
    p.add_argument("--tail", type=int, metavar="BYTES", help="start this many bytes from the end")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore

    if args.tail is not None and args.tail < 0:
        raise UsageError("--tail expects a number of bytes ≥ 0")
    store = RunStore(env.home)
    try:
        run = store.resolve(args.runs)
    except CorruptError as exc:
        # The log does not depend on status.yaml: show it as it is (it cannot be followed,
        # since the run's state is unknown).
        run_id = store.resolve_id(args.runs)
        if args.follow:
            raise CorruptError(f"{exc}; without -f, `orbit logs {run_id}` shows its log") from None
        path = store.run_dir(run_id) / "log.txt"
        try:  # a log that cannot be read either is the one error to show
            os.close(os.open(path, os.O_RDONLY))
        except FileNotFoundError:
            pass
        print(f"orbit: warning: {exc}; showing its log.txt as it is", file=env.stderr)
        return show(env, args.json, run_id, "unreadable", path, start(path, args.tail))
    path = run.path("log.txt")
    offset = start(path, args.tail)
    if args.follow:
        if not args.json:
            follow_until_done(env, store, run, offset=offset, out=binary_stdout(env))
            return ExitCode.OK
        run = follow_until_done(env, store, run)
    return show(env, args.json, run.id, run.state.value, path, offset)


def start(path: Path, tail: int | None) -> int:
    """The offset to start from: 0, or `tail` bytes before the end."""
    if tail is None:
        return ExitCode.OK
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return max(0, size - tail)


def show(env: Env, as_json: bool, run_id: str, state: str, path: Path, offset: int) -> int:
    if not as_json:
        copy_new(path, offset, binary_stdout(env))
        return ExitCode.OK
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        text = ""
    print_json(env, {"id": run_id, "state": state, "offset": offset, "log": text})
    return ExitCode.OK

"""orbit note ID "text" | -: attach a conclusion to a run (notes.jsonl)."""

from __future__ import annotations

import argparse

from orbit.cli.common import add_json, print_json, runs_argument
from orbit.env import Env
from orbit.errors import ExitCode, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("note", help="attach a note to a run")
    runs_argument(p, nargs=None)  # type: ignore[arg-type]
    p.add_argument("text", help="the note, or - to read it from stdin")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    run = store.resolve(args.runs)
    text = env.stdin.read() if args.text == "-" else args.text
    text = text.strip()
    if not text:
        raise UsageError("the note is empty")
    author = env.environ.get("ORBIT_AUTHOR") or env.environ.get("USER") or "unknown"
    note = store.add_note(run.id, text, author)
    if args.json:
        print_json(env, {"id": run.id, **note})
    else:
        print(f"noted on run {run.label}", file=env.stdout)
    return ExitCode.OK

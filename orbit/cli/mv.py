"""orbit mv ID… FOLDER: file runs under another folder (`/` is the top level)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from orbit.cli.common import add_json, print_json, runs_argument
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.store.home import Home


def complete_folders(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    from orbit.store.folders import tree
    from orbit.store.runs import RunStore

    rows = RunStore(Home.from_environ(os.environ)).list_rows()
    counts, _top = tree(r.get("folder") for r in rows if isinstance(r, dict))
    return [c.path for c in counts if c.path.startswith(prefix)]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mv",
        help="file runs under another folder",
        description="File runs under FOLDER (e.g. papers/ablation; `/` is the top level). "
        "Only the record changes: no file moves.",
    )
    runs_argument(p, nargs="+")
    action = p.add_argument("folder", metavar="FOLDER", help="the new folder; `/` for none")
    action.completer = complete_folders
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.folders import move, normalize
    from orbit.store.runs import RunStore

    folder = normalize(args.folder)
    store = RunStore(env.home)
    runs = list({r.id: r for r in (store.resolve(ref) for ref in args.runs)}.values())
    moved = move(store, runs, folder, actor=env.actor)
    ids = [r.id for r in moved]
    if args.json:
        print_json(env, {"folder": folder, "moved": ids})
    else:
        where = folder or "the top level"
        print(f"moved {len(ids)} run(s) to {where}: {' '.join(ids)}", file=env.stdout)
    return ExitCode.OK

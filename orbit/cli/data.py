"""orbit data add|ls|rm: named datasets, mounted into runs with `orbit run -d NAME`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from orbit.cli.common import add_json, ago, complete_datasets, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from orbit.store.datasets import Dataset

# NODES: `data add/ls/rm --node NAME` will run the same operation on a remote node through
# SSH (issue 14). The option goes on each of the three parsers below, and each handler passes
# it on; until then there is no --node, and these commands act on this machine's home only.


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "data",
        help="named datasets: a name for a host path that runs mount with -d NAME",
        description="Named datasets of this home (ORBIT_HOME/datasets.yaml). A dataset is a "
        "directory or file on this machine; `orbit run -d NAME` mounts it read-only at "
        "/data/NAME. Orbit never copies, walks or deletes the data.",
    )
    p.set_defaults(func=no_action)
    dsub = p.add_subparsers(dest="action", metavar="ACTION")
    a = dsub.add_parser("add", help="name a directory or file")
    a.add_argument("name", help="letters, digits, `.`, `_` and `-`")
    a.add_argument("path", help="the directory or file (relative to the current directory)")
    a.add_argument("--description", metavar="TEXT", help="one line saying what it is")
    a.add_argument("--replace", action="store_true", help="replace a dataset of this name")
    add_json(a)
    a.set_defaults(func=add)
    ls = dsub.add_parser("ls", help="the datasets, and whether their paths still exist")
    add_json(ls)
    ls.set_defaults(func=list_datasets)
    r = dsub.add_parser("rm", help="forget a dataset's name (the data stays)")
    name = r.add_argument("name")
    name.completer = complete_datasets
    add_json(r)
    r.set_defaults(func=rm)


def no_action(args: argparse.Namespace, env: Env) -> int:
    raise UsageError("choose an action: add, ls or rm (see `orbit data --help`)")


def shown(dataset: Dataset) -> dict[str, Any]:
    """A dataset as `--json` gives it; `type` is "directory", "file" or null (gone)."""
    kind = dataset.kind()
    return {
        "name": dataset.name,
        "path": dataset.path,
        "description": dataset.description,
        "added_at": dataset.added_at,
        "added_by": dataset.added_by,
        "exists": kind is not None,
        "type": kind,
    }


def add(args: argparse.Namespace, env: Env) -> int:
    from orbit.store import datasets

    dataset = datasets.add(
        env.home,
        args.name,
        env.cwd / args.path,
        description=args.description,
        replace=args.replace,
    )
    if args.json:
        print_json(env, shown(dataset))
    else:
        print(
            f"dataset {dataset.name}: {dataset.path}; mount it with "
            f"`orbit run -d {dataset.name}` (read-only at /data/{dataset.name})",
            file=env.stdout,
        )
    return ExitCode.OK


def list_datasets(args: argparse.Namespace, env: Env) -> int:
    from orbit.store import datasets

    rows = [shown(d) for _, d in sorted(datasets.load(env.home).items())]
    if args.json:
        print_json(env, {"datasets": rows})
        return ExitCode.OK
    if not rows:
        print("no datasets; name one with `orbit data add NAME PATH`", file=env.stdout)
        return ExitCode.OK
    body = [
        [
            r["name"],
            r["path"],
            {"directory": "yes", "file": "yes (file)"}.get(r["type"] or "", "MISSING"),
            ago(r["added_at"]),
            r["description"] or "",
        ]
        for r in rows
    ]
    table(env.stdout, ["NAME", "PATH", "EXISTS", "ADDED", "DESCRIPTION"], body)
    return ExitCode.OK


def rm(args: argparse.Namespace, env: Env) -> int:
    from orbit.store import datasets

    dataset = datasets.remove(env.home, args.name)
    if args.json:
        print_json(env, {"removed": shown(dataset)})
    else:
        print(f"removed dataset {dataset.name} (its data stays at {dataset.path})", file=env.stdout)
    return ExitCode.OK

"""orbit data add|ls|rm: named datasets, mounted into runs with `orbit run -d NAME`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from orbit.cli.common import add_json, ago, complete_datasets, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from orbit.store.datasets import Dataset

# `--node NAME` runs the same command in that node's home, over SSH (docs/nodes.md), and
# shows its answer here: a dataset is registered on the machine that has the data.


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
    _node_option(a, "the node that has the data (PATH is then a path there)")
    add_json(a)
    a.set_defaults(func=add)
    ls = dsub.add_parser("ls", help="the datasets, and whether their paths still exist")
    _node_option(ls, "list that node's datasets")
    add_json(ls)
    ls.set_defaults(func=list_datasets)
    r = dsub.add_parser("rm", help="forget a dataset's name (the data stays)")
    name = r.add_argument("name")
    name.completer = complete_datasets
    _node_option(r, "forget it on that node")
    add_json(r)
    r.set_defaults(func=rm)


def _node_option(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--node", metavar="NAME", help=help)


def _on_node(args: argparse.Namespace, env: Env, words: list[str]) -> Any:
    """Run `orbit data WORDS --json` on the node --node names; its answer. The node's reading
    is taken again afterwards, so placement sees the change at once."""
    import json

    from orbit.nodes import ssh
    from orbit.nodes.probe import read_node
    from orbit.store import nodes

    node = nodes.get(env.home, args.node)
    answer = json.loads(ssh.call(node, env.environ, "data", [*words, "--json"]))
    read_node(env.home, node)
    return answer


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
    if args.node:
        words = ["add", args.name, args.path]
        words += ["--description", args.description] if args.description else []
        words += ["--replace"] if args.replace else []
        row = _on_node(args, env, words)
        if args.json:
            print_json(env, {**row, "node": args.node})
        else:
            text = f"dataset {row['name']} on node {args.node}: {row['path']}"
            print(f"{text}; runs with `-d {row['name']}` go to nodes that have it", file=env.stdout)
        return ExitCode.OK
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
    if args.node:
        rows = list(_on_node(args, env, ["ls"])["datasets"])
    else:
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
    if args.node:
        removed = _on_node(args, env, ["rm", args.name])["removed"]
    else:
        from orbit.store import datasets

        removed = shown(datasets.remove(env.home, args.name))
    if args.json:
        print_json(env, {"removed": removed})
    else:
        where = f" on node {args.node}" if args.node else ""
        print(f"removed dataset {removed['name']}{where} (its data stays at {removed['path']})",
              file=env.stdout)  # fmt: skip
    return ExitCode.OK

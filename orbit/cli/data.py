"""orbit data add|ls|rm: named datasets, mounted into runs with `orbit run -d NAME`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from orbit.cli.profiles import Commands, show, show_list, show_removed
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.human import ago

if TYPE_CHECKING:
    from orbit.store.datasets import Dataset

# `--node NAME` runs the same command in that node's home, over SSH (docs/nodes.md), and
# shows its answer here: a dataset is registered on the machine that has the data.


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmds = Commands(
        sub,
        "data",
        "orbit.store.datasets",
        help="named datasets: a name for a host path that runs mount with -d NAME",
        description="Named datasets of this home (ORBIT_HOME/datasets.yaml). A dataset is a "
        "directory or file on this machine; `orbit run -d NAME` mounts it read-only at "
        "/data/NAME. Orbit never copies, walks or deletes the data.",
    )
    a = cmds.add("name a directory or file", add, "letters, digits, `.`, `_` and `-`")
    a.add_argument("path", help="the directory or file (relative to the current directory)")
    a.add_argument("--description", metavar="TEXT", help="one line saying what it is")
    _node_option(a, "the node that has the data (PATH is then a path there)")
    ls = cmds.ls("the datasets, and whether their paths still exist", list_datasets)
    _node_option(ls, "list that node's datasets")
    r = cmds.named("rm", "forget a dataset's name (the data stays)", rm)
    _node_option(r, "forget it on that node")


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
        text = f"dataset {row['name']} on node {args.node}: {row['path']}"
        line = f"{text}; runs with `-d {row['name']}` go to nodes that have it"
        show(env, args, {**row, "node": args.node}, line)
        return ExitCode.OK
    from orbit.store import datasets

    dataset = datasets.add(
        env.home,
        args.name,
        env.cwd / args.path,
        description=args.description,
        replace=args.replace,
    )
    line = (
        f"dataset {dataset.name}: {dataset.path}; mount it with "
        f"`orbit run -d {dataset.name}` (read-only at /data/{dataset.name})"
    )
    show(env, args, shown(dataset), line)
    return ExitCode.OK


def list_datasets(args: argparse.Namespace, env: Env) -> int:
    from orbit.store import datasets

    if args.node:
        rows = list(_on_node(args, env, ["ls"])["datasets"])
    else:
        rows = [shown(d) for _, d in sorted(datasets.load(env.home).items())]
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
    headers = ["NAME", "PATH", "EXISTS", "ADDED", "DESCRIPTION"]
    show_list(env, args, datasets.STORE, {"datasets": rows}, headers, body)
    return ExitCode.OK


def rm(args: argparse.Namespace, env: Env) -> int:
    from orbit.store import datasets

    if args.node:
        removed = _on_node(args, env, ["rm", args.name])["removed"]
    else:
        removed = shown(datasets.remove(env.home, args.name))
    where = f" on node {args.node}" if args.node else ""
    detail = f"{where} (its data stays at {removed['path']})"
    show_removed(env, args, datasets.STORE, {"removed": removed}, removed["name"], detail)
    return ExitCode.OK

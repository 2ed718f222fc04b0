"""orbit export FOLDER DIR: copy the finished runs of a folder (and its subfolders) to DIR."""

from __future__ import annotations

import argparse
from pathlib import Path

from orbit.cli.common import add_json, print_json
from orbit.cli.mv import complete_folders
from orbit.env import Env
from orbit.errors import ExitCode, OrbitError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="copy a folder's finished runs to a directory",
        description="Copy each finished run of FOLDER and its subfolders to "
        "DIR/<folder>/<id>/ (a real copy; lock and pid files are left out). Active runs are "
        "skipped; an existing non-empty target is never overwritten.",
    )
    action = p.add_argument("folder", metavar="FOLDER", help="e.g. papers (includes papers/…)")
    action.completer = complete_folders
    p.add_argument("dest", metavar="DIR", help="where to copy (created if missing)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.folders import copy_run, normalize, plan_export, within
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    top = normalize(args.folder)
    # The listing narrows the runs to read; each chosen run is then read from its directory.
    ids = [
        r["id"]
        for r in store.list_rows()
        if isinstance(r, dict) and top is not None and within(r.get("folder"), top)
    ]
    runs = [store.load(i) for i in ids]
    dest = env.cwd / Path(args.dest).expanduser()
    plan = plan_export(store.home.runs_dir, runs, args.folder, dest)
    exported: list[dict[str, str | None]] = []
    for run, target in plan.copy:
        try:
            copy_run(run, target)
        except OrbitError as exc:
            exc.args = (f"{exc} ({len(exported)} run(s) were exported before it)",)
            raise
        folder = str(target.parent.relative_to(plan.dest))
        exported.append({"id": run.id, "folder": folder, "path": str(target)})
    skipped = [{"id": r.id, "state": r.state.value} for r in plan.skipped]
    if args.json:
        print_json(
            env,
            {
                "folder": plan.folder,
                "dir": str(plan.dest),
                "exported": exported,
                "skipped": skipped,
            },
        )
        return ExitCode.OK
    ids_text = "".join(f" {e['id']}" for e in exported)
    out = env.stdout
    print(f"exported {len(exported)} run(s) of {plan.folder} to {plan.dest}:{ids_text}", file=out)
    for r in plan.skipped:
        print(
            f"skipped run {r.label}: it is {r.state.value} (only finished runs are exported)",
            file=env.stdout,
        )
    return ExitCode.OK

"""orbit export FOLDER DIR: copy the finished runs of a folder (and its subfolders) to DIR.
orbit export --atif (FOLDER | -g GROUP | --job JOB) DIR: the agent sessions of those runs as a
trajectory dataset (agents/dataset.py: one ATIF file per session, index.jsonl)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from orbit.cli.common import add_json, group_option, print_json
from orbit.cli.mv import complete_folders
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, OrbitError, UsageError
from orbit.store.model import Run
from orbit.store.runs import RunStore

USAGE = """orbit export FOLDER DIR [--json]
       orbit export --atif (FOLDER | -g GROUP | --job JOB) DIR [--json]"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        usage=USAGE,
        help="copy a folder's finished runs, or their agent sessions as ATIF, to a directory",
        description="Copy each finished run of FOLDER and its subfolders to "
        "DIR/<folder>/<id>/ (a real copy; lock and pid files are left out). Active runs are "
        "skipped; an existing non-empty target is never overwritten. With --atif, write the "
        "agent sessions of a folder's, a group's or a bench job's runs to DIR as a dataset: "
        "<run>.json per session (an ATIF trajectory, the run's outcome in extra.orbit) and "
        "index.jsonl (one line per file); DIR must be absent or empty.",
    )
    action = p.add_argument(
        "paths",
        nargs="*",
        metavar="FOLDER DIR",
        help="e.g. papers ~/copy (papers includes papers/…)",
    )
    action.completer = complete_folders
    p.add_argument("--atif", action="store_true", help="write the runs' agent sessions as ATIF")
    group_option(p, "with --atif: the runs of this group (instead of FOLDER)")
    p.add_argument("--job", metavar="JOB", help="with --atif: the solve runs of this bench job")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    chosen = [x for x in (args.group, args.job) if x is not None]
    if chosen and not args.atif:
        raise UsageError("-g and --job go with --atif (a copy is of a folder: FOLDER DIR)")
    if len(chosen) > 1:
        raise UsageError("give one of FOLDER, -g GROUP or --job JOB")
    wanted = 1 if chosen else 2
    if len(args.paths) != wanted:
        form = "DIR" if chosen else "FOLDER DIR"
        usage = USAGE.splitlines()[1 if args.atif else 0].strip()
        raise UsageError(f"expected {form} (usage: {usage})")
    if args.atif:
        return export_atif(args, env)
    return copy_folder(args.paths[0], args.paths[1], args.json, env)


# --- the copy ---------------------------------------------------------------------------------
def folder_runs(store: RunStore, folder: str) -> list[Run]:
    """The runs filed in `folder` or its subfolders, read from their directories (the listing
    narrows the runs to read)."""
    from orbit.store.folders import normalize, within

    top = normalize(folder)
    ids = [
        r["id"]
        for r in store.list_rows()
        if isinstance(r, dict) and top is not None and within(r.get("folder"), top)
    ]
    return [store.load(i) for i in ids]


def copy_folder(folder: str, dest_text: str, as_json: bool, env: Env) -> int:
    from orbit.store.folders import copy_run, plan_export

    store = RunStore(env.home)
    runs = folder_runs(store, folder)
    dest = env.cwd / Path(dest_text).expanduser()
    plan = plan_export(store.home.runs_dir, runs, folder, dest)
    exported: list[dict[str, str | None]] = []
    for run, target in plan.copy:
        try:
            copy_run(run, target)
        except OrbitError as exc:
            exc.args = (f"{exc} ({len(exported)} run(s) were exported before it)",)
            raise
        folder_path = str(target.parent.relative_to(plan.dest))
        exported.append({"id": run.id, "folder": folder_path, "path": str(target)})
    skipped = [{"id": r.id, "state": r.state.value} for r in plan.skipped]
    if as_json:
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


# --- the trajectory dataset -------------------------------------------------------------------
def export_atif(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import dataset

    store = RunStore(env.home)
    dest = dataset.check_dest(env.cwd / Path(args.paths[-1]).expanduser(), store.home.runs_dir)
    runs, selection, what = select(args, env, store)
    data = dataset.export(runs, dest, selection, what, trial_outcomes(env, runs))
    if args.json:
        print_json(env, data.to_json())
        return ExitCode.OK
    runs_count = len({f["run"] for f in data.files})
    print(
        f"wrote {len(data.files)} trajectory file(s) of {runs_count} run(s) of {what} to "
        f"{dest} (index: {dest / dataset.INDEX})",
        file=env.stdout,
    )
    for s in data.skipped:
        print(f"skipped run {s['id']}: {s['why']}", file=env.stdout)
    return ExitCode.OK


def select(
    args: argparse.Namespace, env: Env, store: RunStore
) -> tuple[list[Run], dict[str, str], str]:
    """The runs to export, the selection as the dataset records it, and how a message names
    it. One-line errors for an unknown group or job, and an empty folder."""
    from orbit.cli.common import group_members

    if args.group is not None:
        ids, _broken = group_members(store, args.group, unknown_group_too=False)
        return [store.load(i) for i in ids], {"group": args.group}, f"group {args.group}"
    if args.job is not None:
        return job_runs(env, store, args.job)
    from orbit.store.folders import normalize

    top = normalize(args.paths[0])
    if top is None:
        raise UsageError("give the folder to export, e.g. `orbit export --atif papers ~/data`")
    runs = folder_runs(store, top)
    if not runs:
        raise NotFoundError(f"no runs in folder {top!r} (see `orbit folders`)")
    return runs, {"folder": top}, f"folder {top}"


def job_runs(env: Env, store: RunStore, ref: str) -> tuple[list[Run], dict[str, str], str]:
    """The solve runs of a bench job's trials."""
    from orbit.bench.records import read_job, resolve_job

    job = resolve_job(env.home, ref)
    solves = [str(t.solve_run) for t in read_job(env.home, job.id).trials if t.solve_run]
    if not solves:
        raise NotFoundError(f"job {job.id} has no solve run yet (see `orbit bench show {job.id}`)")
    return [store.load(r) for r in solves if store.exists(r)], {"job": job.id}, f"job {job.id}"


def trial_outcomes(env: Env, runs: list[Run]) -> dict[str, dict[str, Any]]:
    """The trial's outcome (`bench`) of each run that is a bench trial's, by run id."""
    from orbit.bench.records import trial_outcome

    found = {r.id: trial_outcome(env.home, r.spec.get("tags") or {}) for r in runs}
    return {run_id: more for run_id, more in found.items() if more}

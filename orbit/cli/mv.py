"""orbit mv ID… FOLDER: file runs and bench jobs under another folder (`/` is the top level)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from orbit.cli.common import add_json, print_json, runs_argument
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError
from orbit.store.home import Home

if TYPE_CHECKING:
    from orbit.bench.model import Job
    from orbit.store.model import Run
    from orbit.store.runs import RunStore


def job_folders(home: Home) -> list[str | None]:
    """The folder of each bench job (None: the top level)."""
    from orbit.bench.jobs import list_jobs

    return [j.folder if isinstance(j.folder, str) else None for j in list_jobs(home)]


def complete_folders(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    from orbit.store.folders import tree
    from orbit.store.runs import RunStore

    home = Home.from_environ(os.environ)
    rows = RunStore(home).list_rows()
    counts, _top = tree((r.get("folder") for r in rows if isinstance(r, dict)), job_folders(home))
    return [c.path for c in counts if c.path.startswith(prefix)]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mv",
        help="file runs and bench jobs under another folder",
        description="File runs (by id or name) and bench jobs (j3, or a job's name) under "
        "FOLDER (e.g. papers/ablation; `/` is the top level). Only the record changes: no file "
        "moves.",
    )
    runs_argument(p, nargs="+", help="run id, or bench job id")
    action = p.add_argument("folder", metavar="FOLDER", help="the new folder; `/` for none")
    action.completer = complete_folders
    add_json(p)
    p.set_defaults(func=run)


def _resolve(home: Home, store: RunStore, ref: str) -> Run | Job:
    """A bench job for `j<N>` when that job exists; else a run by id or name; else a bench
    job by its unique name."""
    from orbit.bench.jobs import JOB_ID
    from orbit.bench.model import job_dir
    from orbit.bench.records import resolve_job

    if JOB_ID.match(ref) and (job_dir(home, ref) / "job.json").exists():
        return resolve_job(home, ref)
    try:
        return store.resolve(ref)
    except NotFoundError as exc:
        if not str(exc).startswith("no run "):
            raise  # ambiguous among runs
        try:
            return resolve_job(home, ref)
        except NotFoundError:
            raise NotFoundError(
                f"no run or bench job {ref!r} (see `orbit ps -a` and `orbit bench jobs`)"
            ) from None


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.jobs import move_job
    from orbit.bench.model import Job
    from orbit.store.folders import move, normalize
    from orbit.store.runs import RunStore

    folder = normalize(args.folder)
    store = RunStore(env.home)
    found = [_resolve(env.home, store, ref) for ref in args.runs]  # all, before any moves
    runs = list({r.id: r for r in found if not isinstance(r, Job)}.values())
    job_ids = list(dict.fromkeys(j.id for j in found if isinstance(j, Job)))
    ids = [r.id for r in move(store, runs, folder, actor=env.actor)]
    jobs = [move_job(env.home, job_id, folder).id for job_id in job_ids]
    if args.json:
        print_json(env, {"folder": folder, "moved": ids, "jobs": jobs})
        return ExitCode.OK
    where = folder or "the top level"
    if ids or not jobs:
        print(f"moved {len(ids)} run(s) to {where}: {' '.join(ids)}", file=env.stdout)
    if jobs:
        print(f"moved {len(jobs)} bench job(s) to {where}: {' '.join(jobs)}", file=env.stdout)
    return ExitCode.OK

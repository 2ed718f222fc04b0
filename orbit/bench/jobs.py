"""Jobs: creating one (tasks × methods × seeds → trial files), finding one by id or name, its
driver (started, found alive, restarted), and what a person asks of a finished or running job:
cancel, regrade, rm-job.

A job's secrets (the caller's values of the benchmark's --pass-env variables, which the verify
runs and the adapter's ${VAR} references need) are kept, mode 0600, in
runtime/secrets/bench-<job>.json while the job is unfinished, so that a restarted driver has
them whoever restarts it; they go when the job ends.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from orbit.bench.model import (
    NAME,
    Job,
    Method,
    Task,
    Trial,
    bench_dir,
    job_dir,
    load_job,
    load_trials,
    save_job,
    save_trial,
    trial_id,
)
from orbit.errors import ConflictError, CorruptError, DockerError, NotFoundError, UsageError
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import is_locked, locked
from orbit.store.model import now_iso
from orbit.store.worker import Worker

JOB_ID = re.compile(r"^j[0-9]+$")
DRIVER_LOCK = "driver.lock"
DRIVER_LOG = "driver.log"
DRIVER_MODULE = "orbit.bench.driver"  # a job's driver process: `python -m` this, JOB


# --- finding jobs -----------------------------------------------------------------------------
def job_ids(home: Home) -> list[str]:
    folder = bench_dir(home) / "jobs"
    names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    return sorted((n for n in names if JOB_ID.match(n)), key=lambda n: int(n[1:]))


def list_jobs(home: Home) -> list[Job]:
    out = []
    for job_id in job_ids(home):
        try:
            out.append(load_job(home, job_id))
        except (CorruptError, NotFoundError, TypeError):
            continue  # a job being created, or a damaged job.json: `bench show` names it
    return out


def resolve_job(home: Home, ref: str) -> Job:
    """A job by id (`j3`) or by its unique name."""
    if JOB_ID.match(ref) and (job_dir(home, ref) / "job.json").exists():
        return load_job(home, ref)
    named = [j for j in list_jobs(home) if j.name == ref]
    if len(named) == 1:
        return named[0]
    if named:
        ids = ", ".join(j.id for j in named)
        raise NotFoundError(f"job name {ref!r} is ambiguous ({ids}): use the id")
    raise NotFoundError(f"no job {ref!r} (see `orbit bench jobs`)")


@contextmanager
def job_locked(home: Home, job_id: str) -> Iterator[None]:
    """Held while job.json is read and rewritten (the driver and a command may both write it)."""
    with locked(job_dir(home, job_id) / "job.lock"):
        yield


def set_state(home: Home, job_id: str, state: str, *, unless: tuple[str, ...] = ()) -> Job:
    with job_locked(home, job_id):
        job = load_job(home, job_id)
        if job.state not in unless:
            job.state = state
            save_job(home, job)
        return job


# --- creating a job ---------------------------------------------------------------------------
@dataclass
class JobRequest:
    benchmark: str
    tasks: list[Task]
    methods: list[Method]
    seeds: int = 1
    name: str | None = None
    max_running: int | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    folder: str | None = None  # normalized (store/folders.py)


def _next_id(home: Home) -> str:
    counter = bench_dir(home) / "next_job"
    with locked(bench_dir(home) / "next_job.lock"):
        try:
            number = int(counter.read_text().strip() or "1")
        except FileNotFoundError:
            number = 1
        except ValueError:
            raise CorruptError(f"{counter} does not hold a number") from None
        while (job_dir(home, f"j{number}")).exists():
            number += 1
        job_dir(home, f"j{number}").mkdir(parents=True)
        atomic_write(counter, f"{number + 1}\n".encode())
    return f"j{number}"


def check_request(home: Home, req: JobRequest) -> None:
    if req.seeds < 1:
        raise UsageError("--seeds must be 1 or more")
    if req.max_running is not None and req.max_running < 1:
        raise UsageError("--max-running must be 1 or more")
    if not req.methods:
        raise UsageError("give at least one method: -m oracle, -m empty or -m NAME=AGENT,…")
    names = [m.name for m in req.methods]
    if len(set(names)) != len(names):
        raise UsageError(f"method names must differ: {' '.join(names)}")
    if req.name is not None:
        if not NAME.match(req.name) or JOB_ID.match(req.name):
            raise UsageError(f"job name {req.name!r}: letters, digits, . _ - (and not j<N>)")
        if any(j.name == req.name for j in list_jobs(home)):
            raise ConflictError(f"a job named {req.name!r} exists already")
    unsupported = [t for t in req.tasks if not t.supported]
    if unsupported:
        t = unsupported[0]
        raise UsageError(f"task {t.name!r} is not supported: {t.reason or 'no reason given'}")
    if not req.tasks:
        raise UsageError("no task to run")


def create_job(home: Home, req: JobRequest) -> Job:
    """Write the job and one pending trial per task × method × seed (the driver is started by
    the caller)."""
    check_request(home, req)
    job_id = _next_id(home)
    job = Job(
        id=job_id,
        benchmark=req.benchmark,
        name=req.name,
        tasks=[t.name for t in req.tasks],
        methods=req.methods,
        seeds=req.seeds,
        max_running=req.max_running,
        created_at=now_iso(),
        folder=req.folder,
    )
    write_secrets(home, job_id, req.secrets)
    for task in req.tasks:
        for method in req.methods:
            for seed in range(1, req.seeds + 1):
                tid = trial_id(task.name, method.name, seed)
                trial = Trial(tid, task.name, method.name, seed, updated_at=now_iso())
                save_trial(home, job_id, trial)
    save_job(home, job)  # last: a job without job.json is one still being created
    return job


# --- the job's secrets ------------------------------------------------------------------------
def secrets_path(home: Home, job_id: str) -> Path:
    return home.secrets_dir / f"bench-{job_id}.json"


def write_secrets(home: Home, job_id: str, values: Mapping[str, str]) -> None:
    home.secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(secrets_path(home, job_id), json.dumps(dict(values)).encode(), mode=0o600)


def read_secrets(home: Home, job_id: str) -> dict[str, str]:
    try:
        data = json.loads(secrets_path(home, job_id).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def drop_secrets(home: Home, job_id: str) -> None:
    unlink_quiet(secrets_path(home, job_id))


# --- the driver process -----------------------------------------------------------------------
def driver_lock(home: Home, job_id: str) -> Path:
    return job_dir(home, job_id) / DRIVER_LOCK


def driver_alive(home: Home, job_id: str) -> bool:
    return is_locked(driver_lock(home, job_id))


def driver_worker(home: Home, job_id: str) -> Worker:
    """The job's driver, as store/worker.py starts it (its log as the job's other files, by
    the umask)."""
    folder = job_dir(home, job_id)
    return Worker("driver", f"the driver of job {job_id}", DRIVER_MODULE, folder / DRIVER_LOCK,
                  folder / DRIVER_LOG, (job_id,), 0o666)  # fmt: skip


def start_driver(home: Home, job_id: str, environ: Mapping[str, str]) -> None:
    """Start the job's driver detached, unless one drives it (`environ` scrubbed as for every
    child process, store/childenv.py). A failure to start is logged: the next `orbit bench`
    command starts it again."""
    driver_worker(home, job_id).wake(home, environ)


def revive(home: Home, environ: Mapping[str, str]) -> list[str]:
    """Start a driver for every unfinished job whose driver is dead; the ids restarted."""
    started = []
    for job in list_jobs(home):
        if job.state == "running" and not driver_alive(home, job.id):
            start_driver(home, job.id, environ)
            started.append(job.id)
    return started


# --- what a person asks -----------------------------------------------------------------------
def move_job(home: Home, job_id: str, folder: str | None) -> Job:
    """File the job under `folder` (None: the top level), as `orbit mv` files runs; its
    trials' runs stay where they are."""
    with job_locked(home, job_id):
        job = load_job(home, job_id)
        if job.folder != folder:
            job.folder = folder
            save_job(home, job)
        return job


def request_cancel(home: Home, job_id: str) -> Job:
    """Mark the job cancelled; its driver cancels the trials' runs and stops (a dead driver is
    restarted by the caller for that). A job whose only unfinished trials are regrades is
    finished again once they are stopped (regrades_only): each keeps its earlier grading."""
    return set_state(home, job_id, "cancelled", unless=("finished", "cancelled"))


def regrades_only(trials: list[Trial]) -> int:
    """How many trials are unfinished when each of them is being regraded (so a cancel stops
    only regrades, and the job keeps its grading); 0 when some other trial is unfinished."""
    open_trials = [t for t in trials if t.phase != "done"]
    return len(open_trials) if all(t.earlier is not None for t in open_trials) else 0


def request_regrade(home: Home, job_id: str, secrets: Mapping[str, str]) -> list[str]:
    """Ask for a new verify run of every finished trial that has something to grade (its solved
    image, or its collected artifacts); the job runs again. The trial ids to regrade."""
    with job_locked(home, job_id):
        job = load_job(home, job_id)
        if job.state == "running":
            raise ConflictError(f"job {job_id} is running; regrade it once it has finished")
        chosen = []
        for trial in load_trials(home, job_id):
            if trial.phase == "done" and trial.verify_runs:
                trial.phase = "verifying"
                trial.verifies = len(trial.verify_runs) + 1
                trial.earlier = {k: getattr(trial, k) for k in Trial.GRADING}
                trial.evaluation, trial.reason, trial.score, trial.scores = (
                    "unknown",
                    None,
                    None,
                    {},
                )
                trial.updated_at = now_iso()
                save_trial(home, job_id, trial)
                chosen.append(trial.id)
        if chosen:
            write_secrets(home, job_id, secrets)
            job.state = "running"
            save_job(home, job)
    return chosen


def check_removable(home: Home, job: Job) -> None:
    """ConflictError unless the job can be deleted: not running, and not being cancelled (its
    driver marks the trials once their runs have stopped). The driver of a finished job writes
    nothing, so one still alive there does not matter."""
    if job.state == "running":
        raise ConflictError(f"job {job.id} is running; `orbit bench cancel {job.id}` first")
    if job.state == "cancelled" and driver_alive(home, job.id):
        raise ConflictError(
            f"job {job.id} is being cancelled (its driver is still stopping its runs); "
            "try again in a moment"
        )


def remove_job(home: Home, job_id: str) -> list[str]:
    """Delete a finished job: its runs (containers first), its solved images, its folder. The
    ids of the runs removed."""
    from orbit.execute import docker_ops
    from orbit.store.runs import RunStore

    check_removable(home, load_job(home, job_id))
    store = RunStore(home)
    trials = load_trials(home, job_id)
    run_ids = [r for t in trials for r in [t.solve_run, *t.verify_runs] if r]
    runs = [store.load(r) for r in run_ids if store.exists(r)]
    active = [r.label for r in runs if r.state.active]
    if active:
        raise ConflictError(f"runs {', '.join(active)} of job {job_id} are still active")
    for run in runs:
        if (home.active_dir / run.id).exists():
            docker_ops.remove_container(home, run.id)
        store.remove(run)
    images = sorted({t.solved_image for t in trials if t.solved_image})
    errors = remove_images(images) if images else []
    if errors:
        raise DockerError(f"job {job_id}: cannot remove image {errors[0]}; its runs are gone")
    drop_secrets(home, job_id)
    trash = job_dir(home, job_id).with_name(f".removing-{job_id}")
    os.rename(job_dir(home, job_id), trash)
    shutil.rmtree(trash, ignore_errors=True)
    return [r.id for r in runs]


def remove_images(tags: list[str]) -> list[str]:
    """Remove these images (gone already is fine); the errors, one line each."""
    from orbit.execute import docker_ops
    from orbit.execute.engine import EngineError, NotFound

    client = docker_ops.connect()
    errors = []
    for tag in tags:
        try:
            client.remove_image(tag, force=True)
        except NotFound:
            continue
        except EngineError as exc:
            errors.append(f"{tag}: {exc.explanation}")
    return errors

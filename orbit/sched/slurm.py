"""Slurm as a home's executor: sbatch, squeue and scancel, and the tick's part (docs/nodes.md).

In a home with `executor: slurm` the tick never plans against this machine. Each queued run
becomes one batch job, named `orbit-<home tag>-<id>`, whose script runs the run's shepherd in
the foreground on the compute node (`orbit.execute.slurm_job`); the job admits the run itself
when Slurm starts it. Until then the run stays `queued`, with Slurm's own reason.

Submitting never happens twice for a run: before it submits, the tick looks the run's job name
up in squeue (all states), and a job found there is adopted instead (a tick killed between
sbatch and its status write left it). The name carries the home's tag, so two homes sharing a
cluster account never adopt each other's jobs.
"""

from __future__ import annotations

import logging
import math
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from orbit.errors import OrbitError, SlurmError
from orbit.store import secrets
from orbit.store.childenv import lean_environ
from orbit.store.files import unlink_quiet
from orbit.store.home import Home
from orbit.store.model import Run, RunState, now_iso
from orbit.store.runs import RunStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Report(Protocol):
        waiting: dict[str, str]
        problems: list[str]


log = logging.getLogger(__name__)

SLURM_LOG = "slurm.log"  # the job's own stdout and stderr, in the run directory
JOB_ENTRY = "orbit.execute.slurm_job"
TIMEOUT_S = 30.0
# A job in one of these states has left (or is leaving) the node: if its run is still queued,
# the job never took it. Every other state (PENDING, RUNNING, CONFIGURING, SUSPENDED,
# REQUEUED, ...) may still start it.
ENDED = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "COMPLETING",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
# sbatch's messages when it could not reach the controller: try again on a later tick. Any
# other failure is Slurm refusing this job, which no retry changes.
TRANSIENT = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "zero bytes were transmitted",
    "communication connection failure",
    "temporarily unavailable",
    "not responding",
)


def enabled(home: Home) -> bool:
    return home.settings.executor == "slurm"


@dataclass(frozen=True)
class Job:
    job_id: str
    name: str
    state: str  # squeue's %T: PENDING, RUNNING, COMPLETED, ...
    partition: str
    nodes: str
    reason: str  # squeue's %r: Resources, Priority, None, ...

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def job_name(home: Home, run_id: str) -> str:
    return f"orbit-{home.tag}-{run_id}"


def _environ(home: Home) -> dict[str, str]:
    """Slurm's commands get the scrubbed environment of Orbit's children (SLURM_CONF kept);
    sbatch exports it to the job, whose `python -S` needs the import path."""
    return lean_environ(home)


def _call(
    home: Home, argv: list[str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            env=_environ(home),
            timeout=TIMEOUT_S,
        )
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: is Slurm's client installed here?") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} gave no answer within {TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise SlurmError(f"cannot run {argv[0]}: {exc.strerror}") from None


def _message(stderr: str) -> str:
    """The last line of a Slurm command's error output, without its `sbatch: error:` prefixes."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    text = lines[-1] if lines else "no message"
    for prefix in ("sbatch: error:", "squeue: error:", "scancel: error:", "error:"):
        text = text.removeprefix(prefix).strip()
    return text.removeprefix("Batch job submission failed:").strip()


# --- the commands ---------------------------------------------------------------------------
FIELDS = "%i|%j|%T|%P|%N|%r"


def _parse(out: str) -> list[Job]:
    jobs = []
    for line in out.splitlines():
        parts = line.strip().split("|", 5)
        if len(parts) == 6:
            jobs.append(Job(*parts))
    return jobs


def query(home: Home, job_ids: list[str]) -> dict[str, Job]:
    """The jobs squeue still knows among `job_ids`, in any state, by id; one call."""
    if not job_ids:
        return {}
    argv = ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", FIELDS]
    done = _call(home, argv)
    if done.returncode != 0:
        # Asked for one id it no longer knows, squeue fails; for several, it lists the others.
        if "Invalid job id" in done.stderr:
            return {}
        raise SlurmError(f"squeue failed: {_message(done.stderr)}")
    return {job.job_id: job for job in _parse(done.stdout)}


def jobs_named(home: Home, names: list[str]) -> dict[str, Job]:
    """This user's jobs in squeue with one of `names`, in any state, by name (the newest)."""
    if not names:
        return {}
    argv = ["squeue", "-h", "-t", "all", "--me", "--name", ",".join(names), "-o", FIELDS]
    done = _call(home, argv)
    if done.returncode != 0:
        raise SlurmError(f"squeue failed: {_message(done.stderr)}")
    found: dict[str, Job] = {}
    for job in sorted(_parse(done.stdout), key=lambda j: int(j.job_id.split("_")[0] or 0)):
        found[job.name] = job
    return found


def cancel(home: Home, job_id: str) -> None:
    """scancel the job; a job that has ended already is no error."""
    done = _call(home, ["scancel", job_id])
    gone = ("already completing or completed", "Invalid job id")
    if done.returncode != 0 and not any(text in done.stderr for text in gone):
        raise SlurmError(f"scancel {job_id} failed: {_message(done.stderr)}")


class Refused(Exception):
    """sbatch refused the job (its message): the run fails; a retry would be refused again."""


TIME_GRACE_MIN = 2  # minutes a job's limit leaves after the run's own --timeout


def sbatch_argv(home: Home, run: Run) -> list[str]:
    """sbatch's options for the run: its resources, the home's partition and account, the job's
    name, its log in the run directory, and the settings' extra options last."""
    res = run.resources
    settings = home.settings
    log_path = str(run.path(SLURM_LOG))
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={job_name(home, run.id)}",
        f"--cpus-per-task={max(1, math.ceil(res.cpus))}",
        f"--mem={max(1, math.ceil(res.mem_gb * 1024))}",
        f"--output={log_path}",
        f"--error={log_path}",
        "--open-mode=append",
        f"--chdir={run.dir}",
        "--no-requeue",  # a job that starts again would find its run taken: Orbit decides
        "--export=ALL",  # the environment sbatch is given: the scrubbed one (_environ)
    ]
    if res.gpus:
        argv.append(f"--gres=gpu:{res.gpus}")
    if run.timeout_min:
        # The shepherd stops the run at its timeout; Slurm's limit (a partition's default may
        # be shorter) must not come first: the timeout and a little time to stop and settle.
        argv.append(f"--time={math.ceil(run.timeout_min) + TIME_GRACE_MIN}")
    if settings.slurm_partition:
        argv.append(f"--partition={settings.slurm_partition}")
    if settings.slurm_account:
        argv.append(f"--account={settings.slurm_account}")
    argv.extend(settings.slurm_extra_args or ())
    return argv


def job_script(home: Home, run_id: str) -> str:
    """The batch script: the run's shepherd in the foreground, on the compute node, with this
    interpreter (the login host's Python: a shared file system is assumed)."""
    argv = [sys.executable, "-S", "-m", JOB_ENTRY, str(home.root), run_id]
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in argv) + "\n"


def submit(home: Home, run: Run) -> str:
    """sbatch the run; its job id. Refused when Slurm refuses the job, SlurmError when Slurm
    cannot be reached."""
    done = _call(home, sbatch_argv(home, run), stdin=job_script(home, run.id))
    if done.returncode != 0:
        message = _message(done.stderr)
        if any(t in done.stderr.lower() for t in TRANSIENT):
            raise SlurmError(f"sbatch failed: {message}")
        raise Refused(message)
    job_id = done.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmError(f"sbatch gave no job id: {done.stdout.strip()[:200]!r}")
    return job_id


# --- the tick's part ------------------------------------------------------------------------
def advance(home: Home, store: RunStore, queued: list[Run], actor: str, report: Report) -> None:
    """In place of measuring and admitting: submit the queued runs that have no job, adopt the
    jobs a killed tick left, write each waiting run's reason from squeue (one call), and fail
    the runs whose job ended without taking them. Slurm out of reach is a problem, never a
    failed run."""
    fresh = [r for r in queued if not _job_id(r)]
    try:
        found = jobs_named(home, [job_name(home, r.id) for r in fresh])
    except SlurmError as exc:
        report.problems.append(str(exc))
        return
    following: list[Run] = [r for r in queued if _job_id(r)]
    for run in fresh:
        job = found.get(job_name(home, run.id))
        try:
            taken = _submit(home, store, run, job, actor, report)
        except OrbitError as exc:  # its files became unreadable meanwhile: the others go on
            report.problems.append(f"run {run.id}: {exc}")
            continue
        if taken is not None:
            following.append(taken)
    try:
        jobs = query(home, [_job_id(r) for r in following])
    except SlurmError as exc:
        report.problems.append(str(exc))
        return
    for run in following:
        try:
            _follow(home, store, run, jobs.get(_job_id(run)), actor, report)
        except OrbitError as exc:
            report.problems.append(f"run {run.id}: {exc}")


def _job_id(run: Run) -> str:
    slurm = run.status.get("slurm")
    return str(slurm.get("job_id") or "") if isinstance(slurm, dict) else ""


def _submit(
    home: Home, store: RunStore, run: Run, job: Job | None, actor: str, report: Report
) -> Run | None:
    """Submit the run (or adopt `job`, its job found in squeue) and record the job; the run
    as recorded, or None when it no longer waits for a job."""
    event = "slurm-adopted"
    if job is None:
        try:
            job_id = submit(home, run)
        except Refused as exc:
            _fail(home, store, run.id, f"Slurm refused the job: {exc}", actor)
            return None
        except SlurmError as exc:
            report.problems.append(f"run {run.id}: {exc}")
            _reason(store, run, f"waiting to be submitted to Slurm: {exc}", actor, report)
            return None
        event, partition = "slurm-submitted", home.settings.slurm_partition
    else:
        job_id, partition = job.job_id, job.partition
    record = {"job_id": job_id, "partition": partition, "submitted_at": now_iso()}
    where = f" (partition {partition})" if partition else ""
    reason = f"submitted to Slurm as job {job_id}{where}"

    def change(current: Run) -> dict[str, Any] | None:
        if current.state is not RunState.QUEUED or _job_id(current):
            return None
        return {"slurm": record, "reason": reason}

    recorded = store.update(run.id, change, actor=actor, event=event)
    if _job_id(recorded) != job_id:
        # Cancelled (or taken by another job) while it was being submitted: no second job.
        log.info("run %s: no longer waits for Slurm job %s; cancelling it", run.id, job_id)
        try:
            cancel(home, job_id)
        except SlurmError as exc:
            report.problems.append(f"run {run.id}: {exc}")
        return None
    report.waiting[run.id] = reason
    return recorded


def _follow(
    home: Home, store: RunStore, run: Run, job: Job | None, actor: str, report: Report
) -> None:
    """One submitted, queued run: Slurm's reason while its job waits; failed once its job is
    gone without having taken it (decided on the status as it is now, under the run's lock:
    a job that has just started and admitted the run is never mistaken for a vanished one)."""
    job_id = _job_id(run)
    if job is None or job.ended:
        what = f"ended ({job.state})" if job is not None else "is gone from Slurm's queue"
        reason = f"Slurm job {job_id} {what} before it started the run"
        tail = _log_tail(run.path(SLURM_LOG))
        _fail(home, store, run.id, f"{reason}: {tail}" if tail else reason, actor, job_id)
        return
    where = f" (partition {job.partition})" if job.partition else ""
    if job.state == "PENDING":
        why = "" if job.reason in ("None", "") else f": {job.reason}"  # not yet considered
        reason = f"waiting in Slurm{where}{why}"
    else:
        reason = f"Slurm job {job_id} is {job.state.lower()} on {job.nodes or '?'}; starting"
    _reason(store, run, reason, actor, report)


def _reason(store: RunStore, run: Run, reason: str, actor: str, report: Report) -> None:
    """Write a waiting run's reason, only when it changed (ticks stay cheap)."""
    report.waiting[run.id] = reason
    if run.reason == reason:
        return

    def change(current: Run) -> dict[str, Any] | None:
        if current.state is not RunState.QUEUED or current.reason == reason:
            return None
        return {"reason": reason}

    store.update(run.id, change, actor=actor)


def _fail(
    home: Home, store: RunStore, run_id: str, reason: str, actor: str, job_id: str | None = None
) -> None:
    """A queued run that no job will start: failed, unless it has moved on meanwhile (its job
    took it, or it was cancelled), or its job is not `job_id` any more."""
    fields = {"state": RunState.FAILED.value, "reason": reason, "finished_at": now_iso()}

    def change(current: Run) -> dict[str, Any] | None:
        if current.state is not RunState.QUEUED:
            return None
        if job_id is not None and _job_id(current) != job_id:
            return None
        return fields

    if store.update(run_id, change, actor=actor, event="failed").state is RunState.FAILED:
        unlink_quiet(home.queue_dir / run_id)
        secrets.drop(home, run_id)


def _log_tail(path: Path, limit: int = 300) -> str:
    """The last non-empty line of the job's log (Slurm's or Python's last word), if any."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""

"""Changes a person asks for on an existing run (shared by the CLI and the web view)."""

from __future__ import annotations

import logging

from orbit.errors import ConflictError, CorruptError, SlurmError
from orbit.execute.shepherd import CANCEL_FILE
from orbit.sched import slurm
from orbit.store import secrets
from orbit.store.exitrecord import rebuild_status
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.model import LEASED, Run, RunState, now_iso
from orbit.store.runs import RunStore

log = logging.getLogger(__name__)


def request_cancel(store: RunStore, run_id: str, *, actor: str) -> Run:
    """Cancel a queued run at once; ask the shepherd of a started one to stop it.

    A started run becomes `cancelled` when its shepherd has stopped the container and recorded
    the exit (within a few seconds); a finished run is returned unchanged. A run with a Slurm
    job also has its job scancel'ed (after the status is written: a job that starts meanwhile
    finds its run cancelled and ends); Slurm out of reach is logged, never an error. A damaged
    status.yaml is first rebuilt from the run's history, as the tick does (`rebuild_status`),
    so that a damaged running run can still be stopped; one that cannot be rebuilt is refused
    with its CorruptError.
    """
    try:
        run = store.load(run_id)
    except CorruptError:
        repaired = rebuild_status(store, run_id, actor=actor)
        if repaired is None:
            raise
        log.warning("run %s: status.yaml rebuilt from its history", run_id)
        run = repaired
    if run.state is RunState.QUEUED:
        try:
            run = store.transition(
                run_id,
                RunState.CANCELLED,
                actor=actor,
                expect=[RunState.QUEUED],
                reason="cancelled by user",
                finished_at=now_iso(),
            )
            unlink_quiet(store.home.queue_dir / run_id)
            secrets.drop(store.home, run_id)
            _scancel(store, run)
            return run
        except ConflictError:
            run = store.load(run_id)  # admitted meanwhile: cancel it as a started run
    if run.state in LEASED or run.state is RunState.UNKNOWN:  # UNKNOWN: on a node (mirror)
        atomic_write(run.path(CANCEL_FILE), actor.encode())
        store.append_event(run_id, "cancel-requested", actor=actor)
        _scancel(store, run)  # frees the allocation; its SIGTERM also stops the container
    return run


def _scancel(store: RunStore, run: Run) -> None:
    slurm_status = run.status.get("slurm")
    job_id = slurm_status.get("job_id") if isinstance(slurm_status, dict) else None
    if not job_id:
        return
    try:
        slurm.cancel(store.home, str(job_id))
    except SlurmError as exc:
        log.warning("run %s: %s", run.id, exc)

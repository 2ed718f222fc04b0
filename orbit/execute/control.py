"""Changes a person asks for on an existing run (shared by the CLI and the web view)."""

from __future__ import annotations

from orbit.errors import ConflictError
from orbit.execute.shepherd import CANCEL_FILE
from orbit.store import secrets
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.model import LEASED, Run, RunState, now_iso
from orbit.store.runs import RunStore


def request_cancel(store: RunStore, run_id: str, *, actor: str) -> Run:
    """Cancel a queued run at once; ask the shepherd of a started one to stop it.

    A started run becomes `cancelled` when its shepherd has stopped the container and recorded
    the exit (within a few seconds); a finished run is returned unchanged.
    """
    run = store.load(run_id)
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
            return run
        except ConflictError:
            run = store.load(run_id)  # admitted meanwhile: cancel it as a started run
    if run.state in LEASED or run.state is RunState.UNKNOWN:  # UNKNOWN: on a node (mirror)
        atomic_write(run.path(CANCEL_FILE), actor.encode())
        store.append_event(run_id, "cancel-requested", actor=actor)
    return run

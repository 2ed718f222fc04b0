"""exit.json: the shepherd's one-file record of how a container ended.

Written atomically once the exit is known and before the container is removed, so the result
survives a shepherd killed at any later instant; whoever finds it (the shepherd itself, or the
next tick) turns it into the run's final state with `finalize_from_exit`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orbit.errors import ConflictError, OrbitError
from orbit.sched.resources import fmt_num
from orbit.store.files import atomic_write
from orbit.store.model import FORMAT, RunState, now_iso
from orbit.store.runs import RunStore

EXIT_FILE = "exit.json"

# Shell conventions for codes the command itself never chose (the init process reports them).
EXIT_HINTS = {126: "command not executable", 127: "command not found"}


def write_exit(run_dir: Path, record: dict[str, Any]) -> None:
    data = {"format": FORMAT, **record}
    atomic_write(run_dir / EXIT_FILE, (json.dumps(data, indent=2) + "\n").encode())


def read_exit(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / EXIT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def outcome(record: dict[str, Any]) -> tuple[RunState, str | None]:
    """The final state and reason that an exit record means."""
    if record.get("cancelled"):
        return RunState.CANCELLED, "cancelled by user"
    if record.get("error"):
        return RunState.FAILED, str(record["error"])
    if record.get("timed_out"):
        minutes = float(record["timeout_min"])
        after = f"{fmt_num(minutes)} min" if minutes >= 1 else f"{fmt_num(minutes * 60)} s"
        return RunState.FAILED, f"timed out after {after}"
    if record.get("oom_killed") and record.get("exit_code") != 0:
        limit = record.get("mem_limit_gb")
        return RunState.FAILED, (
            f"killed for memory (limit {fmt_num(float(limit))} GiB)"
            if limit
            else "killed for memory"
        )
    code = record.get("exit_code")
    if code == 0:
        return RunState.SUCCEEDED, None
    hint = EXIT_HINTS.get(code) if isinstance(code, int) else None
    return RunState.FAILED, f"exit code {code}" + (f" ({hint})" if hint else "")


def finalize_from_exit(store: RunStore, run_id: str, *, actor: str) -> None:
    """Settle a run from its exit.json; a run already settled is left as it is."""
    run_dir = store.run_dir(run_id)
    record = read_exit(run_dir)
    if record is None:
        return
    state, reason = outcome(record)
    finished_at = record.get("finished_at") or now_iso()
    try:
        started_at = store.load(run_id).status.get("started_at")
    except OrbitError:
        started_at = None
    if started_at and finished_at < started_at:
        # Docker stamps StartedAt when the start call returns, which can be after a very
        # short process already exited.
        finished_at = started_at
    # Only when Docker discarded output that was never copied (see logfollow.py).
    extra = {"log_incomplete": record["log_incomplete"]} if record.get("log_incomplete") else {}
    try:
        store.transition(
            run_id,
            state,
            actor=actor,
            expect=[RunState.STARTING, RunState.RUNNING],
            reason=reason,
            exit_code=record.get("exit_code"),
            oom_killed=bool(record.get("oom_killed")),
            finished_at=finished_at,
            peaks=record.get("peaks") or {},
            **extra,
        )
    except ConflictError:
        pass  # already finished (e.g. by a racing tick)
    # The active/ marker stays until the container is removed (the shepherd's last step).

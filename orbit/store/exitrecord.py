"""exit.json: the shepherd's one-file record of how a container ended.

Written atomically once the exit is known and before the container is removed, so the result
survives a shepherd killed at any later instant; whoever finds it (the shepherd itself, or the
next tick) turns it into the run's final state with `finalize_from_exit`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from orbit.errors import DISK_FULL, ConflictError, CorruptError, OrbitError
from orbit.human import fmt_minutes, fmt_num
from orbit.store import index, outbox
from orbit.store.excerpt import log_excerpt
from orbit.store.files import atomic_write, read_regular, read_yaml, write_yaml
from orbit.store.locks import locked
from orbit.store.model import (
    EXIT_JSON,
    FORMAT,
    LEASED,
    LOG,
    RUN_YAML,
    STATUS_YAML,
    Run,
    RunState,
    now_iso,
)
from orbit.store.runs import RunStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

log = logging.getLogger(__name__)

# Shell conventions for codes the command itself never chose (the init process reports them).
EXIT_HINTS = {126: "command not executable", 127: "command not found"}


def write_exit(run_dir: Path, record: dict[str, Any]) -> None:
    data = {"format": FORMAT, **record}
    atomic_write(run_dir / EXIT_JSON, (json.dumps(data, indent=2) + "\n").encode())


def read_exit(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_regular(run_dir / EXIT_JSON))
    except (OSError, ValueError, CorruptError):
        return None
    return data if isinstance(data, dict) else None


CANCEL_LATE = "the cancel came after it had exited"


def outcome(record: dict[str, Any]) -> tuple[RunState, str | None]:
    """The final state and reason that an exit record means; a cancel that came after the
    command had exited by itself (`cancel_late`) leaves its outcome, with a note."""
    state, reason = _outcome(record)
    if record.get("cancel_late"):
        reason = f"{reason}; {CANCEL_LATE}" if reason else CANCEL_LATE
    return state, reason


def _outcome(record: dict[str, Any]) -> tuple[RunState, str | None]:
    if record.get("cancelled"):
        return RunState.CANCELLED, "cancelled by user"
    if record.get("error"):
        return RunState.FAILED, str(record["error"])
    if record.get("timed_out"):
        return RunState.FAILED, f"timed out after {fmt_minutes(float(record['timeout_min']))}"
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
    if record.get("docker_restarted"):  # set by the shepherd: see execute/troubles.py
        return RunState.FAILED, f"stopped by a Docker daemon restart (exit code {code})"
    # Only when the log showed that the command could not be run: a program may exit 126 itself.
    hint = EXIT_HINTS.get(code) if isinstance(code, int) and record.get("exec_failed") else None
    return RunState.FAILED, f"exit code {code}" + (f" ({hint})" if hint else "")


def settled_fields(record: dict[str, Any]) -> dict[str, Any]:
    """What an exit record sets in status.yaml: state, reason, exit code, OOM, finish time,
    peaks, `log_incomplete` only when Docker discarded output never copied (logfollow), and
    `docker_unreachable` only when the shepherd saw Docker stop answering during the run."""
    state, reason = outcome(record)
    fields: dict[str, Any] = {
        "state": state.value,
        "reason": reason,
        "exit_code": record.get("exit_code"),
        "oom_killed": bool(record.get("oom_killed")),
        "finished_at": record.get("finished_at") or now_iso(),
        "peaks": record.get("peaks") or {},
    }
    for key in ("log_incomplete", "docker_unreachable"):  # shown by store/lognote.py
        if record.get(key):
            fields[key] = record[key]
    return fields


def finalize_from_exit(store: RunStore, run_id: str, *, actor: str) -> bool:
    """Settle a run from its exit.json; a run already settled is left as it is. A failed run
    gets its `error_excerpt` (store/excerpt.py) in the same write.

    False when the run's files cannot be read or written (hand-damaged, disk full): the result
    stays in exit.json and the run is left for the tick to repair (`rebuild_status`).
    """
    run_dir = store.run_dir(run_id)
    record = read_exit(run_dir)
    if record is None:
        return False
    fields = settled_fields(record)
    state = RunState(fields.pop("state"))
    if state is RunState.FAILED:
        fields["error_excerpt"] = log_excerpt(run_dir / LOG)
    try:
        started_at = store.load(run_id).status.get("started_at")
    except OrbitError:
        started_at = None
    if started_at and fields["finished_at"] < started_at:
        # Docker stamps StartedAt when the start call returns, which can be after a very
        # short process already exited.
        fields["finished_at"] = started_at
    try:
        store.transition(
            run_id, state, actor=actor, expect=[RunState.STARTING, RunState.RUNNING], **fields
        )
    except ConflictError:
        pass  # already finished (e.g. by a racing tick)
    except (OrbitError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            raise  # a full disk passes: the shepherd retries until space returns
        log.warning("run %s: cannot settle from exit.json: %s", run_id, exc)
        return False
    # The active/ marker stays until the container is removed (the shepherd's last step).
    return True


def rebuild_status(store: RunStore, run_id: str, *, actor: str) -> Run | None:
    """Write a new status.yaml for a run whose status.yaml is damaged (cut short, garbage,
    missing), from its history (events.jsonl) and, when there is one, its exit.json; the
    damaged file is kept as `status.yaml.broken`. The repaired run, or None when it is not
    repairable here: run.yaml unreadable too, a status.yaml that is only unreadable (permissions)
    or from a newer Orbit, or no such run. It writes under the run's lock, as every update
    does, so a live shepherd (whose updates fail on the damaged file) goes on from the
    rebuilt one: `orbit cancel` rebuilds a running run's status this way before stopping it.
    """
    run_dir = store.run_dir(run_id)
    try:
        spec = read_yaml(run_dir / RUN_YAML)
    except CorruptError:
        return None
    if not isinstance(spec.get("format", FORMAT), int) or spec.get("format", FORMAT) > FORMAT:
        return None
    if "id" not in spec or "submitted_at" not in spec:
        return None  # run.yaml cut short too: the run stays unreadable whatever status.yaml says
    try:
        with locked(run_dir / ".lock", timeout=5.0):
            if not _damaged(store, run_id):
                return None
            status = _replay(spec, store.events(run_id), read_exit(run_dir))
            try:
                atomic_write(run_dir / f"{STATUS_YAML}.broken", read_regular(run_dir / STATUS_YAML))
            except FileNotFoundError:
                pass
            # A rebuilt status may settle the run (from exit.json): its event first, as in
            # RunStore.update. Were it settled before the damage, the message's key was sent.
            notify = status.get("state") in outbox.FINISHED and outbox.record_settled(
                store.home, run_id, str(status["state"]), str(status["updated_at"])
            )
            write_yaml(run_dir / STATUS_YAML, status)
            store.append_event(run_id, "repaired", actor=actor, state=status["state"])
        run = store.load(run_id)
        if notify:
            outbox.wake_sender(store.home)
    except (OrbitError, OSError) as exc:
        log.warning("run %s: cannot rebuild status.yaml: %s", run_id, exc)
        return None
    index.append(store.home.index_path, index.row_for(run, index.status_stamp(run.dir)))
    return run


def _damaged(store: RunStore, run_id: str) -> bool:
    """True when status.yaml is missing or broken; False when it is fine, only unreadable
    (permissions: never overwrite what cannot be read) or written by a newer Orbit."""
    import yaml

    path = store.run_dir(run_id) / STATUS_YAML
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        return True
    except (OSError, CorruptError):  # not a file (a FIFO): never replaced blind
        return False
    try:
        data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return True
    if isinstance(data, dict):
        version = data.get("format", FORMAT)
        if not isinstance(version, int) or version > FORMAT:
            return False
    try:
        store.load(run_id)
    except CorruptError:
        return True
    except OrbitError:
        return False
    return False


def _replay(
    spec: dict[str, Any], events: list[dict[str, Any]], record: dict[str, Any] | None
) -> dict[str, Any]:
    """A status from the run's events (each transition's event carries the fields it set),
    then settled from its exit record if the events leave it active."""
    status: dict[str, Any] = {
        "format": FORMAT,
        "state": RunState.QUEUED.value,
        "reason": None,
        "exit_code": None,
        "submitted_at": spec.get("submitted_at") or now_iso(),
        "started_at": None,
        "finished_at": None,
    }
    for event in events:
        if event.get("event") == "repaired":
            continue
        fields = {k: v for k, v in event.items() if k not in ("time", "event", "actor")}
        if fields.get("state") in {s.value for s in RunState}:
            status.update(fields)
    state = RunState(status["state"])
    if record is not None and state.active:
        status.update(settled_fields(record))
        state = RunState(status["state"])
    if state in LEASED and not isinstance(status.get("lease"), dict):
        res = spec.get("resources") or {}
        status["lease"] = {"cpus": res.get("cpus"), "mem_gb": res.get("mem_gb"), "gpus": []}
    if state.finished and not status.get("finished_at"):
        status["finished_at"] = now_iso()
    status.pop("updated_at", None)
    status["updated_at"] = now_iso()  # always the last key, as RunStore writes it
    return status

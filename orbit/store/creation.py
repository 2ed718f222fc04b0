"""Writing new runs, one or a whole batch (a sweep) at once.

A batch is written in phases, so that 1,000 runs cost one lock, one journal commit and one
index append instead of 1,000 of each; a single run is a batch of one. Each run gets exactly
the files a run written alone gets:

1. Claim: under `locks/ids.lock`, record the batch (`runtime/batches/`, store/batches.py:
   its lock held, its ids, phase "staging"), then `mkdir runs/.staging-<n>` for every run
   (on `FileExistsError`, or when `runs/<n>` is there once it is made, n+1), then
   `runtime/next_id` once. Concurrent `orbit run` and `orbit sweep` processes take the same
   lock, and `mkdir` is the final arbiter: no id is handed out twice. The staging directory
   claims the id (an empty `runs/<n>` did, before: renaming a directory over an empty one
   costs ten times a rename to a free name, a third of a millisecond a run; a killed older
   batch's empty `runs/<n>` is still cleared). Then `recorded(created_at)`: a group's launch
   line, with the batch's time.
2. Stage: write every `runs/.staging-<id>/` whole. Nothing reads a hidden directory.
3. Sync: one fsync of `runs/`, after every staging directory is written; then the record's
   phase becomes "reveal". On a journaling file system (ext4, xfs; btrfs logs the new
   directories beneath a synced one) a directory's fsync commits the journal, which holds
   every staging directory's entries made before it: an fsync of each staging directory
   would add only a disk cache flush apiece (about 0.5 ms, half a second for 1,000 runs).
4. Reveal, one run after another: `queue/<id>` (queued runs), then the rename of the staging
   directory to `runs/<id>`. The marker comes first, so that a run that appears
   is always seen by the tick; a marker whose run has not appeared is skipped by the tick.
5. fsync `queue/` and `runs/`: once this returns, the renames survive a power cut too.
6. One append of all the runs' rows to index.jsonl (a cache: a crash before it costs a
   re-read at the next listing); then the batch's record is removed.

A batch is all or nothing. Killed in phases 1-3, it leaves what `recover` (run by every tick)
clears: staging and empty claimed directories, secrets, and in the group's record the note
that a launch of N runs was interrupted (store/groups.py). Killed in phase 4 or later, its
runs are whole and synced, and `recover` reveals the rest. An exception stops a batch
without that: what was not revealed is removed, and the runs revealed so far stay. See
docs/architecture.md, "From submit to finish" and "Crash safety".
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from orbit.record import Record
from orbit.store import batches, index, outbox, secrets
from orbit.store.files import (
    YamlBatch,
    append_lines,
    atomic_write,
    dump_yaml,
    touch_exclusive,
    unlink_quiet,
)
from orbit.store.home import Home
from orbit.store.locks import locked
from orbit.store.model import (
    EVENTS,
    FORMAT,
    LOG,
    METRICS,
    NOTES,
    OUTPUT,
    RUN_YAML,
    STATUS_YAML,
    Run,
    RunState,
    now_iso,
    stamp_of,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

log = logging.getLogger(__name__)

log_files = (LOG, METRICS, NOTES)  # created empty in every run


class NewRun(Record):
    """One run to write: its run.yaml keys (without format, id and submitted_at), the files
    beside them (code.diff, build.log), and `prepare(id, staging_dir)`, which may add more
    before the run appears (its secrets, the folders its mounts need)."""

    __slots__ = ("files", "prepare", "spec")

    def __init__(
        self,
        spec: dict[str, Any],
        files: dict[str, bytes] | None = None,
        prepare: Callable[[str, Path], None] | None = None,
    ) -> None:
        self.spec = spec
        self.files: dict[str, bytes] = {} if files is None else files
        self.prepare = prepare


def next_id(home: Home) -> int:
    """The id the next run will get (runtime/next_id), or 0 when unknown."""
    try:
        return int((home.runtime_dir / "next_id").read_text().strip())
    except (OSError, ValueError):
        return 0


def claim_ids(
    home: Home, count: int, writing: batches.Writing | None = None
) -> list[tuple[str, Path]]:
    """Allocate `count` ids, each with its staging directory made (`runs/.staging-<id>`): a
    counter under a lock, with `mkdir` as the final arbiter. With `writing`, the batch is
    recorded with the ids before their directories are made."""
    counter = home.runtime_dir / "next_id"
    claimed: list[tuple[str, Path]] = []
    with locked(home.locks_dir / "ids.lock"):
        try:
            n = int(counter.read_text().strip())
        except (OSError, ValueError):
            n = 1 + max((int(p) for p in _dir_names(home) if p.isdigit()), default=0)
        if writing is not None:
            writing.begin([str(i) for i in range(n, n + count)])
        try:
            runs = os.fspath(home.runs_dir)
            while len(claimed) < count:
                staging = f"{runs}/.staging-{n}"
                try:
                    os.mkdir(staging)
                except FileExistsError:
                    n += 1
                    continue
                # Made first, then looked for: a run revealed meanwhile (its rename) is seen.
                if os.path.lexists(f"{runs}/{n}"):
                    _rmdir_quiet(Path(staging))
                else:
                    claimed.append((str(n), Path(staging)))
                n += 1
            if writing is not None:
                writing.claimed([run_id for run_id, _ in claimed])
            atomic_write(counter, f"{n}\n".encode())
        except BaseException:
            for _, path in claimed:  # a full disk must not leave empty runs/<n> behind
                _rmdir_quiet(path)
            raise
    return claimed


def create_runs(
    home: Home,
    runs: Sequence[NewRun],
    *,
    state: RunState = RunState.QUEUED,
    reason: str,
    actor: str,
    status_fields: dict[str, Any] | None = None,
    revealed: Callable[[Run], None] | None = None,
    recorded: Callable[[str], None] | None = None,
) -> list[Run]:
    """Write `runs` as complete run directories (queued ones with their markers), in order.

    `recorded(created_at)` is called once the batch's record exists, before any run is
    staged (a launch is noted then, with the batch's time: a writer killed before leaves
    neither). `revealed(run)` is called as each run appears; when either raises, or anything
    fails, the runs revealed so far stay and the others are removed. The runs share one
    submit time.
    """
    if not runs:
        return []
    home.ensure()
    writing = batches.Writing(home, runs[0].spec.get("group"), state.value)
    try:
        claimed = claim_ids(home, len(runs), writing)
        return _write_batch(
            home, runs, claimed, writing, state, reason, actor, status_fields, revealed, recorded
        )
    finally:
        writing.end()


def _write_batch(
    home: Home,
    runs: Sequence[NewRun],
    claimed: list[tuple[str, Path]],
    writing: batches.Writing,
    state: RunState,
    reason: str,
    actor: str,
    status_fields: dict[str, Any] | None,
    revealed: Callable[[Run], None] | None,
    recorded: Callable[[str], None] | None = None,
) -> list[Run]:
    """Phases 2-6 for the claimed ids; on an error, remove what was not revealed."""
    now = now_iso()
    status = {
        "format": FORMAT,
        "state": state.value,
        "reason": reason,
        "exit_code": None,
        "submitted_at": now,
        "started_at": None,
        "finished_at": now if state.finished else None,
        **(status_fields or {}),
        "updated_at": now,  # always the last key: a file cut short lacks it
    }
    event = {"time": now, "event": "submitted", "state": state.value, "actor": actor}
    status_text = dump_yaml(status).encode()
    event_line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    yaml = YamlBatch()
    done: list[Run] = []
    notify = False
    try:
        if recorded and writing.batch is not None:
            recorded(writing.batch.created_at)
        staged = []
        runs_dir = home.runs_dir
        places = (os.fspath(runs_dir), os.fspath(home.queue_dir))
        for (run_id, staging), new in zip(claimed, runs, strict=True):
            spec = {"format": FORMAT, "id": run_id, **new.spec, "submitted_at": now}
            final = runs_dir / run_id
            stamp = _stage(staging, yaml.dump(spec).encode(), status_text, event_line, new.files)
            if new.prepare:
                new.prepare(run_id, staging)
            staged.append((Run(run_id, final, spec, dict(status), stamp), staging))
        _fsync(home.runs_dir)
        writing.synced()
        for run, staging in staged:
            notify = _reveal(home, places, run.id, staging, state, now) or notify
            done.append(run)
            if revealed:
                revealed(run)
    except BaseException:
        for run_id, _ in claimed[len(done) :]:
            _clear(home, run_id)
        try:
            _settle(home, done)
        except OSError:
            pass  # the error that stopped the batch is the one to report
        raise
    _settle(home, done)
    if notify:
        outbox.wake_sender(home)  # after the run appears: a spawn costs it nothing more
    return done


def _reveal(
    home: Home,
    places: tuple[str, str],
    run_id: str,
    staging: Path,
    state: RunState | str,
    at: str,
) -> bool:
    """Make one staged run appear: its marker (queued), then the rename over its claimed
    directory. True when it was born finished (its outbox event was written). `places`: the
    runs and queue directories (strings: a batch's 1,000 joins cost more than pathlib's)."""
    runs, queue = places
    value = RunState(state)
    if value is RunState.QUEUED:
        touch_exclusive(f"{queue}/{run_id}")
    # A run born finished (a failed build) is settled by the rename: its event first.
    settled = value.finished and outbox.record_settled(home, run_id, value.value, at)
    # To a free name; over the empty directory that claimed the id in a killed older batch.
    os.rename(staging, f"{runs}/{run_id}")
    return bool(settled)


def _clear(home: Home, run_id: str) -> None:
    """Remove what an unfinished submit of `run_id` left: never a run that appeared."""
    import shutil  # here: a shepherd imports this module and never needs it

    final = home.runs_dir / run_id
    if _has_status(final):
        return
    shutil.rmtree(home.runs_dir / f".staging-{run_id}", ignore_errors=True)
    unlink_quiet(home.queue_dir / run_id)
    secrets.drop(home, run_id)
    _rmdir_quiet(final)


class Recovered(Record):
    """What `recover` did: the runs it revealed, the ids it cleared."""

    __slots__ = ("cleared", "revealed")

    def __init__(self) -> None:
        self.revealed: list[str] = []
        self.cleared: list[str] = []


def recover(home: Home) -> Recovered:
    """Finish or undo every batch whose writer was killed (store/batches.py): one killed while
    revealing gets the rest of its runs revealed (they are whole and synced), one killed
    before is cleared, and a cleared batch of a group is noted in the group's record. Cheap
    when there is none: one listing of `runtime/batches/`."""
    done = Recovered()
    for batch in batches.abandoned(home):
        if batch.phase == batches.REVEAL:
            notify = False
            places = (os.fspath(home.runs_dir), os.fspath(home.queue_dir))
            for run_id in batch.ids:
                staging = home.runs_dir / f".staging-{run_id}"
                if staging.is_dir() and not _has_status(home.runs_dir / run_id):
                    try:
                        at = now_iso()
                        notify = _reveal(home, places, run_id, staging, batch.state, at) or notify
                    except OSError as exc:  # left for a person: never a tick that fails on it
                        log.warning("run %s of a killed batch not revealed: %s", run_id, exc)
                        continue
                    done.revealed.append(run_id)
            _fsync(home.queue_dir)
            _fsync(home.runs_dir)
            if notify:
                outbox.wake_sender(home)
            continue
        for run_id in batch.ids:
            _clear(home, run_id)
        done.cleared.extend(batch.ids)
        if batch.group:
            from orbit.store.groups import record_interrupted  # hashlib: not for a shepherd

            record_interrupted(home, batch.group, batch.ids, batch.created_at)
    return done


def _settle(home: Home, runs: list[Run]) -> None:
    """Make the renames durable and list the runs in index.jsonl."""
    if runs:
        _fsync(home.queue_dir)
        _fsync(home.runs_dir)
        _index(home, runs)


def _stage(
    staging: Path, spec: bytes, status: bytes, event: bytes, files: dict[str, bytes]
) -> list[int]:
    """The run's files in its (claimed, empty) staging directory, and the stamp of its
    status.yaml (a rename keeps it); no file is fsynced: the caller syncs. Plain strings:
    1,000 runs of pathlib's joins cost more than their writes."""
    folder = os.fspath(staging)
    os.mkdir(f"{folder}/{OUTPUT}")
    _write(f"{folder}/{RUN_YAML}", spec)
    st = _write(f"{folder}/{STATUS_YAML}", status)
    for name in log_files:
        _write(f"{folder}/{name}", b"")
    for name, data in files.items():
        _write(f"{folder}/{name}", data)
    _write(f"{folder}/{EVENTS}", event)
    return stamp_of(st)


def _write(path: str, data: bytes) -> os.stat_result:
    """A new file (nobody else sees the staging directory: no temporary name is needed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return os.fstat(fd)
    finally:
        os.close(fd)


def _index(home: Home, runs: list[Run]) -> None:
    """Their rows in index.jsonl, in one append; a cache, so a refused write is no error.

    Each row carries the stamp of the status.yaml it was made from, as written: should a tick
    have changed a run since it appeared, its row is stale, not wrong."""
    lines = [json.dumps(index.row_for(run, run.stamp), separators=(",", ":")) for run in runs]
    try:
        append_lines(home.index_path, lines)
    except OSError:
        pass


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _has_status(final: Path) -> bool:
    """The run appeared (or is another's): its status.yaml is there."""
    try:
        os.lstat(final / STATUS_YAML)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: leave it alone
    return True


def _rmdir_quiet(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _dir_names(home: Home) -> list[str]:
    try:
        return [n for n in os.listdir(home.runs_dir) if not n.startswith(".")]
    except FileNotFoundError:
        return []

"""The record of a batch being written (orbit/store/creation.py), so that a killed submit is
finished or undone by the next tick instead of leaving hidden runs behind.

    runtime/batches/<first id>-<pid>.lock   held (flock) by the writer for as long as it writes
    runtime/batches/<first id>-<pid>.json   {"format": 1, "ids": [...], "group": G or null,
                                             "state": the runs' state, "phase": "staging" or
                                             "reveal", "created_at": time, "pid": writer}

The lock is taken before the record appears and the ids are recorded (under `locks/ids.lock`)
before their directories are made, so every id the batch claims is named here while it may
leave anything behind. The writer rewrites `phase` to "reveal" once every run is staged and
synced, and removes both files when it is done (or has undone a failure). A record whose lock
is free belongs to a writer that was killed: `creation.recover` reveals the rest of a batch
killed in its "reveal" phase (its runs are whole) and clears one killed while "staging"; a
cleared batch of a group is recorded in the group's `interrupted.jsonl` (store/groups.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from orbit.record import Record
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import LockTimeout, release, try_lock
from orbit.store.model import now_iso

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

FORMAT = 1
STAGING = "staging"
REVEAL = "reveal"


def batches_dir(home: Home) -> Path:
    return home.runtime_dir / "batches"


class Batch(Record):
    """A batch as its record says: its ids, group, the state its runs are born in, its phase."""

    __slots__ = ("created_at", "group", "ids", "path", "phase", "state")

    def __init__(
        self,
        path: Path,
        ids: list[str],
        group: str | None,
        state: str,
        phase: str,
        created_at: str,
    ) -> None:
        self.path = path
        self.ids = ids
        self.group = group
        self.state = state
        self.phase = phase
        self.created_at = created_at

    def write(self) -> None:
        body = {
            "format": FORMAT,
            "ids": self.ids,
            "group": self.group,
            "state": self.state,
            "phase": self.phase,
            "created_at": self.created_at,
            "pid": os.getpid(),
        }
        atomic_write(self.path, json.dumps(body).encode())


class Writing:
    """The writer's side: the lock held from `begin` to `end`, and the record it keeps."""

    def __init__(self, home: Home, group: str | None, state: str) -> None:
        self.home = home
        self.group = group
        self.state = state
        self.batch: Batch | None = None
        self.handle: IO[str] | None = None

    def begin(self, planned: Sequence[str]) -> None:
        """Lock and record the batch before its ids are claimed (`planned`: the ids it will
        most likely get; `claimed` corrects them)."""
        stem = batches_dir(self.home) / f"{planned[0]}-{os.getpid()}"
        self.handle = try_lock(stem.with_suffix(".lock"))
        if self.handle is None:  # only this process puts its pid in the name
            raise LockTimeout(f"{stem}.lock is held by another process")
        self.batch = Batch(
            stem.with_suffix(".json"), list(planned), self.group, self.state, STAGING, now_iso()
        )
        self.batch.write()

    def claimed(self, ids: Sequence[str]) -> None:
        if self.batch is not None and list(ids) != self.batch.ids:
            self.batch.ids = list(ids)
            self.batch.write()

    def synced(self) -> None:
        """Every run is staged and synced: from now on a killed batch is finished, not undone."""
        if self.batch is not None:
            self.batch.phase = REVEAL
            self.batch.write()

    def end(self) -> None:
        if self.batch is not None:
            unlink_quiet(self.batch.path)
        if self.handle is not None:
            unlink_quiet(Path(self.handle.name))
            release(self.handle)
        self.batch = self.handle = None


def read(path: Path) -> Batch | None:
    """The record at `path`; None when it is gone or cannot be read."""
    try:
        data = json.loads(path.read_text())
        ids = [str(i) for i in data["ids"]]
        group = data.get("group")
        return Batch(
            path,
            ids,
            str(group) if group else None,
            str(data["state"]),
            str(data["phase"]),
            str(data.get("created_at") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _records(home: Home) -> list[Path]:
    try:
        names = os.listdir(batches_dir(home))
    except FileNotFoundError:
        return []
    return [batches_dir(home) / n for n in sorted(names) if n.endswith(".json")]


def pending(home: Home, group: str | None = None) -> list[Batch]:
    """The batches being written, or killed and not yet recovered (of `group`, if given)."""
    found = (read(p) for p in _records(home))
    return [b for b in found if b is not None and (group is None or b.group == group)]


def abandoned(home: Home) -> Iterator[Batch]:
    """Each batch whose writer is gone, locked for the caller while it is handled; its record
    and lock are removed once the caller goes on. Lock files left without a record (a writer
    killed before writing it, or after removing it) are removed too."""
    folder = batches_dir(home)
    try:
        names = set(os.listdir(folder))
    except FileNotFoundError:
        return
    for name in sorted(names):
        stem, _, suffix = name.rpartition(".")
        if suffix != "lock" and not (suffix == "json" and f"{stem}.lock" not in names):
            continue
        lock = folder / f"{stem}.lock"
        handle = try_lock(lock, make_parent=False)
        if handle is None:
            continue  # its writer is alive
        try:
            batch = read(folder / f"{stem}.json")  # read under the lock: the writer's last word
            if batch is not None:
                yield batch
            for other in names:  # a record's temporary file, from a writer killed writing it
                if other.startswith(f".{stem}.json.") and other.endswith(".tmp"):
                    unlink_quiet(folder / other)
            unlink_quiet(folder / f"{stem}.json")
            unlink_quiet(lock)
        finally:
            release(handle)

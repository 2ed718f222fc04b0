"""Run records: allocate, write, read, resolve, transition, list and remove.

A run directory is created whole: it is staged under the hidden name that claims its id
and renamed to the id, so readers never see a half-written run. status.yaml is
only changed under the run's lock by `transition`/`update`, which also append the matching
line to events.jsonl and the listing index.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from orbit.errors import ConflictError, CorruptError, NotFoundError
from orbit.record import Record
from orbit.store import index, outbox, secrets
from orbit.store.creation import NewRun, create_runs
from orbit.store.files import (
    append_jsonl,
    read_jsonl,
    read_yaml,
    unlink_quiet,
    write_yaml,
)
from orbit.store.home import Home
from orbit.store.locks import is_locked, locked
from orbit.store.model import (
    EVENTS,
    FORMAT,
    LEASED,
    NOTES,
    RUN_YAML,
    SHEPHERD_LOCK,
    STATUS_YAML,
    TRANSITIONS,
    Run,
    RunState,
    now_iso,
    stamp_of,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

log = logging.getLogger(__name__)

ABANDONED_SECONDS = 600  # a submit that has not finished writing its run by then never will


class Broken(Record):
    """A run directory that cannot be read; listed with its problem, never fatal.

    `spec` is its run.yaml when that one file could still be read (a broken status.yaml), so
    its group and name are known; None when not even that could be read.
    """

    __slots__ = ("id", "problem", "spec")

    def __init__(self, id: str, problem: str, spec: dict[str, Any] | None = None) -> None:
        self.id = id
        self.problem = problem
        self.spec = spec

    @property
    def group_known(self) -> bool:
        # Every run.yaml has the key (null without a group): one without it was cut or emptied.
        return self.spec is not None and "group" in self.spec

    @property
    def group(self) -> str | None:
        return str(self.spec["group"]) if self.spec and self.spec.get("group") else None

    @property
    def name(self) -> str | None:
        return str(self.spec["name"]) if self.spec and self.spec.get("name") else None

    def may_be_in(self, group: str) -> bool:
        """In `group` by its run.yaml, or perhaps: not even its group can be read."""
        return self.group == group or not self.group_known


class RunStore:
    def __init__(self, home: Home, *, index_cache: index.IndexCache | None = None) -> None:
        self.home = home
        # A long-lived process (the web server) passes one so that list_rows parses only what
        # was appended to index.jsonl since its last call; the CLI reads the file whole.
        self.index_cache = index_cache

    # --- creation -----------------------------------------------------------------------
    def create(
        self,
        spec: dict[str, Any],
        *,
        state: RunState = RunState.QUEUED,
        reason: str,
        actor: str,
        extra_files: dict[str, bytes] | None = None,
        status_fields: dict[str, Any] | None = None,
        prepare: Callable[[str, Path], None] | None = None,
        recorded: Callable[[str], None] | None = None,
    ) -> Run:
        """Write a complete run directory and, when queued, its queue marker (a batch of one:
        see orbit/store/creation.py, also for `recorded`).

        `prepare(id, staging_dir)` may add files (e.g. code.diff) before the directory appears.
        """
        new = NewRun(spec, extra_files or {}, prepare)
        (run,) = create_runs(
            self.home,
            [new],
            state=state,
            reason=reason,
            actor=actor,
            status_fields=status_fields,
            recorded=recorded,
        )
        return run

    def settle_unfinished_submit(self, run_id: str) -> bool:
        """For a marker whose run directory is not there (yet): True when that is a submit in
        progress or one abandoned more than ABANDONED_SECONDS ago, which is then cleared."""
        final = self.run_dir(run_id)
        staging = self.home.runs_dir / f".staging-{run_id}"
        if _present(final / STATUS_YAML):
            return False
        try:
            claimed = final.is_dir() and not any(final.iterdir())
        except OSError:
            claimed = False
        if not claimed and not _present(staging):
            if _present(final):
                return False  # a real run directory with a problem: report it
            unlink_quiet(self.home.queue_dir / run_id)  # its run was removed by hand
            unlink_quiet(self.home.active_dir / run_id)
            return True
        age = time.time() - max(_mtime(final), _mtime(staging))
        if age > ABANDONED_SECONDS:
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
            secrets.drop(self.home, run_id)
            try:
                final.rmdir()
            except OSError:
                pass
            unlink_quiet(self.home.queue_dir / run_id)
        return True

    def drop_stale_secrets(self, listed: Iterable[str], writing: set[str]) -> list[str]:
        """Delete the secrets of runs in `listed` (store/secrets.py) that will never run again,
        and return their ids: runs that finished or are gone, and ids whose submit was killed
        before they appeared. Kept: those of a batch still being written (`writing`), of a run
        with an active/ marker (its container may still need them) or not finished, or one
        that cannot be read.
        `listed` must be read before `writing`: a run's secrets are written after its batch's
        record, so an id not in `writing` then has appeared, or never will."""
        dropped = []
        for run_id in listed:
            if run_id in writing or _present(self.home.active_dir / run_id):
                continue
            if _present(self.run_dir(run_id) / STATUS_YAML):
                try:
                    if not self.load(run_id).state.finished:
                        continue
                except (CorruptError, NotFoundError):
                    continue  # perhaps repaired later: a person decides
            secrets.drop(self.home, run_id)
            dropped.append(run_id)
        return dropped

    # --- reading ------------------------------------------------------------------------
    def _dir_names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.home.runs_dir) if not n.startswith(".")]
        except FileNotFoundError:
            return []

    def run_dir(self, run_id: str) -> Path:
        return self.home.runs_dir / run_id

    def load(self, run_id: str) -> Run:
        path = self.run_dir(run_id)
        if not path.is_dir():
            raise NotFoundError(f"no run {run_id!r}")
        spec = _check_format(path / RUN_YAML, read_yaml(path / RUN_YAML))
        _check_spec(path / RUN_YAML, spec)
        status = _check_format(path / STATUS_YAML, read_yaml(path / STATUS_YAML))
        _check_status(path / STATUS_YAML, status)
        return Run(run_id, path, spec, status)

    def exists(self, run_id: str) -> bool:
        """True when the run has a status.yaml, or one that this user may not examine."""
        return _present(self.run_dir(run_id) / STATUS_YAML)

    def resolve(self, ref: str) -> Run:
        """A run by exact id, unique id prefix, unique name, or unique name prefix."""
        return self.load(self.resolve_id(ref))

    def resolve_id(self, ref: str) -> str:
        """The id `ref` names (as `resolve`), without reading the run: it may be broken.
        Order: an exact id, a unique id prefix, a unique exact name, then (when no id starts
        with `ref` and no run has that name) a unique name prefix."""
        ref = ref.strip()
        if not ref:
            raise NotFoundError("empty run id")
        # A ref with a slash or a leading dot is never an id: without this check `../x` or an
        # absolute path would name a directory outside runs/.
        if "/" not in ref and not ref.startswith(".") and self.exists(ref):
            return ref
        by_prefix = [n for n in self._dir_names() if n.startswith(ref)]
        if len(by_prefix) == 1:
            return by_prefix[0]
        # list_rows, not the raw index: it fills in runs the index lacks (deleted, or a crash
        # between a status write and its index line).
        names = [
            (r.id, r.name) if isinstance(r, Broken) else (r["id"], r.get("name"))
            for r in self.list_rows()
        ]
        by_name = sorted({i for i, name in names if name == ref})
        if not by_prefix and not by_name:
            by_name = sorted({i for i, name in names if name and str(name).startswith(ref)})
        if len(by_name) == 1:
            return by_name[0]
        if len(by_prefix) > 1 or len(by_name) > 1:
            matches = sorted(set(by_prefix) | set(by_name), key=id_key)
            shown = ", ".join(matches[:8]) + (" …" if len(matches) > 8 else "")
            raise NotFoundError(f"{ref!r} is ambiguous: it matches runs {shown}")
        raise NotFoundError(f"no run {ref!r} (see `orbit ps -a`)")

    def active_ids(self) -> list[str]:
        ids: set[str] = set()
        for d in (self.home.queue_dir, self.home.active_dir):
            try:
                ids.update(n for n in os.listdir(d) if not n.startswith("."))
            except FileNotFoundError:
                pass
        return sorted(ids, key=id_key)

    def queued_ids(self) -> list[str]:
        try:
            return sorted(
                (n for n in os.listdir(self.home.queue_dir) if not n.startswith(".")), key=id_key
            )
        except FileNotFoundError:
            return []

    def leased_ids(self) -> list[str]:
        try:
            return sorted(
                (n for n in os.listdir(self.home.active_dir) if not n.startswith(".")), key=id_key
            )
        except FileNotFoundError:
            return []

    def load_many(self, ids: Iterable[str]) -> list[Run | Broken]:
        out: list[Run | Broken] = []
        for run_id in ids:
            try:
                out.append(self.load(run_id))
            except (CorruptError, NotFoundError) as exc:
                out.append(self.broken(run_id, str(exc)))
        return out

    def broken(self, run_id: str, problem: str) -> Broken:
        """A Broken entry for a run that could not be loaded, with its run.yaml if readable."""
        try:
            spec: dict[str, Any] | None = read_yaml(self.run_dir(run_id) / RUN_YAML)
        except CorruptError:
            spec = None
        return Broken(run_id, problem, spec)

    def list_rows(self) -> list[dict[str, Any] | Broken]:
        """Every run as an index row (fresh rows from the cache, stale ones from disk)."""
        if self.index_cache is not None:
            rows, n_lines = self.index_cache.read(self.home.index_path)
        else:
            rows, n_lines = index.read(self.home.index_path)
        out: list[dict[str, Any] | Broken] = []
        fresh: dict[str, dict[str, Any]] = {}
        runs_dir = str(self.home.runs_dir)  # plain strings: pathlib costs more than the stat
        for run_id in sorted(self._dir_names(), key=id_key):
            row = self.row_of(run_id, rows.get(run_id), runs_dir)
            if row is None:
                continue
            if not isinstance(row, Broken):
                fresh[run_id] = row
            out.append(row)
        if n_lines > 2 * len(fresh) + 100:
            self._cache(self._compact, fresh)
        return out

    def row_of(
        self, run_id: str, row: dict[str, Any] | None, runs_dir: str
    ) -> dict[str, Any] | Broken | None:
        """Run `run_id`'s listing row: `row` (its index row) while the status.yaml it was made
        from is unchanged, else one made from disk and appended to the index; a Broken entry
        for a run that cannot be read; None for no run (removed, or an id being claimed)."""
        try:
            st = os.stat(f"{runs_dir}/{run_id}/{STATUS_YAML}")
            mtime: list[int] | None = stamp_of(st)
        except OSError:
            mtime = None
        if mtime is None:
            try:
                with os.scandir(self.run_dir(run_id)) as entries:
                    claimed_only = not any(entries)
            except FileNotFoundError:
                return None  # removed since the listing
            except NotADirectoryError:
                # A stray file is no run: listed, but a member of no group.
                problem = f"{self.run_dir(run_id)}: not a run directory"
                return Broken(run_id, problem, spec={"group": None})
            except OSError as exc:  # permission denied
                problem = f"{self.run_dir(run_id)}: not a run directory"
                if exc.strerror:
                    problem += f" ({exc.strerror.lower()})"
                return self.broken(run_id, problem)
            if not claimed_only:
                return self.broken(run_id, f"{self.run_dir(run_id)}: status.yaml missing")
            return None  # an empty directory is an id being claimed right now
        if row is None or row.get("st") != mtime:
            try:
                run = self.load(run_id)
            except (CorruptError, NotFoundError) as exc:
                return self.broken(run_id, str(exc))
            row = index.row_for(run, mtime)
            self._cache(index.append, self.home.index_path, row)
        return row

    def _compact(self, fresh: dict[str, dict[str, Any]]) -> None:
        with locked(self.home.locks_dir / "index.lock"):
            index.rewrite(self.home.index_path, fresh)

    @staticmethod
    def _cache(write: Callable[..., None], *args: Any) -> None:
        """Update the listing index, which is only a cache: a disk that refuses the write (full,
        read-only, another user's home) costs speed until it is repaired, never a listing."""
        try:
            write(*args)
        except OSError as exc:
            log.debug("index not updated: %s", exc)

    # --- changes ------------------------------------------------------------------------
    def transition(
        self,
        run_id: str,
        to: RunState,
        *,
        actor: str,
        event: str | None = None,
        expect: Iterable[RunState] | None = None,
        **fields: Any,
    ) -> Run:
        """Move a run to state `to`, atomically, with an event; refuses illegal moves."""

        def change(run: Run) -> dict[str, Any] | None:
            current = run.state
            if expect is not None and current not in set(expect):
                raise ConflictError(f"run {run.label} is {current.value}")
            if to is not current and to not in TRANSITIONS.get(current, frozenset()):
                raise ConflictError(f"run {run.label} is {current.value}; cannot become {to.value}")
            return {"state": to.value, **fields}

        return self.update(run_id, change, actor=actor, event=event or to.value)

    def update(
        self,
        run_id: str,
        change: Callable[[Run], dict[str, Any] | None],
        *,
        actor: str,
        event: str | None = None,
    ) -> Run:
        """Apply `change(run) -> fields` to status.yaml under the run's lock.

        Returning None leaves the file alone. The event line (if any) is appended after the
        status is replaced, so the history never claims what the status does not show.
        """
        path = self.run_dir(run_id)
        try:
            with locked(path / ".lock", make_parent=False):
                run = self.load(run_id)
                fields = change(run)
                if fields is None:
                    return run
                status = {**run.status, **fields, "format": FORMAT}
                status.pop("updated_at", None)
                status["updated_at"] = now_iso()  # always the last key: a file cut short lacks it
                settles = status["state"] != run.state.value and RunState(status["state"]).finished
                # The notification event goes first: a crash before the status write leaves it
                # pending (the sender waits for the run to be finished), never missing.
                notify = settles and outbox.record_settled(
                    self.home, run_id, status["state"], status["updated_at"]
                )
                write_yaml(path / STATUS_YAML, status)
                run.status = status
                if event:
                    line = {
                        "time": now_iso(),
                        "event": event,
                        "state": status["state"],
                        "actor": actor,
                    }
                    line.update({k: v for k, v in fields.items() if k not in ("state",)})
                    append_jsonl(path / EVENTS, line)
                self._index(run)
        except FileNotFoundError:
            if path.is_dir():
                raise
            # Removed meanwhile (`orbit rm --force`): its lock must not bring it back.
            raise NotFoundError(f"run {run_id} was removed") from None
        if notify:
            outbox.wake_sender(self.home)  # after the lock: a spawn costs the run nothing more
        return run

    def append_event(self, run_id: str, event: str, *, actor: str, **fields: Any) -> None:
        line = {"time": now_iso(), "event": event, "actor": actor, **fields}
        append_jsonl(self.run_dir(run_id) / EVENTS, line)

    def _index(self, run: Run) -> None:
        mtime = index.status_stamp(run.dir)
        if mtime is not None:
            self._cache(index.append, self.home.index_path, index.row_for(run, mtime))

    def add_note(self, run_id: str, text: str, actor: str) -> dict[str, Any]:
        note = {"time": now_iso(), "author": actor, "text": text}
        append_jsonl(self.run_dir(run_id) / NOTES, note)
        return note

    def notes(self, run_id: str) -> list[dict[str, Any]]:
        return read_jsonl(self.run_dir(run_id) / NOTES)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return read_jsonl(self.run_dir(run_id) / EVENTS)

    def remove(self, run: Run) -> None:
        """Delete a finished run's directory (renamed aside first, so it vanishes at once)."""
        if run.state.active:
            raise ConflictError(f"run {run.label} is {run.state.value}; cancel it first")
        self.remove_dir(run.id)

    def remove_dir(self, run_id: str) -> None:
        """Delete a run's directory whatever its state or damage, and what names it (markers,
        secrets). The caller makes sure no container of the run is left (`orbit rm --force`)."""
        trash = self.home.runs_dir / f".removing-{run_id}"
        os.rename(self.run_dir(run_id), trash)
        # On a full disk, deleting runs is how space comes back: the tombstone may fail.
        self._cache(index.append, self.home.index_path, {"id": run_id, "removed": True})
        _rmtree(trash)
        unlink_quiet(self.home.queue_dir / run_id)
        unlink_quiet(self.home.active_dir / run_id)
        secrets.drop(self.home, run_id)


def _check_spec(path: Path, spec: dict[str, Any]) -> None:
    """A run.yaml cut at a line break (or emptied to a stray key) is still valid YAML: `id` is
    its second key and `submitted_at` its last."""
    missing = [key for key in ("id", "submitted_at") if key not in spec]
    if missing:
        raise CorruptError(f"{path}: missing {', '.join(missing)} (truncated or hand-edited?)")


def _check_status(path: Path, status: dict[str, Any]) -> None:
    """A status.yaml cut at a line break is still valid YAML: check what each state needs."""
    try:
        state = RunState(str(status.get("state")))
    except ValueError:
        raise CorruptError(f"{path}: unknown state {status.get('state')!r}") from None
    needed = ["reason", "submitted_at", "updated_at"]
    if state in LEASED:
        needed.append("lease")
    if state.finished:
        needed.append("finished_at")
    missing = [key for key in needed if key not in status]
    if missing:
        raise CorruptError(f"{path}: missing {', '.join(missing)} (truncated or hand-edited?)")
    lease = status.get("lease")
    if state in LEASED and not (isinstance(lease, dict) and {"cpus", "mem_gb"} <= set(lease)):
        raise CorruptError(f"{path}: lease is incomplete (truncated or hand-edited?)")


def _check_format(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Refuse files from a newer Orbit; upgrade older formats here when there are any."""
    version = data.get("format", FORMAT)
    if not isinstance(version, int) or version > FORMAT:
        raise CorruptError(f"{path}: format {version!r} is newer than this Orbit reads ({FORMAT})")
    return data


def _present(path: Path) -> bool:
    """`path.exists()` that answers True, not PermissionError, when the path cannot be
    examined (a directory made unreadable): something is there, and it is reported."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def _rmtree(path: Path) -> None:
    """Remove a tree, also the directories its owner made unreadable (chmod 000); what cannot
    be removed even so stays behind under its hidden name."""
    import shutil

    def retry(func: Any, name: str, exc_info: Any) -> None:
        if func is os.unlink or not os.path.isdir(name):
            return
        try:
            os.chmod(name, 0o700)
        except OSError:
            return
        shutil.rmtree(name, ignore_errors=True)

    shutil.rmtree(path, onerror=retry)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def shepherd_alive(run_dir: Path) -> bool:
    """True while a shepherd holds the run's lock (a lock, not a pid: it dies with its holder)."""
    return is_locked(run_dir / SHEPHERD_LOCK)


def id_key(run_id: str) -> tuple[int, str]:
    """Run ids sort as numbers (2 before 10); anything else after them."""
    return (int(run_id), "") if run_id.isdigit() else (1 << 62, run_id)

"""Folders: a path per run for filing (`--folder`, `orbit mv`), a tree of counts, and export.

run.yaml is written once, so it keeps the folder given at submit; `orbit mv` records the new
one in status.yaml (`folder`, null = the top level) with a `moved` event. The effective folder
is status.yaml's when it has the key, else run.yaml's. Nothing on disk moves: folders are
labels, and `export` is the one operation that copies files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orbit.errors import ConflictError, NotFoundError, OrbitError, UsageError
from orbit.store.dirlist import special_kind
from orbit.store.model import DISK_RESERVE, Run

if TYPE_CHECKING:
    from orbit.store.runs import RunStore


def normalize(text: str | None) -> str | None:
    """`papers/ablation` from ` /papers//ablation/ `; None (the top level) from `` or `/`.

    Raises UsageError for `.` and `..` segments: a folder becomes a directory path on export,
    and must never point outside the export directory.
    """
    if text is None:
        return None
    parts = [p for p in text.strip().split("/") if p]
    for part in parts:
        if part in (".", ".."):
            raise UsageError(f"folder {text!r}: `.` and `..` are not folder names")
        if part != part.strip() or "\0" in part or "\\" in part:
            raise UsageError(f"folder {text!r}: a folder name has no edge spaces, NUL or `\\`")
    return "/".join(parts) or None


def of_run(run: Run) -> str | None:
    return run.folder


def within(folder: str | None, top: str) -> bool:
    """True when `folder` is `top` or one of its subfolders."""
    return folder is not None and (folder == top or folder.startswith(top + "/"))


def move(store: RunStore, runs: Iterable[Run], folder: str | None, *, actor: str) -> list[Run]:
    """File each run under `folder` (None: the top level) through status.yaml, with a `moved`
    event; a run already there is left untouched. Works on active runs too: every status
    change is merged into the previous content, so the key stays."""

    def change(current: Run) -> dict[str, Any] | None:
        return None if of_run(current) == folder else {"folder": folder}

    return [store.update(run.id, change, actor=actor, event="moved") for run in runs]


@dataclass
class FolderCount:
    path: str
    runs: int  # in this folder and its subfolders
    direct: int  # filed in exactly this folder
    jobs: int = 0  # bench jobs in this folder and its subfolders
    direct_jobs: int = 0  # bench jobs filed in exactly this folder


def tree(
    folders: Iterable[str | None], job_folders: Iterable[str | None] = ()
) -> tuple[list[FolderCount], int]:
    """Every folder with its counts of runs (`folders`: one entry a run) and bench jobs
    (`job_folders`: one a job), parents before children (sorted by path segments), and the
    number of runs at the top level. `a/b/c` alone lists `a`, `a/b` and `a/b/c`."""
    counts: dict[str, FolderCount] = {}
    top_level = 0
    for kind, entries in (("runs", folders), ("jobs", job_folders)):
        for folder in entries:
            if not folder or not isinstance(folder, str):  # a damaged record: the top level
                top_level += kind == "runs"
                continue
            parts = folder.split("/")
            for depth in range(1, len(parts) + 1):
                path = "/".join(parts[:depth])
                entry = counts.setdefault(path, FolderCount(path, 0, 0))
                _count(entry, kind, direct=depth == len(parts))
    return [counts[k] for k in sorted(counts, key=lambda p: p.split("/"))], top_level


def _count(entry: FolderCount, kind: str, *, direct: bool) -> None:
    if kind == "runs":
        entry.runs += 1
        entry.direct += direct
    else:
        entry.jobs += 1
        entry.direct_jobs += direct


@dataclass
class ExportPlan:
    folder: str
    dest: Path
    copy: list[tuple[Run, Path]]  # finished runs and their targets
    skipped: list[Run]  # active runs, left out


def export_dest(dest: Path, runs_dir: Path) -> Path:
    """An export's DIR, resolved; refused (one line) inside Orbit's run directory or when it
    is a file."""
    dest = dest.expanduser().resolve()
    data = runs_dir.resolve()
    if dest == data or data in dest.parents:
        raise UsageError(f"cannot export into Orbit's run directory {data}")
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest} exists and is not a directory")
    return dest


def plan_export(runs_dir: Path, runs: Iterable[Run], folder: str | None, dest: Path) -> ExportPlan:
    """Decide what `export` copies where; raises before anything is written.

    Targets are `dest/<the run's folder>/<id>`; an existing target that is not an empty
    directory is refused (ConflictError naming it), so an export never overwrites.
    """
    top = normalize(folder)
    if top is None:
        raise UsageError("give the folder to export, e.g. `orbit export papers ~/copy`")
    dest = export_dest(dest, runs_dir)
    chosen = [r for r in runs if within(of_run(r), top)]
    if not chosen:
        raise NotFoundError(f"no runs in folder {top!r} (see `orbit folders`)")
    copy: list[tuple[Run, Path]] = []
    skipped: list[Run] = []
    taken: list[str] = []
    for run in chosen:
        if run.state.active:
            skipped.append(run)
            continue
        try:  # written before --folder was checked, a folder could hold `..`
            folder_path = str(normalize(of_run(run)))
        except UsageError:
            raise UsageError(
                f"run {run.id} is filed under {of_run(run)!r}, which is no safe directory "
                f"path: `orbit mv {run.id} FOLDER` it first"
            ) from None
        target = dest / folder_path / run.id
        if occupied(target):
            taken.append(str(target))
        copy.append((run, target))
    if taken:
        shown = ", ".join(taken[:3]) + (f" and {len(taken) - 3} more" if len(taken) > 3 else "")
        raise ConflictError(f"not overwriting {shown}: export to another directory")
    return ExportPlan(top, dest, copy, skipped)


@contextmanager
def staged_dir(target: Path, prefix: str) -> Iterator[Path]:
    """A new temporary directory beside `target`, renamed onto `target` (absent or an empty
    directory) when the block ends, removed when it raises: `target` is whole or absent."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=".export", dir=target.parent))
    try:
        yield tmp
        os.rename(tmp, target)  # over an empty directory too; a full one fails: never overwrite
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def copy_run(run: Run, target: Path) -> None:
    """Copy one run directory to `target` (absent or an empty directory), whole or not at all:
    it is copied under a temporary name beside `target`, then renamed. Lock and pid files and
    the disk reserve are left out; symlinks the experiment made in output/ are copied as links."""
    try:
        with staged_dir(target, f".{run.id}.") as tmp:
            shutil.copytree(
                run.dir, tmp, symlinks=True, ignore=_skip_live(run.dir), dirs_exist_ok=True
            )
    except (OSError, shutil.Error) as exc:
        raise OrbitError(f"could not copy run {run.label} to {target}: {_first(exc)}") from exc


def _special(path: str) -> bool:
    try:
        return bool(special_kind(os.lstat(path).st_mode))
    except OSError:
        return False


def occupied(target: Path) -> bool:
    if not target.exists() and not target.is_symlink():
        return False
    if target.is_symlink() or not target.is_dir():
        return True
    with os.scandir(target) as entries:
        return any(True for _ in entries)


def _skip_live(top: Path) -> Callable[[str, list[str]], set[str]]:
    """Leave out lock and pid files, the shepherd's disk reserve and in-flight temp files, in
    the run's own folder only (an experiment's output/x.lock is a result and is copied), and
    FIFOs, sockets and device nodes anywhere: a `--root` container can make real devices of
    the host in output/, and copying one would read the host's disk (or block on a FIFO)."""
    top_s = str(top)

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if _special(os.path.join(folder, n))}
        if folder != top_s:
            return skipped
        return skipped | {
            n
            for n in names
            if n.endswith((".lock", ".pid"))
            or n == DISK_RESERVE
            or (n.startswith(".") and n.endswith(".tmp"))
        }

    return ignore


def _first(exc: BaseException) -> str:
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        errors = exc.args[0]
        if errors:
            src, _dst, why = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            return f"{src}: {why}{more}"
    return str(exc)

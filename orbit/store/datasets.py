"""Named datasets of one home: a name for a host path that runs mount with `-d NAME`.

    ORBIT_HOME/datasets.yaml   (store/profiles.py: replaced atomically, under locks/datasets.lock)
    format: 1
    datasets:
      NAME: {path, added_at, added_by, description}

A dataset is a directory or a single file on this machine, named once and mounted read-only
by default. Orbit never copies, walks or deletes it: `remove` forgets the name only. The
registry is read at submit, where a `-d` becomes an ordinary `mounts` entry of run.yaml plus
a `datasets` entry saying which dataset it was (docs/run-directory.md). Nothing here prints.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbit.errors import UsageError
from orbit.store.home import Home
from orbit.store.model import now_iso
from orbit.store.profiles import Malformed, ProfileStore

DEFAULT_TARGET = "/data"  # `-d NAME` mounts at /data/NAME


@dataclass(frozen=True)
class Dataset:
    name: str
    path: str  # absolute, symlinks resolved when added
    added_at: str
    added_by: str
    description: str | None = None

    def kind(self) -> str | None:
        """`directory` or `file` as the path is now; None when it is gone (one stat, never a
        walk of the tree)."""
        try:
            mode = os.stat(self.path).st_mode
        except OSError:
            return None
        return "directory" if stat.S_ISDIR(mode) else "file"

    def entry(self) -> dict[str, Any]:
        """Its datasets.yaml entry (the name is the key)."""
        out: dict[str, Any] = {
            "path": self.path,
            "added_at": self.added_at,
            "added_by": self.added_by,
        }
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class Use:
    """A dataset as one run mounts it (`-d NAME[:DST[:rw]]`): run.yaml's `datasets` entry."""

    name: str
    path: str | None  # None: not on this machine; the node the run goes to mounts its own
    target: str
    rw: bool

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "target": self.target, "rw": self.rw}

    def mount(self) -> dict[str, Any]:
        """Its run.yaml `mounts` entry: an ordinary bind mount."""
        return {"source": self.path, "target": self.target, "rw": self.rw}


def _parse(name: str, entry: dict[str, Any]) -> Dataset:
    where = entry.get("path")
    if not isinstance(where, str) or not where.startswith("/"):
        raise Malformed("has no absolute `path`")
    description = entry.get("description")
    if description is not None and not isinstance(description, str):
        raise Malformed("has a `description` that is not text")
    return Dataset(
        name=name,
        path=where,
        added_at=str(entry.get("added_at") or ""),
        added_by=str(entry.get("added_by") or ""),
        description=description or None,
    )


STORE: ProfileStore[Dataset] = ProfileStore(
    file="datasets.yaml",
    kind="dataset",
    command="orbit data",
    parse=_parse,
    dump=Dataset.entry,
    underscore_first=True,  # a name is also the last part of its mount point (/data/NAME)
    add_usage="orbit data add NAME PATH",
)
path_of, load, check_name = STORE.path, STORE.load, STORE.check_name


def add(
    home: Home,
    name: str,
    path: str | Path,
    *,
    description: str | None = None,
    replace: bool = False,
) -> Dataset:
    """Name `path` (a directory or a file, which must exist; resolved to an absolute path
    without symlinks). A name that exists is refused (ConflictError) unless `replace`."""
    check_name(name)
    if description is not None and ("\n" in description or not description.strip()):
        raise UsageError("a dataset description is one non-empty line")
    resolved = Path(path).expanduser().resolve()
    if not resolved.exists():
        raise UsageError(f"dataset path does not exist: {resolved}")
    if not (resolved.is_dir() or resolved.is_file()):
        raise UsageError(f"dataset path is neither a directory nor a file: {resolved}")
    dataset = Dataset(
        name=name,
        path=str(resolved),
        added_at=now_iso(),
        added_by=_user(home),
        description=description.strip() if description else None,
    )
    return STORE.add(home, dataset, replace=replace)


remove = STORE.remove  # forgets the name only: the data stays where it is


def _user(home: Home) -> str:
    user = home.environ.get("USER")
    if user:
        return user
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


# --- `-d NAME[:DST[:rw]]` at submit -------------------------------------------------------------
def parse_use(text: str) -> tuple[str, str | None, bool]:
    """(name, target or None for the default, rw) of one `-d` value. `NAME:rw` (and `:ro`) is
    short for the default target with that mode: a target is always an absolute path."""
    parts = text.split(":")
    name = parts[0]
    if len(parts) > 3 or not name:
        raise UsageError(f"-d expects NAME[:DST[:rw]], got {text!r}")
    check_name(name)
    target: str | None = None
    mode = "ro"
    rest = parts[1:]
    if len(rest) == 1 and rest[0] in ("ro", "rw"):
        mode = rest[0]
    elif rest:
        target = rest[0] or None
        if len(rest) == 2:
            mode = rest[1]
    if mode not in ("ro", "rw"):
        raise UsageError(f"-d mode must be ro or rw, got {mode!r} in {text!r}")
    if target is not None and not target.startswith("/"):
        raise UsageError(f"-d destination must be an absolute path, got {target!r} in {text!r}")
    return name, target, mode == "rw"


def resolve(home: Home, items: list[str]) -> list[Use]:
    """The datasets a run asks for, each checked: a known name (NotFoundError listing the
    known ones), a path that still exists (UsageError), one mount point each."""
    if not items:
        return []
    datasets = load(home)
    uses = []
    for text in items:
        name, target, rw = parse_use(text)
        dataset = datasets.get(name)
        if dataset is None:
            raise STORE.not_found(name, datasets, prefix=f"-d {text}: ")
        if dataset.kind() is None:
            raise UsageError(
                f"-d {text}: dataset {name!r} is registered at {dataset.path}, which no longer "
                f"exists; `orbit data add {name} NEWPATH --replace`, or `orbit data rm {name}`"
            )
        uses.append(Use(name, dataset.path, target or f"{DEFAULT_TARGET}/{name}", rw))
    return uses

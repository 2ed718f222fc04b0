"""One store for the named records a home keeps, one file per kind of record.

    auth.json      auth profiles (agents/auth.py; JSON, `version`, mode 0600)
    notify.yaml    notification profiles (notify/profiles.py; `format`, mode 0600)
    nodes.yaml     the other machines runs go to (store/nodes.py; `format`)
    datasets.yaml  named host paths runs mount (store/datasets.py; `format`)

Each file is `{VERSION_KEY: N, TOP: {NAME: ENTRY}}`. A `ProfileStore` reads and writes one of
them: it checks the names (the kind's own pattern, the names Orbit keeps for itself), reads a
damaged file as one CorruptError naming it, replaces the file atomically (mode 0600 for a kind
that holds secrets), and makes every read-change-write under `locks/<stem>.lock`, so that two
commands adding at once lose neither record. Its errors are worded from the kind's name and the
command that manages it, the same for every kind. Nothing here prints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from orbit.errors import ConflictError, CorruptError, NotFoundError, OrbitError, UsageError
from orbit.store.files import MAX_YAML_BYTES, atomic_write, dump_yaml, read_regular, read_yaml
from orbit.store.home import Home
from orbit.store.locks import locked
from orbit.store.model import now_iso


class Malformed(Exception):
    """Raised by a kind's `parse`: why one entry cannot be read (the store names the file,
    the kind and the entry)."""


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class ProfileStore(Generic[T]):
    """The records of one kind, by name. `parse(name, entry)` makes a record of a file's entry
    (a mapping; raising Malformed, or any OrbitError, ValueError, TypeError or KeyError, for one
    it cannot read) and `dump(record)` makes its entry again, without the name (the key)."""

    VERSION = 1  # every kind's file is at version 1

    def __init__(
        self,
        *,
        file: str,
        kind: str,
        command: str,
        parse: Callable[[str, dict[str, Any]], T],
        dump: Callable[[T], dict[str, Any]],
        json_format: bool = False,
        version_key: str = "format",
        secret: bool = False,
        sort: bool = True,
        stamp: str | None = None,
        top: str = "",
        longest: int = 64,
        underscore_first: bool = False,
        reserved: tuple[str, ...] = (),
        add_usage: str = "",
    ) -> None:
        self.file = file
        self.kind = kind  # "auth profile": what its messages call one record
        self.command = command  # "orbit auth": the command that manages them
        self.top = top or Path(file).stem  # the key of the records' mapping
        self.parse = parse
        self.dump = dump
        self.json_format = json_format
        self.version_key = version_key
        self.secret = secret  # the file is mode 0600 (it holds credentials)
        self.sort = sort  # saved in name order; else in the order they were added
        self.stamp = stamp  # the field set to the time of `add` when it is empty
        # Letters, digits, `.`, `_` and `-`, at most `longest`, not starting with `.` or `-`
        # (nor `_` unless `underscore_first`): a name is also a file or folder name here.
        first = "A-Za-z0-9_" if underscore_first else "A-Za-z0-9"
        self.name_pattern = re.compile(rf"^[{first}][A-Za-z0-9._-]{{0,{longest - 1}}}$")
        start = (
            "not starting with `.` or `-`"
            if underscore_first
            else "starting with a letter or digit"
        )
        self.name_rule = f"letters, digits, `.`, `_` and `-`, at most {longest}, {start}"
        self.reserved = reserved  # names Orbit uses itself beside the records' own
        self.add_usage = add_usage or f"{command} add"

    def path(self, home: Home) -> Path:
        return home.root / self.file

    # --- reading ----------------------------------------------------------------------------
    def load(self, home: Home) -> dict[str, T]:
        """Every record by name ({} when the file does not exist). A damaged file is one
        CorruptError naming it."""
        path = self.path(home)
        data = self._read(path)
        if data is None:
            return {}
        version = data.get(self.version_key)
        if version != self.VERSION:
            raise CorruptError(
                f"{path}: {self.version_key} {version!r} is not one this Orbit reads "
                f"({self.VERSION})"
            )
        entries = data.get(self.top)
        if entries is None:
            return {}
        if not isinstance(entries, dict):
            raise CorruptError(f"{path}: `{self.top}` is not a mapping; fix or remove it")
        return {str(name): self._parse(path, name, entry) for name, entry in entries.items()}

    def _read(self, path: Path) -> dict[str, Any] | None:
        if not self.json_format:
            return read_yaml(path) if path.exists() else None
        try:
            data = json.loads(read_regular(path, MAX_YAML_BYTES))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise CorruptError(f"{path} cannot be read ({exc}); fix or remove it") from None
        if not isinstance(data, dict):
            raise CorruptError(f"{path}: expected a mapping, found {type(data).__name__}")
        return data

    def _parse(self, path: Path, name: Any, entry: Any) -> T:
        def bad(why: str) -> CorruptError:
            return CorruptError(f"{path}: {self.kind} {name!r} {why}; fix or remove it")

        if not isinstance(name, str) or not self.name_pattern.match(name):
            raise bad("has a name Orbit does not accept")
        if not isinstance(entry, dict):
            raise bad("is not a mapping")
        try:
            return self.parse(name, entry)
        except Malformed as exc:
            raise bad(str(exc)) from None
        except (OrbitError, ValueError, TypeError, KeyError) as exc:
            raise bad(f"is malformed ({exc})") from None

    def get(self, home: Home, name: str) -> T:
        records = self.load(home)
        if name not in records:
            raise self.not_found(name, records)
        return records[name]

    def not_found(self, name: str, records: dict[str, T], prefix: str = "") -> NotFoundError:
        """The error for an unknown name, naming the known: "no dataset 'x' (known: a, b)"."""
        if records:
            known = "known: " + ", ".join(sorted(records))
        else:
            known = f"none yet: add one with `{self.add_usage}`"
        return NotFoundError(f"{prefix}no {self.kind} {name!r} ({known})")

    # --- writing ----------------------------------------------------------------------------
    def check_name(self, name: str) -> str:
        if not self.name_pattern.match(name):
            raise UsageError(f"bad {self.kind} name {name!r}: {self.name_rule}")
        if name in self.reserved:
            raise UsageError(f"bad {self.kind} name {name!r}: Orbit uses it itself; choose another")
        return name

    def add(self, home: Home, record: T, *, replace: bool = False) -> T:
        """Store `record` under its name; a name that exists is a ConflictError unless
        `replace`."""
        self.check_name(record.name)
        with self._locked(home):
            records = self.load(home)
            if record.name in records and not replace:
                raise self.conflict(record.name)
            if self.stamp and not getattr(record, self.stamp):
                setattr(record, self.stamp, now_iso())
            records[record.name] = record
            self._save(home, records)
        return record

    def conflict(self, name: str) -> ConflictError:
        """The error for adding a name that exists."""
        return ConflictError(
            f"{self.kind} {name!r} exists; `{self.command} rm {name}` first, "
            "or add it again with --replace"
        )

    def update(self, home: Home, name: str, change: Callable[[T], None]) -> T | None:
        """Apply `change` to the record `name` as it is now and save it, under the lock (a
        record added again meanwhile gets the change; one removed meanwhile stays removed:
        None)."""
        with self._locked(home):
            records = self.load(home)
            record = records.get(name)
            if record is None:
                return None
            change(record)
            self._save(home, records)
        return record

    def remove(self, home: Home, name: str) -> T:
        """Forget `name`; NotFoundError (naming the known ones) when there is no such record."""
        with self._locked(home):
            records = self.load(home)
            if name not in records:
                raise self.not_found(name, records)
            record = records.pop(name)
            self._save(home, records)
        return record

    @contextmanager
    def _locked(self, home: Home) -> Iterator[None]:
        home.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        with locked(home.locks_dir / f"{Path(self.file).stem}.lock"):
            yield

    def _save(self, home: Home, records: dict[str, T]) -> None:
        order = sorted(records.items()) if self.sort else list(records.items())
        body = {self.version_key: self.VERSION, self.top: {n: self.dump(r) for n, r in order}}
        text = json.dumps(body, indent=2) + "\n" if self.json_format else dump_yaml(body)
        atomic_write(self.path(home), text.encode(), mode=0o600 if self.secret else None)


# --- records that are dataclasses (auth and notify profiles) --------------------------------
def entry_of(record: Any) -> dict[str, Any]:
    """A dataclass record's entry: every field but its name, in the class's order."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(record).items() if k != "name"}


def fields_of(cls: Any, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's values for the dataclass `cls`'s fields (others, and `name`, left out: a
    file a newer Orbit wrote still loads)."""
    return {k: v for k, v in entry.items() if k in cls.__dataclass_fields__ and k != "name"}

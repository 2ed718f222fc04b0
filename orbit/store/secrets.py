"""A run's secrets: kept under `runtime/secrets/`, never in the run directory.

    runtime/secrets/<id>.json   {"version": 2, "env": {VAR: value}, "redact": [value, …]}
    runtime/secrets/<id>.d/     files a container mounts (e.g. an agent's login), mode 0700

`env` reaches the container's environment; every `env` value and every `redact` string is
replaced by `[redacted]` in log.txt. Runs submitted before version 2 have a flat
`{VAR: value}` object, read the same way. All of it goes when the run finishes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from orbit.record import Record
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.home import Home

VERSION = 2


class Secrets(Record):
    """A run's secrets; compared by value. Empty (false) when there are none."""

    __slots__ = ("env", "files", "redact")

    def __init__(
        self,
        env: dict[str, str] | None = None,
        redact: list[str] | None = None,
        files: dict[str, bytes] | None = None,
    ) -> None:
        self.env: dict[str, str] = {} if env is None else env
        self.redact: list[str] = [] if redact is None else redact
        # name under <id>.d/ → content
        self.files: dict[str, bytes] = {} if files is None else files

    def __bool__(self) -> bool:
        return bool(self.env or self.redact or self.files)

    def __repr__(self) -> str:
        """Names only: a repr lands in logs and tracebacks, a value never may."""
        return (
            f"Secrets(env={sorted(self.env)}, redact=<{len(self.redact)}>, "
            f"files={sorted(self.files)})"
        )

    @property
    def values(self) -> list[str]:
        """Every string to keep out of the log."""
        return [*self.env.values(), *self.redact]


def files_dir(home: Home, run_id: str) -> Path:
    return home.secrets_dir / f"{run_id}.d"


def write(home: Home, run_id: str, secrets: Secrets) -> None:
    """Write the run's secrets: files mode 0600 in 0700 folders, owned by the submitting user,
    who is also the container's user (or root, who reads them anyway)."""
    home.secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if secrets.files:
        folder = files_dir(home, run_id)
        folder.mkdir(mode=0o700, exist_ok=True)
        for name, data in secrets.files.items():
            atomic_write(folder / name, data, mode=0o600)
    body = {"version": VERSION, "env": secrets.env, "redact": secrets.redact}
    atomic_write(home.secrets_path(run_id), json.dumps(body).encode(), mode=0o600)


def read(home: Home, run_id: str) -> Secrets:
    """The run's secrets; empty when there are none (or the file cannot be read)."""
    try:
        data = json.loads(home.secrets_path(run_id).read_text())
    except (OSError, ValueError):
        return Secrets()
    if not isinstance(data, dict):
        return Secrets()
    if data.get("version") == VERSION and isinstance(data.get("env"), dict):
        env = data["env"]
        redact = data.get("redact")
        kept = [str(v) for v in redact] if isinstance(redact, list) else []
        return Secrets({str(k): str(v) for k, v in env.items()}, kept)
    return Secrets({str(k): str(v) for k, v in data.items()})  # version 1: a flat object


def listed(home: Home) -> list[str]:
    """The ids of the runs that have secrets here (a bench job's `bench-*` files are not)."""
    try:
        names = os.listdir(home.secrets_dir)
    except FileNotFoundError:
        return []
    return sorted({i for i in map(_owner, names) if i.isdigit()})


def _owner(name: str) -> str:
    """The id a file here is for: `<id>.json`, `<id>.d`, or a temporary `.<id>.json.<x>.tmp`
    (atomic_write's, left by a writer killed while writing it: it holds the values too)."""
    if name.startswith(".") and name.endswith(".tmp"):
        name = name[1:].rsplit(".", 2)[0]
    stem, _, suffix = name.rpartition(".")
    return stem if suffix in ("json", "d") else ""


def drop(home: Home, run_id: str) -> None:
    """Delete the run's secrets, files included, and a temporary file left by a writer killed
    while writing them (safe to repeat)."""
    unlink_quiet(home.secrets_path(run_id))
    try:
        names = os.listdir(home.secrets_dir)
    except FileNotFoundError:
        names = []
    for name in names:
        if name.startswith(f".{run_id}.json.") and name.endswith(".tmp"):
            unlink_quiet(home.secrets_dir / name)
    import shutil  # here: a shepherd needs it only for a run with secret files

    shutil.rmtree(files_dir(home, run_id), ignore_errors=True)

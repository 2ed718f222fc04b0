"""Where state lives: the ORBIT_HOME layout and its user settings (config.yaml).

ORBIT_HOME/
  config.yaml        user settings (format: 1)
  runs/<id>/         run directories       } under the data directory when one is set
  queue/<id>         marker: the run is queued        } Maildir-style index kept by the
  active/<id>        marker: the run holds a lease    } tick; rebuilt from runs/ by the tick
  snapshots/         code snapshots        } <h>.manifest and objects/ (older: <h>.tar),
                                           } content-addressed, shared by runs
  index.jsonl        listing cache for `ps -a` (rebuildable; never the truth)
  cache/snapshots/   per repository: file stats and hashes, the last tree (rebuildable)
  locks/             scheduler.lock (+ .holder), ids.lock, index.lock
  runtime/           next_id, boot_id, last_tick, tick.requested, markers_checked, secrets/

Private by default: the home and what Orbit creates in it are 0700/0600 unless the home itself
is made readable by its group or everyone (`Home.umask`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from orbit.errors import CorruptError, UsageError
from orbit.record import Record
from orbit.store.files import read_yaml, set_umask, write_yaml
from orbit.store.settings import SCHEMA, Settings, check_setting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CONFIG_FORMAT = 1
# How a damaged config.yaml is repaired with Orbit itself (Home.move_config_aside).
CONFIG_REPAIR = (
    "fix it, or `orbit config reset` (moves it aside as config.yaml.damaged-<time>; "
    "the settings become the defaults)"
)


class Home(Record):
    """An ORBIT_HOME and the environment it was found in; config.yaml is read once, when first
    asked for (`settings`). Equal to a home with the same root, environment and settings read."""

    __slots__ = ("_settings", "environ", "root")

    def __init__(self, root: Path, environ: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.environ: Mapping[str, str] = {} if environ is None else environ
        self._settings: Settings | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Home:
        raw = environ.get("ORBIT_HOME") or str(Path(environ.get("HOME", "~")) / ".orbit")
        return cls(Path(raw).expanduser().resolve(), environ)

    # --- layout -------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def data_dir(self) -> Path:
        raw = self.environ.get("ORBIT_DATA") or self.settings.data_dir
        return Path(raw).expanduser().resolve() if raw else self.root

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def queue_dir(self) -> Path:
        return self.root / "queue"

    @property
    def active_dir(self) -> Path:
        return self.root / "active"

    @property
    def snapshots_dir(self) -> Path:
        """Where code snapshots are written: beside runs/, under the data directory."""
        return self.data_dir / "snapshots"

    @property
    def snapshot_cache_dir(self) -> Path:
        """The snapshot stat cache, one file per repository (rebuildable; never the truth)."""
        return self.root / "cache" / "snapshots"

    def snapshot_path(self, snapshot_hash: str) -> Path:
        """A snapshot's tar, as Orbit wrote them before manifests. Before snapshots moved to
        the data directory they were kept in ORBIT_HOME/snapshots/: a run submitted then still
        finds its tar there."""
        path = self.snapshots_dir / f"{snapshot_hash}.tar"
        legacy = self.root / "snapshots" / path.name
        return legacy if not path.exists() and legacy.exists() else path

    @property
    def locks_dir(self) -> Path:
        return self.root / "locks"

    @property
    def runtime_dir(self) -> Path:
        return self.root / "runtime"

    @property
    def secrets_dir(self) -> Path:
        return self.runtime_dir / "secrets"

    def secrets_path(self, run_id: str) -> Path:
        """The run's `--pass-env` values, kept here until its container is created."""
        return self.secrets_dir / f"{run_id}.json"

    @property
    def index_path(self) -> Path:
        return self.root / "index.jsonl"

    @property
    def tag(self) -> str:
        """A short, stable name for this home: container names and labels carry it so two
        homes on one machine never touch each other's containers."""
        try:  # CPython's own SHA-256: hashlib loads OpenSSL (~3 ms, 0.5 MB in each shepherd)
            from _sha256 import sha256
        except ImportError:
            from hashlib import sha256

        return sha256(str(self.root).encode()).hexdigest()[:8]

    def ensure(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = 0o777 & ~self.umask()  # private, unless the home was deliberately opened up
        for d in (self.runs_dir, self.queue_dir, self.active_dir, self.locks_dir, self.runtime_dir):
            d.mkdir(mode=mode, parents=True, exist_ok=True)
        self.secrets_dir.mkdir(mode=0o700, exist_ok=True)

    # --- who may read it ----------------------------------------------------------------
    def umask(self) -> int:
        """The umask for what Orbit creates here: private (077) unless the home itself is
        readable by its group (027) or by everyone (022). A new home is created 0700, so
        sharing is a deliberate `chmod` (docs/configuration.md#who-can-read-the-runs)."""
        try:
            mode = os.stat(self.root).st_mode
        except OSError:
            return 0o077
        return 0o022 | (0 if mode & 0o040 else 0o050) | (0 if mode & 0o004 else 0o005)

    def apply_umask(self) -> None:
        """Make this process (and the shepherds it starts) create files as `umask` says."""
        set_umask(self.umask())

    # --- settings -----------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        """The settings of config.yaml, typed (orbit/store/settings.py); a file that cannot be
        read, or holds an unknown key or a bad value, raises CorruptError with its repair."""
        if self._settings is None:
            self._settings = self._load_settings()
        return self._settings

    def _load_settings(self) -> Settings:
        if not os.path.lexists(self.config_path):  # a symlink loop is there, and damaged
            return Settings()
        try:  # an empty file (or only comments) holds no settings: the defaults
            data = read_yaml(self.config_path, allow_empty=True)
        except CorruptError as exc:
            raise CorruptError(f"{exc}; {CONFIG_REPAIR}") from None
        for key, value in data.items():
            if key == "format":
                continue
            problem = check_setting(key, value)
            if problem:
                repair = f"fix it, or `orbit config set {key} null`"
                raise CorruptError(
                    f"{self.config_path}: {problem}; {repair if key in SCHEMA else CONFIG_REPAIR}"
                )
        return Settings({k: v for k, v in data.items() if k != "format"})

    def config_problem(self) -> str | None:
        """Why the settings cannot be read (the one-line error, with its repair), or None."""
        try:
            _ = self.settings  # read (and kept) once
        except CorruptError as exc:
            return str(exc)
        return None

    def with_defaults(self) -> Home:
        """This home with the default settings: what `orbit doctor` checks the rest of a home
        whose config.yaml is damaged with."""
        home = Home(self.root, self.environ)
        home._settings = Settings()
        return home

    def move_config_aside(self) -> Path | None:
        """Rename config.yaml to `config.yaml.damaged-<UTC time>` when it cannot be read (else
        `config.yaml.old-<time>`) and leave the settings at their defaults, but for a
        `data_dir` that can still be read from it: the runs live there. The new name, or None
        without a file. Nothing is deleted: the old file is there to copy settings back from."""
        path = self.config_path
        if not os.path.lexists(path):
            return None
        kind = "old" if self.config_problem() is None else "damaged"
        try:
            data_dir = read_yaml(path, allow_empty=True).get("data_dir")
        except CorruptError:
            data_dir = None
        valid = data_dir and check_setting("data_dir", data_dir) is None
        kept = {"data_dir": data_dir} if valid else {}
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = path.with_name(f"{path.name}.{kind}-{stamp}")
        n = 1
        while os.path.lexists(aside):
            n += 1
            aside = path.with_name(f"{path.name}.{kind}-{stamp}-{n}")
        os.rename(path, aside)
        if kept:
            write_yaml(path, {"format": CONFIG_FORMAT, **kept})
        self._settings = None
        return aside

    def set_config(self, key: str, value: Any) -> Path | None:
        """Set one setting (None: back to its default). A config.yaml that cannot be read is
        moved aside first (`move_config_aside`): its new name is returned, else None."""
        problem = check_setting(key, value) if value is not None else None
        if problem:
            raise UsageError(problem)
        moved = None
        try:
            exists = os.path.lexists(self.config_path)
            current = read_yaml(self.config_path, allow_empty=True) if exists else {}
        except CorruptError:
            moved = self.move_config_aside()
            current = {}
        current.pop("format", None)
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_yaml(self.config_path, {"format": CONFIG_FORMAT, **current})
        self._settings = None
        return moved


def current_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"

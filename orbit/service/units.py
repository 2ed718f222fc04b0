"""Systemd user units, for any Orbit service: render a template, install, uninstall, ask.

A unit Orbit writes carries an `# orbit-home: PATH` line naming the ORBIT_HOME it was rendered
for; a unit another home (or not Orbit) wrote is never replaced or removed (`check_owner`).
Programs (systemctl, crontab) run with a timeout and never raise: `run_program` returns what
they said.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orbit.errors import ConflictError, OrbitError, UsageError
from orbit.store.childenv import PACKAGE_PARENT
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.locks import is_locked

TEMPLATE_DIR = PACKAGE_PARENT / "systemd"
HOME_LINE = "# orbit-home: "
COMMAND_TIMEOUT_S = 15


class Data:
    """A result: a dataclass whose as_dict() is its --json shape."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


def holder_info(lock: Path, info: Path) -> dict[str, Any] | None:
    """What a process that holds `lock` for its whole life wrote about itself in `info` (its
    pid, start, interval); None when no process holds the lock (the lock is the liveness)."""
    if not is_locked(lock):
        return None
    try:
        data = json.loads(info.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# --- running programs ---------------------------------------------------------------------
@dataclass
class Outcome:
    code: int
    out: str
    err: str

    @property
    def why(self) -> str:
        """The program's first line of complaint, for one-line messages."""
        lines = (self.err or self.out).strip().splitlines()
        return lines[0] if lines else f"exit code {self.code}"


def run_program(argv: list[str], environ: Mapping[str, str], stdin: str | None = None) -> Outcome:
    """Run `argv` to its end (at most COMMAND_TIMEOUT_S); a program that cannot start or
    answer is an Outcome too (code 127 or 124), never an exception."""
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            env=dict(environ),
            timeout=COMMAND_TIMEOUT_S,
        )
    except OSError as exc:
        return Outcome(127, "", f"{argv[0]}: {exc.strerror or exc}")
    except subprocess.TimeoutExpired:
        return Outcome(124, "", f"{' '.join(argv)} did not answer within {COMMAND_TIMEOUT_S} s")
    return Outcome(done.returncode, done.stdout, done.stderr)


def systemctl(environ: Mapping[str, str], *args: str) -> Outcome:
    """`systemctl --user ARGS`."""
    program = shutil.which("systemctl", path=environ.get("PATH"))
    if program is None:
        return Outcome(127, "", "systemctl not found")
    return run_program([program, "--user", *args], environ)


# --- rendering ----------------------------------------------------------------------------
def user_unit_dir(environ: Mapping[str, str]) -> Path:
    config = environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(config):  # the XDG spec ignores a relative value
        config = str(Path(environ.get("HOME") or Path.home()) / ".config")
    return Path(config) / "systemd" / "user"


def quote_unit(value: str, *, exec_arg: bool = False) -> str:
    """One unit-file word: `%` specifiers doubled, in a command line `$` doubled too (so systemd
    expands neither), and double-quoted with backslash and quote escaped unless plain."""
    if "\n" in value:
        raise UsageError(f"a path with a line break cannot go into a unit file: {value!r}")
    text = value.replace("%", "%%")
    if exec_arg:
        text = text.replace("$", "$$")
    if re.fullmatch(r"[\w/.,:=+@-]+", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(
    name: str, home: Home, environment: Mapping[str, str], argv: list[str], **extra: str
) -> str:
    """The template systemd/`name` filled in for `home`: its @HOME@, @HOME_TEXT@,
    @ENVIRONMENT@ (from `environment`), @EXEC_START@ (from `argv`) and the `extra` fields."""
    if "\n" in str(home.root):
        raise UsageError("ORBIT_HOME must not contain a line break")
    values = {
        "HOME": str(home.root),
        "HOME_TEXT": str(home.root).replace("%", "%%"),
        "ENVIRONMENT": " ".join(quote_unit(f"{k}={v}") for k, v in environment.items()),
        "EXEC_START": " ".join(quote_unit(a, exec_arg=True) for a in argv),
        **extra,
    }
    path = TEMPLATE_DIR / name
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise OrbitError(
            f"unit template {path} not found: install Orbit from its repository "
            "(pip install -e .) or run it from a checkout"
        ) from None
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], text)


# --- whose unit ---------------------------------------------------------------------------
def unit_home(path: Path) -> str | None:
    """The ORBIT_HOME an installed unit was rendered for; "" when Orbit did not write it, None
    when there is no such unit."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(HOME_LINE):
            return line[len(HOME_LINE) :]
    return ""


def check_owner(home: Home, path: Path, fix: Callable[[str], str]) -> None:
    """Refuse (ConflictError) to replace a unit another home or not Orbit wrote; `fix(owner)`
    is the message (what to do then) when another home's unit is in the way."""
    owner = unit_home(path)
    if owner is None or owner == str(home.root):
        return
    if owner == "":
        raise ConflictError(f"{path} exists and was not written by Orbit; move it away first")
    raise ConflictError(fix(owner))


# --- install, uninstall -------------------------------------------------------------------
@dataclass
class Installed(Data):
    kind: str  # "systemd" or "cron"
    changed: bool  # False: it was already installed exactly so
    files: list[str] = field(default_factory=list)
    line: str | None = None
    enabled: bool = False  # starts with the user manager / is in the crontab
    started: bool = False  # ticking now
    interval_s: float = 0.0
    todo: str | None = None  # the command a person still has to run, if any
    problem: str | None = None  # why it is not ticking now


@dataclass
class Removed(Data):
    kind: str
    removed: list[str] = field(default_factory=list)  # files, or the crontab line
    note: str | None = None  # why something was left in place


def install_units(
    home: Home,
    environ: Mapping[str, str],
    units: Mapping[str, str],
    main: str,
    *,
    owner_fix: Callable[[str], str],
    interval_s: float = 0.0,
) -> Installed:
    """Write `units` into the user unit dir, enable `main` and (with a reachable user systemd)
    start it, restarting it when a unit changed.

    Without a reachable user manager the units are still written and, when systemctl can do so
    offline, enabled: `main` then starts with the user manager; `todo` says how to start it now.
    """
    unit_dir = user_unit_dir(environ)
    paths = {name: unit_dir / name for name in units}
    for path in paths.values():
        check_owner(home, path, owner_fix)
    changed = False
    unit_dir.mkdir(parents=True, exist_ok=True)
    for name, text in units.items():
        path = paths[name]
        if not path.exists() or path.read_text() != text:
            atomic_write(path, text.encode())
            changed = True
    result = Installed(
        "systemd", changed, files=[str(p) for p in paths.values()], interval_s=interval_s
    )
    reload = systemctl(environ, "daemon-reload")
    enable = systemctl(environ, "enable", main)  # works offline too: it only makes a symlink
    result.enabled = enable.code == 0
    if reload.code == 0:
        # restart when changed: a new interval (or command) takes effect at once.
        start = systemctl(environ, "restart" if changed else "start", main)
        result.started = start.code == 0
        if not result.started:
            result.problem = start.why
    else:
        result.problem = f"no user systemd reachable ({reload.why})"
    if not result.enabled:
        result.problem = result.problem or enable.why
        result.todo = f"systemctl --user daemon-reload && systemctl --user enable --now {main}"
    elif not result.started:
        result.todo = f"systemctl --user daemon-reload && systemctl --user start {main}"
    return result


def uninstall_units(
    home: Home, environ: Mapping[str, str], names: tuple[str, ...], main: str, wanted_by: str
) -> Removed:
    """Stop, disable and delete `names` (`main` is the enabled one, in `wanted_by`.wants), if
    they were rendered for this home."""
    unit_dir = user_unit_dir(environ)
    paths = [unit_dir / name for name in names]
    owners = {unit_home(p) for p in paths} - {None}
    result = Removed("systemd")
    if not owners:
        result.note = "not installed"
        return result
    if owners != {str(home.root)}:
        others = ", ".join(sorted(o or "not written by Orbit" for o in owners))
        where = f"units in {unit_dir} are" if len(names) > 1 else f"unit {paths[0]} is"
        result.note = f"the {where} not this home's ({others}); left in place"
        return result
    systemctl(environ, "stop", main)
    systemctl(environ, "disable", main)
    # Without systemctl the enable symlink may remain; it is ours when it points at our unit.
    wants = unit_dir / f"{wanted_by}.wants" / main
    if wants.is_symlink() and Path(os.readlink(wants)).name == main:
        wants.unlink()
    for path in paths:
        if path.exists():
            path.unlink()
            result.removed.append(str(path))
    systemctl(environ, "daemon-reload")
    return result


def linger() -> bool | None:
    """Whether this user's manager runs without a login session; None when unknown."""
    try:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return None
    return Path("/var/lib/systemd/linger", user).exists()

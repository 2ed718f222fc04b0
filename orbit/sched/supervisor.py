"""The supervisor: what runs the tick when nobody types.

One tick (orbit/sched/tick.py), three ways to run it on a clock: a systemd user timer (units
rendered from the templates in systemd/), a cron line, or `orbit scheduler run` in the
foreground (an APScheduler interval job). This module installs, removes and describes them and
runs the foreground loop; it returns data and raises OrbitError, never prints.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orbit.errors import ConflictError, OrbitError, UsageError
from orbit.sched.foreground import (  # run_foreground: the CLI calls it from here
    ForegroundStatus,
    foreground_status,
    run_foreground,  # noqa: F401
)
from orbit.store.childenv import PACKAGE_PARENT, child_environ
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.model import parse_iso

TEMPLATE_DIR = PACKAGE_PARENT / "systemd"
TICK_UNITS = ("orbit-tick.service", "orbit-tick.timer")
TIMER = "orbit-tick.timer"
HOME_LINE = "# orbit-home: "
CRON_MARK = "# orbit-tick "
MIN_INTERVAL_S = 1.0
CRON_INTERVAL_S = 60.0  # cron's granularity
COMMAND_TIMEOUT_S = 15


def interval_of(home: Home, requested: float | None) -> float:
    value = float(home.config["scheduler_interval_s"] if requested is None else requested)
    if value < MIN_INTERVAL_S:
        raise UsageError(f"the tick interval must be at least {MIN_INTERVAL_S:g} s, got {value:g}")
    return value


def tick_environment(home: Home) -> dict[str, str]:
    """The variables a supervised tick needs: which home, where the package is, and the
    settings that change what a tick decides (or it would decide differently from `orbit run`)."""
    return child_environ(home, {})


def tick_command(spawn: str = "fork") -> list[str]:
    cmd = [sys.executable, "-m", "orbit", "scheduler", "tick"]
    return [*cmd, "--spawn", "exec"] if spawn == "exec" else cmd


class _Data:
    """A result: a dataclass whose as_dict() is its --json shape."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


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


def _run(argv: list[str], environ: Mapping[str, str], stdin: str | None = None) -> Outcome:
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


def _systemctl(environ: Mapping[str, str], *args: str) -> Outcome:
    program = shutil.which("systemctl", path=environ.get("PATH"))
    if program is None:
        return Outcome(127, "", "systemctl not found")
    return _run([program, "--user", *args], environ)


# --- systemd ------------------------------------------------------------------------------
def user_unit_dir(environ: Mapping[str, str]) -> Path:
    config = environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(config):  # the XDG spec ignores a relative value
        config = str(Path(environ.get("HOME") or Path.home()) / ".config")
    return Path(config) / "systemd" / "user"


def _quote_unit(value: str, *, exec_arg: bool = False) -> str:
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


def render_units(home: Home, interval_s: float) -> dict[str, str]:
    """The tick units for `home`, rendered from the templates in systemd/."""
    if "\n" in str(home.root):
        raise UsageError("ORBIT_HOME must not contain a line break")
    env = tick_environment(home)
    values = {
        "HOME": str(home.root),
        "HOME_TEXT": str(home.root).replace("%", "%%"),
        "ENVIRONMENT": " ".join(_quote_unit(f"{k}={v}") for k, v in env.items()),
        "EXEC_START": " ".join(_quote_unit(a, exec_arg=True) for a in tick_command("exec")),
        "INTERVAL": f"{interval_s:g}s",
        "INTERVAL_TEXT": f"{interval_s:g} s",
    }
    units = {}
    for name in TICK_UNITS:
        path = TEMPLATE_DIR / name
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise OrbitError(
                f"unit template {path} not found: install Orbit from its repository "
                "(pip install -e .) or run it from a checkout"
            ) from None
        text = re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], text)
        units[name] = text
    return units


def _unit_home(path: Path) -> str | None:
    """The ORBIT_HOME an installed unit was rendered for; "" when Orbit did not write it."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(HOME_LINE):
            return line[len(HOME_LINE) :]
    return ""


def _check_owner(home: Home, path: Path, fix: Callable[[str], str] | None = None) -> None:
    """Refuse to replace a unit another home (or not Orbit) wrote; `fix(owner)` is the message
    (what to do then) when another home's unit is in the way."""
    owner = _unit_home(path)
    if owner is None or owner == str(home.root):
        return
    if owner == "":
        raise ConflictError(f"{path} exists and was not written by Orbit; move it away first")
    if fix is not None:
        raise ConflictError(fix(owner))
    raise ConflictError(
        f"the systemd timer already ticks ORBIT_HOME={owner} (one home per user): remove it with "
        f"`ORBIT_HOME={shlex.quote(owner)} orbit scheduler uninstall --systemd`, "
        "or tick this home with --cron"
    )


@dataclass
class Installed(_Data):
    kind: str  # "systemd" or "cron"
    changed: bool  # False: it was already installed exactly so
    files: list[str] = field(default_factory=list)
    line: str | None = None
    enabled: bool = False  # starts with the user manager / is in the crontab
    started: bool = False  # ticking now
    interval_s: float = 0.0
    todo: str | None = None  # the command a person still has to run, if any
    problem: str | None = None  # why it is not ticking now


def install_units(
    home: Home,
    environ: Mapping[str, str],
    units: Mapping[str, str],
    main: str,
    *,
    owner_fix: Callable[[str], str] | None = None,
    interval_s: float = 0.0,
) -> Installed:
    """Write `units` into the user unit dir, enable `main` and (with a reachable user systemd)
    start it, restarting it when a unit changed. Shared by the tick's units and the web unit.

    Without a reachable user manager the units are still written and, when systemctl can do so
    offline, enabled: `main` then starts with the user manager; `todo` says how to start it now.
    """
    unit_dir = user_unit_dir(environ)
    paths = {name: unit_dir / name for name in units}
    for path in paths.values():
        _check_owner(home, path, owner_fix)
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
    reload = _systemctl(environ, "daemon-reload")
    enable = _systemctl(environ, "enable", main)  # works offline too: it only makes a symlink
    result.enabled = enable.code == 0
    if reload.code == 0:
        # restart when changed: a new interval (or command) takes effect at once.
        start = _systemctl(environ, "restart" if changed else "start", main)
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


def install_systemd(home: Home, environ: Mapping[str, str], interval_s: float) -> Installed:
    """Write the tick units, enable the timer and (with a reachable user systemd) start it."""
    units = render_units(home, interval_s)
    return install_units(home, environ, units, TIMER, interval_s=interval_s)


@dataclass
class Removed(_Data):
    kind: str
    removed: list[str] = field(default_factory=list)  # files, or the crontab line
    note: str | None = None  # why something was left in place


def uninstall_units(
    home: Home, environ: Mapping[str, str], names: tuple[str, ...], main: str, wanted_by: str
) -> Removed:
    """Stop, disable and delete `names` (`main` is the enabled one, in `wanted_by`.wants), if
    they were rendered for this home."""
    unit_dir = user_unit_dir(environ)
    paths = [unit_dir / name for name in names]
    owners = {_unit_home(p) for p in paths} - {None}
    result = Removed("systemd")
    if not owners:
        result.note = "not installed"
        return result
    if owners != {str(home.root)}:
        others = ", ".join(sorted(o or "not written by Orbit" for o in owners))
        where = f"units in {unit_dir} are" if len(names) > 1 else f"unit {paths[0]} is"
        result.note = f"the {where} not this home's ({others}); left in place"
        return result
    _systemctl(environ, "stop", main)
    _systemctl(environ, "disable", main)
    # Without systemctl the enable symlink may remain; it is ours when it points at our unit.
    wants = unit_dir / f"{wanted_by}.wants" / main
    if wants.is_symlink() and Path(os.readlink(wants)).name == main:
        wants.unlink()
    for path in paths:
        if path.exists():
            path.unlink()
            result.removed.append(str(path))
    _systemctl(environ, "daemon-reload")
    return result


def uninstall_systemd(home: Home, environ: Mapping[str, str]) -> Removed:
    """Stop, disable and delete the tick units, if they were rendered for this home."""
    return uninstall_units(home, environ, TICK_UNITS, TIMER, "timers.target")


@dataclass
class SystemdStatus(_Data):
    state: str
    unit_dir: str
    installed: bool  # this home's units are in unit_dir
    home: str | None  # the ORBIT_HOME the units there tick, if any
    interval_s: float | None
    enabled: bool
    active: bool | None  # None: no user systemd to ask
    problem: str | None
    linger: bool | None  # the user manager runs without a login session


def systemd_status(home: Home, environ: Mapping[str, str]) -> SystemdStatus:
    unit_dir = user_unit_dir(environ)
    owners = {_unit_home(unit_dir / n) for n in TICK_UNITS} - {None}
    owner = next(iter(owners)) if len(owners) == 1 else None
    interval = None
    timer = unit_dir / TIMER
    if timer.exists():
        found = re.search(r"^OnUnitActiveSec=([\d.]+)s$", timer.read_text(), re.M)
        interval = float(found.group(1)) if found else None
    installed = owner == str(home.root) and all((unit_dir / n).exists() for n in TICK_UNITS)
    enabled = active = problem = None
    if owners:
        enabled = _systemctl(environ, "is-enabled", TIMER).out.strip() == "enabled"
        asked = _systemctl(environ, "is-active", TIMER)
        if asked.out.strip():
            active = asked.out.strip() == "active"
        else:
            problem = f"no user systemd reachable ({asked.why})"
    if not owners:
        state = "not installed"
    elif not installed:
        state = f"installed for ORBIT_HOME={owner or '?'}, not this home"
    elif active:
        state = f"ticking every {interval:g} s" if interval else "ticking"
    elif enabled:
        state = "enabled, not running" + (f": {problem}" if problem else "")
    else:
        state = "units written, not enabled" + (f": {problem}" if problem else "")
    return SystemdStatus(
        state=state,
        unit_dir=str(unit_dir),
        installed=installed,
        home=owner or None,
        interval_s=interval,
        enabled=bool(enabled),
        active=active,
        problem=problem,
        linger=_linger(),
    )


def _linger() -> bool | None:
    try:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return None
    return Path("/var/lib/systemd/linger", user).exists()


def systemd_reachable(environ: Mapping[str, str]) -> bool:
    return bool(_systemctl(environ, "is-active", TIMER).out.strip())


# --- cron ---------------------------------------------------------------------------------
def crontab_program(environ: Mapping[str, str]) -> str:
    """The crontab program: $ORBIT_CRONTAB when set, else `crontab` on PATH."""
    chosen = environ.get("ORBIT_CRONTAB")
    if chosen:
        if not os.access(chosen, os.X_OK):
            raise OrbitError(f"ORBIT_CRONTAB={chosen} is not an executable crontab program")
        return chosen
    found = shutil.which("crontab", path=environ.get("PATH"))
    if found is None:
        raise OrbitError(
            "crontab not found: install cron (`apt-get install cron`) or use --systemd"
        )
    return found


def cron_line(home: Home) -> str:
    """The crontab entry for `home`, ending in its marker so uninstall finds exactly it."""
    if "\n" in str(home.root):
        raise UsageError("ORBIT_HOME must not contain a line break")
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in tick_environment(home).items())
    cmd = " ".join(shlex.quote(a) for a in tick_command())
    line = f"* * * * * {env} {cmd} >/dev/null 2>&1 {CRON_MARK}{home.root}"
    return line.replace("%", "\\%")  # cron turns a bare % into a newline


def _is_ours(line: str, home: Home) -> bool:
    return line.rstrip().endswith(f"{CRON_MARK}{home.root}".replace("%", "\\%"))


def read_crontab(environ: Mapping[str, str]) -> str:
    got = _run([crontab_program(environ), "-l"], environ)
    if got.code == 0:
        return got.out
    if "no crontab" in got.err.lower():
        return ""
    raise OrbitError(f"crontab -l failed: {got.why}")


def _write_crontab(environ: Mapping[str, str], text: str) -> None:
    got = _run([crontab_program(environ), "-"], environ, stdin=text)
    if got.code != 0:
        raise OrbitError(f"crontab - failed: {got.why}")


def install_cron(home: Home, environ: Mapping[str, str]) -> Installed:
    """Add (or refresh) this home's line in the user's crontab; other lines stay as they are."""
    line = cron_line(home)
    lines = read_crontab(environ).splitlines()
    mine = [i for i, text in enumerate(lines) if _is_ours(text, home)]
    changed = [lines[i] for i in mine] != [line]
    if changed:
        kept = [text for i, text in enumerate(lines) if i not in mine]
        at = mine[0] if mine else len(kept)
        kept.insert(at, line)
        _write_crontab(environ, "\n".join(kept) + "\n")
    result = Installed("cron", changed, line=line, enabled=True, interval_s=CRON_INTERVAL_S)
    if _cron_daemon_running():
        result.started = True
    else:
        result.problem = "no cron daemon is running"
        result.todo = "start cron (e.g. `service cron start`)"
    return result


def uninstall_cron(home: Home, environ: Mapping[str, str]) -> Removed:
    result = Removed("cron")
    lines = read_crontab(environ).splitlines()
    kept = [text for text in lines if not _is_ours(text, home)]
    result.removed = [text for text in lines if _is_ours(text, home)]
    if result.removed:
        _write_crontab(environ, "\n".join(kept) + "\n" if kept else "")
    else:
        result.note = "not installed"
    return result


@dataclass
class CronStatus(_Data):
    state: str
    installed: bool
    line: str | None
    daemon_running: bool
    problem: str | None


def cron_status(home: Home, environ: Mapping[str, str]) -> CronStatus:
    running = _cron_daemon_running()
    try:
        lines = [t for t in read_crontab(environ).splitlines() if _is_ours(t, home)]
    except OrbitError as exc:
        return CronStatus("not installed (crontab unusable)", False, None, running, str(exc))
    if not lines:
        return CronStatus("not installed", False, None, running, None)
    state = "ticking every minute" if running else "line installed, but no cron daemon runs"
    problem = None if running else "no cron daemon is running"
    return CronStatus(state, True, lines[0], running, problem)


def _cron_daemon_running() -> bool:
    import psutil

    return any(p.info.get("name") in ("cron", "crond") for p in psutil.process_iter(["name"]))


@dataclass
class Status(_Data):
    home: str
    last_tick: str | None
    last_tick_age_s: float | None
    queued: int
    active: int
    supervised: bool  # something ticks this home without anyone typing
    systemd: SystemdStatus
    cron: CronStatus
    foreground: ForegroundStatus


def _count(folder: Path) -> int:
    try:
        return sum(1 for name in os.listdir(folder) if not name.startswith("."))
    except FileNotFoundError:
        return 0


def status(home: Home, environ: Mapping[str, str], now: datetime | None = None) -> Status:
    try:
        last = (home.runtime_dir / "last_tick").read_text().strip() or None
    except FileNotFoundError:
        last = None
    when = parse_iso(last)
    age = ((now or datetime.now(UTC)) - when).total_seconds() if when else None
    sd = systemd_status(home, environ)
    cron = cron_status(home, environ)
    fg = foreground_status(home)
    supervised = (sd.installed and bool(sd.active)) or (cron.installed and cron.daemon_running)
    return Status(
        home=str(home.root),
        last_tick=last,
        last_tick_age_s=None if age is None else round(age, 3),
        queued=_count(home.queue_dir),
        active=_count(home.active_dir),
        supervised=supervised or fg.running,
        systemd=sd,
        cron=cron,
        foreground=fg,
    )

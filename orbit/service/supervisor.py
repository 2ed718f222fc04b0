"""The tick's supervisor: what runs the tick when nobody types, and its status.

One tick (orbit/sched/tick.py), three ways to run it on a clock: a systemd user timer (units
rendered from the templates in systemd/), a cron line, or `orbit scheduler run` in the
foreground (service/foreground.py). Without any of them the short-lived ticker
(service/ticker.py) moves a waiting queue. This module installs, removes and describes them;
it returns data and raises OrbitError, never prints.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orbit.errors import OrbitError, UsageError
from orbit.sched.clock import last_clock_tick
from orbit.service import cron, units
from orbit.service.foreground import foreground_status
from orbit.service.ticker import ticker_status
from orbit.service.tickloop import LoopStatus
from orbit.service.units import Data, Installed, Removed, systemctl, unit_home, user_unit_dir
from orbit.store.childenv import child_environ
from orbit.store.home import Home
from orbit.store.model import parse_iso

TICK_UNITS = ("orbit-tick.service", "orbit-tick.timer")
TIMER = "orbit-tick.timer"
CRON_MARK = "# orbit-tick "
MIN_INTERVAL_S = 1.0
CRON_INTERVAL_S = 60.0  # cron's granularity


def interval_of(home: Home, requested: float | None) -> float:
    value = home.settings.scheduler_interval_s if requested is None else float(requested)
    if value < MIN_INTERVAL_S:
        raise UsageError(f"the tick interval must be at least {MIN_INTERVAL_S:g} s, got {value:g}")
    return value


def tick_command(clock_s: float) -> list[str]:
    """The clock's tick: `--clock S` notes it in runtime/clock.json, so no ticker starts while
    the clock ticks every S seconds."""
    return [sys.executable, "-m", "orbit", "scheduler", "tick", "--clock", f"{clock_s:g}"]


# --- systemd ------------------------------------------------------------------------------
def _owner_fix(owner: str) -> str:
    return (
        f"the systemd timer already ticks ORBIT_HOME={owner} (one home per user): remove it with "
        f"`ORBIT_HOME={shlex.quote(owner)} orbit scheduler uninstall --systemd`, "
        "or tick this home with --cron"
    )


def render_units(home: Home, interval_s: float) -> dict[str, str]:
    """The tick units for `home`, rendered from the templates in systemd/."""
    env = child_environ(home, {})
    argv = tick_command(interval_s)
    extra = {"INTERVAL": f"{interval_s:g}s", "INTERVAL_TEXT": f"{interval_s:g} s"}
    return {name: units.render(name, home, env, argv, **extra) for name in TICK_UNITS}


def install_systemd(home: Home, environ: Mapping[str, str], interval_s: float) -> Installed:
    """Write the tick units, enable the timer and (with a reachable user systemd) start it."""
    rendered = render_units(home, interval_s)
    return units.install_units(
        home, environ, rendered, TIMER, owner_fix=_owner_fix, interval_s=interval_s
    )


def uninstall_systemd(home: Home, environ: Mapping[str, str]) -> Removed:
    """Stop, disable and delete the tick units, if they were rendered for this home."""
    return units.uninstall_units(home, environ, TICK_UNITS, TIMER, "timers.target")


@dataclass
class SystemdStatus(Data):
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
    owners = {unit_home(unit_dir / n) for n in TICK_UNITS} - {None}
    owner = next(iter(owners)) if len(owners) == 1 else None
    interval = None
    timer = unit_dir / TIMER
    if timer.exists():
        found = re.search(r"^OnUnitActiveSec=([\d.]+)s$", timer.read_text(), re.M)
        interval = float(found.group(1)) if found else None
    installed = owner == str(home.root) and all((unit_dir / n).exists() for n in TICK_UNITS)
    enabled = active = problem = None
    if owners:
        enabled = systemctl(environ, "is-enabled", TIMER).out.strip() == "enabled"
        asked = systemctl(environ, "is-active", TIMER)
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
        linger=units.linger(),
    )


def systemd_reachable(environ: Mapping[str, str]) -> bool:
    return bool(systemctl(environ, "is-active", TIMER).out.strip())


# --- cron ---------------------------------------------------------------------------------
def cron_line(home: Home) -> str:
    """The crontab entry for `home`, ending in its marker so uninstall finds exactly it."""
    argv = tick_command(CRON_INTERVAL_S)
    return cron.line_for(home, "* * * * *", child_environ(home, {}), argv, CRON_MARK)


def install_cron(home: Home, environ: Mapping[str, str]) -> Installed:
    """Add (or refresh) this home's line in the user's crontab; other lines stay as they are."""
    line = cron_line(home)
    changed = cron.replace(home, environ, line, CRON_MARK)
    result = Installed("cron", changed, line=line, enabled=True, interval_s=CRON_INTERVAL_S)
    if cron.daemon_running():
        result.started = True
    else:
        result.problem = "no cron daemon is running"
        result.todo = "start cron (e.g. `service cron start`)"
    return result


def uninstall_cron(home: Home, environ: Mapping[str, str]) -> Removed:
    result = Removed("cron", removed=cron.remove(home, environ, CRON_MARK))
    if not result.removed:
        result.note = "not installed"
    return result


@dataclass
class CronStatus(Data):
    state: str
    installed: bool
    line: str | None
    daemon_running: bool
    problem: str | None


def cron_status(home: Home, environ: Mapping[str, str]) -> CronStatus:
    running = cron.daemon_running()
    try:
        lines = cron.find(home, environ, CRON_MARK)
    except OrbitError as exc:
        return CronStatus("not installed (crontab unusable)", False, None, running, str(exc))
    if not lines:
        return CronStatus("not installed", False, None, running, None)
    state = "ticking every minute" if running else "line installed, but no cron daemon runs"
    problem = None if running else "no cron daemon is running"
    return CronStatus(state, True, lines[0], running, problem)


# --- everything at once: `orbit scheduler status` -----------------------------------------
@dataclass
class Status(Data):
    home: str
    last_tick: str | None
    last_tick_age_s: float | None
    last_clock_tick_age_s: float | None  # the timer's or the cron line's
    queued: int
    active: int
    supervised: bool  # something ticks this home on a clock
    systemd: SystemdStatus
    cron: CronStatus
    foreground: LoopStatus
    ticker: LoopStatus


def _count(folder: Path) -> int:
    try:
        return sum(1 for name in os.listdir(folder) if not name.startswith("."))
    except FileNotFoundError:
        return 0


def status(home: Home, environ: Mapping[str, str], now: datetime | None = None) -> Status:
    now = now or datetime.now(UTC)
    try:
        last = (home.runtime_dir / "last_tick").read_text().strip() or None
    except FileNotFoundError:
        last = None
    when = parse_iso(last)
    age = (now - when).total_seconds() if when else None
    clock = last_clock_tick(home)
    clock_age = None if clock is None else round(now.timestamp() - clock.at, 3)
    sd = systemd_status(home, environ)
    cron_now = cron_status(home, environ)
    fg = foreground_status(home)
    supervised = (sd.installed and bool(sd.active)) or (
        cron_now.installed and cron_now.daemon_running
    )
    return Status(
        home=str(home.root),
        last_tick=last,
        last_tick_age_s=None if age is None else round(age, 3),
        last_clock_tick_age_s=clock_age,
        queued=_count(home.queue_dir),
        active=_count(home.active_dir),
        supervised=supervised or fg.running,
        systemd=sd,
        cron=cron_now,
        foreground=fg,
        ticker=ticker_status(home),
    )

"""The settings page: the auth profiles and notification profiles of this home, read-only and
with every secret masked (agents/auth.py `describe`, notify/profiles.py `describe`: the page
never holds more than a key's last four characters), each one's last test or delivery, the
doctor's checks and config.yaml.

The doctor's checks take a tenth to a third of a second (Docker, the supervisor, the agent
CLIs), so a page view reuses the checks of the last DOCTOR_TTL_S seconds; `?recheck=1` runs
them again. Concurrent views wait for one run of the checks instead of each starting one.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import bottle

from orbit.errors import OrbitError
from orbit.store.home import Home
from orbit.web.context import Route, current

DOCTOR_TTL_S = 30.0
_checked: dict[str, tuple[float, list[dict[str, Any]]]] = {}  # home root → (monotonic, checks)
_checking = threading.Lock()


def doctor_checks(home: Home, *, again: bool = False) -> tuple[list[dict[str, Any]], float]:
    """The doctor's checks and how many seconds ago they ran (0 when just now)."""
    from orbit.doctor import run_checks

    key = str(home.root)
    with _checking:
        at, checks = _checked.get(key, (0.0, []))
        age = time.monotonic() - at
        if again or not checks or age > DOCTOR_TTL_S:
            checks, age = run_checks(home), 0.0
            _checked[key] = (time.monotonic(), checks)
    return checks, age


def auth_profiles(home: Home) -> tuple[list[dict[str, Any]], str | None]:
    """The auth profiles as `orbit auth ls --json` describes them (secrets masked), or the
    problem that keeps auth.json from being read."""
    from orbit.agents import auth

    try:
        return [auth.describe(p) for p in auth.load(home).values()], None
    except OrbitError as exc:
        return [], _named(home, exc)


def notify_profiles(home: Home) -> tuple[list[dict[str, Any]], str | None]:
    """The notification profiles as `orbit notify ls --json` describes them (URL and secret
    masked), each with `last`: its newest line of notify/log.jsonl, or None."""
    from orbit.notify import journal
    from orbit.notify import profiles as pf

    try:
        found = [pf.describe(p) for p in pf.load(home).values()]
    except OrbitError as exc:
        return [], _named(home, exc)
    last = journal.last_by_profile(home)
    return [
        {
            **p,
            "on": _texts(p["on"]),
            "groups": _texts(p["groups"]),
            "last": _delivery(last.get(p["name"])),
        }
        for p in found
    ], None


def _texts(value: Any) -> list[str]:
    """A list of names from notify.yaml, as text whatever the file holds there."""
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _named(home: Home, exc: OrbitError) -> str:
    """The error with the home named, not spelled out (as the error pages do)."""
    return str(exc).replace(str(home.root), "ORBIT_HOME")


def _delivery(line: dict[str, Any] | None) -> dict[str, str] | None:
    """A log line's time, outcome and detail as text (the log is a file anyone may damage)."""
    if line is None:
        return None
    return {k: str(line.get(k) or "") for k in ("time", "outcome", "title", "detail")}


def page() -> str:
    ctx = current()
    home = ctx.home
    checks, age = doctor_checks(home, again=bottle.request.query.get("recheck") == "1")
    auth_rows, auth_problem = auth_profiles(home)
    notify_rows, notify_problem = notify_profiles(home)
    return ctx.render(
        "settings",
        title="Settings",
        checks=checks,
        checked_s=age,
        home=str(home.root),
        config=home.settings.as_written(),
        auth=auth_rows,
        auth_problem=auth_problem,
        notify=notify_rows,
        notify_problem=notify_problem,
    )


ROUTES: list[Route] = [("GET", "/settings", page)]

"""orbit-web.service: the web server as a systemd user unit (`orbit web --install`,
`--uninstall`), with the conventions of the tick's units (service/units.py)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Mapping

from orbit.service import units
from orbit.service.units import Installed, Removed
from orbit.store.childenv import child_environ
from orbit.store.home import Home

UNIT = "orbit-web.service"


def server_command(port: int | None) -> list[str]:
    """The server process itself: `python -m orbit web --serve [--port N]`."""
    cmd = [sys.executable, "-m", "orbit", "web", "--serve"]
    return [*cmd, "--port", str(port)] if port is not None else cmd


def render_unit(home: Home, port: int | None = None) -> str:
    """systemd/orbit-web.service filled in for `home`."""
    return units.render(UNIT, home, child_environ(home, {}), server_command(port))


def _owner_fix(owner: str) -> str:
    return (
        f"{UNIT} already serves ORBIT_HOME={owner} (one per user): remove it with "
        f"`ORBIT_HOME={shlex.quote(owner)} orbit web --uninstall`, or run `orbit web` without "
        "a unit for this home"
    )


def install_unit(
    home: Home,
    environ: Mapping[str, str],
    port: int | None = None,
    make_way: Callable[[], None] | None = None,
) -> Installed:
    """Write orbit-web.service for `home`, enable it and (with a reachable user systemd) start it.

    `make_way` is called when a reachable user manager is about to start a unit that is not
    active yet: a server started without the unit holds the home's web lock, and the unit's
    server would exit with "already running" and restart forever, so the caller stops it there.
    """
    text = render_unit(home, port)
    units.check_owner(home, units.user_unit_dir(environ) / UNIT, _owner_fix)
    asked = units.systemctl(environ, "is-active", UNIT).out.strip()
    if asked and asked != "active" and make_way is not None:
        make_way()
    return units.install_units(home, environ, {UNIT: text}, UNIT, owner_fix=_owner_fix)


def uninstall_unit(home: Home, environ: Mapping[str, str]) -> Removed:
    """Stop, disable and delete orbit-web.service, if it was rendered for this home."""
    return units.uninstall_units(home, environ, (UNIT,), UNIT, "default.target")


def unit_state(home: Home, environ: Mapping[str, str], serving: int | None) -> tuple[bool, str]:
    """(installed for this home, one line for `orbit scheduler status`); `serving` is the port
    this home's server listens on, if one runs."""
    owner = units.unit_home(units.user_unit_dir(environ) / UNIT)
    if owner is None:
        return False, "no unit (`orbit web --install` adds one)"
    if owner != str(home.root):
        return False, f"{UNIT} serves ORBIT_HOME={owner or '?'}, not this home"
    asked = units.systemctl(environ, "is-active", UNIT).out.strip()
    where = f", serving on port {serving}" if serving else ""
    if asked:
        return True, f"{UNIT} {asked}{where}"
    enabled = units.systemctl(environ, "is-enabled", UNIT).out.strip() == "enabled"
    what = "enabled" if enabled else "written, not enabled"
    return True, f"{UNIT} {what} (no user systemd reachable){where}"

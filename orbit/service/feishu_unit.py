"""orbit-feishu-NAME.service: a Feishu bot as a systemd user unit (`orbit notify install NAME`,
`orbit notify uninstall NAME`), with the conventions of the tick's and the web server's units
(service/units.py). The bot itself is orbit/feishu/bot.py; a unit only keeps it up from boot,
as the tick does from the next tick."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping

from orbit.service import units
from orbit.service.units import Installed, Removed
from orbit.store.childenv import child_environ
from orbit.store.feishu import BOT_MODULE
from orbit.store.home import Home

TEMPLATE = "orbit-feishu.service"


def unit_name(name: str) -> str:
    return f"orbit-feishu-{name}.service"


def bot_command(name: str) -> list[str]:
    return [sys.executable, "-m", BOT_MODULE, name]


def render_unit(home: Home, name: str) -> str:
    """systemd/orbit-feishu.service filled in for the bot `name` of `home`."""
    text = units.render(TEMPLATE, home, child_environ(home, {}), bot_command(name),
                        NAME=name)  # fmt: skip
    return text


def install_unit(home: Home, environ: Mapping[str, str], name: str) -> Installed:
    """Write orbit-feishu-NAME.service for `home`, enable it and (with a reachable user
    systemd) start it."""
    unit = unit_name(name)

    def fix(owner: str) -> str:
        return (
            f"{unit} already runs the bot {name} of ORBIT_HOME={owner}: remove it with "
            f"`ORBIT_HOME={shlex.quote(owner)} orbit notify uninstall {name}`"
        )

    return units.install_units(home, environ, {unit: render_unit(home, name)}, unit,
                               owner_fix=fix)  # fmt: skip


def uninstall_unit(home: Home, environ: Mapping[str, str], name: str) -> Removed:
    """Stop, disable and delete orbit-feishu-NAME.service, if it was rendered for this home."""
    unit = unit_name(name)
    return units.uninstall_units(home, environ, (unit,), unit, "default.target")


def installed(home: Home, environ: Mapping[str, str], name: str) -> bool:
    return units.unit_home(units.user_unit_dir(environ) / unit_name(name)) == str(home.root)

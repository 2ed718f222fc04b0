"""Orbit's hooks in an agent's own JSON settings, added and taken away without touching the rest.

The settings file belongs to the user: it is parsed (never patched as text), Orbit's handlers
are appended to the `hooks` events they belong to, every other key and hook keeps its place,
and the file is written back with the indentation, key order and final newline it had (on
remove, agents/plugin.py puts the bytes from before install back while nobody else changed the
file; this is for when somebody did). Orbit's handlers are found again by their command, which
runs `-m orbit hook`, and belong to the home their `--home PATH` names (a handler without one
was written before hooks named their home).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orbit.errors import CorruptError
from orbit.store.files import atomic_write

MARK = "-m orbit hook"


def is_orbit_handler(handler: Any) -> bool:
    return isinstance(handler, dict) and MARK in str(handler.get("command", ""))


def handler_home(handler: Any) -> str | None:
    """The home an Orbit handler's command names with `--home`; None when it names none."""
    try:
        words = shlex.split(str(handler.get("command", "")))
    except ValueError:
        return None
    for i, word in enumerate(words):
        if word == "--home" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--home="):
            return word[len("--home=") :]
    return None


def of_home(home: str) -> Callable[[Any], bool]:
    """Whether a handler is Orbit's for `home`: it names that home, or none at all."""
    return lambda h: is_orbit_handler(h) and handler_home(h) in (None, home)


def fragment(path: Path, orbit_command: str, home: str) -> dict[str, list[dict[str, Any]]]:
    """The `hooks` of a settings fragment in hooks/, with `orbit …` commands made runnable
    without PATH (`orbit_command` is the interpreter and `-m orbit`) and bound to `home`
    (`--home PATH`, quoted for the shell), whatever ORBIT_HOME the agent's environment holds."""
    data = json.loads(path.read_text())
    events: dict[str, list[dict[str, Any]]] = data["hooks"]
    for groups in events.values():
        for group in groups:
            for handler in group["hooks"]:
                command = handler["command"]
                if command.startswith("orbit "):
                    rest = command[len("orbit") :]
                    handler["command"] = f"{orbit_command}{rest} --home {shlex.quote(home)}"
    return events


def homes_named(settings: Settings) -> set[str]:
    """The homes Orbit's handlers in the file name (those naming none are left out)."""
    found = set()
    for group in _groups(settings):
        for handler in group.get("hooks") or []:
            home = handler_home(handler) if is_orbit_handler(handler) else None
            if home is not None:
                found.add(home)
    return found


def read_text(path: Path) -> str:
    """A user's configuration file as text; CorruptError (one line) when it is not UTF-8."""
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise CorruptError(f"{path} is not UTF-8 text; Orbit does not rewrite it") from None


class Settings:
    """One JSON settings file as read: its data and how it was formatted."""

    def __init__(self, path: Path) -> None:
        # A settings file linked from elsewhere (a dotfiles checkout) is written where it lives.
        self.path = path.resolve() if path.is_symlink() else path
        self.existed = self.path.exists()
        self.text = read_text(self.path) if self.existed else ""
        if self.existed:
            try:
                data = json.loads(self.text)
            except ValueError as exc:
                raise CorruptError(
                    f"{path} is not valid JSON (line {getattr(exc, 'lineno', '?')}); "
                    "fix it, then try again: Orbit does not rewrite it"
                ) from None
            if not isinstance(data, dict):
                raise CorruptError(f"{path} does not hold a JSON object; Orbit does not rewrite it")
        else:
            data = {}
        self.data: dict[str, Any] = data

    def render(self) -> str:
        indent = _indent_of(self.text) if self.existed else 2
        ascii_only = bool(re.search(r"\\u[0-9a-fA-F]{4}", self.text)) and self.text.isascii()
        text = json.dumps(self.data, indent=indent, ensure_ascii=ascii_only)
        if not self.existed or self.text.endswith("\n"):
            text += "\n"
        return text

    def save(self) -> bool:
        """Write the data back when it changed; whether it did."""
        text = self.render()
        if self.existed and text == self.text:
            return False
        self.write(text)
        return True

    def write(self, text: str) -> None:
        """Replace the file with `text` (atomically)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The user's file keeps its permissions; a new one is private (it may hold keys).
        mode = self.path.stat().st_mode & 0o7777 if self.existed else 0o600
        atomic_write(self.path, text.encode(), mode=mode)
        self.text, self.existed = text, True


def _indent_of(text: str) -> int | str | None:
    """The indentation of the first indented line: spaces as a count, a tab as itself; None
    for a file on one line."""
    match = re.search(r"\n([ \t]+)\S", text)
    if not match:
        return None
    unit = match.group(1)
    return unit if "\t" in unit else len(unit)


def add_hooks(settings: Settings, events: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Put Orbit's handlers in, replacing every older one of Orbit's (the caller has made sure
    none belongs to another home in use); the keys this created (`hooks`, `hooks.EVENT`), so
    that removing can take exactly those away again."""
    created: list[str] = []
    hooks = settings.data.get("hooks")
    if not isinstance(hooks, dict):
        if hooks is not None:
            raise CorruptError(f"{settings.path}: `hooks` is not a JSON object; fix it first")
        hooks = settings.data["hooks"] = {}
        created.append("hooks")
    for event, groups in events.items():
        existing = hooks.get(event)
        if existing is None:
            existing = hooks[event] = []
            created.append(f"hooks.{event}")
        if not isinstance(existing, list):
            raise CorruptError(f"{settings.path}: `hooks.{event}` is not a list; fix it first")
        ours = [g for g in existing if _orbit_group(g)]
        if ours == groups:
            continue  # installed as it would be now: leave the file as it is
        _strip_event(existing, is_orbit_handler)
        existing.extend(json.loads(json.dumps(groups)))
    return created


def remove_hooks(settings: Settings, created: list[str], home: str) -> None:
    """Take `home`'s handlers out (another home's stay); drop the keys install created once
    they are empty."""
    hooks = settings.data.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        groups = hooks[event]
        if isinstance(groups, list):
            _strip_event(groups, of_home(home))
            if not groups and f"hooks.{event}" in created:
                del hooks[event]
    if not hooks and "hooks" in created:
        del settings.data["hooks"]


def has_hooks(settings: Settings, events: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether the file holds Orbit's handlers exactly as install would write them now."""
    hooks = settings.data.get("hooks")
    if not isinstance(hooks, dict):
        return False
    for event, groups in events.items():
        existing = hooks.get(event)
        if not isinstance(existing, list) or [g for g in existing if _orbit_group(g)] != groups:
            return False
    return True


def any_hooks(settings: Settings, home: str) -> bool:
    """Whether the file holds any of Orbit's handlers for `home`."""
    mine = of_home(home)
    return any(mine(h) for g in _groups(settings) for h in g.get("hooks") or [])


def _groups(settings: Settings) -> list[dict[str, Any]]:
    """Every matcher group of every event whose handlers are a list."""
    hooks = settings.data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    return [
        g
        for groups in hooks.values()
        if isinstance(groups, list)
        for g in groups
        if isinstance(g, dict) and isinstance(g.get("hooks"), list)
    ]


def _orbit_group(group: Any) -> bool:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(handlers, list) and any(is_orbit_handler(h) for h in handlers)


def _strip_event(groups: list[Any], which: Callable[[Any], bool]) -> None:
    """Remove the handlers `which` picks from an event's matcher groups; a group left without
    handlers by that is removed too (a user's group keeps its own handlers)."""
    for group in list(groups):
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(which(h) for h in handlers):
            continue
        kept = [h for h in handlers if not which(h)]
        if kept:
            group["hooks"] = kept
        else:
            groups.remove(group)

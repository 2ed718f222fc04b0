"""Orbit's hooks in an agent's own JSON settings, added and taken away without touching the rest.

The settings file belongs to the user: it is parsed (never patched as text), Orbit's handlers
are appended to the `hooks` events they belong to, every other key and hook keeps its place,
and the file is written back with the indentation, key order and final newline it had, so a
file that Orbit adds to and then removes from reads byte for byte as before. Orbit's handlers
are found again by their command, which runs `-m orbit hook`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from orbit.errors import CorruptError
from orbit.store.files import atomic_write

MARK = "-m orbit hook"


def is_orbit_handler(handler: Any) -> bool:
    return isinstance(handler, dict) and MARK in str(handler.get("command", ""))


def fragment(path: Path, orbit_command: str) -> dict[str, list[dict[str, Any]]]:
    """The `hooks` of a settings fragment in hooks/, with `orbit …` commands made runnable
    without PATH (`orbit_command` is the interpreter and `-m orbit`)."""
    data = json.loads(path.read_text())
    events: dict[str, list[dict[str, Any]]] = data["hooks"]
    for groups in events.values():
        for group in groups:
            for handler in group["hooks"]:
                command = handler["command"]
                if command.startswith("orbit "):
                    handler["command"] = orbit_command + command[len("orbit") :]
    return events


class Settings:
    """One JSON settings file as read: its data and how it was formatted."""

    def __init__(self, path: Path) -> None:
        # A settings file linked from elsewhere (a dotfiles checkout) is written where it lives.
        self.path = path.resolve() if path.is_symlink() else path
        self.existed = self.path.exists()
        self.text = self.path.read_text() if self.existed else ""
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The user's file keeps its permissions; a new one is private (it may hold keys).
        mode = self.path.stat().st_mode & 0o7777 if self.existed else 0o600
        atomic_write(self.path, text.encode(), mode=mode)
        self.text, self.existed = text, True
        return True


def _indent_of(text: str) -> int | str | None:
    """The indentation of the first indented line: spaces as a count, a tab as itself; None
    for a file on one line."""
    match = re.search(r"\n([ \t]+)\S", text)
    if not match:
        return None
    unit = match.group(1)
    return unit if "\t" in unit else len(unit)


def add_hooks(settings: Settings, events: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Put Orbit's handlers in, replacing Orbit's older ones; the keys this created (`hooks`,
    `hooks.EVENT`), so that removing can take exactly those away again."""
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
        _strip_event(existing)
        existing.extend(json.loads(json.dumps(groups)))
    return created


def remove_hooks(settings: Settings, created: list[str]) -> None:
    """Take Orbit's handlers out; drop the keys install created once they are empty."""
    hooks = settings.data.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        groups = hooks[event]
        if isinstance(groups, list):
            _strip_event(groups)
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


def any_hooks(settings: Settings) -> bool:
    hooks = settings.data.get("hooks")
    if not isinstance(hooks, dict):
        return False
    return any(
        _orbit_group(g) for groups in hooks.values() if isinstance(groups, list) for g in groups
    )


def _orbit_group(group: Any) -> bool:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(handlers, list) and any(is_orbit_handler(h) for h in handlers)


def _strip_event(groups: list[Any]) -> None:
    """Remove Orbit's handlers from an event's matcher groups; a group left without handlers
    by that is removed too (a user's group keeps its own handlers)."""
    for group in list(groups):
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(is_orbit_handler(h) for h in handlers):
            continue
        kept = [h for h in handlers if not is_orbit_handler(h)]
        if kept:
            group["hooks"] = kept
        else:
            groups.remove(group)

"""Group notes (a conclusion stored once for a whole group) and who a note is by.

A group's notes live in ORBIT_HOME/groups/<safe name>/notes.jsonl (the group's folder:
store/groups.py), one JSON line per note (`time`, `author`, `text`, `group`), appended whole
like a run's notes.jsonl.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from orbit import harnesses
from orbit.store.files import append_jsonl, read_jsonl
from orbit.store.groups import group_dir
from orbit.store.home import Home
from orbit.store.model import NOTES, now_iso

__all__ = ["add_group_note", "author", "group_dir", "group_notes"]

# Variables a coding agent Orbit has no harness for (orbit/harnesses/ says the others') sets in
# the shells it runs commands in, and the name a note takes when nothing names a person
# (checked in this order, after the harnesses').
OTHER_AGENT_MARKERS: tuple[tuple[str, str], ...] = (
    ("GEMINI_CLI", "gemini-cli"),
    ("CURSOR_AGENT", "cursor"),
    ("OPENCODE", "opencode"),
    ("CLINE_ACTIVE", "cline"),
)


def author(environ: Mapping[str, str]) -> str:
    """Who a note is by: ORBIT_AUTHOR, else $USER (or $LOGNAME), else the coding agent whose
    shell this is, else the login name of this uid; `uid N` only when the uid has no name."""
    for key in ("ORBIT_AUTHOR", "USER", "LOGNAME"):
        value = (environ.get(key) or "").strip()
        if value:
            return value
    agent = harnesses.agent_of_shell(environ)
    if agent is not None:
        return agent
    for key, name in OTHER_AGENT_MARKERS:
        if environ.get(key):
            return name
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, ImportError):
        return f"uid {os.getuid()}"


def add_group_note(home: Home, group: str, text: str, actor: str) -> dict[str, Any]:
    """Append one note to the group's notes.jsonl (one whole-line write)."""
    path = group_dir(home, group)
    path.mkdir(parents=True, exist_ok=True)
    note = {"time": now_iso(), "author": actor, "text": text, "group": group}
    append_jsonl(path / NOTES, note)
    return note


def group_notes(home: Home, group: str | None) -> list[dict[str, Any]]:
    """The group's notes, oldest first; [] for no group or a group without notes."""
    if not group:
        return []
    return [n for n in read_jsonl(group_dir(home, group) / NOTES) if n.get("group", group) == group]

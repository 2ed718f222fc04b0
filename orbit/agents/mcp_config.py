"""Orbit's MCP server (`orbit mcp`) in an agent's own MCP configuration, added and taken away
without touching the rest.

Claude Code reads its user-scope servers from `mcpServers` in ~/.claude.json, Codex from the
`[mcp_servers.NAME]` tables of $CODEX_HOME/config.toml (orbit/harnesses/ says which file).
Orbit writes these files itself, so registering needs neither CLI installed. The JSON file is
parsed and written back in its own format (agents/settings.py); the TOML file is never
reformatted: Orbit's table is appended as text and cut out again as text, and the result is
parsed before it is written. Orbit's server is found again by its arguments (`-m orbit mcp
--home PATH`), which name the home it serves (agents/plugin.py keeps the bytes from before
install and decides whose registration it is).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from orbit.agents.settings import Settings, read_text
from orbit.errors import CorruptError
from orbit.store.files import atomic_write

NAME = "orbit"  # the server's name in the agent's configuration
# Codex starts a server with a few variables only (HOME, PATH, USER, LANG, …); these are the
# ones Orbit reads besides them, so the server reaches the Docker engine the user's shell does.
PASSED_VARS = ["DOCKER_HOST", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "ORBIT_DATA"]


def server(argv: list[str], home: str) -> dict[str, Any]:
    """The server as an agent starts it: `argv` (Orbit's interpreter and `-m orbit`) with
    `mcp --home HOME`."""
    return {"command": argv[0], "args": [*argv[1:], "mcp", "--home", home]}


def served_home(entry: Any) -> str | None:
    """The home an `orbit mcp` entry serves (its `--home`); None for a server not Orbit's."""
    if not isinstance(entry, dict) or not isinstance(entry.get("args"), list):
        return None
    args = [str(a) for a in entry["args"]]
    if "mcp" not in args or "--home" not in args[:-1]:
        return None
    at = args.index("mcp")
    if args[max(0, at - 2) : at] != ["-m", "orbit"]:
        return None
    return args[args.index("--home") + 1]


def same_server(entry: Any, shaped: dict[str, Any]) -> bool:
    """Whether an entry is exactly what install would write now (`shape` of a config)."""
    return isinstance(entry, dict) and all(entry.get(k) == v for k, v in shaped.items())


class JsonConfig:
    """Claude Code's ~/.claude.json: the server under `mcpServers`, as `claude mcp add` writes
    it (`type`, `command`, `args`, `env`)."""

    KEY = "mcpServers"

    def __init__(self, path: Path) -> None:
        self.settings = Settings(path)
        self.path = self.settings.path

    @property
    def existed(self) -> bool:
        return self.settings.existed

    @property
    def text(self) -> str:
        return self.settings.text

    @staticmethod
    def shape(wanted: dict[str, Any]) -> dict[str, Any]:
        """The entry as this file holds it (Claude Code passes the server its environment)."""
        return {"type": "stdio", **wanted, "env": {}}

    def entry(self) -> Any:
        servers = self.settings.data.get(self.KEY)
        return servers.get(NAME) if isinstance(servers, dict) else None

    def put(self, wanted: dict[str, Any]) -> list[str]:
        """Add (or replace) Orbit's server; the keys this created."""
        data = self.settings.data
        created = []
        if self.KEY not in data:
            data[self.KEY] = {}
            created.append(self.KEY)
        if not isinstance(data[self.KEY], dict):
            raise CorruptError(f"{self.path}: `{self.KEY}` is not a JSON object; fix it first")
        data[self.KEY][NAME] = self.shape(wanted)
        return created

    def take(self, created: list[str]) -> None:
        """Take Orbit's server out; drop `mcpServers` too when install created it and it is
        empty now."""
        servers = self.settings.data.get(self.KEY)
        if isinstance(servers, dict):
            servers.pop(NAME, None)
            if not servers and self.KEY in created:
                del self.settings.data[self.KEY]

    def empty(self) -> bool:
        return not self.settings.data

    def render(self) -> str:
        return self.settings.render()

    def write(self, text: str) -> None:
        self.settings.write(text)


_HEADER = re.compile(r"""\[\s*mcp_servers\s*\.\s*(?:orbit|"orbit"|'orbit')\s*(\]|\.)""")


class TomlConfig:
    """Codex's config.toml, kept as text: the server is the table `[mcp_servers.orbit]`."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve() if path.is_symlink() else path
        self.existed = self.path.exists()
        self.text = read_text(self.path) if self.existed else ""
        self.new_text = self.text
        self.data = _parse(self.path, self.text)

    @staticmethod
    def shape(wanted: dict[str, Any]) -> dict[str, Any]:
        return {**wanted, "env_vars": PASSED_VARS}

    def entry(self) -> Any:
        servers = self.data.get("mcp_servers")
        return servers.get(NAME) if isinstance(servers, dict) else None

    def put(self, wanted: dict[str, Any]) -> list[str]:
        """Append Orbit's table (after cutting out an older one of Orbit's); nothing is
        created but the table, so no keys to record."""
        text = self.new_text
        if self.entry() is not None:
            text = cut_table(text, self.entry())
        if text and not text.endswith("\n"):
            text += "\n"
        text += ("\n" if text.strip() else "") + table(self.shape(wanted))
        after = _parse(self.path, text, adding=True)
        servers = after.get("mcp_servers")
        if not isinstance(servers, dict) or not same_server(servers.get(NAME), self.shape(wanted)):
            raise CorruptError(
                f"{self.path}: Orbit's [mcp_servers.{NAME}] cannot be added to it as a table "
                "(is `mcp_servers` an inline table?); register it by hand (docs/agents.md)"
            )
        self.new_text = text
        return []

    def take(self, created: list[str]) -> None:
        """Cut Orbit's table out, with the blank line install put before it."""
        if self.entry() is not None:
            self.new_text = cut_table(self.new_text, self.entry())

    def empty(self) -> bool:
        return not self.new_text.strip()

    def render(self) -> str:
        return self.new_text

    def write(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = self.path.stat().st_mode & 0o7777 if self.existed else 0o600
        atomic_write(self.path, text.encode(), mode=mode)
        self.text = self.new_text = text
        self.existed = True
        self.data = _parse(self.path, text)


def _parse(path: Path, text: str, adding: bool = False) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        if adding:
            raise CorruptError(
                f"{path}: adding Orbit's [mcp_servers.{NAME}] would make it invalid TOML "
                f"({exc}); register it by hand (docs/agents.md)"
            ) from None
        raise CorruptError(
            f"{path} is not valid TOML ({exc}); fix it, then try again: Orbit does not rewrite it"
        ) from None


def table(entry: dict[str, Any]) -> str:
    """Orbit's table as TOML text (JSON strings and lists of them are TOML too)."""
    lines = [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    return f"[mcp_servers.{NAME}]\n" + "\n".join(lines) + "\n"


def cut_table(text: str, entry: Any) -> str:
    """`text` without Orbit's table and the blank line before it: the text install wrote when
    it is still there, else the `[mcp_servers.orbit]` table with its sub-tables, up to the next
    other table header (the blank lines before that header stay)."""
    ours = "\n" + table(entry) if isinstance(entry, dict) else None
    if ours and ours in text:
        at = text.rindex(ours)
        return text[:at] + text[at + len(ours) :]
    kept: list[str] = []
    blanks: list[str] = []  # blank lines inside Orbit's table: they stay before a next header
    inside = False
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith("["):
            was, inside = inside, bool(_HEADER.match(stripped))
            if inside and not was and kept and not kept[-1].strip():
                kept.pop()
            if was and not inside:
                kept += blanks
            blanks = []
        if not inside:
            kept.append(line)
        elif not stripped.strip():
            blanks.append(line)
        else:
            blanks = []
    return "".join(kept)


Config = JsonConfig | TomlConfig


def open_config(path: Path) -> Config:
    """The agent's MCP configuration as read (CorruptError, in one line, for a broken file)."""
    return TomlConfig(path) if path.suffix == ".toml" else JsonConfig(path)

"""`orbit plugin`: Orbit's skills and hooks installed into coding agents, and taken away again.

One canonical copy of the package's skills lives under ORBIT_HOME/agent-kit/<version>-<hash>/,
reached through the symbolic link agent-kit/current, which an update replaces in one rename.
Each agent's skill directory gets a symbolic link per skill to agent-kit/current/skills/<name>,
so an update needs no relinking. What each install added (links, directories, settings keys)
is recorded in agent-kit/installed.json, and `remove` takes away exactly that: a link another
installed agent still uses (Codex, pi and dsh share ~/.agents/skills) stays.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orbit
from orbit.agents.settings import (
    Settings,
    add_hooks,
    any_hooks,
    fragment,
    has_hooks,
    homes_named,
    remove_hooks,
)
from orbit.errors import ConflictError, CorruptError, NotFoundError, UsageError
from orbit.store.files import atomic_write
from orbit.store.home import Home

AGENTS = ("claude", "codex", "pi", "dsh")
PACKAGE = Path(orbit.__file__).resolve().parent
# The settings fragment in hooks/ per agent; agents without one get the skills only (Codex's
# hooks are behind a feature flag and a trust check, and `notify` has no session start).
HOOK_FRAGMENTS = {"claude": "claude-code.json"}


@dataclass(frozen=True)
class Target:
    agent: str
    profile: str | None
    skills_dir: Path
    settings: Path | None

    @property
    def key(self) -> str:
        return f"{self.agent}:{self.profile}" if self.profile else self.agent


def target(agent: str, profile: str | None, environ: Mapping[str, str]) -> Target:
    """Where `agent` reads personal skills and settings, from HOME and the agent's variables."""
    if agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}; one of: {', '.join(AGENTS)}")
    if profile is not None and agent != "dsh":
        raise UsageError("--profile is for dsh only")
    home = Path(environ.get("HOME") or Path.home())
    if agent == "claude":
        config = Path(environ.get("CLAUDE_CONFIG_DIR") or home / ".claude")
        return Target(agent, None, config / "skills", config / "settings.json")
    if agent == "dsh" and profile is not None:
        if not profile or "/" in profile or profile.startswith("."):
            raise UsageError(f"not a dsh profile name: {profile!r}")
        dsh_home = Path(environ.get("DSH_HOME") or home / ".dsh")
        return Target(agent, profile, dsh_home / "profiles" / profile / "skills", None)
    agents_home = environ.get("DSH_AGENTS_HOME") if agent == "dsh" else None
    return Target(agent, None, Path(agents_home or home / ".agents") / "skills", None)


def package_skills() -> Path:
    return PACKAGE / "skills"


def orbit_command() -> str:
    """How a hook runs Orbit without PATH: this interpreter with `-m orbit`. `-P` keeps the
    hook's working directory (the user's project) off sys.path, so a folder named `orbit`
    there is not imported instead."""
    return f"{shlex.quote(sys.executable)} -P -m orbit"


def hook_events(home: Home, agent: str) -> dict[str, list[dict[str, Any]]]:
    return fragment(PACKAGE / "hooks" / HOOK_FRAGMENTS[agent], orbit_command(), str(home.root))


def _check_hooks_owner(settings: Settings, home: Home, t: Target) -> None:
    """Refuse when the settings' hooks report to another home that still records them."""
    for other in sorted(homes_named(settings) - {str(home.root)}):
        try:
            entry = Kit(Home(Path(other))).manifest().get(t.key)
        except (CorruptError, OSError):
            entry = {"settings": str(t.settings)}
        if entry is not None and entry.get("settings") == str(t.settings):
            raise ConflictError(
                f"{t.settings} has Orbit's hooks for ORBIT_HOME={other} (one home per "
                f"settings file): take them away with `ORBIT_HOME={shlex.quote(other)} orbit "
                f"plugin remove {t.agent}` first"
            )


def tree_hash(root: Path) -> str:
    """The content of the skills under `root` (paths and bytes), to tell copies apart."""
    digest = hashlib.sha256()
    if not root.is_dir():
        return ""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
            digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class Kit:
    """ORBIT_HOME/agent-kit: the canonical copy and the record of what was installed."""

    def __init__(self, home: Home) -> None:
        self.root = home.root / "agent-kit"
        self.current = self.root / "current"
        self.manifest_path = self.root / "installed.json"

    @property
    def skills(self) -> Path:
        return self.current / "skills"

    def version(self) -> str | None:
        try:
            return str(json.loads((self.current / "kit.json").read_text())["version"])
        except (OSError, ValueError, KeyError):
            return None

    def stale(self) -> bool:
        return tree_hash(self.skills) != tree_hash(package_skills())

    def refresh(self) -> bool:
        """Make the canonical copy the package's; whether it changed. A new copy is built
        beside the old one and `current` is switched to it in one rename."""
        wanted = tree_hash(package_skills())
        if self.current.is_dir() and tree_hash(self.skills) == wanted:
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        name = f"{orbit.__version__}-{wanted[:12]}-{secrets.token_hex(3)}"
        build = self.root / f".build-{name}"
        shutil.copytree(package_skills(), build / "skills", symlinks=False)
        meta = {"version": orbit.__version__, "hash": wanted}
        (build / "kit.json").write_text(json.dumps(meta) + "\n")
        os.rename(build, self.root / name)
        link = self.root / f".current-{name}"
        os.symlink(name, link)
        os.replace(link, self.current)
        for old in self.root.iterdir():
            if old.is_dir() and not old.is_symlink() and old.name not in (name, "current"):
                shutil.rmtree(old, ignore_errors=True)
        return True

    def drop(self) -> None:
        """Take the whole kit away (the last agent was removed)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError:
            raise CorruptError(f"{self.manifest_path} is not valid JSON") from None
        agents = data.get("agents") if isinstance(data, dict) else None
        return agents if isinstance(agents, dict) else {}

    def save_manifest(self, agents: dict[str, Any]) -> None:
        text = json.dumps({"format": 1, "agents": agents}, indent=2, sort_keys=True) + "\n"
        try:
            if self.manifest_path.read_text() == text:
                return
        except FileNotFoundError:
            pass
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write(self.manifest_path, text.encode())


def skill_names() -> list[str]:
    return sorted(p.name for p in package_skills().iterdir() if (p / "SKILL.md").is_file())


def _is_ours(link: Path, kit: Kit) -> bool:
    if not link.is_symlink():
        return False
    return os.readlink(link).startswith(str(kit.root) + os.sep)


def _check_free(t: Target, kit: Kit, names: list[str]) -> None:
    for name in names:
        link = t.skills_dir / name
        if (link.exists() or link.is_symlink()) and not _is_ours(link, kit):
            raise ConflictError(
                f"{link} exists and is not Orbit's; move it away to install Orbit's {name} skill"
            )


def _make_dirs(path: Path) -> list[str]:
    """mkdir -p, returning the directories it created (outermost first)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    created = []
    for d in reversed(missing):
        d.mkdir()
        created.append(str(d))
    return created


def install(home: Home, agent: str, profile: str | None, environ: Mapping[str, str]) -> dict:
    """Install (or refresh) Orbit's skills and hooks for one agent; what was done."""
    t = target(agent, profile, environ)
    kit = Kit(home)
    names = skill_names()
    _check_free(t, kit, names)
    settings = _settings_of(t)  # refuses a broken settings file before anything is written
    if settings is not None:
        _check_hooks_owner(settings, home, t)
    agents = kit.manifest()
    entry = agents.get(t.key) or {"created_dirs": [], "created_keys": [], "created_file": False}
    refreshed = kit.refresh()
    entry["created_dirs"] = entry["created_dirs"] + _make_dirs(t.skills_dir)
    linked = []
    for name in names:
        link, dest = t.skills_dir / name, kit.skills / name
        if link.is_symlink() and os.readlink(link) == str(dest):
            continue
        if link.is_symlink():
            link.unlink()  # Orbit's, pointing elsewhere (an older layout)
        os.symlink(dest, link)
        linked.append(name)
    entry.update(skills_dir=str(t.skills_dir), skills=names, agent=agent, profile=profile)
    hooks_changed = False
    if settings is not None and t.settings is not None:
        created_file = not settings.existed
        created = add_hooks(settings, hook_events(home, agent))
        hooks_changed = settings.save()
        entry["settings"] = str(t.settings)
        entry["created_file"] = entry["created_file"] or created_file
        entry["created_keys"] = sorted(set(entry["created_keys"]) | set(created))
    agents[t.key] = entry
    kit.save_manifest(agents)
    return {
        "agent": t.key,
        "skills_dir": str(t.skills_dir),
        "skills": names,
        "linked": linked,
        "kit_updated": refreshed,
        "hooks": str(t.settings) if t.settings else None,
        "hooks_changed": hooks_changed,
        "home": str(home.root),
    }


def _settings_of(t: Target) -> Settings | None:
    if t.agent not in HOOK_FRAGMENTS or t.settings is None:
        return None
    return Settings(t.settings)


def remove(home: Home, agent: str, profile: str | None, environ: Mapping[str, str]) -> dict:
    """Take away what install added for one agent, and nothing else."""
    t = target(agent, profile, environ)
    kit = Kit(home)
    agents = kit.manifest()
    entry = agents.get(t.key)
    if entry is None:
        raise NotFoundError(f"Orbit's plugin is not installed for {t.key}")
    settings_path = entry.get("settings")
    if settings_path:
        settings = Settings(Path(settings_path))  # refuses a broken file before any change
        if settings.existed:
            remove_hooks(settings, entry.get("created_keys", []), str(home.root))
            if entry.get("created_file") and not settings.data:
                settings.path.unlink()
            else:
                settings.save()
    del agents[t.key]
    still_used = {(Path(e["skills_dir"]) / n) for e in agents.values() for n in e.get("skills", [])}
    unlinked = []
    for name in entry.get("skills", []):
        link = Path(entry["skills_dir"]) / name
        if link not in still_used and _is_ours(link, kit):
            link.unlink()
            unlinked.append(name)
    for d in reversed(entry.get("created_dirs", [])):
        try:
            Path(d).rmdir()
        except OSError:  # holds something else, or another agent's links: it stays,
            _hand_over(d, agents)  # and goes with the last agent that uses it
    if agents:
        kit.save_manifest(agents)
    else:
        kit.drop()
    return {"agent": t.key, "unlinked": unlinked, "hooks_removed": bool(settings_path)}


def _hand_over(directory: str, agents: dict[str, Any]) -> None:
    for other in agents.values():
        skills_dir = Path(other["skills_dir"])
        if skills_dir == Path(directory) or Path(directory) in skills_dir.parents:
            dirs = set(other.get("created_dirs", [])) | {directory}
            other["created_dirs"] = sorted(dirs, key=len)  # outermost first


def status(home: Home, environ: Mapping[str, str]) -> dict:
    """Per agent: installed or not, the version, stale or not, hooks present."""
    kit = Kit(home)
    agents = kit.manifest()
    keys = list(AGENTS) + sorted(k for k in agents if k not in AGENTS)
    kit_stale = bool(agents) and kit.stale()
    rows = []
    for key in keys:
        agent, _, profile = key.partition(":")
        t = target(agent, profile or None, environ)
        entry = agents.get(key)
        row: dict[str, Any] = {
            "agent": key,
            "installed": entry is not None,
            "skills_dir": str(t.skills_dir),
            "version": kit.version() if entry else None,
            "stale": False,
            "hooks": None,
        }
        if entry is not None:
            links_ok = all(
                (t.skills_dir / n).is_symlink()
                and os.readlink(t.skills_dir / n) == str(kit.skills / n)
                for n in skill_names()
            )
            hooks_ok = True
            if agent in HOOK_FRAGMENTS and t.settings is not None:
                row["hooks"], hooks_ok = _hooks_state(t.settings, home, agent)
            row["stale"] = kit_stale or not links_ok or not hooks_ok
        rows.append(row)
    return {"package_version": orbit.__version__, "kit": str(kit.root), "agents": rows}


def _hooks_state(path: Path, home: Home, agent: str) -> tuple[bool, bool]:
    """(Orbit's hooks for this home present, present exactly as install would write them)."""
    try:
        settings = Settings(path)
    except CorruptError:
        return False, False
    return any_hooks(settings, str(home.root)), has_hooks(settings, hook_events(home, agent))


def update(home: Home, environ: Mapping[str, str]) -> list[dict]:
    """Re-copy the canonical skills and refresh links and hooks of every installed agent."""
    kit = Kit(home)
    results = []
    for key, entry in sorted(kit.manifest().items()):
        results.append(install(home, entry.get("agent", key), entry.get("profile"), environ))
    return results

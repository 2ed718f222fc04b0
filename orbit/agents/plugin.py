"""`orbit plugin`: Orbit's skills and hooks installed into coding agents, and taken away again.

Each agent's skill directory gets a real copy of each skill (orbit/agents/skill_copy.py), which
depends on nothing outside itself. Claude Code's settings get hook commands that name the home
they were installed from (`--home PATH`), so they reach it whatever the agent's environment
holds; one Claude Code configuration reports to one home at a time. What each install added
(directories, settings keys) is recorded in ORBIT_HOME/agent-kit/installed.json, and `remove`
takes away exactly that: a copy another agent still uses (Codex, pi and dsh share
~/.agents/skills, maybe from other homes) stays, and so does a copy someone changed. Claude Code
and Codex also get Orbit's MCP server (`orbit mcp --home PATH`) in their user MCP configuration
(agents/mcp_config.py), one home per configuration like the hooks.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orbit
from orbit import harnesses
from orbit.agents import mcp_config, skill_copy
from orbit.agents.settings import (
    Settings,
    add_hooks,
    any_hooks,
    fragment,
    has_hooks,
    homes_named,
    remove_hooks,
)
from orbit.agents.skill_copy import skill_names
from orbit.errors import ConflictError, CorruptError, NotFoundError, UsageError
from orbit.harnesses.base import Harness, spoken
from orbit.store.files import atomic_write
from orbit.store.home import Home

PACKAGE = skill_copy.PACKAGE

User = tuple[str, str]  # (home, agent key): who an installed copy is for


@dataclass(frozen=True)
class Target:
    agent: str
    profile: str | None
    skills_dir: Path
    settings: Path | None
    mcp: Path | None = None  # where the agent reads user MCP servers

    @property
    def key(self) -> str:
        return f"{self.agent}:{self.profile}" if self.profile else self.agent


def target(agent: str, profile: str | None, environ: Mapping[str, str]) -> Target:
    """Where `agent` reads personal skills and settings, from HOME and the agent's variables."""
    h = harness_of(agent)
    if profile is not None and not h.profiles:
        with_profiles = [x.plugin for x in harnesses.every() if x.profiles]
        raise UsageError(f"--profile is for {spoken(with_profiles)} only")
    skills = h.skills(environ, profile)
    settings = skills.settings if h.hook_fragment else None
    mcp = h.mcp_config(environ) if h.mcp_config else None
    return Target(agent, profile, skills.dir, settings, mcp)


def harness_of(agent: str) -> Harness:
    """The harness `orbit plugin` calls `agent`; UsageError for none."""
    h = harnesses.by_plugin_name(agent)
    if h is None:
        raise UsageError(f"unknown agent {agent!r}; one of: {', '.join(agent_names())}")
    return h


def agent_names() -> list[str]:
    return [h.plugin for h in harnesses.plugin_order()]


def orbit_argv() -> list[str]:
    """How an agent runs Orbit without PATH: this interpreter with `-m orbit`. `-P` keeps the
    agent's working directory (the user's project) off sys.path, so a folder named `orbit`
    there is not imported instead."""
    return [sys.executable, "-P", "-m", "orbit"]


def orbit_command() -> str:
    """orbit_argv() as a hook's shell command."""
    return shlex.join(orbit_argv())


def mcp_server(home: Home) -> dict[str, Any]:
    return mcp_config.server(orbit_argv(), str(home.root))


def hook_events(home: Home, agent: str) -> dict[str, list[dict[str, Any]]]:
    hooks = PACKAGE / "hooks" / str(harness_of(agent).hook_fragment)
    return fragment(hooks, orbit_command(), str(home.root))


class Kit:
    """ORBIT_HOME/agent-kit: the record of what was installed (installed.json). Before skills
    were copied it also held the one copy they linked to (`current` and its folders)."""

    def __init__(self, root: Path) -> None:
        self.root = root / "agent-kit"
        self.manifest_path = self.root / "installed.json"
        self.originals = self.root / "settings-before"

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

    def original(self, key: str) -> Path:
        """Where the bytes of `key`'s settings file from before install are kept (0600)."""
        return self.originals / f"{key}.json"

    def drop_old_copies(self, agents: dict[str, Any]) -> None:
        """Delete the copy older installs linked to, once no recorded skill is such a link."""
        if any(p.is_symlink() for p in _skill_paths(agents)) or not self.root.is_dir():
            return
        for entry in self.root.iterdir():
            if entry not in (self.manifest_path, self.originals):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)

    def drop(self) -> None:
        """Take the whole kit away (the last agent was removed)."""
        shutil.rmtree(self.root, ignore_errors=True)


def _skill_paths(agents: dict[str, Any]) -> set[Path]:
    return {Path(e["skills_dir"]) / n for e in agents.values() for n in e.get("skills", [])}


def _users(path: Path, home: Home, agents: dict[str, Any], found: skill_copy.Found) -> set[User]:
    """Who uses the copy at `path`: this home's recorded agents whose skill directory holds it,
    and those of the copy's record whose home still records them (a home deleted since is
    forgotten)."""
    me = str(home.root)
    users = {(me, key) for key, e in agents.items() if path in _skill_paths({key: e})}
    for user_home, key in found.users():
        if user_home != me and _still_installed(Path(user_home), key, path):
            users.add((user_home, key))
    return users


def _still_installed(home_root: Path, key: str, path: Path) -> bool:
    try:
        entry = Kit(home_root).manifest().get(key)
    except (CorruptError, OSError):
        return True  # unreadable: that home may still use it
    return entry is not None and path in _skill_paths({key: entry})


def _check_hooks_owner(settings: Settings, home: Home, t: Target) -> None:
    """Refuse when the settings' hooks report to another home that still records them."""
    for other in sorted(homes_named(settings) - {str(home.root)}):
        try:
            entry = Kit(Path(other)).manifest().get(t.key)
        except (CorruptError, OSError):
            entry = {"settings": str(t.settings)}
        if entry is not None and entry.get("settings") == str(t.settings):
            raise ConflictError(
                f"{t.settings} has Orbit's hooks for ORBIT_HOME={other} (one home per "
                f"settings file): take them away with `ORBIT_HOME={shlex.quote(other)} orbit "
                f"plugin remove {t.agent}` first"
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
    """Install (or refresh) Orbit's skills and hooks for one agent; what was done. Nothing is
    written when a skill's place holds something not Orbit's, or a settings file is broken."""
    t = target(agent, profile, environ)
    check = harness_of(agent).check_install
    if check is not None:
        check(profile, environ)
    kit = Kit(home.root)
    names = skill_names()
    for name in names:
        skill_copy.refuse(t.skills_dir / name, name, skill_copy.inspect(t.skills_dir / name))
    settings = _settings_of(t)
    if settings is not None:
        _check_hooks_owner(settings, home, t)
    mcp = mcp_config.open_config(t.mcp) if t.mcp is not None else None
    mcp_plan = _plan_mcp(mcp, home, t) if mcp is not None else None
    agents = kit.manifest()
    entry = agents.get(t.key) or {"created_dirs": [], "created_keys": [], "created_file": False}
    entry["created_dirs"] = entry["created_dirs"] + _make_dirs(t.skills_dir)
    entry.update(skills_dir=str(t.skills_dir), skills=names, agent=agent, profile=profile)
    agents[t.key] = entry
    copied = []
    for name in names:
        path = t.skills_dir / name
        if skill_copy.put(path, name, _users(path, home, agents, skill_copy.inspect(path))):
            copied.append(name)
    hooks_changed = False
    if settings is not None and t.settings is not None:
        created_file = not settings.existed
        before = settings.text if settings.existed else None
        had_ours = any_hooks(settings, str(home.root))
        created = add_hooks(settings, hook_events(home, agent))
        hooks_changed = settings.save()
        if hooks_changed and before is not None:
            _keep_original(kit, t.key, entry, before, settings.text, had_ours)
        entry["settings"] = str(t.settings)
        entry["created_file"] = entry["created_file"] or created_file
        entry["created_keys"] = sorted(set(entry["created_keys"]) | set(created))
    mcp_changed = False
    if mcp is not None and mcp_plan is not None:
        mcp_changed = _register(kit, t, entry, mcp, mcp_plan)
    kit.save_manifest(agents)
    kit.drop_old_copies(agents)
    return {
        "agent": t.key,
        "skills_dir": str(t.skills_dir),
        "skills": names,
        "copied": copied,
        "hooks": str(t.settings) if t.settings else None,
        "hooks_changed": hooks_changed,
        "mcp": str(t.mcp) if t.mcp else None,
        "mcp_changed": mcp_changed,
        "home": str(home.root),
    }


def _check_mcp_owner(config: mcp_config.Config, home: Home, t: Target) -> None:
    """Refuse when the configuration's `orbit` server is not Orbit's, or serves another home
    that still records it (a home deleted since is taken over)."""
    entry = config.entry()
    if entry is None:
        return
    other = mcp_config.served_home(entry)
    if other is None:
        raise ConflictError(
            f"{t.mcp} already has an MCP server named {mcp_config.NAME!r} that Orbit did not "
            "write; remove it (or rename it), then install again"
        )
    if other == str(home.root):
        return
    try:
        recorded = Kit(Path(other)).manifest().get(t.key)
    except (CorruptError, OSError):
        recorded = {"mcp": {"config": str(t.mcp)}}
    if recorded is not None and (recorded.get("mcp") or {}).get("config") == str(t.mcp):
        raise ConflictError(
            f"{t.mcp} has Orbit's MCP server for ORBIT_HOME={other} (one home per "
            f"configuration): take it away with `ORBIT_HOME={shlex.quote(other)} orbit plugin "
            f"remove {t.agent}` first"
        )


@dataclass(frozen=True)
class McpPlan:
    """Orbit's server put into the configuration in memory, before anything is written."""

    changed: bool
    created_keys: list[str]
    had_ours: bool  # this home's install was in the file before (else its bytes are the user's)


def _plan_mcp(config: mcp_config.Config, home: Home, t: Target) -> McpPlan:
    """Check whose `orbit` server the configuration holds, and put this home's in (in memory:
    a file it cannot be added to refuses here, before install changes anything)."""
    _check_mcp_owner(config, home, t)
    wanted = mcp_server(home)
    if mcp_config.same_server(config.entry(), config.shape(wanted)):
        return McpPlan(False, [], True)
    # A server this home did not record (registered by hand, or by a home deleted since) is
    # part of the file as it was: remove puts it back.
    record = (Kit(home.root).manifest().get(t.key) or {}).get("mcp")
    had_ours = record is not None and not record.get("preexisting") and config.entry() is not None
    return McpPlan(True, config.put(wanted), had_ours)


def _register(
    kit: Kit, t: Target, entry: dict[str, Any], config: mcp_config.Config, plan: McpPlan
) -> bool:
    """Write the planned configuration, recording what install created there (the file, its
    folders, keys) and its bytes from before; whether the file changed."""
    record = entry.get("mcp")
    if record is None:  # a server already as install would write it (by hand) stays on remove
        record = {"created_file": not config.existed, "created_keys": []}
        record["preexisting"] = not plan.changed
    record["config"] = str(t.mcp)
    entry["mcp"] = record
    if not plan.changed:
        return False
    record.pop("preexisting", None)
    record["created_keys"] = sorted(set(record["created_keys"]) | set(plan.created_keys))
    record["created_dirs"] = record.get("created_dirs", []) + _make_dirs(config.path.parent)
    before = config.text if config.existed else None
    written = config.render()
    config.write(written)
    if before is not None:
        _keep_original(kit, _mcp_key(t.key), record, before, written, plan.had_ours)
    return True


def _mcp_key(key: str) -> str:
    return f"{key}.mcp"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _keep_original(
    kit: Kit, key: str, entry: dict[str, Any], before: str, written: str, had_ours: bool
) -> None:
    """Keep the settings file's bytes from before Orbit first changed it, and the digest of
    what Orbit wrote, so that remove can put those bytes back while nobody else changed the
    file. A file changed by someone else around Orbit's hooks has no such bytes any more."""
    path = kit.original(key)
    if entry.get("settings_written") != _digest(before) or not path.exists():
        if had_ours:  # Orbit's hooks were in, and the user changed the file: no original
            path.unlink(missing_ok=True)
            entry.pop("settings_written", None)
            return
        kit.originals.mkdir(parents=True, exist_ok=True)
        atomic_write(path, before.encode(), mode=0o600)
    entry["settings_written"] = _digest(written)


def _put_back(
    kit: Kit, key: str, entry: dict[str, Any], settings: Settings | mcp_config.Config
) -> bool:
    """Write the file's bytes from before install back, when the file is still what Orbit
    last wrote; whether it did."""
    path = kit.original(key)
    if entry.get("settings_written") != _digest(settings.text) or not path.is_file():
        return False
    settings.write(path.read_text())
    return True


def _settings_of(t: Target) -> Settings | None:
    if t.settings is None:  # an agent without hooks: the skills only
        return None
    return Settings(t.settings)


def remove(home: Home, agent: str, profile: str | None, environ: Mapping[str, str]) -> dict:
    """Take away what install added for one agent, and nothing else: a copy another agent
    still uses, or one changed since it was installed (then only its record goes), stays."""
    t = target(agent, profile, environ)
    kit = Kit(home.root)
    agents = kit.manifest()
    entry = agents.get(t.key)
    if entry is None:
        raise NotFoundError(f"Orbit's plugin is not installed for {t.key}")
    record = entry.get("mcp")
    # Read (and refused when broken) before any change, like the settings file below.
    mcp = mcp_config.open_config(Path(record["config"])) if record else None
    settings_path = entry.get("settings")
    if settings_path:
        settings = Settings(Path(settings_path))  # refuses a broken file before any change
        if settings.existed and not _put_back(kit, t.key, entry, settings):
            remove_hooks(settings, entry.get("created_keys", []), str(home.root))
            if entry.get("created_file") and not settings.data:
                settings.path.unlink()
            else:
                settings.save()
        kit.original(t.key).unlink(missing_ok=True)
    mcp_removed = _unregister(kit, home, t.key, record, mcp) if record and mcp else False
    del agents[t.key]
    removed, kept = [], []
    for name in entry.get("skills", []):
        path = Path(entry["skills_dir"]) / name
        found = skill_copy.inspect(path)
        if found.kind not in ("copy", "link"):
            continue
        users = _users(path, home, agents, found)
        if users and found.kind == "copy":
            skill_copy.set_users(path, users)
        elif users:
            continue  # an older link another agent of this home still uses
        elif found.changed:
            skill_copy.disown(path)
            kept.append(name)
        else:
            skill_copy.take_away(path)
            removed.append(name)
    for d in reversed(entry.get("created_dirs", [])):
        try:
            Path(d).rmdir()
        except OSError:  # holds something else, or another agent's copies: it stays,
            _hand_over(d, agents)  # and goes with the last agent that uses it
    if agents:
        kit.save_manifest(agents)
        kit.drop_old_copies(agents)
    else:
        kit.drop()
    return {
        "agent": t.key,
        "removed": removed,
        "kept_changed": kept,
        "hooks_removed": bool(settings_path),
        "mcp_removed": mcp_removed,
    }


def _unregister(
    kit: Kit, home: Home, key: str, record: dict[str, Any], config: mcp_config.Config
) -> bool:
    """Take Orbit's server for this home out of the configuration install put it in (the
    bytes from before install when nobody changed the file since); whether it was there."""
    found = config.existed and mcp_config.served_home(config.entry()) == str(home.root)
    if found and record.get("preexisting"):
        return False
    if found and not _put_back(kit, _mcp_key(key), record, config):
        config.take(record.get("created_keys", []))
        if record.get("created_file") and config.empty():
            config.path.unlink()
        else:
            config.write(config.render())
    kit.original(_mcp_key(key)).unlink(missing_ok=True)
    for d in reversed(record.get("created_dirs", [])):
        try:
            Path(d).rmdir()
        except OSError:
            pass  # holds something else now (the agent's own files): it stays
    return found


def _hand_over(directory: str, agents: dict[str, Any]) -> None:
    for other in agents.values():
        skills_dir = Path(other["skills_dir"])
        if skills_dir == Path(directory) or Path(directory) in skills_dir.parents:
            dirs = set(other.get("created_dirs", [])) | {directory}
            other["created_dirs"] = sorted(dirs, key=len)  # outermost first


def status(home: Home, environ: Mapping[str, str]) -> dict:
    """Per agent: installed or not, the version, stale or not, hooks present, and its MCP
    registration (`mcp`: the file, whether this home's server is in it, the home the server
    there serves, stale)."""
    kit = Kit(home.root)
    agents = kit.manifest()
    names = agent_names()
    keys = names + sorted(k for k in agents if k not in names)
    fresh = {name: skill_copy.wanted(name) for name in skill_names()} if agents else {}
    rows = []
    for key in keys:
        agent, _, profile = key.partition(":")
        t = target(agent, profile or None, environ)
        entry = agents.get(key)
        row: dict[str, Any] = {
            "agent": key,
            "installed": entry is not None,
            "skills_dir": str(t.skills_dir),
            "version": None,
            "stale": False,
            "hooks": None,
            "mcp": None,
        }
        if entry is not None:
            found = [skill_copy.inspect(t.skills_dir / n) for n in fresh]
            row["version"] = next((f.marker.get("version") for f in found if f.marker), None)
            copies_ok = all(
                f.kind == "copy"
                and not f.changed
                and f.marker is not None
                and f.marker.get("files") == files
                and f.marker.get("version") == orbit.__version__
                for f, files in zip(found, fresh.values(), strict=True)
            )
            hooks_ok = True
            if t.settings is not None:
                row["hooks"], hooks_ok = _hooks_state(t.settings, home, agent)
            if t.mcp is not None:
                row["mcp"] = _mcp_state(t.mcp, home)
            mcp_ok = row["mcp"] is None or not row["mcp"]["stale"]
            row["stale"] = not copies_ok or not hooks_ok or not mcp_ok
        rows.append(row)
    return {"package_version": orbit.__version__, "kit": str(kit.root), "agents": rows}


def _mcp_state(path: Path, home: Home) -> dict[str, Any]:
    try:
        config = mcp_config.open_config(path)
    except (CorruptError, OSError):
        return {"config": str(path), "registered": False, "home": None, "stale": True}
    entry = config.entry()
    served = mcp_config.served_home(entry)
    return {
        "config": str(path),
        "registered": served == str(home.root),
        "home": served,
        "stale": not mcp_config.same_server(entry, config.shape(mcp_server(home))),
    }


def _hooks_state(path: Path, home: Home, agent: str) -> tuple[bool, bool]:
    """(Orbit's hooks for this home present, present exactly as install would write them)."""
    try:
        settings = Settings(path)
    except CorruptError:
        return False, False
    return any_hooks(settings, str(home.root)), has_hooks(settings, hook_events(home, agent))


def update(home: Home, environ: Mapping[str, str]) -> list[dict]:
    """Copy the package's skills again and refresh the hooks of every installed agent."""
    results = []
    for key, entry in sorted(Kit(home.root).manifest().items()):
        results.append(install(home, entry.get("agent", key), entry.get("profile"), environ))
    return results

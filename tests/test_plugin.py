"""`orbit plugin`: skills linked into each agent, Claude Code hooks merged into the user's
settings, and everything taken away again without touching what the user had."""

from __future__ import annotations

import io
import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from orbit.cli import main
from orbit.env import Env

# A settings file as a user of Claude Code has it: their own hooks, permissions, env, a model.
USER_SETTINGS = """{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "model": "opus",
  "permissions": {
    "allow": [
      "Bash(npm run lint)",
      "Read(~/.zshrc)"
    ],
    "deny": [
      "Read(./.env)"
    ]
  },
  "env": {
    "DISABLE_TELEMETRY": "1"
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/check-bash.sh"
          }
        ]
      }
    ],
    "SessionStart": [
      {
        "matcher": "startup",
        "hooks": [
          {
            "type": "command",
            "command": "echo \\"welcome, née Zoë\\""
          }
        ]
      }
    ]
  },
  "statusLine": {
    "type": "command",
    "command": "~/.claude/statusline.sh"
  }
}
"""


class Agents:
    """The CLI with HOME and ORBIT_HOME in a temporary directory."""

    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "user"
        self.home.mkdir()
        self.orbit_home = tmp / "orbit-home"
        self.environ = {
            "HOME": str(self.home),
            "ORBIT_HOME": str(self.orbit_home),
            "PATH": os.environ.get("PATH", ""),
        }

    def __call__(self, *args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        env = Env(environ=dict(self.environ), stdout=out, stderr=err, cwd=self.home)
        code = main(list(args), env)
        return code, out.getvalue(), err.getvalue()

    def ok(self, *args: str) -> str:
        code, out, err = self(*args)
        assert code == 0, err
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    @property
    def settings(self) -> Path:
        return self.home / ".claude" / "settings.json"


@pytest.fixture
def agents(tmp_path: Path) -> Agents:
    return Agents(tmp_path)


def snapshot(root: Path) -> dict[str, Any]:
    """Every file's bytes and every link's target under `root`."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = ("link", os.readlink(path))
        elif path.is_file():
            found[rel] = path.read_bytes()
    return found


def all_commands(settings_path: Path) -> list[str]:
    """Orbit's hook commands in a settings file, every event's, in order."""
    return [c for cs in orbit_commands(json.loads(settings_path.read_text())).values() for c in cs]


def orbit_commands(settings: dict[str, Any]) -> dict[str, list[str]]:
    return {
        event: [h["command"] for g in groups for h in g["hooks"] if "-m orbit hook" in h["command"]]
        for event, groups in settings.get("hooks", {}).items()
    }


def test_claude_round_trip_keeps_the_users_settings(agents: Agents) -> None:
    agents.settings.parent.mkdir()
    agents.settings.write_text(USER_SETTINGS)
    agents.settings.chmod(0o644)
    own_skill = agents.home / ".claude" / "skills" / "my-skill"
    own_skill.mkdir(parents=True)
    (own_skill / "SKILL.md").write_text("---\nname: my-skill\ndescription: mine\n---\n")

    agents.ok("plugin", "install", "claude")
    for name in ("orbit", "orbit-bench"):
        link = agents.home / ".claude" / "skills" / name
        assert link.is_symlink()
        assert (link / "SKILL.md").read_text().startswith("---\nname: " + name)
        assert str(agents.orbit_home / "agent-kit") in os.readlink(link)
    data = json.loads(agents.settings.read_text())
    original = json.loads(USER_SETTINGS)
    for key in ("$schema", "model", "permissions", "env", "statusLine"):
        assert data[key] == original[key]
    assert list(data) == list(original)  # key order kept
    assert data["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    assert data["hooks"]["SessionStart"][0] == original["hooks"]["SessionStart"][0]
    commands = orbit_commands(data)
    home = f" --home {agents.orbit_home}"
    assert [c.split(" -m orbit ")[1] for c in commands["SessionStart"]] == [
        "hook session-start" + home
    ]
    assert [c.split(" -m orbit ")[1] for c in commands["Stop"]] == ["hook session-end" + home]
    assert [c.split(" -m orbit ")[1] for c in commands["SessionEnd"]] == ["hook session-end" + home]
    interpreter = shlex.split(commands["SessionStart"][0])[0]
    assert os.path.isabs(interpreter), "hooks must run without PATH"
    for command in all_commands(agents.settings):
        words = shlex.split(command)
        assert words[1:4] == ["-P", "-m", "orbit"], "the project's own folders stay off sys.path"
        assert words[-2:] == ["--home", str(agents.orbit_home)], command
    assert agents.settings.stat().st_mode & 0o777 == 0o644

    before = snapshot(agents.home), snapshot(agents.orbit_home)
    out = agents.ok("plugin", "install", "claude")
    assert "nothing changed" in out
    assert (snapshot(agents.home), snapshot(agents.orbit_home)) == before

    agents.ok("plugin", "remove", "claude")
    assert agents.settings.read_text() == USER_SETTINGS
    assert sorted(p.name for p in (agents.home / ".claude" / "skills").iterdir()) == ["my-skill"]
    assert (own_skill / "SKILL.md").read_text().startswith("---\nname: my-skill")
    assert not (agents.orbit_home / "agent-kit").exists()


def test_claude_without_settings_creates_and_deletes_the_file(agents: Agents) -> None:
    agents.ok("plugin", "install", "claude")
    assert set(orbit_commands(json.loads(agents.settings.read_text()))) == {
        "SessionStart",
        "Stop",
        "SessionEnd",
    }
    agents.ok("plugin", "remove", "claude")
    assert not agents.settings.exists()
    assert not (agents.home / ".claude").exists()


def test_a_linked_settings_file_stays_a_link(agents: Agents, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(USER_SETTINGS)
    agents.settings.parent.mkdir()
    agents.settings.symlink_to(dotfiles)
    agents.ok("plugin", "install", "claude")
    assert agents.settings.is_symlink() and "SessionEnd" in orbit_commands(
        json.loads(dotfiles.read_text())
    )
    agents.ok("plugin", "remove", "claude")
    assert agents.settings.is_symlink() and dotfiles.read_text() == USER_SETTINGS


def test_plugin_without_an_action_is_one_line(agents: Agents) -> None:
    code, _, err = agents("plugin")
    assert code == 2 and err.count("\n") == 1


def test_a_broken_settings_file_is_refused_and_left_alone(agents: Agents) -> None:
    agents.settings.parent.mkdir()
    broken = '{\n  "model": "opus",\n  "hooks": {\n'
    agents.settings.write_text(broken)
    code, _, err = agents("plugin", "install", "claude")
    assert code == 6
    assert err.count("\n") == 1 and "not valid JSON" in err and "Traceback" not in err
    assert agents.settings.read_text() == broken
    assert not (agents.home / ".claude" / "skills").exists()


def test_a_users_own_skill_of_the_same_name_is_never_replaced(agents: Agents) -> None:
    mine = agents.home / ".agents" / "skills" / "orbit"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("mine")
    code, _, err = agents("plugin", "install", "codex")
    assert code == 5 and err.count("\n") == 1 and "not Orbit's" in err
    assert (mine / "SKILL.md").read_text() == "mine"
    assert not (agents.home / ".agents" / "skills" / "orbit-bench").exists()


def test_codex_pi_and_dsh_share_agents_skills(agents: Agents) -> None:
    for agent in ("codex", "pi", "dsh"):
        agents.ok("plugin", "install", agent)
    agents.ok("plugin", "install", "dsh", "--profile", "work")
    shared = agents.home / ".agents" / "skills" / "orbit"
    profile = agents.home / ".dsh" / "profiles" / "work" / "skills" / "orbit"
    assert (shared / "SKILL.md").is_file() and (profile / "SKILL.md").is_file()
    assert not (agents.home / ".claude").exists()  # codex, pi and dsh get no Claude hooks

    rows = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}
    assert rows["claude"]["installed"] is False
    assert all(rows[a]["installed"] for a in ("codex", "pi", "dsh", "dsh:work"))
    assert rows["codex"]["version"] == "0.1.0" and rows["codex"]["hooks"] is None

    agents.ok("plugin", "remove", "codex")
    assert shared.is_symlink(), "pi and dsh still use the shared link"
    agents.ok("plugin", "remove", "pi")
    agents.ok("plugin", "remove", "dsh")
    assert not shared.is_symlink() and not (agents.home / ".agents").exists()
    assert profile.is_symlink()
    agents.ok("plugin", "remove", "dsh", "--profile", "work")
    assert not profile.is_symlink()
    code, _, err = agents("plugin", "remove", "pi")
    assert code == 3 and "not installed" in err
    code, _, err = agents("plugin", "install", "codex", "--profile", "x")
    assert code == 2 and err.count("\n") == 1


def test_update_after_the_copy_changes(agents: Agents) -> None:
    agents.settings.parent.mkdir()
    agents.settings.write_text(USER_SETTINGS)
    agents.ok("plugin", "install", "claude")
    agents.ok("plugin", "install", "codex")
    out = agents.ok("plugin", "list")
    assert "STALE" not in out
    doctor = [c for c in _doctor(agents) if c["name"] == "agent plugin"]
    assert doctor and all(c["status"] == "OK" for c in doctor)

    canonical = agents.orbit_home / "agent-kit" / "current" / "skills" / "orbit" / "SKILL.md"
    canonical.write_text(canonical.read_text() + "\nan edit the package does not have\n")
    rows = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}
    assert rows["claude"]["stale"] and rows["codex"]["stale"]
    assert "STALE" in agents.ok("plugin", "list")
    warned = [c for c in _doctor(agents) if c["name"] == "agent plugin" and c["status"] == "WARN"]
    assert len(warned) == 2 and all(c["fix"] == "`orbit plugin update`" for c in warned)

    updated = agents.json("plugin", "update")["updated"]
    assert sorted(u["agent"] for u in updated) == ["claude", "codex"]
    assert "an edit" not in canonical.read_text()
    rows = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}
    assert not rows["claude"]["stale"] and not rows["codex"]["stale"] and rows["claude"]["hooks"]
    assert all(c["status"] == "OK" for c in _doctor(agents) if c["name"] == "agent plugin"), "fixed"
    # only one copy is kept
    kit = agents.orbit_home / "agent-kit"
    assert len([p for p in kit.iterdir() if p.is_dir() and not p.is_symlink()]) == 1


def test_hooks_taken_out_by_hand_are_reported_and_restored(agents: Agents) -> None:
    agents.ok("plugin", "install", "claude")
    agents.settings.write_text('{\n  "model": "opus"\n}\n')
    row = agents.json("plugin", "list")["agents"][0]
    assert row["agent"] == "claude" and row["hooks"] is False and row["stale"]
    agents.ok("plugin", "update")
    data = json.loads(agents.settings.read_text())
    assert data["model"] == "opus" and "SessionStart" in orbit_commands(data)
    agents.ok("plugin", "remove", "claude")
    assert agents.settings.read_text() == '{\n  "model": "opus"\n}\n'


def test_doctor_says_not_installed_as_information(agents: Agents) -> None:
    checks = [c for c in _doctor(agents) if c["name"] == "agent plugin"]
    assert len(checks) == 1 and checks[0]["status"] == "OK"
    assert "orbit plugin install" in checks[0]["detail"]


def _doctor(agents: Agents) -> list[dict[str, Any]]:
    from dataclasses import asdict

    from orbit.doctor import check_agents
    from orbit.store.home import Home

    home = Home.from_environ(agents.environ)
    return [asdict(c) for c in check_agents(home, agents.environ)]

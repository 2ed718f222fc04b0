"""`orbit plugin`: skills copied into each agent, Claude Code hooks merged into the user's
settings, and everything taken away again without touching what the user had."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import shutil
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
        copy = agents.home / ".claude" / "skills" / name
        assert copy.is_dir() and not copy.is_symlink()
        assert (copy / "SKILL.md").read_text().startswith("---\nname: " + name)
        assert not [p for p in copy.rglob("*") if p.is_symlink()]
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


# A layout no JSON writer reproduces: lists on one line, a key without a space, 1e3, a tab.
HAND_WRITTEN = """{
    "model":"opus",
    "permissions": { "allow": ["Bash(npm run lint)", "Read(~/.zshrc)"], "deny": [] },
    "cleanupPeriodDays": 1e3,
\t"env": {"DISABLE_TELEMETRY": "1"}
}
"""


def test_remove_puts_back_a_hand_written_settings_file_byte_for_byte(agents: Agents) -> None:
    agents.settings.parent.mkdir()
    agents.settings.write_text(HAND_WRITTEN)
    agents.ok("plugin", "install", "claude")
    assert "SessionStart" in orbit_commands(json.loads(agents.settings.read_text()))
    agents.ok("plugin", "update")
    agents.ok("plugin", "remove", "claude")
    assert agents.settings.read_text() == HAND_WRITTEN


def test_remove_keeps_what_the_user_changed_after_install(agents: Agents) -> None:
    agents.settings.parent.mkdir()
    agents.settings.write_text(HAND_WRITTEN)
    agents.ok("plugin", "install", "claude")
    data = json.loads(agents.settings.read_text())
    data["model"] = "sonnet"
    data["hooks"]["SessionStart"].append({"hooks": [{"type": "command", "command": "mine"}]})
    agents.settings.write_text(json.dumps(data, indent=2) + "\n")
    agents.ok("plugin", "remove", "claude")
    after = json.loads(agents.settings.read_text())
    assert after == {
        **json.loads(HAND_WRITTEN),
        "model": "sonnet",
        "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "mine"}]}]},
    }
    assert not (agents.orbit_home / "agent-kit").exists()


def test_a_settings_file_edited_around_orbits_hooks_is_not_put_back(agents: Agents) -> None:
    """The user edits the file while Orbit's hooks are in, then an update rewrites the hooks:
    the bytes from before the first install are no longer the user's file."""
    agents.settings.parent.mkdir()
    agents.settings.write_text(HAND_WRITTEN)
    agents.ok("plugin", "install", "claude")
    data = json.loads(agents.settings.read_text())
    data["model"] = "haiku"
    for groups in data["hooks"].values():  # as an older Orbit wrote them: without --home
        for g in groups:
            for h in g["hooks"]:
                h["command"] = h["command"].split(" --home ")[0]
    agents.settings.write_text(json.dumps(data, indent=2) + "\n")
    out = agents.ok("plugin", "update")
    assert "nothing changed" not in out
    agents.ok("plugin", "remove", "claude")
    assert json.loads(agents.settings.read_text()) == {**json.loads(HAND_WRITTEN), "model": "haiku"}


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
    (agents.home / ".dsh" / "profiles" / "work").mkdir(parents=True)  # dsh was run, has a profile
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
    assert (shared / "SKILL.md").is_file(), "pi and dsh still use the shared copy"
    agents.ok("plugin", "remove", "pi")
    agents.ok("plugin", "remove", "dsh")
    assert not shared.exists() and not (agents.home / ".agents").exists()
    assert (profile / "SKILL.md").is_file()
    agents.ok("plugin", "remove", "dsh", "--profile", "work")
    assert not profile.exists()
    code, _, err = agents("plugin", "remove", "pi")
    assert code == 3 and "not installed" in err
    code, _, err = agents("plugin", "install", "codex", "--profile", "x")
    assert code == 2 and err.count("\n") == 1


def test_dsh_that_is_not_there_is_named_and_nothing_is_created(agents: Agents) -> None:
    before = snapshot(agents.home)
    code, _, err = agents("plugin", "install", "dsh")
    assert code == 3 and err.count("\n") == 1, err
    assert "dsh not found" in err and "npm install -g @deepseek-ai/dsh" in err
    assert snapshot(agents.home) == before and not (agents.home / ".agents").exists()
    assert not agents.orbit_home.exists()

    dsh_home = agents.home / "dsh-home"
    (dsh_home / "profiles" / "work").mkdir(parents=True)
    agents.environ["DSH_HOME"] = str(dsh_home)
    code, _, err = agents("plugin", "install", "dsh", "--profile", "headless")
    assert code == 3 and err.count("\n") == 1, err
    assert f"no dsh profile headless in {dsh_home / 'profiles'}" in err and "work" in err
    assert not (dsh_home / "profiles" / "headless").exists()
    assert not agents.orbit_home.exists()

    agents.ok("plugin", "install", "dsh", "--profile", "work")
    assert (dsh_home / "profiles" / "work" / "skills" / "orbit" / "SKILL.md").is_file()


def test_dsh_on_path_is_dsh_installed(agents: Agents, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dsh").write_text("#!/bin/sh\n")
    (bin_dir / "dsh").chmod(0o755)
    agents.environ["PATH"] = f"{bin_dir}:{agents.environ['PATH']}"
    agents.ok("plugin", "install", "dsh")  # no ~/.dsh yet: the shared ~/.agents/skills
    assert (agents.home / ".agents" / "skills" / "orbit" / "SKILL.md").is_file()
    code, _, err = agents("plugin", "install", "dsh", "--profile", "work")
    assert code == 3 and "no dsh profile work" in err and "create it with dsh" in err


def _age(copy: Path) -> None:
    """Make `copy` look installed by an older Orbit: another version, another SKILL.md, and a
    record that matches it (so it is Orbit's unchanged copy, only old)."""
    marker = json.loads((copy / ".orbit-skill.json").read_text())
    text = (copy / "SKILL.md").read_text() + "\nwhat an older version said\n"
    (copy / "SKILL.md").write_text(text)
    marker["version"] = "0.0.1"
    marker["files"]["SKILL.md"] = hashlib.sha256(text.encode()).hexdigest()
    (copy / ".orbit-skill.json").write_text(json.dumps(marker))


def test_update_replaces_an_older_copy(agents: Agents) -> None:
    agents.settings.parent.mkdir()
    agents.settings.write_text(USER_SETTINGS)
    agents.ok("plugin", "install", "claude")
    agents.ok("plugin", "install", "codex")
    out = agents.ok("plugin", "list")
    assert "STALE" not in out
    doctor = [c for c in _doctor(agents) if c["name"] == "agent plugin"]
    assert doctor and all(c["status"] == "OK" for c in doctor)

    for root in (agents.home / ".claude", agents.home / ".agents"):
        _age(root / "skills" / "orbit")
    rows = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}
    assert rows["claude"]["stale"] and rows["codex"]["stale"]
    assert rows["claude"]["version"] == "0.0.1"
    assert "STALE" in agents.ok("plugin", "list")
    warned = [c for c in _doctor(agents) if c["name"] == "agent plugin" and c["status"] == "WARN"]
    assert len(warned) == 2 and all(c["fix"] == "`orbit plugin update`" for c in warned)

    updated = agents.json("plugin", "update")["updated"]
    assert sorted(u["agent"] for u in updated) == ["claude", "codex"]
    assert all(u["copied"] == ["orbit"] for u in updated)
    for root in (agents.home / ".claude", agents.home / ".agents"):
        skills = root / "skills"
        assert "older version" not in (skills / "orbit" / "SKILL.md").read_text()
        assert sorted(p.name for p in skills.iterdir()) == ["orbit", "orbit-bench"], "no leftovers"
    rows = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}
    assert not rows["claude"]["stale"] and not rows["codex"]["stale"] and rows["claude"]["hooks"]
    assert all(c["status"] == "OK" for c in _doctor(agents) if c["name"] == "agent plugin"), "fixed"


def test_a_copy_the_user_changed_is_never_replaced_nor_deleted(agents: Agents) -> None:
    agents.ok("plugin", "install", "codex")
    copy = agents.home / ".agents" / "skills" / "orbit"
    (copy / "references" / "mine.md").write_text("my own notes\n")
    rows = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}
    assert rows["codex"]["stale"]
    code, _, err = agents("plugin", "update")
    assert code == 5 and err.count("\n") == 1 and "changed since Orbit installed it" in err
    assert "references/mine.md" in err and "Traceback" not in err
    out = agents.ok("plugin", "remove", "codex")
    assert "kept orbit" in out
    assert (copy / "references" / "mine.md").read_text() == "my own notes\n"
    assert not (copy / ".orbit-skill.json").exists(), "now the user's own"
    assert not (agents.home / ".agents" / "skills" / "orbit-bench").exists()


def test_installed_skills_outlive_their_home(agents: Agents, tmp_path: Path) -> None:
    agents.ok("plugin", "install", "claude")
    skills = agents.home / ".claude" / "skills"
    before = snapshot(skills)
    shutil.rmtree(agents.orbit_home)
    assert snapshot(skills) == before
    assert (skills / "orbit" / "references" / "docs" / "cli.md").is_file()


def test_skills_shared_by_two_homes(agents: Agents, tmp_path: Path) -> None:
    """Two homes install into the one ~/.agents/skills (Codex from one, pi from the other: one
    Codex configuration has one home's MCP server): the copy is removed with the last of them,
    and a home deleted meanwhile does not keep it forever."""
    other = {**agents.environ, "ORBIT_HOME": str(tmp_path / "second-home")}
    agents.ok("plugin", "install", "codex")
    assert main(["plugin", "install", "pi"], _env(other)) == 0
    copy = agents.home / ".agents" / "skills" / "orbit"
    users = json.loads((copy / ".orbit-skill.json").read_text())["users"]
    assert sorted(u["home"] for u in users) == sorted([str(agents.orbit_home), other["ORBIT_HOME"]])
    agents.ok("plugin", "remove", "codex")
    assert (copy / "SKILL.md").is_file(), "the second home still uses it"
    assert main(["plugin", "remove", "pi"], _env(other)) == 0
    assert not list((agents.home / ".agents" / "skills").iterdir())

    agents.ok("plugin", "install", "codex")
    assert main(["plugin", "install", "pi"], _env(other)) == 0
    shutil.rmtree(other["ORBIT_HOME"])
    agents.ok("plugin", "remove", "codex")
    assert not copy.exists()


def _env(environ: dict[str, str]) -> Env:
    return Env(environ=dict(environ), stdout=io.StringIO(), stderr=io.StringIO())


def test_an_older_install_is_upgraded_in_place(agents: Agents) -> None:
    """What Orbit wrote before skills were copied and hooks named their home: links into
    ORBIT_HOME/agent-kit/current, hook commands without --home. Installing again leaves one
    handler per event, real copies, no old kit; removing still restores the user's file."""
    kit = agents.orbit_home / "agent-kit"
    old_copy = kit / "0.1.0-abc-123" / "skills"
    shutil.copytree(Path(__file__).resolve().parents[1] / "skills" / "orbit", old_copy / "orbit")
    (kit / "current").symlink_to("0.1.0-abc-123")
    skills = agents.home / ".claude" / "skills"
    skills.mkdir(parents=True)
    for name in ("orbit", "orbit-bench"):
        (skills / name).symlink_to(kit / "current" / "skills" / name)
    old = json.loads(USER_SETTINGS)
    for event, timeout in (("SessionStart", 10), ("Stop", 30), ("SessionEnd", 30)):
        kind = "session-start" if event == "SessionStart" else "session-end"
        handler = {"type": "command", "command": f"/usr/bin/python3 -m orbit hook {kind}"}
        old["hooks"].setdefault(event, []).append({"hooks": [{**handler, "timeout": timeout}]})
    agents.settings.write_text(json.dumps(old, indent=2, ensure_ascii=False) + "\n")
    manifest = {
        "claude": {
            "agent": "claude",
            "profile": None,
            "skills_dir": str(skills),
            "skills": ["orbit", "orbit-bench"],
            "settings": str(agents.settings),
            "created_dirs": [],
            "created_keys": ["hooks.SessionEnd", "hooks.Stop"],
            "created_file": False,
        }
    }
    (kit / "installed.json").write_text(json.dumps({"format": 1, "agents": manifest}))
    assert agents.json("plugin", "list")["agents"][0]["stale"]

    agents.ok("plugin", "install", "claude")
    commands = orbit_commands(json.loads(agents.settings.read_text()))
    assert {e: len(c) for e, c in commands.items() if c} == {
        "SessionStart": 1,
        "Stop": 1,
        "SessionEnd": 1,
    }
    assert all(c.endswith(f"--home {agents.orbit_home}") for c in all_commands(agents.settings))
    assert all(
        (skills / n).is_dir() and not (skills / n).is_symlink() for n in ("orbit", "orbit-bench")
    )
    assert sorted(p.name for p in kit.iterdir()) == ["installed.json"], "the old copy is gone"
    assert not agents.json("plugin", "list")["agents"][0]["stale"]

    agents.ok("plugin", "remove", "claude")
    assert agents.settings.read_text() == USER_SETTINGS
    assert not skills.exists() or not list(skills.iterdir())


def test_hooks_of_another_home_in_use_are_not_taken_over(agents: Agents, tmp_path: Path) -> None:
    first = {**agents.environ, "ORBIT_HOME": str(tmp_path / "first-home")}
    assert main(["plugin", "install", "claude"], _env(first)) == 0
    code, _, err = agents("plugin", "install", "claude")
    assert code == 5 and err.count("\n") == 1 and "first-home" in err and "plugin remove" in err
    assert not agents.orbit_home.exists(), "nothing written"

    shutil.rmtree(first["ORBIT_HOME"])  # that home is gone: its hooks are replaced
    agents.ok("plugin", "install", "claude")
    commands = all_commands(agents.settings)
    assert len(commands) == 3 and all(c.endswith(f"--home {agents.orbit_home}") for c in commands)


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

"""`orbit plugin` and Orbit's MCP server: registered in Claude Code's ~/.claude.json and Codex's
config.toml, listed, refreshed and taken away again without touching what the user had; and the
real `claude` and `codex` CLIs start the server so registered."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from test_agent_clis import install_real_clis
from test_plugin import Agents, _env, snapshot

from orbit.cli import main

# ~/.claude.json as Claude Code keeps it: its own state, a user server, a project's servers.
CLAUDE_JSON = """{
  "numStartups": 12,
  "theme": "dark",
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {
        "GITHUB_TOKEN": "ghp_example"
      }
    }
  },
  "projects": {
    "/work/app": {
      "allowedTools": [],
      "mcpServers": {}
    }
  }
}
"""

# A Codex config.toml with comments, a server with a sub-table, a profile after the servers,
# and no newline at its end: Orbit must not reformat any of it.
CONFIG_TOML = """# my Codex settings
model = "gpt-5.1-codex"   # the default
approval_policy = "on-request"

[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "0"]

[mcp_servers.docs.env]
DOCS_TOKEN = "t0k"

[profiles.fast]
model = "gpt-5.1-codex-mini\""""

OFFLINE = {  # no network here: Claude Code's updater and telemetry off (Codex's `mcp` and
    # `app-server` commands reach none)
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "NO_COLOR": "1",
}


@pytest.fixture
def agents(tmp_path: Path) -> Agents:
    return Agents(tmp_path)


def claude_json(agents: Agents) -> Path:
    return agents.home / ".claude.json"


def config_toml(agents: Agents) -> Path:
    return agents.home / ".codex" / "config.toml"


def write_user_configs(agents: Agents) -> None:
    claude_json(agents).write_text(CLAUDE_JSON)
    config_toml(agents).parent.mkdir()
    config_toml(agents).write_text(CONFIG_TOML)
    config_toml(agents).chmod(0o640)


def expected_args(agents: Agents) -> list[str]:
    return ["-P", "-m", "orbit", "mcp", "--home", str(agents.orbit_home)]


def test_install_registers_and_remove_restores_both_files_byte_for_byte(agents: Agents) -> None:
    write_user_configs(agents)
    before = snapshot(agents.home)
    out = agents.ok("plugin", "install", "claude") + agents.ok("plugin", "install", "codex")
    assert f"MCP server `orbit` in {claude_json(agents)}, serving {agents.orbit_home}" in out
    assert f"MCP server `orbit` in {config_toml(agents)}" in out

    servers = json.loads(claude_json(agents).read_text())["mcpServers"]
    assert list(servers) == ["github", "orbit"]
    assert servers["orbit"] == {
        "type": "stdio",
        "command": sys.executable,
        "args": expected_args(agents),
        "env": {},
    }
    text = config_toml(agents).read_text()
    assert text.startswith(CONFIG_TOML + "\n\n[mcp_servers.orbit]\n"), "appended, nothing else"
    codex = tomllib.loads(text)
    assert codex["mcp_servers"]["orbit"]["command"] == sys.executable
    assert codex["mcp_servers"]["orbit"]["args"] == expected_args(agents)
    assert "DOCKER_HOST" in codex["mcp_servers"]["orbit"]["env_vars"]
    assert codex["mcp_servers"]["docs"]["env"] == {"DOCS_TOKEN": "t0k"}
    assert codex["profiles"] == {"fast": {"model": "gpt-5.1-codex-mini"}}

    again = agents.json("plugin", "install", "codex")
    assert not again["mcp_changed"] and again["mcp"] == str(config_toml(agents))

    rows = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}
    assert rows["claude"]["mcp"] == {
        "config": str(claude_json(agents)),
        "registered": True,
        "home": str(agents.orbit_home),
        "stale": False,
    }
    assert rows["codex"]["mcp"]["registered"] and not rows["codex"]["stale"]
    assert rows["pi"]["mcp"] is None
    listed = agents.ok("plugin", "list")
    assert "codex        installed 0.1.0, MCP server (" in listed

    assert agents.json("plugin", "remove", "claude")["mcp_removed"]
    assert "skills, hooks and MCP server removed" in agents.ok("plugin", "remove", "codex")
    assert snapshot(agents.home) == before
    assert config_toml(agents).stat().st_mode & 0o777 == 0o640
    assert not (agents.orbit_home / "agent-kit").exists()


def test_missing_files_are_created_and_removed_again(agents: Agents) -> None:
    agents.ok("plugin", "install", "claude")
    agents.ok("plugin", "install", "codex")
    assert json.loads(claude_json(agents).read_text()) == {
        "mcpServers": {
            "orbit": {
                "type": "stdio",
                "command": sys.executable,
                "args": expected_args(agents),
                "env": {},
            }
        }
    }
    assert config_toml(agents).read_text().startswith("[mcp_servers.orbit]\ncommand = ")
    assert claude_json(agents).stat().st_mode & 0o777 == 0o600
    agents.ok("plugin", "remove", "claude")
    agents.ok("plugin", "remove", "codex")
    assert sorted(p.name for p in agents.home.iterdir()) == [], "no file or folder left"


def test_changes_made_after_install_stay_when_orbits_server_goes(agents: Agents) -> None:
    """Claude Code rewrites ~/.claude.json as it runs, and people edit config.toml by hand:
    remove then takes out Orbit's server (and the table's text) only."""
    write_user_configs(agents)
    agents.ok("plugin", "install", "claude")
    agents.ok("plugin", "install", "codex")
    data = json.loads(claude_json(agents).read_text())
    data["numStartups"] = 13
    data["mcpServers"]["later"] = {"type": "stdio", "command": "later", "args": [], "env": {}}
    claude_json(agents).write_text(json.dumps(data, indent=2))
    added = '\n[mcp_servers.later]\ncommand = "later"\n'
    with config_toml(agents).open("a") as f:
        f.write(added)

    agents.ok("plugin", "remove", "claude")
    agents.ok("plugin", "remove", "codex")
    left = json.loads(claude_json(agents).read_text())
    assert left["numStartups"] == 13 and list(left["mcpServers"]) == ["github", "later"]
    assert left["projects"] == json.loads(CLAUDE_JSON)["projects"]
    assert config_toml(agents).read_text() == CONFIG_TOML + "\n" + added


def test_a_server_edited_by_hand_is_stale_and_update_refreshes_it(agents: Agents) -> None:
    write_user_configs(agents)
    agents.ok("plugin", "install", "codex")
    text = config_toml(agents).read_text()
    config_toml(agents).write_text(text.replace(sys.executable, "/usr/bin/python3"))
    row = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}["codex"]
    assert row["stale"] and row["mcp"]["stale"] and row["mcp"]["registered"]
    assert "STALE" in agents.ok("plugin", "list")

    updated = agents.json("plugin", "update")["updated"]
    assert [u["mcp_changed"] for u in updated] == [True]
    assert config_toml(agents).read_text() == text
    row = {r["agent"]: r for r in agents.json("plugin", "list")["agents"]}["codex"]
    assert not row["stale"]
    agents.ok("plugin", "remove", "codex")
    # Changed by hand since install, the file has no bytes from before to put back: the table
    # and its blank line go, the newline install put after the user's last line stays.
    assert config_toml(agents).read_text() == CONFIG_TOML + "\n"


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        (".claude.json", '{"mcpServers": {"x": }', ".claude.json is not valid JSON (line 1)"),
        (".claude.json", '{"mcpServers": []}', "`mcpServers` is not a JSON object"),
        (".codex/config.toml", 'model = "o3\n', "config.toml is not valid TOML (Illegal character"),
        (
            ".codex/config.toml",
            "mcp_servers = { a = { command = 'a' } }\n",
            "would make it invalid TOML",
        ),
        (".claude.json", b'{"a": "\xff"}', ".claude.json is not UTF-8 text"),
        (".codex/config.toml", b'a = "\xff"', "config.toml is not UTF-8 text"),
    ],
)
def test_a_config_orbit_cannot_change_is_one_line_and_nothing_is_touched(
    agents: Agents, name: str, text: str | bytes, said: str
) -> None:
    path = agents.home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = snapshot(agents.home)
    code, out, err = agents("plugin", "install", "claude" if name == ".claude.json" else "codex")
    assert code != 0 and out == ""
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert snapshot(agents.home) == before and not agents.orbit_home.exists()


def test_a_server_named_orbit_that_is_not_orbits_is_never_replaced(agents: Agents) -> None:
    mine = {"mcpServers": {"orbit": {"type": "stdio", "command": "my-orbit", "args": []}}}
    claude_json(agents).write_text(json.dumps(mine))
    code, _, err = agents("plugin", "install", "claude")
    assert code != 0 and "already has an MCP server named 'orbit' that Orbit did not" in err
    assert json.loads(claude_json(agents).read_text()) == mine
    assert not (agents.home / ".claude").exists()


def test_one_home_per_configuration(agents: Agents, tmp_path: Path) -> None:
    """Like the hooks: a second home refuses while the first still records its server, with
    the fix in one line; a home deleted since is taken over."""
    write_user_configs(agents)
    second = {**agents.environ, "ORBIT_HOME": str(tmp_path / "second-home")}
    agents.ok("plugin", "install", "codex")
    code, _, err = as_home(second, "plugin", "install", "codex")
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert f"has Orbit's MCP server for ORBIT_HOME={agents.orbit_home}" in err
    assert "orbit plugin remove codex` first" in err
    listed = json.loads(as_home(second, "plugin", "list", "--json")[1])
    row = {r["agent"]: r for r in listed["agents"]}["codex"]
    assert not row["installed"] and not Path(second["ORBIT_HOME"], "agent-kit").exists()
    first = agents.json("plugin", "list")["agents"][1]
    assert first["mcp"]["registered"] and first["mcp"]["home"] == str(agents.orbit_home)

    shutil.rmtree(agents.orbit_home)
    left_behind = config_toml(agents).read_text()  # the deleted home's server
    assert as_home(second, "plugin", "install", "codex")[0] == 0
    served = tomllib.loads(config_toml(agents).read_text())["mcp_servers"]["orbit"]["args"]
    assert served[-1] == second["ORBIT_HOME"]
    assert as_home(second, "plugin", "remove", "codex")[0] == 0
    assert config_toml(agents).read_text() == left_behind, "as it was before this install"


def as_home(environ: dict[str, str], *args: str) -> tuple[int, str, str]:
    env = _env(environ)
    code = main(list(args), env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return code, env.stdout.getvalue(), env.stderr.getvalue()


def test_a_registration_by_hand_is_taken_over_and_put_back(agents: Agents) -> None:
    """`claude mcp add` / `codex mcp add` of the same server (docs/agents.md): install leaves
    one exactly as it would write it, takes over another, and remove leaves the file as it
    was."""
    by_hand = {"type": "stdio", "command": sys.executable, "args": expected_args(agents), "env": {}}
    claude_json(agents).write_text(json.dumps({"mcpServers": {"orbit": by_hand}}, indent=2))
    config_toml(agents).parent.mkdir()
    args = ", ".join(json.dumps(a) for a in expected_args(agents))
    config_toml(agents).write_text(  # as `codex mcp add` writes it: no env_vars
        f'[mcp_servers.orbit]\ncommand = "/usr/bin/python3"\nargs = [{args}]\n'
    )
    before = snapshot(agents.home)
    assert not agents.json("plugin", "install", "claude")["mcp_changed"]
    assert agents.json("plugin", "install", "codex")["mcp_changed"]
    codex = tomllib.loads(config_toml(agents).read_text())["mcp_servers"]["orbit"]
    assert codex["command"] == sys.executable and "env_vars" in codex
    assert not agents.json("plugin", "list")["agents"][1]["stale"]
    agents.ok("plugin", "remove", "claude")
    agents.ok("plugin", "remove", "codex")
    assert snapshot(agents.home) == before


# The real CLIs ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_clis() -> Path:
    return install_real_clis()


def cli(agents: Agents, clis: Path, *args: str, stdin: str | None = None) -> str:
    environ = {
        **agents.environ,
        **OFFLINE,
        "PATH": f"{clis / 'bin'}:{agents.environ['PATH']}",
        # The server is the Orbit under test, which only PYTHONPATH names (an installed Orbit
        # needs nothing: its interpreter is the command).
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    proc = subprocess.run(
        list(args),
        cwd=agents.home,
        env=environ,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{args}: {proc.stderr[-2000:]}"
    return proc.stdout


def codex_servers(agents: Agents, clis: Path) -> list[dict[str, Any]]:
    """What Codex's app server reports after starting every configured MCP server
    (`mcpServerStatus/list`: each server's tools, or why it failed to start). `codex mcp list`
    only reads the configuration; this is the check that starts the server."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"clientInfo": {"name": "t", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "mcpServerStatus/list", "params": {}},
    ]
    script = (
        "import subprocess, sys, json\n"
        "pipe = subprocess.PIPE\n"
        "p = subprocess.Popen(sys.argv[1:], stdin=pipe, stdout=pipe, text=True)\n"
        "p.stdin.write(sys.stdin.read()); p.stdin.flush()\n"
        "for line in p.stdout:\n"
        "    if json.loads(line).get('id') == 1:\n"
        "        print(line, end=''); break\n"
        "p.kill()\n"
    )
    # Codex passes a server a few variables only: PYTHONPATH reaches the Orbit under test
    # through this override of the command line, the file stays as install wrote it.
    passed = 'mcp_servers.orbit.env_vars=["PYTHONPATH"]'
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    out = cli(
        agents, clis, sys.executable, "-c", script, "codex", "app-server", "-c", passed, stdin=stdin
    )
    return json.loads(out)["result"]["data"]


def test_the_real_claude_and_codex_start_the_registered_server(
    agents: Agents, real_clis: Path
) -> None:
    write_user_configs(agents)
    toml_before = config_toml(agents).read_bytes()
    agents.ok("plugin", "install", "claude")
    agents.ok("plugin", "install", "codex")

    listed = cli(agents, real_clis, "claude", "mcp", "list")
    line = next(x for x in listed.splitlines() if x.startswith("orbit: "))
    assert f"-m orbit mcp --home {agents.orbit_home}" in line and "✔ Connected" in line, listed
    got = cli(agents, real_clis, "claude", "mcp", "get", "orbit")
    assert "Scope: User config" in got and "Status: ✔ Connected" in got, got

    listed = json.loads(cli(agents, real_clis, "codex", "mcp", "list", "--json"))
    orbit = next(s for s in listed if s["name"] == "orbit")
    assert orbit["enabled"] and orbit["transport"]["args"] == expected_args(agents), listed
    got = cli(agents, real_clis, "codex", "mcp", "get", "orbit")
    assert f"args: -P -m orbit mcp --home {agents.orbit_home}" in got, got
    status = {s["name"]: s for s in codex_servers(agents, real_clis)}
    assert status["orbit"]["serverInfo"]["name"] == "orbit", status["orbit"].get("toolsError")
    assert {"ps", "show", "run"} <= set(status["orbit"]["tools"])

    # Claude Code keeps its own state in the file (first start, user id, …, and it drops
    # settings it holds at their default): remove takes out Orbit's server and nothing else.
    expected = json.loads(claude_json(agents).read_text())
    del expected["mcpServers"]["orbit"]
    agents.ok("plugin", "remove", "claude")
    agents.ok("plugin", "remove", "codex")
    assert json.loads(claude_json(agents).read_text()) == expected
    assert expected["mcpServers"] == json.loads(CLAUDE_JSON)["mcpServers"]
    assert config_toml(agents).read_bytes() == toml_before
    listed = cli(agents, real_clis, "claude", "mcp", "list")
    assert "orbit" not in listed and "github" in listed
    names = [
        s["name"] for s in json.loads(cli(agents, real_clis, "codex", "mcp", "list", "--json"))
    ]
    assert names == ["docs"]


def test_claude_config_dir_is_where_the_real_claude_reads_it(
    agents: Agents, real_clis: Path, tmp_path: Path
) -> None:
    config = tmp_path / "claude-config"
    agents.environ["CLAUDE_CONFIG_DIR"] = str(config)
    agents.ok("plugin", "install", "claude")
    assert (config / ".claude.json").is_file() and not claude_json(agents).exists()
    assert "Status: ✔ Connected" in cli(agents, real_clis, "claude", "mcp", "get", "orbit")
    agents.ok("plugin", "remove", "claude")
    assert "orbit" not in cli(agents, real_clis, "claude", "mcp", "list")


def test_doctor_names_the_mcp_server_and_warns_when_it_is_gone(agents: Agents) -> None:
    from dataclasses import asdict

    from orbit.doctor import check_agents
    from orbit.store.home import Home

    agents.ok("plugin", "install", "codex")
    home = Home.from_environ(agents.environ)
    (codex,) = [asdict(c) for c in check_agents(home, agents.environ) if "codex" in c.detail]
    assert codex["status"] == "OK" and codex["detail"].endswith(", MCP server")
    config_toml(agents).write_text("")  # taken out by hand
    (codex,) = [asdict(c) for c in check_agents(home, agents.environ) if "codex" in c.detail]
    assert codex["status"] == "WARN" and "MCP server missing (stale)" in codex["detail"]
    assert codex["fix"] == "`orbit plugin update`"
    agents.ok("plugin", "update")
    assert "orbit" in tomllib.loads(config_toml(agents).read_text())["mcp_servers"]


def test_remove_refuses_a_broken_configuration_before_changing_anything(agents: Agents) -> None:
    agents.ok("plugin", "install", "codex")
    config_toml(agents).write_text(config_toml(agents).read_text() + "oops = \n")
    before = snapshot(agents.home), snapshot(agents.orbit_home)
    code, _, err = agents("plugin", "remove", "codex")
    assert code == 6 and "config.toml is not valid TOML" in err and len(err.splitlines()) == 1
    assert (snapshot(agents.home), snapshot(agents.orbit_home)) == before

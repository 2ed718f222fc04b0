"""The stand-in `claude` and `codex` CLIs (tests/agent_standins.py, docs/testing.md).

They run on the host (Python 3.11) and inside orbit-test/python:3 (Debian's python3-minimal),
mounted read-only from an npm-like install, as a non-root user with HOME on a tmpfs, the way
`orbit run --auth` runs the real CLIs. Each test checks what Orbit relies on: versions, the root
guard, credentials and exit codes, transcript and rollout paths and line shapes, a round trip
through a real local provider, the login flows, and that no credential reaches a file.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import stat
from pathlib import Path
from uuid import uuid4

import pytest
from agent_standins import (
    assert_no_secret,
    install,
    provider_server,
    read_jsonl,
    run_container,
    run_host,
    shared_dir,
)

ANTHROPIC_KEY = "sk-ant-api03-standin-" + secrets.token_hex(12)
OPENAI_KEY = "sk-proj-standin-" + secrets.token_hex(12)
SESSION = "7d1c0b9e-3f4a-4e8b-9a21-5c6d7e8f9a01"
TOOLS_PROMPT = (
    "create notes/a.txt containing hello\n"
    "edit notes/a.txt: hello -> goodbye\n"
    "run: cat notes/a.txt; id -u\n"
    "Reply with exactly: all done"
)


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    """An npm-like install of both stand-ins (world-readable, for any container user)."""
    prefix = tmp_path / "agents"
    prefix.mkdir()
    install(prefix)
    return prefix


# --- install and versions ------------------------------------------------------------------------


def test_install_is_an_npm_global_layout(agents: Path) -> None:
    modules = agents / "lib" / "node_modules"
    claude_pkg = json.loads((modules / "@anthropic-ai/claude-code/package.json").read_text())
    codex_pkg = json.loads((modules / "@openai/codex/package.json").read_text())
    assert claude_pkg == {
        "name": "@anthropic-ai/claude-code",
        "version": "2.1.332",
        "bin": {"claude": "bin/claude.exe"},
    }
    assert codex_pkg == {
        "name": "@openai/codex",
        "version": "0.171.0",
        "bin": {"codex": "bin/codex.js"},
    }
    assert (
        os.readlink(agents / "bin/claude")
        == "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
    )
    assert os.readlink(agents / "bin/codex") == "../lib/node_modules/@openai/codex/bin/codex.js"
    for exe in ("@anthropic-ai/claude-code/bin/claude.exe", "@openai/codex/bin/codex.js"):
        path = modules / exe
        assert stat.S_IMODE(path.stat().st_mode) == 0o755
        assert path.read_text().startswith("#!/usr/bin/env python3\n")


def test_versions_on_the_host_and_in_the_container(
    agents: Path, tmp_path: Path, python_image: str
) -> None:
    env = {"HOME": str(tmp_path)}
    assert (
        run_host(agents, "claude", "--version", env=env, cwd=tmp_path).stdout
        == "2.1.332 (Claude Code)\n"
    )
    codex = run_host(agents, "codex", "--version", env=env, cwd=tmp_path)
    assert (codex.returncode, codex.stdout) == (0, "codex-cli 0.171.0\n")
    assert (tmp_path / ".codex" / "tmp").is_dir()  # like the real one, even for --version
    done = run_container(
        python_image, agents, "claude --version && codex --version && ls -d ~/.codex/tmp"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "2.1.332 (Claude Code)",
        "codex-cli 0.171.0",
        "/home/agent/.codex/tmp",
    ]


# --- claude --------------------------------------------------------------------------------------


def test_claude_flag_and_credential_errors(agents: Path, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    unknown = run_host(agents, "claude", "-p", "--frobnicate", "hi", env=env, cwd=tmp_path)
    assert (unknown.returncode, unknown.stderr) == (1, "error: unknown option '--frobnicate'\n")
    stream = run_host(
        agents, "claude", "-p", "--output-format", "stream-json", "hi", env=env, cwd=tmp_path
    )
    assert stream.returncode == 1
    assert (
        stream.stderr
        == "Error: When using --print, --output-format=stream-json requires --verbose\n"
    )
    anonymous = run_host(agents, "claude", "-p", "hi", env=env, cwd=tmp_path)
    assert (anonymous.returncode, anonymous.stdout) == (1, "Not logged in · Please run /login\n")
    as_json = run_host(
        agents, "claude", "-p", "--output-format", "json", "hi", env=env, cwd=tmp_path
    )
    result = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert (result["type"], result["is_error"], result["result"]) == (
        "result",
        True,
        "Not logged in · Please run /login",
    )
    logged_in = {**env, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    piped = run_host(
        agents, "claude", "-p", env=logged_in, cwd=tmp_path, stdin="Reply with exactly: piped"
    )
    assert (piped.returncode, piped.stdout) == (0, "piped\n")
    turns = run_host(
        agents, "claude", "-p", "--max-turns", "1", TOOLS_PROMPT, env=logged_in, cwd=tmp_path
    )
    assert (turns.returncode, turns.stdout) == (1, "Error: Reached max turns (1)")
    as_json = run_host(
        agents,
        "claude",
        "-p",
        "--max-turns",
        "1",
        "--output-format",
        "json",
        TOOLS_PROMPT,
        env=logged_in,
        cwd=tmp_path,
    )
    result = json.loads(as_json.stdout)
    assert (result["subtype"], result["is_error"], result["num_turns"]) == (
        "error_max_turns",
        True,
        2,
    )


def test_claude_root_guard(agents: Path, tmp_path: Path, python_image: str) -> None:
    key = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    script = 'claude -p {flags} "Reply with exactly: ran"; echo "rc=$?"'
    refusal = "--dangerously-skip-permissions cannot be used with root/sudo privileges"
    for flags in ("--dangerously-skip-permissions", "--permission-mode bypassPermissions"):
        root = run_container(python_image, agents, script.format(flags=flags), env=key, user="0:0")
        assert root.stdout == "rc=1\n" and refusal in root.stderr
    sandbox = {**key, "IS_SANDBOX": "1"}
    root_ok = run_container(
        python_image,
        agents,
        script.format(flags="--dangerously-skip-permissions"),
        env=sandbox,
        user="0:0",
    )
    assert root_ok.stdout == "ran\nrc=0\n", root_ok.stderr
    bubble = {**key, "CLAUDE_CODE_BUBBLEWRAP": "1"}
    root_bwrap = run_container(
        python_image,
        agents,
        script.format(flags="--dangerously-skip-permissions"),
        env=bubble,
        user="0:0",
    )
    assert root_bwrap.stdout == "ran\nrc=0\n"
    user_ok = run_container(
        python_image, agents, script.format(flags="--dangerously-skip-permissions"), env=key
    )
    assert user_ok.stdout == "ran\nrc=0\n", user_ok.stderr


def test_claude_credential_precedence_reaches_the_provider(agents: Path, tmp_path: Path) -> None:
    token, oauth, stored = (
        f"standin-{name}-" + secrets.token_hex(8) for name in ("gw", "oat", "file")
    )
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {"accessToken": stored}}))
    with provider_server([ANTHROPIC_KEY, token, oauth, stored]) as server:
        base = {
            "HOME": str(tmp_path),
            "CLAUDE_CONFIG_DIR": str(cfg),
            "ANTHROPIC_BASE_URL": server.url,
        }
        oauth_beta = "claude-code-20250219,oauth-2025-04-20"
        # (extra env, headers the request must carry, headers it must not). Both the gateway
        # token and the API key are sent when both are set, as the real CLI does.
        cases: list[tuple[dict[str, str], dict[str, str], tuple[str, ...]]] = [
            (
                {"ANTHROPIC_AUTH_TOKEN": token, "ANTHROPIC_API_KEY": ANTHROPIC_KEY},
                {"authorization": f"Bearer {token}", "x-api-key": ANTHROPIC_KEY},
                (),
            ),
            (
                {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "CLAUDE_CODE_OAUTH_TOKEN": oauth},
                {"x-api-key": ANTHROPIC_KEY},
                ("authorization",),
            ),
            (
                {"CLAUDE_CODE_OAUTH_TOKEN": oauth},
                {"authorization": f"Bearer {oauth}", "anthropic-beta": oauth_beta},
                ("x-api-key",),
            ),
            ({}, {"authorization": f"Bearer {stored}", "anthropic-beta": oauth_beta}, ()),
        ]
        for extra, present, absent in cases:
            done = run_host(
                agents,
                "claude",
                "-p",
                "Reply with exactly: via provider",
                env={**base, **extra},
                cwd=tmp_path,
            )
            assert (done.returncode, done.stdout) == (0, "via provider\n"), done.stderr
            request = server.requests[-1]
            assert request.path == "/v1/messages"
            assert present.items() <= request.headers.items()
            assert not set(absent) & set(request.headers)
            assert request.headers["anthropic-version"] == "2023-06-01"
            assert {"model", "max_tokens", "messages"} <= set(request.body)
        # A refused bearer token reads "not logged in"; a refused API key "invalid".
        refused = run_host(
            agents, "claude", "-p", "hi", env={**base, "ANTHROPIC_AUTH_TOKEN": "bad"}, cwd=tmp_path
        )
        assert (refused.returncode, refused.stdout) == (1, "Not logged in · Please run /login\n")
    # Only the file the test wrote holds a credential; the transcripts hold none.
    (cfg / ".credentials.json").unlink()
    for secret in (token, oauth, stored, ANTHROPIC_KEY):
        assert_no_secret(secret, cfg)


def test_claude_transcript_in_a_container(agents: Path, tmp_path: Path, python_image: str) -> None:
    config = shared_dir(tmp_path / "claude")
    workspace = shared_dir(tmp_path / "workspace")
    trace = shared_dir(tmp_path / "trace")
    done = run_container(
        python_image,
        agents,
        f"cd /workspace && claude -p --verbose --output-format stream-json --session-id {SESSION}"
        f" --dangerously-skip-permissions --model claude-sonnet-4-5 '{TOOLS_PROMPT}\nrun: env'",
        env={
            "CLAUDE_CONFIG_DIR": "/orbit/claude",
            "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
            "STANDIN_TRACE": "/trace/claude.json",
            "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB": "1",
        },
        mounts={config: "/orbit/claude", workspace: "/workspace", trace: "/trace"},
    )
    assert done.returncode == 0, done.stderr
    stream = [json.loads(line) for line in done.stdout.splitlines()]
    assert stream[0]["type"] == "system" and stream[0]["subtype"] == "init"
    assert stream[0]["session_id"] == SESSION and stream[0]["model"] == "claude-sonnet-4-5"
    assert stream[-1]["type"] == "result" and stream[-1]["subtype"] == "success"
    assert (stream[-1]["result"], stream[-1]["num_turns"], stream[-1]["is_error"]) == (
        "all done",
        5,
        False,
    )
    assert (workspace / "notes" / "a.txt").read_text() == "goodbye\n"

    transcript = config / "projects" / "-workspace" / f"{SESSION}.jsonl"
    lines = read_jsonl(transcript)
    entries = [line for line in lines if line["type"] in ("user", "assistant")]
    assert entries[0]["parentUuid"] is None and entries[0]["message"] == {
        "role": "user",
        "content": TOOLS_PROMPT + "\nrun: env",
    }
    for before, after in itertools.pairwise(entries):
        assert after["parentUuid"] == before["uuid"]
    for entry in entries:
        assert entry["sessionId"] == SESSION and entry["cwd"] == "/workspace"
        assert entry["version"] == "2.1.332" and entry["isSidechain"] is False
        assert entry["userType"] == "external" and "gitBranch" in entry
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["timestamp"])
    uses = [
        e
        for e in entries
        if e["type"] == "assistant" and e["message"]["content"][0]["type"] == "tool_use"
    ]
    assert [u["message"]["content"][0]["name"] for u in uses] == ["Write", "Edit", "Bash", "Bash"]
    message = uses[0]["message"]
    assert set(message) >= {"id", "type", "role", "model", "content", "stop_reason", "usage"}
    assert set(message["usage"]) >= {
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    }
    results = [e for e in entries if e["type"] == "user" and "toolUseResult" in e]
    assert len(results) == 4
    assert results[2]["message"]["content"][0]["content"] == "goodbye\n1234"
    assert (
        results[2]["message"]["content"][0]["tool_use_id"] == uses[2]["message"]["content"][0]["id"]
    )
    assert entries[-1]["message"]["content"] == [{"type": "text", "text": "all done"}]
    # With the scrub on, the Bash tool's environment has no credential (run: env), nor any file.
    assert "ANTHROPIC_API_KEY" not in results[3]["message"]["content"][0]["content"]
    assert_no_secret(ANTHROPIC_KEY, config, workspace, trace)
    traced = json.loads((trace / "claude.json").read_text())
    assert (traced["uid"], traced["gid"], traced["cwd"], traced["home"]) == (
        1234,
        1234,
        "/workspace",
        "/home/agent",
    )
    assert traced["config_dir"] == "/orbit/claude" and traced["is_sandbox"] is False
    assert "ANTHROPIC_API_KEY" in traced["env_names"] and traced["argv"][0] == "-p"


def test_claude_no_session_persistence_and_permissions(agents: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(cfg), "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    quiet = run_host(
        agents,
        "claude",
        "-p",
        "--no-session-persistence",
        "Reply with exactly: x",
        env=env,
        cwd=tmp_path,
    )
    assert quiet.stdout == "x\n" and not (cfg / "projects").exists()
    denied = run_host(
        agents, "claude", "-p", "--output-format", "json", "run: touch ran", env=env, cwd=tmp_path
    )
    assert json.loads(denied.stdout)["permission_denials"][0]["tool_name"] == "Bash"
    assert not (tmp_path / "ran").exists()
    allowed = run_host(
        agents,
        "claude",
        "-p",
        "--allowedTools",
        "Bash(touch:*)",
        "run: touch ran",
        env=env,
        cwd=tmp_path,
    )
    assert allowed.returncode == 0 and (tmp_path / "ran").exists()
    # As in the real CLI, -p runs a read-only command without any permission.
    read_only = run_host(
        agents, "claude", "-p", "--output-format", "json", "run: echo hi", env=env, cwd=tmp_path
    )
    assert json.loads(read_only.stdout)["permission_denials"] == []


def test_claude_provider_round_trip_from_a_container(
    agents: Path, tmp_path: Path, python_image: str
) -> None:
    script = 'claude -p "Reply with exactly: from the provider"; echo "rc=$?"'
    with provider_server([ANTHROPIC_KEY]) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
        good = run_container(python_image, agents, script, env=env, network_host=True)
        assert good.stdout == "from the provider\nrc=0\n", good.stderr
        bad = run_container(
            python_image,
            agents,
            script,
            env={**env, "ANTHROPIC_API_KEY": "sk-ant-wrong"},
            network_host=True,
        )
        assert bad.stdout == "Invalid API key · Fix external API key\nrc=1\n"
        assert [r.headers.get("x-api-key") for r in server.requests] == [
            ANTHROPIC_KEY,
            "sk-ant-wrong",
        ]


def test_claude_setup_token_prints_and_saves_nothing(agents: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    done = run_host(
        agents,
        "claude",
        "setup-token",
        env={"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(cfg)},
        cwd=tmp_path,
    )
    tokens = re.findall(r"sk-ant-oat01-[A-Za-z0-9_-]{40,}", done.stdout)
    assert done.returncode == 0 and len(tokens) == 1
    assert_no_secret(tokens[0], tmp_path)


# --- codex ---------------------------------------------------------------------------------------


def test_trace_lists_names_never_values(agents: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    env = {"HOME": str(tmp_path), "CODEX_API_KEY": OPENAI_KEY, "STANDIN_TRACE": str(trace)}
    run_host(agents, "codex", "--version", env=env, cwd=tmp_path)
    traced = json.loads(trace.read_text())
    assert traced["argv"] == ["--version"] and traced["uid"] == os.getuid()
    assert "CODEX_API_KEY" in traced["env_names"] and OPENAI_KEY not in trace.read_text()
    assert traced["config_dir"] == str(tmp_path / ".codex")


def test_claude_session_id_in_use_and_resume(agents: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(cfg), "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    first = run_host(agents, "claude", "-p", "--session-id", SESSION, "hi", env=env, cwd=tmp_path)
    assert first.returncode == 0
    again = run_host(agents, "claude", "-p", "--session-id", SESSION, "hi", env=env, cwd=tmp_path)
    assert (again.returncode, again.stderr) == (
        1,
        f"Error: Session ID {SESSION} is already in use.\n",
    )
    resumed = run_host(
        agents, "claude", "-p", "--resume", SESSION, "Reply with exactly: 2", env=env, cwd=tmp_path
    )
    assert (resumed.returncode, resumed.stdout) == (0, "2\n")
    (transcript,) = (cfg / "projects").glob(f"*/{SESSION}.jsonl")
    entries = [e for e in read_jsonl(transcript) if e["type"] in ("user", "assistant")]
    assert len(entries) == 4
    for before, after in itertools.pairwise(entries):
        assert after["parentUuid"] == before["uuid"]
    unknown = run_host(
        agents, "claude", "-p", "--resume", str(uuid4()), "hi", env=env, cwd=tmp_path
    )
    assert unknown.returncode == 1 and "No conversation found" in unknown.stderr


def test_tool_environments_pass_credentials_unless_told_not_to(
    agents: Path, tmp_path: Path
) -> None:
    """As the real CLIs: Claude's Bash tool sees the key unless CLAUDE_CODE_SUBPROCESS_ENV_SCRUB
    is set; Codex's shell sees it unless shell_environment_policy.ignore_default_excludes is
    false (in config.toml or -c). A key the tool prints lands in the transcript."""
    (tmp_path / ".git").mkdir()
    claude_env = {
        "HOME": str(tmp_path),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        "IS_SANDBOX": "1",  # the host tests may run as root
    }
    argv = ("claude", "-p", "--dangerously-skip-permissions", "run: echo $ANTHROPIC_API_KEY")
    run_host(agents, *argv, env=claude_env, cwd=tmp_path)
    (leaked,) = (tmp_path / "claude").rglob("*.jsonl")
    assert ANTHROPIC_KEY in leaked.read_text()
    leaked.unlink()
    scrub = {**claude_env, "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB": "1"}
    assert run_host(agents, *argv, env=scrub, cwd=tmp_path).returncode == 0
    assert_no_secret(ANTHROPIC_KEY, tmp_path / "claude")

    home = tmp_path / "codex"
    home.mkdir()
    codex_env = {"HOME": str(tmp_path), "CODEX_HOME": str(home), "CODEX_API_KEY": OPENAI_KEY}
    run = ("codex", "exec", "--json", "run: echo $CODEX_API_KEY")
    seen = run_host(agents, *run, env=codex_env, cwd=tmp_path)
    assert OPENAI_KEY in seen.stdout
    excluded = ("-c", "shell_environment_policy.ignore_default_excludes=false")
    assert (
        OPENAI_KEY
        not in run_host(agents, *run[:2], *excluded, *run[2:], env=codex_env, cwd=tmp_path).stdout
    )
    (home / "config.toml").write_text(
        "[shell_environment_policy]\nignore_default_excludes = false\n"
    )
    assert OPENAI_KEY not in run_host(agents, *run, env=codex_env, cwd=tmp_path).stdout


def test_unwritable_config_dirs_fail_in_one_line(
    agents: Path, tmp_path: Path, python_image: str
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)  # the container's uid 1234 cannot write it
    script = (
        "cd /tmp; CLAUDE_CONFIG_DIR=/locked claude -p hi; echo rc=$?;"
        " CODEX_HOME=/locked codex exec --skip-git-repo-check hi </dev/null; echo rc=$?"
    )
    env = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "CODEX_API_KEY": "sk-x"}
    done = run_container(python_image, agents, script, env=env, mounts={locked: "/locked"})
    assert done.stdout == "rc=1\nrc=1\n"
    assert "Traceback" not in done.stderr
    assert "Error: Permission denied, /locked/projects" in done.stderr
    assert "Error: Permission denied: /locked/sessions" in done.stderr

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
import subprocess
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from agent_standins import install, provider_server

ANTHROPIC_KEY = "sk-ant-api03-standin-" + secrets.token_hex(12)
OPENAI_KEY = "sk-proj-standin-" + secrets.token_hex(12)
SESSION = "7d1c0b9e-3f4a-4e8b-9a21-5c6d7e8f9a01"
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
ROLLOUT_RE = re.compile(
    rf"^\d{{4}}/\d{{2}}/\d{{2}}/rollout-\d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}-\d{{2}}-\d{{2}}-({UUID_RE})\.jsonl$"
)
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


def shared_dir(path: Path) -> Path:
    """A host folder the container's uid 1234 can write (Orbit bind-mounts run folders alike)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def host(
    prefix: Path, *argv: str, env: dict[str, str], cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "CLAUDE"))}
    clean = {k: v for k, v in clean.items() if not k.startswith(("CODEX", "OPENAI"))}
    return subprocess.run(
        [str(prefix / "bin" / argv[0]), *argv[1:]],
        env={**clean, **env},
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def container(
    image: str,
    prefix: Path,
    script: str,
    env: dict[str, str] | None = None,
    user: str = "1234:1234",
    mounts: dict[Path, str] | None = None,
    network_host: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`sh -c script` in the image with the install at /opt/agents (read-only), HOME on a tmpfs."""
    uid = user.split(":")[0]
    argv = ["docker", "run", "--rm", "--user", user, "-v", f"{prefix}:/opt/agents:ro"]
    argv += ["--tmpfs", f"/home/agent:uid={uid},gid={uid}", "-e", "HOME=/home/agent"]
    argv += ["-e", "PATH=/opt/agents/bin:/usr/local/bin:/usr/bin:/bin", "-w", "/home/agent"]
    for source, target in (mounts or {}).items():
        argv += ["-v", f"{source}:{target}"]
    for name, value in (env or {}).items():
        argv += ["-e", f"{name}={value}"]
    if network_host:
        argv += ["--network", "host"]
    argv += [image, "sh", "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def assert_no_secret(secret: str, *roots: Path) -> None:
    for path in files_under(*roots):
        assert secret not in path.read_text(errors="replace"), path


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
        host(agents, "claude", "--version", env=env, cwd=tmp_path).stdout
        == "2.1.332 (Claude Code)\n"
    )
    codex = host(agents, "codex", "--version", env=env, cwd=tmp_path)
    assert (codex.returncode, codex.stdout) == (0, "codex-cli 0.171.0\n")
    assert (tmp_path / ".codex" / "tmp").is_dir()  # like the real one, even for --version
    done = container(
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
    unknown = host(agents, "claude", "-p", "--frobnicate", "hi", env=env, cwd=tmp_path)
    assert (unknown.returncode, unknown.stderr) == (1, "error: unknown option '--frobnicate'\n")
    stream = host(
        agents, "claude", "-p", "--output-format", "stream-json", "hi", env=env, cwd=tmp_path
    )
    assert stream.returncode == 1
    assert (
        stream.stderr
        == "Error: When using --print, --output-format=stream-json requires --verbose\n"
    )
    anonymous = host(agents, "claude", "-p", "hi", env=env, cwd=tmp_path)
    assert (anonymous.returncode, anonymous.stdout) == (1, "Not logged in · Please run /login\n")
    as_json = host(agents, "claude", "-p", "--output-format", "json", "hi", env=env, cwd=tmp_path)
    result = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert (result["type"], result["is_error"], result["result"]) == (
        "result",
        True,
        "Not logged in · Please run /login",
    )
    logged_in = {**env, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    piped = host(
        agents, "claude", "-p", env=logged_in, cwd=tmp_path, stdin="Reply with exactly: piped"
    )
    assert (piped.returncode, piped.stdout) == (0, "piped\n")
    turns = host(
        agents, "claude", "-p", "--max-turns", "1", TOOLS_PROMPT, env=logged_in, cwd=tmp_path
    )
    assert (turns.returncode, turns.stdout) == (1, "Error: Reached max turns (1)\n")


def test_claude_root_guard(agents: Path, tmp_path: Path, python_image: str) -> None:
    key = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    script = 'claude -p {flags} "Reply with exactly: ran"; echo "rc=$?"'
    refusal = "--dangerously-skip-permissions cannot be used with root/sudo privileges"
    for flags in ("--dangerously-skip-permissions", "--permission-mode bypassPermissions"):
        root = container(python_image, agents, script.format(flags=flags), env=key, user="0:0")
        assert root.stdout == "rc=1\n" and refusal in root.stderr
    sandbox = {**key, "IS_SANDBOX": "1"}
    root_ok = container(
        python_image,
        agents,
        script.format(flags="--dangerously-skip-permissions"),
        env=sandbox,
        user="0:0",
    )
    assert root_ok.stdout == "ran\nrc=0\n", root_ok.stderr
    bubble = {**key, "CLAUDE_CODE_BUBBLEWRAP": "1"}
    root_bwrap = container(
        python_image,
        agents,
        script.format(flags="--dangerously-skip-permissions"),
        env=bubble,
        user="0:0",
    )
    assert root_bwrap.stdout == "ran\nrc=0\n"
    user_ok = container(
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
        cases = [
            (
                {"ANTHROPIC_AUTH_TOKEN": token, "ANTHROPIC_API_KEY": ANTHROPIC_KEY},
                "authorization",
                f"Bearer {token}",
            ),
            (
                {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "CLAUDE_CODE_OAUTH_TOKEN": oauth},
                "x-api-key",
                ANTHROPIC_KEY,
            ),
            ({"CLAUDE_CODE_OAUTH_TOKEN": oauth}, "authorization", f"Bearer {oauth}"),
            ({}, "authorization", f"Bearer {stored}"),
        ]
        for extra, header, value in cases:
            done = host(
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
            assert request.headers[header] == value
            assert request.headers["anthropic-version"] == "2023-06-01"
            assert {"model", "max_tokens", "messages"} <= set(request.body)
    # Only the file the test wrote holds a credential; the transcripts hold none.
    (cfg / ".credentials.json").unlink()
    for secret in (token, oauth, stored, ANTHROPIC_KEY):
        assert_no_secret(secret, cfg)


def test_claude_transcript_in_a_container(agents: Path, tmp_path: Path, python_image: str) -> None:
    config = shared_dir(tmp_path / "claude")
    workspace = shared_dir(tmp_path / "workspace")
    trace = shared_dir(tmp_path / "trace")
    done = container(
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
    lines = jsonl(transcript)
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
    quiet = host(
        agents,
        "claude",
        "-p",
        "--no-session-persistence",
        "Reply with exactly: x",
        env=env,
        cwd=tmp_path,
    )
    assert quiet.stdout == "x\n" and not (cfg / "projects").exists()
    denied = host(
        agents, "claude", "-p", "--output-format", "json", "run: touch ran", env=env, cwd=tmp_path
    )
    assert json.loads(denied.stdout)["permission_denials"][0]["tool_name"] == "Bash"
    assert not (tmp_path / "ran").exists()
    allowed = host(
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


def test_claude_provider_round_trip_from_a_container(
    agents: Path, tmp_path: Path, python_image: str
) -> None:
    script = 'claude -p "Reply with exactly: from the provider"; echo "rc=$?"'
    with provider_server([ANTHROPIC_KEY]) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
        good = container(python_image, agents, script, env=env, network_host=True)
        assert good.stdout == "from the provider\nrc=0\n", good.stderr
        bad = container(
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
    done = host(
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


def test_codex_home_git_check_flags_and_credentials(agents: Path, tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(home)}
    missing = host(agents, "codex", "exec", "--skip-git-repo-check", "hi", env=env, cwd=tmp_path)
    assert missing.returncode == 1
    assert f'CODEX_HOME points to "{home}", but that path does not exist' in missing.stderr
    home.mkdir()
    outside = host(agents, "codex", "exec", "hi", env=env, cwd=tmp_path)
    assert outside.returncode == 1
    assert (
        "Not inside a trusted directory and --skip-git-repo-check was not specified."
        in outside.stderr
    )
    unknown = host(agents, "codex", "exec", "--frobnicate", "hi", env=env, cwd=tmp_path)
    assert (
        unknown.returncode == 2
        and "error: unexpected argument '--frobnicate' found" in unknown.stderr
    )
    anonymous = host(agents, "codex", "exec", "--skip-git-repo-check", "hi", env=env, cwd=tmp_path)
    assert anonymous.returncode == 1 and "Not logged in" in anonymous.stderr
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    keyed = {**env, "CODEX_API_KEY": OPENAI_KEY}
    inside = host(
        agents,
        "codex",
        "exec",
        "-",
        env=keyed,
        cwd=tmp_path / "repo",
        stdin="Reply with exactly: in git",
    )
    assert (inside.returncode, inside.stdout) == (0, "in git\n")
    ephemeral = host(
        agents,
        "codex",
        "exec",
        "--ephemeral",
        "-C",
        str(tmp_path / "repo"),
        "hi",
        env=keyed,
        cwd=tmp_path,
    )
    assert ephemeral.returncode == 0
    # The failed (not logged in) run and the one in git wrote rollouts; the ephemeral one none.
    assert len(list((home / "sessions").rglob("*.jsonl"))) == 2


def test_codex_rollout_and_json_events_in_a_container(
    agents: Path, tmp_path: Path, python_image: str
) -> None:
    codex_home = shared_dir(tmp_path / "codex")
    sessions = shared_dir(tmp_path / "session")
    workspace = shared_dir(tmp_path / "workspace")
    done = container(
        python_image,
        agents,
        "cd /workspace && codex exec --json --skip-git-repo-check --yolo -o /workspace/last.txt"
        " -c shell_environment_policy.ignore_default_excludes=false"
        f" '{TOOLS_PROMPT}\nrun: env' < /dev/null",
        env={
            "CODEX_HOME": "/orbit/codex",
            "CODEX_API_KEY": OPENAI_KEY,
            "OPENAI_API_KEY": OPENAI_KEY,
        },
        mounts={
            codex_home: "/orbit/codex",
            sessions: "/orbit/codex/sessions",
            workspace: "/workspace",
        },
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "thread.started" and events[1] == {"type": "turn.started"}
    assert events[-1]["type"] == "turn.completed"
    assert set(events[-1]["usage"]) == {"input_tokens", "cached_input_tokens", "output_tokens"}
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    assert [i["type"] for i in items] == [
        "file_change",
        "file_change",
        "command_execution",
        "command_execution",
        "agent_message",
    ]
    assert items[0]["changes"] == [{"path": "/workspace/notes/a.txt", "kind": "add"}]
    assert items[2]["aggregated_output"] == "goodbye\n1234\n" and items[2]["exit_code"] == 0
    assert items[-1]["text"] == "all done"
    assert (workspace / "notes" / "a.txt").read_text() == "goodbye\n"
    assert (workspace / "last.txt").read_text() == "all done"

    (rollout,) = sessions.rglob("*.jsonl")
    match = ROLLOUT_RE.match(str(rollout.relative_to(sessions)))
    assert match and match[1] == events[0]["thread_id"]
    lines = jsonl(rollout)
    assert all(set(line) >= {"timestamp", "type", "payload"} for line in lines)
    meta = lines[0]
    assert meta["type"] == "session_meta"
    assert meta["payload"]["id"] == events[0]["thread_id"]
    assert (
        meta["payload"]["cwd"],
        meta["payload"]["originator"],
        meta["payload"]["cli_version"],
    ) == ("/workspace", "codex_exec", "0.171.0")
    kinds = [(line["type"], line["payload"].get("type")) for line in lines]
    assert ("turn_context", None) in kinds
    for kind in (
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
    ):
        assert ("response_item", kind) in kinds
    for kind in ("user_message", "agent_message", "token_count"):
        assert ("event_msg", kind) in kinds
    patch = next(
        line["payload"] for line in lines if line["payload"].get("type") == "custom_tool_call"
    )
    assert patch["name"] == "apply_patch"
    assert patch["input"].startswith("*** Begin Patch\n*** Add File: notes/a.txt\n")
    call = next(line["payload"] for line in lines if line["payload"].get("type") == "function_call")
    assert (
        call["name"] == "shell"
        and json.loads(call["arguments"])["command"][-1] == "cat notes/a.txt; id -u"
    )
    count = [line["payload"] for line in lines if line["payload"].get("type") == "token_count"][-1]
    assert count["info"]["total_token_usage"]["total_tokens"] > 0
    # With the default excludes on, the shell has no *KEY* variable (run: env); no file holds it.
    assert "OPENAI_API_KEY" not in items[3]["aggregated_output"]
    assert_no_secret(OPENAI_KEY, codex_home, sessions, workspace)


def test_codex_read_only_sandbox_refuses_patches(agents: Path, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    env = {"HOME": str(tmp_path), "CODEX_API_KEY": OPENAI_KEY}
    done = host(
        agents, "codex", "exec", "--json", "create x.txt containing no", env=env, cwd=tmp_path
    )
    item = [json.loads(line) for line in done.stdout.splitlines()][2]["item"]
    assert (item["type"], item["status"]) == ("file_change", "failed")
    assert not (tmp_path / "x.txt").exists()


def test_codex_provider_round_trip_from_a_container(
    agents: Path, tmp_path: Path, python_image: str
) -> None:
    script = (
        'codex exec --skip-git-repo-check "Reply with exactly: codex via provider" </dev/null;'
        ' echo "rc=$?"'
    )
    with provider_server([OPENAI_KEY]) as server:
        env = {"OPENAI_BASE_URL": server.url + "/v1", "CODEX_API_KEY": OPENAI_KEY}
        good = container(python_image, agents, script, env=env, network_host=True)
        assert good.stdout == "codex via provider\nrc=0\n", good.stderr
        bad = container(
            python_image,
            agents,
            script,
            env={**env, "CODEX_API_KEY": "sk-wrong"},
            network_host=True,
        )
        assert bad.stdout == "rc=1\n" and "401 Unauthorized" in bad.stderr
        assert [r.headers["authorization"] for r in server.by_path("/v1/responses")] == [
            f"Bearer {OPENAI_KEY}",
            "Bearer sk-wrong",
        ]
        assert server.requests[0].body["input"][0]["content"][0]["type"] == "input_text"


def test_codex_login_flows(agents: Path, tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(home)}
    status = host(agents, "codex", "login", "status", env=env, cwd=tmp_path)
    assert (status.returncode, status.stderr) == (1, "Not logged in\n")

    device = host(agents, "codex", "login", "--device-auth", env=env, cwd=tmp_path)
    assert device.returncode == 0 and "Successfully logged in" in device.stderr
    assert "https://auth.openai.com/codex/device" in device.stdout
    assert re.search(r"^   [0-9A-F]{4}-[0-9A-F]{4}$", device.stdout, re.MULTILINE)
    auth_file = home / "auth.json"
    assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
    auth = json.loads(auth_file.read_text())
    assert auth["OPENAI_API_KEY"] is None and auth["last_refresh"]
    assert set(auth["tokens"]) == {"id_token", "access_token", "refresh_token", "account_id"}
    status = host(agents, "codex", "login", "status", env=env, cwd=tmp_path)
    assert (status.returncode, status.stderr) == (0, "Logged in using ChatGPT\n")
    # The ChatGPT login is a credential for exec, sent as the bearer token.
    (tmp_path / ".git").mkdir()
    with provider_server([auth["tokens"]["access_token"]]) as server:
        used = host(
            agents,
            "codex",
            "exec",
            "hi",
            env={**env, "OPENAI_BASE_URL": server.url + "/v1"},
            cwd=tmp_path,
        )
        assert used.returncode == 0, used.stderr

    keyed = host(
        agents, "codex", "login", "--with-api-key", env=env, cwd=tmp_path, stdin=OPENAI_KEY + "\n"
    )
    assert keyed.returncode == 0
    assert json.loads(auth_file.read_text())["OPENAI_API_KEY"] == OPENAI_KEY
    assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
    status = host(agents, "codex", "login", "status", env=env, cwd=tmp_path)
    assert status.returncode == 0 and OPENAI_KEY not in status.stderr
    assert f"API key configured - {OPENAI_KEY[:8]}***{OPENAI_KEY[-5:]}" in status.stderr
    # Apart from auth.json, no file under CODEX_HOME holds the key.
    auth_file.unlink()
    assert_no_secret(OPENAI_KEY, home)


def test_trace_lists_names_never_values(agents: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    env = {"HOME": str(tmp_path), "CODEX_API_KEY": OPENAI_KEY, "STANDIN_TRACE": str(trace)}
    host(agents, "codex", "--version", env=env, cwd=tmp_path)
    traced = json.loads(trace.read_text())
    assert traced["argv"] == ["--version"] and traced["uid"] == os.getuid()
    assert "CODEX_API_KEY" in traced["env_names"] and OPENAI_KEY not in trace.read_text()
    assert traced["config_dir"] == str(tmp_path / ".codex")


def test_claude_session_id_in_use_and_resume(agents: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(cfg), "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    first = host(agents, "claude", "-p", "--session-id", SESSION, "hi", env=env, cwd=tmp_path)
    assert first.returncode == 0
    again = host(agents, "claude", "-p", "--session-id", SESSION, "hi", env=env, cwd=tmp_path)
    assert (again.returncode, again.stderr) == (
        1,
        f"Error: Session ID {SESSION} is already in use.\n",
    )
    resumed = host(
        agents, "claude", "-p", "--resume", SESSION, "Reply with exactly: 2", env=env, cwd=tmp_path
    )
    assert (resumed.returncode, resumed.stdout) == (0, "2\n")
    (transcript,) = (cfg / "projects").glob(f"*/{SESSION}.jsonl")
    entries = [e for e in jsonl(transcript) if e["type"] in ("user", "assistant")]
    assert len(entries) == 4
    for before, after in itertools.pairwise(entries):
        assert after["parentUuid"] == before["uuid"]
    unknown = host(agents, "claude", "-p", "--resume", str(uuid4()), "hi", env=env, cwd=tmp_path)
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
    host(agents, *argv, env=claude_env, cwd=tmp_path)
    (leaked,) = (tmp_path / "claude").rglob("*.jsonl")
    assert ANTHROPIC_KEY in leaked.read_text()
    leaked.unlink()
    scrub = {**claude_env, "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB": "1"}
    assert host(agents, *argv, env=scrub, cwd=tmp_path).returncode == 0
    assert_no_secret(ANTHROPIC_KEY, tmp_path / "claude")

    home = tmp_path / "codex"
    home.mkdir()
    codex_env = {"HOME": str(tmp_path), "CODEX_HOME": str(home), "CODEX_API_KEY": OPENAI_KEY}
    run = ("codex", "exec", "--json", "run: echo $CODEX_API_KEY")
    seen = host(agents, *run, env=codex_env, cwd=tmp_path)
    assert OPENAI_KEY in seen.stdout
    excluded = ("-c", "shell_environment_policy.ignore_default_excludes=false")
    assert (
        OPENAI_KEY
        not in host(agents, *run[:2], *excluded, *run[2:], env=codex_env, cwd=tmp_path).stdout
    )
    (home / "config.toml").write_text(
        "[shell_environment_policy]\nignore_default_excludes = false\n"
    )
    assert OPENAI_KEY not in host(agents, *run, env=codex_env, cwd=tmp_path).stdout

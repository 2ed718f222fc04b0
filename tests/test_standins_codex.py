"""The stand-in `codex` CLI (tests/agent_standins.py, docs/testing.md); claude's tests are in
test_standins.py.

It runs on the host (Python 3.11) and inside orbit-test/python:3 (Debian's python3-minimal),
mounted read-only from an npm-like install, as a non-root user with HOME on a tmpfs, the way
`orbit run --auth` runs the real CLI. The tests check CODEX_HOME, the git check, flags,
credentials and exit codes, the rollout path and line shapes, the --json events, a round trip
through a real local provider, the login flows writing auth.json 0600, and that no credential
reaches a file.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import test_standins
from agent_standins import (
    assert_no_secret,
    provider_server,
    read_jsonl,
    run_container,
    run_host,
    shared_dir,
)
from test_standins import OPENAI_KEY, TOOLS_PROMPT

agents = test_standins.agents  # the fixture: an npm-like install of both stand-ins
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
ROLLOUT_RE = re.compile(
    rf"^\d{{4}}/\d{{2}}/\d{{2}}/rollout-\d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}-\d{{2}}-\d{{2}}-({UUID_RE})\.jsonl$"
)


# --- codex ---------------------------------------------------------------------------------------


def test_codex_home_git_check_flags_and_credentials(agents: Path, tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(home)}
    missing = run_host(
        agents, "codex", "exec", "--skip-git-repo-check", "hi", env=env, cwd=tmp_path
    )
    assert missing.returncode == 1
    assert f'CODEX_HOME points to "{home}", but that path does not exist' in missing.stderr
    home.mkdir()
    outside = run_host(agents, "codex", "exec", "hi", env=env, cwd=tmp_path)
    assert outside.returncode == 1
    assert (
        "Not inside a trusted directory and --skip-git-repo-check was not specified."
        in outside.stderr
    )
    unknown = run_host(agents, "codex", "exec", "--frobnicate", "hi", env=env, cwd=tmp_path)
    assert (
        unknown.returncode == 2
        and "error: unexpected argument '--frobnicate' found" in unknown.stderr
    )
    anonymous = run_host(
        agents, "codex", "exec", "--skip-git-repo-check", "hi", env=env, cwd=tmp_path
    )
    # Without a credential the real CLI sends the request anyway and OpenAI refuses it.
    assert anonymous.returncode == 1
    assert "401 Unauthorized" in anonymous.stderr and "Missing bearer" in anonymous.stderr
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    keyed = {**env, "CODEX_API_KEY": OPENAI_KEY}
    inside = run_host(
        agents,
        "codex",
        "exec",
        "-",
        env=keyed,
        cwd=tmp_path / "repo",
        stdin="Reply with exactly: in git",
    )
    assert (inside.returncode, inside.stdout) == (0, "in git\n")
    ephemeral = run_host(
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
    done = run_container(
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
    assert set(events[-1]["usage"]) == {
        "input_tokens",
        "cached_input_tokens",
        "cache_write_input_tokens",
        "output_tokens",
        "reasoning_output_tokens",
    }
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
    lines = read_jsonl(rollout)
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
    for kind in ("task_started", "token_count", "task_complete"):
        assert ("event_msg", kind) in kinds
    # 0.171 records finished messages as item_completed events (no user_message/agent_message).
    finished = [
        (line["payload"]["item"]["type"], line["payload"]["item"]["content"][0]["text"])
        for line in lines
        if line["payload"].get("type") == "item_completed"
    ]
    assert finished == [("UserMessage", TOOLS_PROMPT + "\nrun: env"), ("AgentMessage", "all done")]
    said = [line["payload"] for line in lines if line["payload"].get("role") == "assistant"]
    assert said[-1]["content"] == [{"type": "output_text", "text": "all done"}]
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
    done = run_host(
        agents, "codex", "exec", "--json", "create x.txt containing no", env=env, cwd=tmp_path
    )
    item = [json.loads(line) for line in done.stdout.splitlines()][2]["item"]
    assert (item["type"], item["status"]) == ("file_change", "failed")
    assert not (tmp_path / "x.txt").exists()


def test_codex_provider_round_trip_from_a_container(
    agents: Path, tmp_path: Path, python_image: str
) -> None:
    """0.171 takes the provider's address from the config key openai_base_url (here -c), not
    from OPENAI_BASE_URL, and its key from CODEX_API_KEY, not OPENAI_API_KEY (both checked
    against the real CLI), so the stand-in does the same."""
    script = (
        "codex exec --skip-git-repo-check {config} 'Reply with exactly: codex via provider'"
        ' </dev/null; echo "rc=$?"'
    )
    with provider_server([OPENAI_KEY]) as server:
        config = f"-c 'openai_base_url=\"{server.url}/v1\"'"
        via_config = script.format(config=config)
        env = {"CODEX_API_KEY": OPENAI_KEY}
        good = run_container(python_image, agents, via_config, env=env, network_host=True)
        assert good.stdout == "codex via provider\nrc=0\n", good.stderr
        bad = run_container(
            python_image, agents, via_config, env={"CODEX_API_KEY": "sk-wrong"}, network_host=True
        )
        assert bad.stdout == "rc=1\n" and "401 Unauthorized" in bad.stderr
        openai_key = run_container(
            python_image, agents, via_config, env={"OPENAI_API_KEY": OPENAI_KEY}, network_host=True
        )
        assert openai_key.stdout == "rc=1\n"
        requests = server.by_path("/v1/responses")
        assert [r.headers.get("authorization") for r in requests] == [
            f"Bearer {OPENAI_KEY}",
            "Bearer sk-wrong",
            None,
        ]
        assert requests[0].body["input"][0]["content"][0]["type"] == "input_text"
        ignored = {**env, "OPENAI_BASE_URL": server.url + "/v1"}
        run_container(
            python_image, agents, script.format(config=""), env=ignored, network_host=True
        )
        assert len(server.requests) == 3


def test_codex_login_flows(agents: Path, tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(home)}
    status = run_host(agents, "codex", "login", "status", env=env, cwd=tmp_path)
    assert (status.returncode, status.stderr) == (1, "Not logged in\n")

    device = run_host(agents, "codex", "login", "--device-auth", env=env, cwd=tmp_path)
    assert device.returncode == 0 and "Successfully logged in" in device.stderr
    assert "https://auth.openai.com/codex/device" in device.stdout
    assert re.search(r"^   [0-9A-F]{4}-[0-9A-F]{4}$", device.stdout, re.MULTILINE)
    auth_file = home / "auth.json"
    assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
    auth = json.loads(auth_file.read_text())
    assert auth["OPENAI_API_KEY"] is None and auth["last_refresh"]
    assert set(auth["tokens"]) == {"id_token", "access_token", "refresh_token", "account_id"}
    status = run_host(agents, "codex", "login", "status", env=env, cwd=tmp_path)
    assert (status.returncode, status.stderr) == (0, "Logged in using ChatGPT\n")
    # The ChatGPT login is a credential for exec, sent as the bearer token.
    (tmp_path / ".git").mkdir()
    with provider_server([auth["tokens"]["access_token"]]) as server:
        used = run_host(
            agents,
            "codex",
            "exec",
            "-c",
            f"openai_base_url={server.url}/v1",
            "hi",
            env=env,
            cwd=tmp_path,
        )
        assert used.returncode == 0, used.stderr

    keyed = run_host(
        agents, "codex", "login", "--with-api-key", env=env, cwd=tmp_path, stdin=OPENAI_KEY + "\n"
    )
    assert keyed.returncode == 0
    assert json.loads(auth_file.read_text())["OPENAI_API_KEY"] == OPENAI_KEY
    assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
    status = run_host(agents, "codex", "login", "status", env=env, cwd=tmp_path)
    assert status.returncode == 0 and OPENAI_KEY not in status.stderr
    assert f"API key configured - {OPENAI_KEY[:8]}***{OPENAI_KEY[-5:]}" in status.stderr
    # Apart from auth.json, no file under CODEX_HOME holds the key.
    auth_file.unlink()
    assert_no_secret(OPENAI_KEY, home)

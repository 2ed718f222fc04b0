"""`orbit run --auth` with stand-in Claude Code and Codex CLIs inside real containers: the
agent's transcript lands in the run's `session/`, its credentials reach it and nothing else,
and no file under ORBIT_HOME (auth.json, the store, aside) holds a secret afterwards.

The stand-ins (tests/agent_standins.py, docs/testing.md) are installed the way npm installs the
real CLIs; a local HTTP server stands in for the model provider where a relay is tested.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from agent_standins import install, provider_server
from conftest import Orbit, git_repo
from test_agent_auth import files_holding

KEY = "sk-ant-api03-Qw7Er5Ty3Ui1Op9As7Df5Gh3Jk1Lz"
OPENAI_KEY = "sk-proj-Mn4Bv6Cx8Za0Sd2Fg4Hj6Kl8Qw0Er2Ty"


@pytest.fixture
def agents(orbit: Orbit, tmp_path: Path) -> Orbit:
    """`orbit` with the stand-in CLIs first on PATH and a small repository to work on."""
    bin_dir = install(tmp_path / "npm-global")
    orbit.environ["PATH"] = f"{bin_dir}:{orbit.environ['PATH']}"
    orbit.environ["TEST_KEY"] = KEY
    orbit.environ["TEST_OPENAI_KEY"] = OPENAI_KEY
    orbit.cwd = git_repo(tmp_path / "repo", {"train.py": "print('train')\n"})
    return orbit


def add_key_profile(orbit: Orbit, name: str, harness: str, var: str) -> None:
    res = orbit("auth", "add", name, "--harness", harness, "--kind", "api-key", "--key-env", var)
    assert res.code == 0, res.err


def run_json(orbit: Orbit, *args: str) -> tuple[int, dict]:
    res = orbit("run", "--json", "-w", *args)
    assert res.out, res.err
    return res.code, res.json()


def test_claude_inside_writes_its_transcript_into_session_and_keeps_the_key_to_itself(
    agents: Orbit, python_image: str
) -> None:
    orbit = agents
    add_key_profile(orbit, "c", "claude-code", "TEST_KEY")
    prompt = (
        "create notes.txt containing hello from the agent\n"
        "run: cp notes.txt /orbit/output/ && env | sort > /orbit/output/env.txt\n"
        "Reply with exactly: done-1"
    )
    code, run = run_json(
        orbit, "--auth", "c", "--image", python_image,
        "-e", "STANDIN_TRACE=/orbit/output/trace.json",
        "--", "claude", "-p", "--dangerously-skip-permissions", "--output-format", "json", prompt,
    )  # fmt: skip
    assert code == 0, run
    run_dir = orbit.run_dir(str(run["id"]))
    result = json.loads((run_dir / "log.txt").read_text().strip().splitlines()[-1])
    assert result["type"] == "result" and result["result"] == "done-1"
    # The transcript is where Claude Code writes it for an agent in /workspace: session/.
    transcript = run_dir / "session" / f"{result['session_id']}.jsonl"
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    tools = [
        b["name"]
        for x in lines
        if x["type"] == "assistant"
        for b in x["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    turns = [x for x in lines if x["type"] in ("user", "assistant")]
    assert tools == ["Write", "Bash"] and {x["cwd"] for x in turns} == {"/workspace"}
    assert (run_dir / "output" / "notes.txt").read_text() == "hello from the agent\n"
    trace = json.loads((run_dir / "output" / "trace.json").read_text())
    assert trace["config_dir"] == "/orbit/agent/claude" and trace["home"] == "/orbit/agent/home"
    assert trace["uid"] == 0 and trace["is_sandbox"] is True  # root: Orbit declares the sandbox
    assert "ANTHROPIC_API_KEY" in trace["env_names"]
    # The agent's own commands did not get the key (CLAUDE_CODE_SUBPROCESS_ENV_SCRUB).
    env_txt = (run_dir / "output" / "env.txt").read_text()
    assert "ANTHROPIC_API_KEY" not in env_txt and "CLAUDE_CONFIG_DIR=/orbit/agent/claude" in env_txt
    spec = yaml.safe_load((run_dir / "run.yaml").read_text())
    assert spec["auth"] == {
        "profile": "c",
        "harness": "claude-code",
        "kind": "api-key",
        "cli": {"path": spec["auth"]["cli"]["path"], "version": "2.1.332 (Claude Code)"},
    }
    assert files_holding(orbit.home, KEY) == []
    assert list((orbit.home / "runtime" / "secrets").iterdir()) == []
    shown = orbit("session", str(run["id"]), "--json")
    assert shown.code == 0, shown.err
    assert "done-1" in shown.out and KEY not in shown.out
    assert "inside, auth profile c" in orbit("show", str(run["id"])).out


def test_without_orbit_s_sandbox_declaration_claude_refuses_to_skip_permissions_as_root(
    agents: Orbit, python_image: str
) -> None:
    """The stand-in keeps Claude Code's root guard: a run that overrides IS_SANDBOX fails with the
    real message, so the test above passes because of Orbit's setting."""
    orbit = agents
    add_key_profile(orbit, "c", "claude-code", "TEST_KEY")
    code, run = run_json(
        orbit, "--auth", "c", "--no-project", "--image", python_image, "-e", "IS_SANDBOX=0",
        "--", "claude", "-p", "--dangerously-skip-permissions", "Reply with exactly: x",
    )  # fmt: skip
    assert code == 1 and run["state"] == "failed"
    log = (orbit.run_dir(str(run["id"])) / "log.txt").read_text()
    assert "cannot be used with root/sudo privileges" in log


def test_a_key_the_command_prints_is_redacted_in_the_log(agents: Orbit, python_image: str) -> None:
    orbit = agents
    add_key_profile(orbit, "c", "claude-code", "TEST_KEY")
    code, run = run_json(
        orbit, "--auth", "c", "--no-project", "--image", python_image,
        "--", "sh", "-c", 'echo "key=$ANTHROPIC_API_KEY"',
    )  # fmt: skip
    assert code == 0
    assert (orbit.run_dir(str(run["id"])) / "log.txt").read_text() == "key=[redacted]\n"
    assert files_holding(orbit.home, KEY) == []


def test_relay_profile_reaches_a_local_provider_over_the_host_network(
    agents: Orbit, python_image: str
) -> None:
    orbit = agents
    with provider_server(keys=[KEY]) as server:
        add = ["auth", "add", "relay", "--harness", "claude-code", "--kind", "relay"]
        res = orbit(*add, "--key-env", "TEST_KEY", "--base-url", server.url, "--host-network")
        assert res.code == 0, res.err
        tested = orbit("auth", "test", "relay", "--image", python_image, "--json")
        assert tested.code == 0, (tested.out, tested.err)
        assert tested.json()["ok"] is True
        asked = server.by_path("/v1/messages")
        assert asked and asked[-1].headers.get("authorization") == f"Bearer {KEY}"
        spec = yaml.safe_load((orbit.run_dir(tested.json()["run"]) / "run.yaml").read_text())
        assert spec["network"] == "host" and spec["env"]["ANTHROPIC_BASE_URL"] == server.url
        # A key the relay refuses: the test fails, saying what the agent said.
        orbit.environ["WRONG_KEY"] = "sk-wrong-0000000000000000000000"
        assert (
            orbit(
                *add[:2],
                "bad",
                *add[3:],
                "--key-env",
                "WRONG_KEY",
                "--base-url",
                server.url,
                "--host-network",
            ).code
            == 0
        )
        bad = orbit("auth", "test", "bad", "--image", python_image)
        assert bad.code == 1 and "auth bad: FAILED" in bad.err
        # Each test is kept in its profile: `auth ls` (and the web's settings page) show it.
        last = {p["name"]: p["last_test"] for p in orbit("auth", "ls", "--json").json()}
        assert last["relay"]["ok"] is True and last["relay"]["run"] == tested.json()["run"]
        assert last["bad"]["ok"] is False and last["bad"]["state"] == "failed"
        listing = orbit("auth", "ls").out
        assert "LAST TEST" in listing and " FAILED " in listing and " ok " in listing
    assert files_holding(orbit.home, KEY) == []


def test_codex_login_profile_runs_inside_and_leaves_no_token_behind(
    agents: Orbit, python_image: str
) -> None:
    orbit = agents
    res = orbit("auth", "add", "cx", "--harness", "codex", "--kind", "login")
    assert res.code == 0, res.err
    stored = json.loads(
        json.loads((orbit.home / "auth.json").read_text())["profiles"]["cx"]["files"]["auth.json"]
    )
    token = stored["tokens"]["access_token"]
    assert len(token) > 16 and token not in res.out + res.err
    prompt = "run: env | sort > /orbit/output/env.txt\nReply with exactly: codex-ok"
    code, run = run_json(
        orbit, "--auth", "cx", "--image", python_image,
        "--", "codex", "exec", "--skip-git-repo-check", "--yolo", prompt,
    )  # fmt: skip
    assert code == 0, run
    run_dir = orbit.run_dir(str(run["id"]))
    assert "codex-ok" in (run_dir / "log.txt").read_text().splitlines()
    rollouts = list((run_dir / "session").rglob("rollout-*.jsonl"))
    assert len(rollouts) == 1 and rollouts[0].relative_to(run_dir / "session").parts[0].isdigit()
    first = json.loads(rollouts[0].read_text().splitlines()[0])
    assert first["type"] == "session_meta" and first["payload"]["cwd"] == "/workspace"
    for secret in {token, stored["tokens"]["refresh_token"], stored["tokens"]["id_token"]}:
        assert files_holding(orbit.home, secret) == []
    assert list((orbit.home / "runtime" / "secrets").iterdir()) == []


def test_sweep_with_auth_gives_each_run_its_own_session(agents: Orbit, python_image: str) -> None:
    orbit = agents
    add_key_profile(orbit, "gpt", "codex", "TEST_OPENAI_KEY")
    res = orbit(
        "sweep", "--auth", "gpt", "--image", python_image, "-g", "tries", "-p", "seed=1,2",
        "-w", "--json",
        "--", "codex", "exec", "--skip-git-repo-check", "--yolo",
        "run: env > /orbit/output/env.txt\nReply with exactly: seed-{seed}",
    )  # fmt: skip
    assert res.code == 0, res.err
    for run_id, seed in (("1", "1"), ("2", "2")):
        run_dir = orbit.run_dir(run_id)
        assert f"seed-{seed}" in (run_dir / "log.txt").read_text().splitlines()
        assert len(list((run_dir / "session").rglob("rollout-*.jsonl"))) == 1
        # Codex's shell did not pass the key on (the config.toml Orbit writes into CODEX_HOME).
        env_txt = (run_dir / "output" / "env.txt").read_text()
        assert "CODEX_HOME=/orbit/agent/codex" in env_txt and "API_KEY" not in env_txt
    assert files_holding(orbit.home, OPENAI_KEY) == []


def test_claude_login_takes_the_token_setup_token_prints_and_uses_it(
    agents: Orbit, python_image: str
) -> None:
    orbit = agents
    res = orbit("auth", "add", "cl", "--harness", "claude-code", "--kind", "login")
    assert res.code == 0, res.err
    token = json.loads((orbit.home / "auth.json").read_text())["profiles"]["cl"]["key"]
    assert token.startswith("sk-ant-oat01-") and token not in res.out + res.err
    assert "[token received]" in res.err and "claude setup-token" in res.out
    code, run = run_json(
        orbit, "--auth", "cl", "--no-project", "--image", python_image,
        "-e", "STANDIN_TRACE=/orbit/output/trace.json",
        "--", "claude", "-p", "Reply with exactly: logged-in",
    )  # fmt: skip
    assert code == 0, run
    run_dir = orbit.run_dir(str(run["id"]))
    assert (run_dir / "log.txt").read_text().strip() == "logged-in"
    trace = json.loads((run_dir / "output" / "trace.json").read_text())
    names = set(trace["env_names"])
    assert "CLAUDE_CODE_OAUTH_TOKEN" in names and "ANTHROPIC_API_KEY" not in names
    assert files_holding(orbit.home, token) == []


def test_codex_relay_reaches_the_provider_named_in_its_config(
    agents: Orbit, python_image: str
) -> None:
    """Codex takes a relay's address from its config.toml (it ignores OPENAI_BASE_URL) and sends
    CODEX_API_KEY: the stand-in does as the real 0.171 does, so only Orbit's config reaches it."""
    orbit = agents
    with provider_server(keys=[OPENAI_KEY]) as server:
        res = orbit(
            "auth", "add", "gw", "--harness", "codex", "--kind", "relay", "--host-network",
            "--key-env", "TEST_OPENAI_KEY", "--base-url", f"{server.url}/v1",
        )  # fmt: skip
        assert res.code == 0, res.err
        tested = orbit("auth", "test", "gw", "--image", python_image)
        assert tested.code == 0, (tested.out, tested.err)
        asked = server.by_path("/v1/responses")
        assert asked and asked[-1].headers.get("authorization") == f"Bearer {OPENAI_KEY}"
    assert files_holding(orbit.home, OPENAI_KEY) == []


def test_codex_login_with_an_access_token_goes_through_codex_s_own_login(agents: Orbit) -> None:
    orbit = agents
    add = ["auth", "add", "tok", "--harness", "codex", "--kind", "login", "--key-stdin"]
    bad = orbit(*add, stdin="not-a-jwt\n")
    assert bad.code == 2 and "invalid agent identity JWT format" in bad.err
    assert not (orbit.home / "auth.json").exists()  # nothing stored
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlLXN0YW5kLWlu"
    res = orbit(*add, "--json", stdin=jwt + "\n")
    assert res.code == 0, res.err
    assert res.json()["source"] == "codex login (stdin)" and jwt not in res.out
    stored = json.loads(
        json.loads((orbit.home / "auth.json").read_text())["profiles"]["tok"]["files"]["auth.json"]
    )
    assert stored["tokens"]["access_token"] == jwt
    assert not list((orbit.home / "runtime" / "login").iterdir())  # the private home is gone

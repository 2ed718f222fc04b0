"""Auth profiles and agents inside the container: `orbit auth add|list|test|rm` and
`orbit run --auth`, with stand-in `claude` and `codex` CLIs (tests/agent_standins.py) installed
the way npm installs the real ones, and a local HTTP server standing in for the model provider.

The secret of every profile is checked to appear in no file under ORBIT_HOME but auth.json.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import Orbit

from orbit.store import secrets
from orbit.store.home import Home

KEY = "sk-ant-api03-Zx9KqL2mN8pR4tV6wY1aB3cD5eF7gH9jK"


def files_holding(root: Path, secret: str) -> list[str]:
    """Every file under `root` whose bytes contain `secret` (auth.json, the store, excepted)."""
    found = []
    needle = secret.encode()
    for path in root.rglob("*"):
        if (
            path.is_symlink()
            or not path.is_file()
            or (path.name == "auth.json" and path.parent == root)
        ):
            continue
        try:
            if needle in path.read_bytes():
                found.append(str(path.relative_to(root)))
        except OSError:
            continue
    return found


def add_codex_key(orbit: Orbit, name: str = "p") -> None:
    res = orbit(
        "auth", "add", name, "--harness", "codex", "--kind", "api-key", "--key-stdin", stdin=KEY
    )
    assert res.code == 0, res.err


# --- profiles ------------------------------------------------------------------------------
def test_profiles_take_secrets_from_env_stdin_or_file_and_never_show_them(
    orbit: Orbit, tmp_path: Path
) -> None:
    orbit.environ["MY_KEY"] = KEY
    res = orbit(
        "auth", "add", "a", "--harness", "claude-code", "--kind", "api-key", "--key-env", "MY_KEY"
    )
    assert res.code == 0, res.err
    res = orbit(
        "auth",
        "add",
        "b",
        "--harness",
        "codex",
        "--kind",
        "api-key",
        "--key-stdin",
        stdin=KEY + "\n",
    )
    assert res.code == 0, res.err
    key_file = tmp_path / "relay.key"
    key_file.write_text("relay-key-0123456789abcdefghij\n")
    res = orbit(
        "auth", "add", "r", "--harness", "claude-code", "--kind", "relay",
        "--key-file", str(key_file), "--base-url", "http://127.0.0.1:9/", "--host-network",
    )  # fmt: skip
    assert res.code == 0, res.err
    listed = orbit("auth", "list")
    assert listed.code == 0
    for out in (listed.out, orbit("auth", "list", "--json").out, res.out):
        assert KEY not in out and "relay-key-0123" not in out
    assert "…H9jK" in listed.out and "host" in listed.out
    rows = {p["name"]: p for p in orbit("auth", "list", "--json").json()}
    assert rows["a"]["source"] == "env:MY_KEY" and rows["b"]["source"] == "stdin"
    assert rows["r"]["base_url"] == "http://127.0.0.1:9/" and rows["r"]["host_network"] is True
    path = orbit.home / "auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())["profiles"]
    assert stored["a"]["key"] == KEY and stored["r"]["key"] == "relay-key-0123456789abcdefghij"
    assert orbit("auth", "rm", "b").code == 0
    assert "b" not in json.loads(path.read_text())["profiles"]


def test_from_env_reads_the_environment_and_claude_settings(orbit: Orbit, tmp_path: Path) -> None:
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    settings = {
        "env": {
            "ANTHROPIC_BASE_URL": "https://relay.example",
            "ANTHROPIC_AUTH_TOKEN": KEY,
            "ANTHROPIC_MODEL": "m-1",
        }
    }
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    orbit.environ.update(HOME=str(home))
    for var in (
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CONFIG_DIR",
    ):
        orbit.environ.pop(var, None)
    res = orbit(
        "auth", "add", "rel", "--harness", "claude-code", "--kind", "relay", "--from-env", "--json"
    )
    assert res.code == 0, res.err
    shown = res.json()
    assert shown["base_url"] == "https://relay.example" and shown["env"] == {
        "ANTHROPIC_MODEL": "m-1"
    }
    assert shown["source"] == "from-env:ANTHROPIC_AUTH_TOKEN" and KEY not in res.out


@pytest.mark.parametrize(
    ("args", "stdin", "code", "words"),
    [
        (["auth", "add", "x", "--harness", "codex", "--kind", "api-key"], "", 2, "needs a secret"),
        (
            [
                "auth",
                "add",
                "x",
                "--harness",
                "codex",
                "--kind",
                "api-key",
                "--key-env",
                "NOPE_UNSET",
            ],
            "",
            2,
            "NOPE_UNSET: not set",
        ),
        (
            ["auth", "add", "x", "--harness", "codex", "--kind", "api-key", "--key-stdin"],
            "",
            2,
            "nothing on stdin",
        ),
        (
            ["auth", "add", "x", "--harness", "codex", "--kind", "relay", "--key-stdin"],
            "k" * 20,
            2,
            "needs --base-url",
        ),
        (
            ["auth", "add", "x y", "--harness", "codex", "--kind", "api-key", "--key-stdin"],
            "k" * 20,
            2,
            "bad auth profile name",
        ),
        (["auth", "add", "x", "--harness", "gemini", "--kind", "api-key"], "", 2, "invalid choice"),
        (
            [
                "auth",
                "add",
                "x",
                "--harness",
                "codex",
                "--kind",
                "api-key",
                "--key-stdin",
                "--base-url",
                "ftp://a",
            ],
            "k" * 20,
            2,
            "http(s) URL",
        ),
        (["auth", "test", "nosuch"], "", 3, "no auth profile 'nosuch'"),
        (["auth", "rm", "nosuch"], "", 3, "no auth profile"),
        (["run", "--auth", "nosuch", "--no-project", "--", "true"], "", 3, "no auth profile"),
        (["auth"], "", 2, "choose an action"),
    ],
)
def test_bad_auth_input_gets_one_line(
    orbit: Orbit, args: list[str], stdin: str, code: int, words: str
) -> None:
    res = orbit(*args, stdin=stdin)
    assert res.code == code, (res.out, res.err)
    assert words in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert "Traceback" not in res.err


def test_a_profile_that_exists_or_a_broken_auth_file_is_refused(orbit: Orbit) -> None:
    add = ["auth", "add", "p", "--harness", "codex", "--kind", "api-key", "--key-stdin"]
    assert orbit(*add, stdin=KEY).code == 0
    again = orbit(*add, stdin=KEY)
    assert again.code == 5 and "exists" in again.err
    assert orbit(*add, "--replace", stdin=KEY + "2").code == 0
    (orbit.home / "auth.json").write_text('{"profiles": {"p": {"harness": "codex", "ki')
    res = orbit("auth", "list")
    assert res.code == 6 and "auth.json cannot be read" in res.err
    assert len(res.err.strip().splitlines()) == 1


def test_run_needs_the_cli_on_this_machine(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    add_codex_key(orbit)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    orbit.environ["PATH"] = str(empty)
    res = orbit(
        "run", "--auth", "p", "--no-project", "--image", busybox, "--", "codex", "--version"
    )
    assert res.code == 2 and "`codex` is not installed on this machine" in res.err
    assert not list((orbit.home / "runs").glob("[0-9]*"))  # nothing was submitted


def test_secrets_of_runs_submitted_before_version_2_are_still_read(tmp_path: Path) -> None:
    home = Home(tmp_path / "h")
    home.ensure()
    home.secrets_path("7").write_text(json.dumps({"TOKEN": "abcdef123456"}))
    got = secrets.read(home, "7")
    assert got.env == {"TOKEN": "abcdef123456"} and got.values == ["abcdef123456"]
    secrets.write(home, "8", secrets.Secrets({"A": "1234"}, ["zzzz9999"], {"auth.json": b"{}"}))
    got = secrets.read(home, "8")
    assert got.env == {"A": "1234"} and got.redact == ["zzzz9999"]
    folder = secrets.files_dir(home, "8")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "auth.json").stat().st_mode) == 0o600
    secrets.drop(home, "8")
    assert not folder.exists() and not home.secrets_path("8").exists()
    assert os.listdir(home.secrets_dir) == ["7.json"]


def test_doctor_checks_the_auth_file_and_each_harness_cli(orbit: Orbit, tmp_path: Path) -> None:
    from dataclasses import asdict

    from orbit.doctor import check_auth

    home = Home(orbit.home)
    assert check_auth(home, orbit.environ) == []  # no profiles: nothing to say
    add_codex_key(orbit)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex"
    codex.write_text("#!/bin/sh\necho codex-cli 0.0.0\n")
    codex.chmod(0o755)
    checks = [asdict(c) for c in check_auth(home, {"PATH": str(bin_dir)})]
    assert [c["status"] for c in checks] == ["OK"] and str(codex) in checks[0]["detail"]
    (orbit.home / "auth.json").chmod(0o644)
    checks = [asdict(c) for c in check_auth(home, {"PATH": str(tmp_path)})]
    assert [c["status"] for c in checks] == ["FAIL", "WARN"]
    assert checks[0]["fix"] == f"chmod 600 {orbit.home / 'auth.json'}"
    assert "`codex` is not installed" in checks[1]["detail"]

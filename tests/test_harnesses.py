"""The harness registry (orbit/harnesses/): each registered harness is whole, the lists Orbit
shows are the ones it always showed, and a harness Orbit does not ship (tests/harness_tiny.py,
registered for one test by orbit.harnesses.adding) is taken up by every part that knows
harnesses — auth profiles, the in-container setup, bench methods, the Harbor adapter, plugin
installs, transcripts and their names, note authors — with no other file changed.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench_setup import BASIC
from conftest import Orbit

from orbit import harnesses
from orbit.agents import auth, incontainer
from orbit.bench.harbor import HarborAdapter
from orbit.bench.methods import agent_command, check_method, parse_method
from orbit.bench.model import Benchmark
from orbit.cli.session import header
from orbit.errors import UsageError
from orbit.harnesses.base import Harness
from orbit.review import conversation
from orbit.store.home import Home
from orbit.store.notes import author
from orbit.web.session import formats

PACKAGE = Path(__file__).resolve().parents[1] / "orbit"


def help_text(orbit: Orbit, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`orbit ARGS --help` (argparse prints it to sys.stdout), its lines joined."""
    assert orbit(*args, "--help").code == 0
    return " ".join(capsys.readouterr().out.split())


TINY_LINES = [
    json.dumps({"tiny": 1, "role": "user", "text": "add two and two"}),
    json.dumps({"tiny": 1, "role": "assistant", "text": "four"}),
    json.dumps({"tiny": 1, "event": "done"}),
]


def test_every_harness_is_whole() -> None:
    every = harnesses.every()
    assert len({h.id for h in every}) == len({h.plugin for h in every}) == len(every) == 4
    for h in every:
        if h.hook_fragment is not None:
            assert (PACKAGE / "hooks" / h.hook_fragment).is_file()
        if h.transcript is not None:  # the parser named by a string really is one
            module = importlib.import_module(h.transcript.parser)
            assert callable(module.parse_line) and callable(module.is_message)
            assert harnesses.by_format(h.transcript.format) is h
        if h.cli is not None:
            for probe in (False, True):
                argv = h.cli.command("PROMPT", probe=probe)
                assert argv[0] == h.cli.name and argv[-1] == "PROMPT"


def test_the_lists_orbit_shows_keep_their_order(
    orbit: Orbit, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "--harness {codex,claude-code}" in help_text(orbit, capsys, "auth", "add")
    shown = help_text(orbit, capsys, "plugin", "install")
    assert "{claude,codex,pi,dsh}" in shown and "claude (Claude Code), codex, pi or dsh" in shown
    with pytest.raises(UsageError, match=r"\(one of oracle, empty, codex, claude-code\)"):
        parse_method("x=gpt", Path("."))
    with pytest.raises(UsageError, match="effort= applies to codex only"):
        parse_method("x=claude-code,effort=high", Path("."))
    assert harnesses.format_of({"type": "session_meta", "payload": {}}) == "codex"
    assert harnesses.format_of({"type": "user", "message": {}}) == "claude"
    assert harnesses.format_of({"foo": 1}) == "unknown"


def test_one_command_builder_for_auth_test_and_bench() -> None:
    claude, codex = harnesses.cli_of("claude-code"), harnesses.cli_of("codex")
    assert claude.command("P", probe=True) == ["claude", "-p", "--output-format", "text", "P"]
    assert codex.command("P", probe=True) == [
        *("codex", "exec", "--skip-git-repo-check", "--ephemeral", "P")
    ]
    assert claude.command("P", model="m") == [
        *("claude", "-p", "--dangerously-skip-permissions", "--model", "m", "P")
    ]
    assert codex.command("P", model="m", effort="high") == [
        *("codex", "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"),
        *("-m", "m", "-c", "model_reasoning_effort=high", "P"),
    ]


@pytest.fixture
def tiny() -> Iterator[Harness]:
    with harnesses.adding("harness_tiny") as h:
        yield h
    assert "tiny" not in harnesses.ids()  # gone again for the other tests


def test_a_new_harness_gets_auth_profiles_and_an_in_container_setup(
    tiny: Harness, orbit: Orbit, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "--harness {codex,claude-code,tiny}" in help_text(orbit, capsys, "auth", "add")
    res = orbit("auth", "add", "t", "--harness", "tiny", "--kind", "api-key", "--key-stdin",
                stdin="tiny-secret-123456")  # fmt: skip
    assert res.code == 0, res.err
    orbit.environ.update(TINY_API_KEY="tiny-from-env-7890", TINY_URL="http://127.0.0.1:9")
    res = orbit("auth", "add", "e", "--harness", "tiny", "--kind", "relay", "--from-env")
    assert res.code == 0, res.err
    shown = {p["name"]: p for p in orbit("auth", "list", "--json").json()}
    assert shown["t"]["harness"] == shown["e"]["harness"] == "tiny"
    assert (shown["e"]["base_url"], shown["e"]["source"]) == (
        "http://127.0.0.1:9",
        "from-env:TINY_API_KEY",
    )
    # The CLI on the host's PATH is mounted, its plan's variables, secrets and mounts applied.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tiny").write_text("#!/bin/sh\necho tiny 1.0\n")
    (bin_dir / "tiny").chmod(0o755)
    environ = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    home = Home(orbit.home)
    inside = incontainer.setup(home, auth.get(home, "t"), environ, container_root=False)
    assert inside.env["TINY_HOME"] == "/orbit/agent/tiny"
    assert inside.secrets.env == {"TINY_API_KEY": "tiny-secret-123456"}
    assert {"run_dir": "session", "target": "/orbit/agent/tiny/log", "rw": True} in inside.mounts
    assert inside.record["cli"] == {"path": str(bin_dir / "tiny"), "version": "tiny 1.0"}


def test_a_new_harness_is_a_bench_method(tiny: Harness, orbit: Orbit, tmp_path: Path) -> None:
    res = orbit("auth", "add", "t", "--harness", "tiny", "--kind", "api-key", "--key-stdin",
                stdin="tiny-secret-123456")  # fmt: skip
    assert res.code == 0, res.err
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    method = parse_method(f"m=tiny,auth=t,model=big,bundle={bundle}", tmp_path)
    check_method(Home(orbit.home), method)
    argv = agent_command(method, "Do it.")
    assert argv[-6:] == ["tiny", "run", "--yes", "--model", "big", "Do it."]
    assert argv[:2] == ["sh", "-c"] and '"$TINY_HOME"' in argv[2]
    with pytest.raises(UsageError, match="effort= applies to codex only"):
        parse_method("m=tiny,effort=high", tmp_path)
    harbor = HarborAdapter(Benchmark("basic", str(BASIC), "harbor"), Home(tmp_path / "h"))
    hello = {t.name: t for t in harbor.tasks()}["orbit-test/hello"]
    phase = harbor.solve(hello, method, tmp_path / "trial")
    assert phase.command == [] and phase.instruction  # the engine builds tiny's command


def test_a_new_harness_gets_plugin_installs(
    tiny: Harness, orbit: Orbit, capsys: pytest.CaptureFixture[str]
) -> None:
    orbit.environ["HOME"] = str(orbit.cwd)
    shown = help_text(orbit, capsys, "plugin", "install")
    assert "{claude,codex,pi,dsh,tiny}" in shown and "dsh or tiny (Tiny Agent)" in shown
    res = orbit("plugin", "install", "tiny", "--json")
    assert res.code == 0, res.err
    skills = orbit.cwd / ".tiny" / "skills"
    assert res.json()["skills_dir"] == str(skills) and (skills / "orbit" / "SKILL.md").is_file()
    rows = {r["agent"]: r for r in orbit("plugin", "list", "--json").json()["agents"]}
    assert rows["tiny"]["installed"] and not rows["tiny"]["stale"]
    assert orbit("plugin", "remove", "tiny").code == 0
    assert not (skills / "orbit").exists()


def test_a_new_harness_has_its_transcripts_read_and_named(tiny: Harness) -> None:
    assert conversation.detect(TINY_LINES) == "tiny"
    conv = conversation.parse(TINY_LINES)
    assert conv.format == "tiny" and conv.messages == 2
    assert [i["kind"] for i in conv.items] == ["user", "assistant", "raw"]
    assert conversation.count_messages(TINY_LINES) == 2
    assert header("1", "a.jsonl", conv).splitlines()[1].strip() == "Tiny Agent"
    assert formats()["tiny"] == "Tiny Agent"
    assert author({"TINY_AGENT": "1"}) == "tiny"

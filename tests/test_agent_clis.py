"""The real Claude Code and Codex CLIs, installed from the npm registry (pinned versions), start
inside a run's container through Orbit's mounts (`orbit run --auth`): the CLI installed on the
host, mounted read-only, with Node.js for Codex's launcher.

No model provider is reachable here, so only `--version` is asked of them; what they do with a
model is covered by the stand-ins (test_agent_auth.py). The packages are installed once per
machine under /var/cache/orbit-test/agent-clis (about 800 MB, 10 s from the registry).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import Orbit

CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
CACHE = Path(os.environ.get("ORBIT_TEST_CACHE", "/var/cache/orbit-test")) / "agent-clis"


def install_real_clis() -> Path:
    """The npm global prefix holding both CLIs (installed on first use); its bin/ goes on PATH."""
    prefix = CACHE / f"claude-{CLAUDE_VERSION}_codex-{CODEX_VERSION}"
    if (prefix / "bin" / "claude").exists() and (prefix / "bin" / "codex").exists():
        return prefix
    npm = shutil.which("npm")
    assert npm, "npm is needed to install the agent CLIs (apt-get install npm)"
    staging = prefix.with_name(prefix.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    proc = subprocess.run(
        [
            npm,
            "install",
            "-g",
            "--prefix",
            str(staging),
            "--no-audit",
            "--no-fund",
            f"@anthropic-ai/claude-code@{CLAUDE_VERSION}",
            f"@openai/codex@{CODEX_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"npm install failed: {proc.stderr[-2000:]}"
    os.rename(staging, prefix)
    return prefix


@pytest.fixture(scope="module")
def real_clis() -> Path:
    return install_real_clis()


def test_real_claude_and_codex_start_inside_the_container(
    orbit: Orbit, python_image: str, real_clis: Path
) -> None:
    orbit.environ["PATH"] = f"{real_clis / 'bin'}:{orbit.environ['PATH']}"
    orbit.environ["TEST_KEY"] = "sk-test-0123456789abcdef0123"
    for name, harness in (("c", "claude-code"), ("x", "codex")):
        res = orbit(
            "auth", "add", name, "--harness", harness, "--kind", "api-key", "--key-env", "TEST_KEY"
        )
        assert res.code == 0, res.err
    expected = {"c": f"{CLAUDE_VERSION} (Claude Code)", "x": f"codex-cli {CODEX_VERSION}"}
    for name, command in (("c", "claude"), ("x", "codex")):
        res = orbit(
            "run", "--auth", name, "--no-project", "--image", python_image, "--json", "-w",
            "--", command, "--version",
        )  # fmt: skip
        assert res.code == 0, res.err
        run_id = str(res.json()["id"])
        log = (orbit.run_dir(run_id) / "log.txt").read_text()
        assert log.strip() == expected[name], log
        spec = yaml.safe_load((orbit.run_dir(run_id) / "run.yaml").read_text())
        # The host's CLI was found on PATH, asked its version, and recorded with the run.
        assert spec["auth"]["cli"]["version"] == expected[name]
        assert spec["auth"]["cli"]["path"].startswith(str(real_clis))
        targets = {m["target"] for m in spec["mounts"]}
        assert (
            "/orbit/agent/bin" in targets
            and f"/orbit/agent/tools/{spec['auth']['harness']}" in targets
        )
    # Codex's launcher is a Node.js script: the host's node was mounted for it.
    codex_spec = yaml.safe_load((orbit.run_dir("2") / "run.yaml").read_text())
    assert any(m["target"] == "/orbit/agent/node/bin/node" for m in codex_spec["mounts"])

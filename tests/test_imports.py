"""Imports stay lazy: the commands people type most load no Docker client (nor the Docker SDK,
which Orbit does not use), and a shepherd loads only what following one container needs.

Each command runs as a real `python -X importtime orbit.py …` process; the interpreter's own
import log says which modules were loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ORBIT_PY

from orbit.execute.spawn import ENTRY, shepherd_environ
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

# The MCP SDK (and the pydantic and anyio it brings) only for `orbit mcp`.
HEAVY = ("docker", "requests", "mcp", "pydantic", "anyio")


def imported_modules(home: Path, *args: str) -> tuple[str, set[str]]:
    """Run `orbit ARGS`; its stdout and the set of modules it imported."""
    env = {**os.environ, "ORBIT_HOME": str(home)}
    env.pop("ORBIT_DATA", None)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", ORBIT_PY, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    modules = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                modules.add(name)
    return proc.stdout, modules


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with a queued and a finished run, so `ps` has rows to read."""
    store = RunStore(Home(tmp_path / "home"))
    for state, name in ((RunState.SUCCEEDED, "finished-one"), (RunState.QUEUED, "queued-one")):
        spec = {"name": name, "image": "orbit-test/busybox:1", "command": ["true"]}
        store.create(spec, state=state, reason="", actor="test")
    return store.home.root


@pytest.mark.parametrize(
    ("args", "shows"),
    [
        (["--help"], "Run experiments in Docker"),
        (["ps"], "queued-one"),  # read from the run directory
        (["ps", "-a"], "finished-one"),  # read from the index
    ],
    ids=["help", "ps", "ps-a"],
)
def test_command_does_not_import_docker(home: Path, args: list[str], shows: str) -> None:
    out, modules = imported_modules(home, *args)
    assert shows in out
    assert "orbit.cli" in modules  # the log was read: a parse that found nothing proves nothing
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == []


# What a shepherd must not load: a machine runs a hundred of them, each for as long as its run
# (dataclasses alone, with the inspect, ast and dis it imports, costs each about 1 MB).
NOT_IN_SHEPHERD = (
    *HEAVY,
    "dataclasses",
    "typing",
    "inspect",
    "psutil",
    "portalocker",
    "argparse",
    "tarfile",
    "shutil",
    "tempfile",
    "hashlib",
)


def test_shepherd_imports_stay_lean(tmp_path: Path) -> None:
    # As spawn.py starts one: `python -S`, with the environment and import path a shepherd gets;
    # orbit.sched.gpus is what it imports for a run that leases GPUs.
    code = f"import sys, {ENTRY}, orbit.sched.gpus; print(' '.join(sys.modules))"
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        env=shepherd_environ(Home(tmp_path / "home")),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    modules = set(proc.stdout.split())
    assert ENTRY in modules
    assert sorted(m for m in modules if m.split(".")[0] in NOT_IN_SHEPHERD) == []


# Read only for `orbit run --json`: the metric readers and the record's describer.
ONLY_FOR_JSON = ("orbit.review.metrics", "orbit.store.describe")


@pytest.mark.docker
def test_run_wait_imports_no_json_readers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # A busy machine (use outside Orbit counted) must not hold the runs back.
    (home / "config.yaml").write_text("format: 1\ncount_outside_use: false\n")
    run = ["run", "--no-project", "--image", "orbit-test/busybox:1", "--cpus", "1"]
    run += ["--mem", "0.25"]
    _, modules = imported_modules(home, *run, "-w", "--", "true")
    assert "orbit.execute.submit" in modules  # it did submit
    assert sorted(m for m in modules if m in ONLY_FOR_JSON) == []
    out, modules = imported_modules(home, *run, "-w", "--json", "--", "true")
    assert '"metrics"' in out and '"state": "succeeded"' in out
    assert sorted(m for m in modules if m in ONLY_FOR_JSON) == list(ONLY_FOR_JSON)

"""Every user error: one line on stderr, a documented exit code, no traceback, nothing half-written.

Each test drives the real CLI in-process; the Docker ones use a real engine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import Orbit, Result

from orbit.errors import ExitCode
from orbit.store.files import read_jsonl
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

SMALL = ("--cpus", "0.5", "--mem", "0.25")


def one_line_error(res: Result, code: ExitCode) -> str:
    """The single stderr line of a failed command, after checking the failure's shape."""
    assert res.code == code, f"exit {res.code} (wanted {code.name}): {res.err}"
    assert "Traceback" not in res.err
    lines = res.err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{res.err}"
    assert lines[0].startswith("orbit: "), lines[0]
    assert not lines[0].startswith("orbit: orbit"), lines[0]
    return lines[0]


def assert_no_runs(orbit: Orbit) -> None:
    for sub in ("runs", "queue", "active"):
        folder = orbit.home / sub
        assert not folder.exists() or os.listdir(folder) == [], f"{sub}/ is not empty"
    assert read_jsonl(orbit.home / "index.jsonl") == []


# --- options and arguments (refused before Docker is asked anything) --------------------------
@pytest.mark.parametrize(
    ("extra", "command", "expected"),
    [
        (["--mem", "abc"], ["true"], "--mem: expected a positive number, got 'abc'"),
        (["--mem", "0"], ["true"], "--mem: expected a positive number, got '0'"),
        (["--cpus", "0"], ["true"], "--cpus: expected a positive number, got '0'"),
        (["--cpus", "-1"], ["true"], "--cpus: expected a positive number, got '-1'"),
        (["--cpus", "nan"], ["true"], "--cpus: expected a positive number"),
        (["--cpus", "999"], ["true"], "can never start: it needs 999 CPUs"),
        (["--mem", "100000"], ["true"], "can never start: it needs 100000 GiB memory"),
        (["--timeout", "0"], ["true"], "--timeout: expected a positive number, got '0'"),
        (["-m", "no-such-dir:/data"], ["true"], "mount source does not exist"),
        (["-m", "."], ["true"], "-m expects SRC:DST[:rw]"),
        (["-m", ".:relative"], ["true"], "destination must be an absolute path"),
        (["-e", "NOTKV"], ["true"], "-e expects KEY=VALUE, got 'NOTKV'"),
        (["--pass-env", "ORBIT_TEST_UNSET_VAR"], ["true"], "ORBIT_TEST_UNSET_VAR: not set"),
        ([], [], "no command given"),
        (["--dockerfile", "Dockerfile"], ["true"], "not allowed with argument --image"),
        (["--bogus"], ["true"], "unrecognized arguments: --bogus"),
    ],
    ids=[
        "mem-abc",
        "mem-0",
        "cpus-0",
        "cpus-negative",
        "cpus-nan",
        "cpus-999",
        "mem-too-big",
        "timeout-0",
        "mount-missing",
        "mount-no-target",
        "mount-relative-target",
        "env-not-kv",
        "pass-env-unset",
        "no-command",
        "image-and-dockerfile",
        "unknown-option",
    ],
)
def test_bad_run_options(orbit: Orbit, extra: list[str], command: list[str], expected: str) -> None:
    orbit.environ.pop("ORBIT_TEST_UNSET_VAR", None)
    res = orbit("run", "--no-project", "--image", "orbit-test/busybox:1", *extra, "--", *command)
    line = one_line_error(res, ExitCode.USAGE)
    assert expected in line
    assert res.out == ""
    assert_no_runs(orbit)


def test_no_command_without_separator(orbit: Orbit) -> None:
    res = orbit("run", "--no-project", "--image", "orbit-test/busybox:1")
    assert "no command given" in one_line_error(res, ExitCode.USAGE)
    assert_no_runs(orbit)


def test_project_that_is_not_a_git_repo(orbit: Orbit) -> None:
    res = orbit("run", "--image", "orbit-test/busybox:1", "--", "true")
    line = one_line_error(res, ExitCode.USAGE)
    assert "not inside a Git repository" in line and "--no-project" in line
    assert_no_runs(orbit)


def test_project_that_does_not_exist(orbit: Orbit) -> None:
    res = orbit("run", "--project", "nowhere", "--image", "orbit-test/busybox:1", "--", "true")
    assert "does not exist" in one_line_error(res, ExitCode.USAGE)
    assert_no_runs(orbit)


@pytest.mark.parametrize("command", [["wait"], ["rm", "--yes"]])
def test_neither_ids_nor_group(orbit: Orbit, command: list[str]) -> None:
    res = orbit(*command)
    assert "give run ids or -g GROUP" in one_line_error(res, ExitCode.USAGE)


@pytest.mark.parametrize(
    "command",
    [["show"], ["logs"], ["wait"], ["cancel"], ["note", "{ref}", "text"], ["rm", "--yes"]],
    ids=["show", "logs", "wait", "cancel", "note", "rm"],
)
@pytest.mark.parametrize("ref", ["42", "no-such-name", "../runs/1"])
def test_unknown_run(orbit: Orbit, command: list[str], ref: str) -> None:
    store = RunStore(Home(orbit.home))
    # Finished, so a command that wrongly resolved `ref` to it returns at once.
    store.create(
        {"name": "other", "command": ["true"]}, state=RunState.SUCCEEDED, reason="", actor="test"
    )
    argv = [a.replace("{ref}", ref) for a in command]
    if "{ref}" not in command:
        argv.append(ref)
    res = orbit(*argv)
    line = one_line_error(res, ExitCode.NOT_FOUND)
    assert f"no run {ref!r}" in line


def test_ps_with_a_bad_option(orbit: Orbit) -> None:
    res = orbit("ps", "--bogus")
    assert "unrecognized arguments: --bogus" in one_line_error(res, ExitCode.USAGE)


# --- Docker ------------------------------------------------------------------------------------
def test_docker_not_running(orbit: Orbit, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    socket = f"unix://{tmp_path}/no-docker.sock"
    orbit.environ["DOCKER_HOST"] = socket
    monkeypatch.setenv("DOCKER_HOST", socket)  # docker.from_env reads os.environ
    res = orbit("run", "--no-project", "--image", "orbit-test/busybox:1", *SMALL, "--", "true")
    line = one_line_error(res, ExitCode.DOCKER)
    assert "Docker is not reachable" in line
    assert "systemctl start docker" in line and "dockerd" in line
    assert_no_runs(orbit)


def test_image_that_cannot_be_pulled(orbit: Orbit, busybox: str) -> None:
    orbit.configure(pull_timeout_s=20)
    image = "orbit-test/does-not-exist:1"
    res = orbit("run", "--no-project", "--image", image, *SMALL, "--", "true")
    line = one_line_error(res, ExitCode.DOCKER)
    assert f"image not found: {image}" in line
    assert_no_runs(orbit)


def test_dockerfile_that_fails_to_build_keeps_its_log(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    context = tmp_path / "broken-image"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {busybox}\nRUN false\n")
    res = orbit(
        "run", "--no-project", "--dockerfile", str(context / "Dockerfile"), *SMALL, "--", "true"
    )
    line = one_line_error(res, ExitCode.DOCKER)
    assert "image build failed" in line
    build_log = orbit.run_dir("1") / "build.log"
    assert str(build_log) in line
    assert "RUN false" in build_log.read_text()
    status = orbit.status("1")
    assert status["state"] == "failed"
    assert status["reason"].startswith("image build failed")
    assert status["finished_at"] is not None
    assert os.listdir(orbit.home / "queue") == []  # never queued
    listed = orbit("ps", "-a", "--json").json()["runs"]
    assert [(r["id"], r["state"]) for r in listed] == [("1", "failed")]


# --- existing runs -----------------------------------------------------------------------------
def test_ambiguous_name(orbit: Orbit, busybox: str) -> None:
    first = orbit.submit("--no-project", "--image", busybox, *SMALL, "-n", "dup", "--", "true")
    second = orbit.submit("--no-project", "--image", busybox, *SMALL, "-n", "dup", "--", "true")
    assert orbit("wait", first, second).code == 0
    res = orbit("show", "dup")
    line = one_line_error(res, ExitCode.NOT_FOUND)
    assert f"'dup' is ambiguous: it matches runs {first}, {second}" in line
    assert orbit("show", first).code == 0  # an exact id still works


def test_rm_of_a_running_run(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit("--no-project", "--image", busybox, *SMALL, "--", "sleep", "30")
    try:
        res = orbit("rm", "--yes", run_id)
        line = one_line_error(res, ExitCode.CONFLICT)
        assert "cancel them first" in line
        assert orbit.run_dir(run_id).is_dir()
        assert orbit.status(run_id)["state"] in ("queued", "starting", "running")
    finally:
        cancelled = orbit("cancel", run_id)
    assert cancelled.code == 0, cancelled.err
    assert orbit.status(run_id)["state"] == "cancelled"


def test_rm_without_yes_when_stdin_is_not_a_terminal(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit("--no-project", "--image", busybox, *SMALL, "-w", "--", "true")
    res = orbit("rm", run_id, stdin=f"{run_id}\n")
    line = one_line_error(res, ExitCode.USAGE)
    assert "--yes" in line
    assert orbit.status(run_id)["state"] == "succeeded"


def test_truncated_status_yaml(orbit: Orbit, busybox: str) -> None:
    ids = [
        orbit.submit("--no-project", "--image", busybox, *SMALL, "-n", f"r{i}", "--", "true")
        for i in range(3)
    ]
    assert orbit("wait", *ids).code == 0
    assert orbit("ps", "-a").code == 0  # the index now holds a row for each run
    broken = ids[1]
    path = orbit.run_dir(broken) / "status.yaml"
    data = path.read_bytes()
    with open(path, "r+b") as fh:
        fh.truncate(len(data) // 2)

    res = orbit("ps", "-a")
    assert res.code == 0 and res.err == ""
    lines = {line.split()[0]: line for line in res.out.splitlines()[1:]}
    assert sorted(lines) == sorted(ids)
    assert "succeeded" in lines[ids[0]] and "succeeded" in lines[ids[2]]
    assert "unreadable" in lines[broken] and "status.yaml" in lines[broken]
    rows = {r["id"]: r for r in orbit("ps", "-a", "--json").json()["runs"]}
    assert rows[broken]["state"] == "unreadable"
    assert "\n" not in rows[broken]["error"] and str(path) in rows[broken]["error"]

    res = orbit("show", broken)
    line = one_line_error(res, ExitCode.CORRUPT)
    assert str(path) in line
    assert orbit("show", ids[2]).code == 0
    tick = orbit("scheduler", "tick", "--json")
    assert tick.code == 0, tick.err
    assert tick.json()["ran"] is True


def test_a_broken_queued_run_does_not_stop_the_tick(orbit: Orbit, busybox: str) -> None:
    """The tick reports an unreadable queued run as a problem and admits the others."""
    store = RunStore(Home(orbit.home))
    spec = {
        "image": busybox,
        "command": ["true"],
        "resources": {"cpus": 0.5, "mem_gb": 0.25},
        "project": {"mode": "none"},
        "user": f"{os.getuid()}:{os.getgid()}",
    }
    broken = store.create(spec, reason="waiting for the scheduler", actor="test")
    good = store.create(spec, reason="waiting for the scheduler", actor="test")
    broken.path("status.yaml").write_text("format: 1\nstate: [queued\n")
    res = orbit("scheduler", "tick", "--json")
    assert res.code == 0, res.err
    report = res.json()
    assert report["admitted"] == [good.id]
    assert len(report["problems"]) == 1 and str(broken.path("status.yaml")) in report["problems"][0]
    assert orbit.wait_for(good.id, lambda s: s["state"] == "succeeded", timeout=30)
    listed = {r["id"]: r["state"] for r in orbit("ps", "--json").json()["runs"]}
    assert listed == {broken.id: "unreadable"}


def test_an_image_removed_while_its_run_waits_fails_the_run(orbit: Orbit, busybox: str) -> None:
    """README: an unknown image is refused at submit (exit 4, no run: the test above); one that
    disappears between submit and start fails the recorded run, `image not found: IMAGE`, and
    `orbit run -w` exits 125."""
    import subprocess
    import time

    image = f"orbit-test/vanishing:{os.getpid()}-{time.monotonic_ns()}"
    subprocess.run(["docker", "tag", busybox, image], check=True)
    try:
        orbit.configure(total_cpus=1)
        blocker = orbit.submit(
            "--no-project",
            "--image",
            busybox,
            "--cpus",
            "1",
            "--mem",
            "0.1",
            "--",
            "sh",
            "-c",
            "trap exit TERM; sleep 60 & wait",
        )
        waiting = orbit.proc(
            "run",
            "--no-project",
            "--image",
            image,
            "--cpus",
            "1",
            "--mem",
            "0.1",
            "-w",
            "--",
            "true",
        )
        queued = orbit.wait_for(str(int(blocker) + 1), lambda s: s["state"] == "queued")
        assert queued["state"] == "queued"
    finally:
        subprocess.run(["docker", "rmi", image], check=True, capture_output=True)
    assert orbit("cancel", blocker).code == 0
    _, err = waiting.communicate(timeout=60)
    assert waiting.returncode == ExitCode.NO_RESULT, err
    status = orbit.status(str(int(blocker) + 1))
    assert (status["state"], status["reason"]) == ("failed", f"image not found: {image}")
    assert status["exit_code"] is None
    assert f"image not found: {image}" in err

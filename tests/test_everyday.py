"""What a daily user meets: `run -w`'s exit code, why a run waits, and doctor's path check.

All against the real Docker engine (and, for doctor's warning, a second real dockerd whose file
system view lacks the test's home).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import SMALL, Orbit, kill_shepherd

from orbit.errors import ExitCode


def running(status: dict) -> bool:
    return status.get("state") == "running"


def queued_with(text: str) -> Callable[[dict], bool]:
    return lambda s: s.get("state") == "queued" and text in (s.get("reason") or "")


def queue_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if " queued: " in line]


# --- orbit run -w exits with the command's exit code ------------------------------------------
def test_run_wait_exits_with_the_commands_code(orbit: Orbit, busybox: str) -> None:
    res = orbit("run", "--image", busybox, *SMALL, "-w", "--", "sh", "-c", "echo hi; exit 3")
    assert res.code == 3, res.err
    assert res.out == "hi\n"
    assert res.err == "orbit: run 1 failed: exit code 3\n"  # admitted at once: no queue line
    # `orbit wait` keeps 0/1, for one run as for many.
    assert orbit("wait", "1").code == ExitCode.RUN_FAILED
    ok = orbit("run", "--image", busybox, *SMALL, "-w", "--", "echo", "fine")
    assert ok.code == 0 and ok.out == "fine\n" and ok.err == "orbit: run 2 succeeded\n"
    assert orbit("wait", "2").code == 0
    assert orbit("wait", "1", "2").code == ExitCode.RUN_FAILED


def test_run_wait_json_exits_the_same(orbit: Orbit, busybox: str) -> None:
    res = orbit("run", "--json", "--image", busybox, *SMALL, "-w", "--", "sh", "-c", "exit 42")
    assert res.code == 42
    data = res.json()
    assert data["state"] == "failed" and data["exit_code"] == 42


def test_a_command_killed_by_a_signal_passes_its_code_through(orbit: Orbit, busybox: str) -> None:
    res = orbit("run", "--image", busybox, *SMALL, "-w", "--", "sh", "-c", "kill -USR1 $$")
    assert res.code == 128 + signal.SIGUSR1, res.err
    assert orbit.status("1")["exit_code"] == 128 + signal.SIGUSR1


def test_run_wait_cancelled_from_another_process(orbit: Orbit, busybox: str) -> None:
    proc = orbit.proc("run", "--image", busybox, *SMALL, "-w", "--", "sleep", "300")
    try:
        orbit.wait_for("1", running)
        assert orbit("cancel", "1").code == 0
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == ExitCode.CANCELLED == 143, err
    assert "orbit: run 1 cancelled: cancelled by user" in err


def test_run_wait_of_a_run_that_never_ran(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    """A mount that was there at submit and is gone when the container is created: the
    container never runs, and `run -w` says so with 125."""
    orbit.configure(total_cpus=1)
    blocker = orbit.submit("--image", busybox, *SMALL, "--", "sleep", "300")
    orbit.wait_for(blocker, running)
    data = tmp_path / "data"
    data.mkdir()
    proc = orbit.proc(
        "run", "--image", busybox, *SMALL, "-m", f"{data}:/data", "-w", "--", "ls", "/data"
    )
    try:
        orbit.wait_for("2", queued_with("waiting for 1 CPU"))
        data.rmdir()
        assert orbit("cancel", blocker).code == 0
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == ExitCode.NO_RESULT == 125, err
    status = orbit.status("2")
    assert status["state"] == "failed" and status["exit_code"] is None
    assert f"orbit: run 2 failed: {status['reason']}" in err


def test_run_wait_of_a_lost_run(orbit: Orbit, busybox: str) -> None:
    """The container vanishes with its shepherd: the waiting command's tick finds the run lost."""
    proc = orbit.proc("run", "--image", busybox, *SMALL, "-w", "--", "sleep", "300")
    try:
        status = orbit.wait_for("1", running)
        kill_shepherd(orbit, "1")
        subprocess.run(["docker", "rm", "-f", status["container"]], capture_output=True, check=True)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == ExitCode.NO_RESULT, err
    assert orbit.status("1")["state"] == "lost"
    assert "orbit: run 1 lost: " in err


# --- why a run waits ---------------------------------------------------------------------------
def test_run_wait_and_wait_say_why_a_run_is_queued(orbit: Orbit, busybox: str) -> None:
    orbit.configure(total_cpus=2, total_mem_gb=1)
    a = orbit.submit("--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.25", "--",
                     "sleep", "300")  # fmt: skip
    a2 = orbit.submit("--image", busybox, "--no-project", "--cpus", "0.5", "--mem", "0.75", "--",
                      "sleep", "300")  # fmt: skip
    orbit.wait_for(a, running)
    orbit.wait_for(a2, running)
    b_args = ("--image", busybox, "--no-project", "--cpus", "1.5", "--mem", "0.5", "-n", "b")
    runner = orbit.proc("run", *b_args, "-w", "--", "echo", "done")
    waiter = None
    try:
        first = orbit.wait_for("3", queued_with("memory"))["reason"]
        waiter = orbit.proc("wait", "3")
        time.sleep(6)  # more than one tick of each waiting command: the reason stays the same
        assert orbit("cancel", a2).code == 0  # memory frees; 1.5 CPUs are still not free
        second = orbit.wait_for("3", lambda s: s.get("reason") != first)["reason"]
        assert second == "waiting for 1.5 CPUs: 1 of 2 leased"
        time.sleep(6)
        assert orbit("cancel", a).code == 0
        out, err = runner.communicate(timeout=60)
        w_out, w_err = waiter.communicate(timeout=60)
    finally:
        runner.kill()
        if waiter:
            waiter.kill()
    assert runner.returncode == 0, err
    assert out == "done\n"  # stdout holds only the command's output
    lines = queue_lines(err)
    assert lines[-2:] == [f"orbit: run 3 (b) queued: {first}", f"orbit: run 3 (b) queued: {second}"]
    assert len(set(lines)) == len(lines)  # each reason said once, not on every poll
    assert waiter.returncode == 0 and w_out == "run 3 (b) succeeded\n"
    assert queue_lines(w_err) == lines[-2:]


class StepClock:
    """A monotonic clock that moves only when the test says, and counts its readings."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        return self.now


def until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_run_wait_says_a_reason_again_only_when_it_changes_in_kind(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    """The GPU's use outside Orbit changes its figure at every tick (20.1, 20.2, … GiB): `run -w`
    says the reason once, then, with only the figures changed, once more after REPEAT_SECONDS."""
    from conftest import gpu, write_gpus

    from orbit.cli import main
    from orbit.cli.watch import REPEAT_SECONDS
    from orbit.env import Env

    def outside(gb: float) -> None:
        alice = {"pid": 4242, "memory_gb": gb, "name": "python", "user": "alice"}
        write_gpus(tmp_path / "gpus.yaml", [gpu(0, processes=[alice])])

    outside(20.1)
    orbit.environ["ORBIT_FAKE_GPUS"] = str(tmp_path / "gpus.yaml")
    clock, err = StepClock(), io.StringIO()
    env = Env(environ=dict(orbit.environ), stdout=io.StringIO(), stderr=err, cwd=orbit.cwd,
              monotonic=clock)  # fmt: skip
    argv = ["run", "--image", busybox, *SMALL, "--gpus", "1", "-n", "g", "-w", "--", "true"]
    codes: list[int] = []
    waiter = threading.Thread(target=lambda: codes.append(main(argv, env)))
    lines = lambda: len(queue_lines(err.getvalue()))  # noqa: E731
    waiter.start()
    try:
        orbit.wait_for("1", queued_with("(python, user alice, 20.1 GiB)"))
        until(lambda: lines() == 1, "run -w never said the first reason")  # before it changes
        for gb in (20.2, 20.3, 20.4, 20.5, 20.6, 20.7, 20.8, 20.9, 21.2, 21.1):
            said = lines()
            outside(gb)  # ten ticks, each with another figure
            assert orbit("scheduler", "tick").code == 0
            orbit.wait_for("1", queued_with(f"(python, user alice, {gb} GiB)"))
            # run -w has read the new reason: it said it, or read the clock twice since (it
            # reads it on each poll while the reason differs from the line it said)
            readings = clock.readings
            seen = lambda r=readings, n=said: clock.readings >= r + 2 or lines() > n  # noqa: E731
            until(seen, "run -w stopped polling")
        assert lines() == 1, err.getvalue()
        clock.now += REPEAT_SECONDS  # the figures changed, and the last line is old now
        until(lambda: lines() == 2, err.getvalue())
    finally:
        orbit("cancel", "1")
        waiter.join(60)
    assert codes == [int(ExitCode.CANCELLED)]
    reason = "waiting for 1 GPU: GPU 0 in use outside Orbit by pid 4242 (python, user alice, {})"
    assert queue_lines(err.getvalue()) == [
        "orbit: run 1 (g) queued: " + reason.format("20.1 GiB"),
        "orbit: run 1 (g) queued: " + reason.format("21.1 GiB"),
    ]


def test_a_reasons_kind_leaves_its_figures_out() -> None:
    from orbit.cli.watch import reason_kind

    load = "waiting for 1 CPU: 0 of 2 leased, CPUs busy outside Orbit (load {} of 2)"
    assert reason_kind(load.format("1.5")) == reason_kind(load.format("2"))
    held = "waiting for 1 CPU: {} reserved for an earlier run"
    assert len({reason_kind(held.format(x)) for x in ("0.49", "0.5", "0.51")}) == 1
    assert reason_kind(load.format(2)) != reason_kind("waiting for 1 CPU: 2 of 2 leased")


# --- orbit doctor: does Docker see Orbit's paths? ----------------------------------------------
def path_check(orbit: Orbit) -> dict:
    res = orbit.proc("doctor", "--json")
    out, err = res.communicate(timeout=60)
    assert res.returncode == 0, err
    return next(c for c in json.loads(out)["checks"] if c["name"] == "docker paths")


def doctor_leftovers(orbit: Orbit, docker_host: str) -> tuple[list[str], str]:
    probes = [p.name for p in (orbit.home / "runs").iterdir() if p.name.startswith(".doctor")]
    containers = subprocess.run(
        ["docker", "-H", docker_host, "ps", "-aq", "--filter", "label=orbit.doctor"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return probes, containers


def test_doctor_sees_the_paths_of_a_local_engine(orbit: Orbit, busybox: str) -> None:
    started = time.monotonic()
    check = path_check(orbit)
    elapsed = time.monotonic() - started
    assert check["status"] == "OK", check
    assert check["detail"] == f"the engine sees {orbit.home / 'runs'} as Orbit does"
    probes, _ = doctor_leftovers(orbit, "unix:///var/run/docker.sock")
    assert probes == []
    print(f"orbit doctor (all checks) took {elapsed:.2f} s")


@pytest.fixture
def masked_engine(tmp_path: Path) -> Iterator[str]:
    """A second dockerd in its own mount namespace, where a tmpfs hides `tmp_path` (so the
    test's home is not there): its DOCKER_HOST. It gets a bridge of its own (a dockerd with
    `--bridge=none` deletes the shared docker0)."""
    if os.geteuid() != 0:
        pytest.skip("starting a second dockerd needs root")
    for tool in ("dockerd", "unshare", "ip"):
        if shutil.which(tool) is None:
            pytest.skip(f"starting a second dockerd needs {tool}, which is not installed")
    root = Path(tempfile.mkdtemp(prefix="od2-", dir="/tmp"))  # short: a socket path is ≤ 107
    bridge = f"obr{os.getpid() % 100000}"
    subnet = f"172.31.{200 + os.getpid() % 50}"
    subprocess.run(["ip", "link", "add", "name", bridge, "type", "bridge"], check=True)
    proc = None
    try:
        subprocess.run(["ip", "addr", "add", f"{subnet}.1/24", "dev", bridge], check=True)
        subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
        script = (
            'mount -t tmpfs tmpfs "$1" && exec dockerd --data-root "$2/data" --exec-root '
            '"$2/exec" --pidfile "$2/pid" -H "unix://$2/sock" --bridge="$3" --iptables=false '
            "--ip-masq=false"
        )
        with open(root / "log", "wb") as log:
            argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"]
            proc = subprocess.Popen(
                [*argv, str(tmp_path), str(root), bridge],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        host = f"unix://{root}/sock"
        deadline = time.monotonic() + 30
        while subprocess.run(["docker", "-H", host, "version"], capture_output=True).returncode:
            if proc.poll() is not None or time.monotonic() > deadline:
                log_text = (root / "log").read_text()[-2000:]
                pytest.fail(f"the second dockerd did not start: {log_text}")
            time.sleep(0.2)
        yield host
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.docker  # masked_engine starts a dockerd of its own
def test_doctor_warns_when_docker_sees_other_paths(orbit: Orbit, masked_engine: str) -> None:
    orbit.environ["DOCKER_HOST"] = masked_engine
    orbit.home.mkdir(parents=True, exist_ok=True)  # doctor would create it anyway
    check = path_check(orbit)
    assert check["status"] == "WARN", check
    runs = orbit.home / "runs"
    assert check["detail"] == (
        f"the engine does not see {runs} (bind mounts of it fail: no such path)"
    )
    assert "DOCKER_HOST" in check["fix"]
    text = orbit.proc("doctor")
    out, err = text.communicate(timeout=60)
    assert text.returncode == 0, err  # a WARN is not a failure
    assert next(line for line in out.splitlines() if "docker paths" in line).startswith("WARN")
    assert doctor_leftovers(orbit, masked_engine) == ([], "")
    # The engine had no image: doctor imported an empty one to create its probe container.
    images = subprocess.run(
        ["docker", "-H", masked_engine, "images", "-q", "orbit-doctor/empty:1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert images.strip()

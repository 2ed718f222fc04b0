"""What holds a running run back that is not its program, said where people look (shepherd
troubles, execute/troubles.py): Docker killed and restarted under a run (the second engine,
tests/node_engine.py), and a full disk under the run (a small tmpfs)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SMALL, Orbit
from node_setup import SecondEngine


def finished(status: dict) -> bool:
    return status["state"] in ("succeeded", "failed", "cancelled", "lost")


@pytest.fixture
def engine2_orbit(orbit: Orbit, second_engine: SecondEngine) -> Iterator[Orbit]:
    """A home whose runs run on the second engine, which a test may kill and restart."""
    orbit.environ["DOCKER_HOST"] = second_engine.docker_host
    yield orbit
    second_engine.start()  # a test that failed midway may have left it dead
    for cid in second_engine.docker("ps", "-aq").stdout.split():
        second_engine.docker("rm", "-f", cid)


def test_docker_killed_under_a_run_is_said_and_its_restart_is_blamed(
    engine2_orbit: Orbit, second_engine: SecondEngine, busybox: str
) -> None:
    orbit = engine2_orbit
    script = "i=0; while true; do i=$((i+1)); echo T-$i; sleep 0.2; done"
    run_id = orbit.submit("--image", busybox, *SMALL, "-n", "long", "--", "sh", "-c", script)
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    log = orbit.run_dir(run_id) / "log.txt"
    deadline = time.monotonic() + 20
    while "T-3\n" not in log.read_text():
        assert time.monotonic() < deadline, "the run never printed"
        time.sleep(0.05)
    waiting = orbit.proc("wait", run_id)
    try:
        second_engine.kill()
        status = orbit.wait_for(run_id, lambda s: bool(s.get("reason")), timeout=20)
        assert status["state"] == "running"
        assert status["reason"].startswith("Docker is not answering since "), status
        assert (
            status["docker_unreachable"][0]["from"] and "to" not in status["docker_unreachable"][0]
        )
        shown = orbit("ps").out
        assert "Docker is not answering since" in shown, shown
        second_engine.start()
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    status = orbit.status(run_id)
    assert status["state"] == "failed", status
    assert status["reason"] == "stopped by a Docker daemon restart (exit code 143)", status
    outage = status["docker_unreachable"]
    assert len(outage) == 1 and outage[0]["from"] < outage[0]["to"], outage
    events = [e["event"] for e in orbit.events(run_id)]
    assert events.count("docker-unreachable") == 1 and events.count("docker-back") == 1, events
    # While Docker was away `orbit wait` said why the run did not move; its result says the
    # daemon stopped the run, and that the log may lack what was written meanwhile.
    assert f"orbit: run {run_id} (long) running: Docker is not answering since" in err, err
    assert "stopped by a Docker daemon restart (exit code 143)" in out, out
    assert "log incomplete: Docker was not answering " in out, out
    assert "log incomplete: Docker was not answering" in orbit("logs", run_id).err
    assert "log incomplete: Docker was not answering" in orbit("show", run_id).out
    assert "Docker is not answering" in (orbit.run_dir(run_id) / "shepherd.log").read_text()


def held_by_something(status: dict) -> bool:
    return status["state"] == "running" and bool(status.get("reason"))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs as ORBIT_HOME's disk (root only: `mount`); the test grows it."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_run_held_by_a_full_disk_says_so_until_space_returns(
    busybox: str, small_disk: Path, tmp_path: Path
) -> None:
    orbit = Orbit(small_disk / "home", tmp_path)
    try:
        # 6 MB of output for a 4 MiB disk, then a pause: the copy waits for room.
        flood = "awk 'BEGIN{for(i=1;i<=60000;i++) printf \"%09d-%090d\\n\", i, 0}'"
        run_id = orbit.submit(
            "--image", busybox, "--no-project", *SMALL, "--", "sh", "-c", f"{flood}; echo END"
        )
        status = orbit.wait_for(run_id, held_by_something, timeout=60)
        where = str(orbit.run_dir(run_id))
        assert status["reason"] == f"waiting: disk full under {where}", status
        assert f"waiting: disk full under {where}" in orbit("ps").out
        assert f"waiting: disk full under {where}" in orbit("show", run_id).out
        waiting = orbit.proc("wait", run_id)
        time.sleep(1)  # `orbit wait` has looked at the run once (it says why it waits)
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        _, err = waiting.communicate(timeout=60)
        assert f"orbit: run {run_id} running: waiting: disk full under {where}" in err, err
        status = orbit.wait_for(run_id, finished, timeout=60)
        assert status["state"] == "succeeded" and not status.get("reason"), status
        lines = (orbit.run_dir(run_id) / "log.txt").read_text().splitlines()
        assert len(lines) == 60_001 and lines[-1] == "END"  # nothing lost
        events = [e["event"] for e in orbit.events(run_id)]
        assert events.count("disk-full") == 1 and events.count("disk-space-back") == 1, events
        said = (orbit.run_dir(run_id) / "shepherd.log").read_text()
        assert said.count("disk full under") == 1, said
        from orbit.store.locks import is_locked

        deadline = time.monotonic() + 30
        while is_locked(orbit.run_dir(run_id) / "shepherd.lock"):  # its last steps
            assert time.monotonic() < deadline, "the shepherd never ended"
            time.sleep(0.05)
        assert not (orbit.run_dir(run_id) / ".disk-reserve").exists()
    finally:
        from conftest import _cleanup_containers

        _cleanup_containers(orbit.home)

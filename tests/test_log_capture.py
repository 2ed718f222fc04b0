"""Log capture under pressure, against a real Docker engine: floods past Docker's log rotation,
shepherd kills and stops, secrets split by Docker, a full disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SMALL, Orbit, kill_shepherd, shepherd_pid

# Docker rotates the json-file log every 20 MB of JSON: about 117,000 lines of 100 bytes.
FLOOD = 250_000
AWK_FLOOD = "awk 'BEGIN{{for(i={start};i<={end};i++) printf \"%09d-%090d\\n\", i, 0}}'"  # 100 bytes


def finished(status: dict) -> bool:
    return status["state"] in ("succeeded", "failed", "cancelled", "lost")


def numbered(start: int, end: int) -> list[str]:
    return [f"{i:09d}-{0:090d}" for i in range(start, end + 1)]


def log_lines(orbit: Orbit, run_id: str) -> list[str]:
    return (orbit.run_dir(run_id) / "log.txt").read_text().splitlines()


def assert_copied_cleanly(orbit: Orbit, run_id: str) -> None:
    """No read of Docker's log failed along the way (shepherd.log says so otherwise)."""
    path = orbit.run_dir(run_id) / "shepherd.log"
    text = path.read_text() if path.exists() else ""
    assert "log copy failed" not in text, text


def exit_record(orbit: Orbit, run_id: str) -> dict:
    return json.loads((orbit.run_dir(run_id) / "exit.json").read_text())


def docker_tail(container: str, n: int) -> str:
    proc = subprocess.run(
        ["docker", "logs", "--tail", str(n), container], capture_output=True, text=True
    )
    return proc.stdout + proc.stderr


def flood_run(orbit: Orbit, image: str, script: str, *options: str) -> str:
    return orbit.submit("--image", image, "--no-project", "--cpus", "0.5", "--mem", "0.25",
                        *options, "--", "sh", "-c", script)  # fmt: skip


def timed_flood(seconds: int) -> str:
    """Numbered 100-byte lines at full speed for about `seconds` s (or without end, for 0),
    then `COUNT n`. srand() returns the previous seed: `srand(); srand()` reads the clock."""
    stop = f"if(i%5000==0){{srand(); if(srand()-t>={seconds}) break}}" if seconds else ""
    return (
        "awk 'BEGIN{srand(); t=srand(); "
        f'for(i=1;;i++){{printf "%09d-%090d\\n", i, 0; {stop}}} print "COUNT " i}}\''
    )


def numbers_of(lines: list[str]) -> list[int]:
    return [int(line[:9]) for line in lines if len(line) == 100 and line[9] == "-"]


def docker_last_number(container: str) -> int:
    """The number of the last line of the container's flood that Docker received."""
    lines = [line for line in docker_tail(container, 3).splitlines() if line[9:10] == "-"]
    return int(lines[-1][:9]) if lines else 0


def test_flood_past_rotation_is_copied_whole_and_once(orbit: Orbit, busybox: str) -> None:
    # Docker's follow stream lost one rotated file (117k lines) of this flood, silently.
    script = AWK_FLOOD.format(start=1, end=FLOOD) + "; echo END; sleep 1; echo after"
    run_id = flood_run(orbit, busybox, script)
    status = orbit.wait_for(run_id, finished, timeout=120)
    assert status["state"] == "succeeded", status
    assert log_lines(orbit, run_id) == [*numbered(1, FLOOD), "END", "after"]
    record = exit_record(orbit, run_id)
    assert "log_incomplete" not in record and "log_incomplete" not in status
    assert record["shepherd_cpu_s"] > 0
    assert_copied_cleanly(orbit, run_id)


def test_flood_with_shepherd_kills_keeps_every_line_once(orbit: Orbit, busybox: str) -> None:
    # Under that load, a killed shepherd's successor resumes from log.pos's anchor.
    script = (
        AWK_FLOOD.format(start=1, end=FLOOD // 2)
        + "; sleep 1; "
        + AWK_FLOOD.format(start=FLOOD // 2 + 1, end=FLOOD)
        + "; echo END; sleep 1; echo after"
    )
    run_id = flood_run(orbit, busybox, script)
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    for _ in range(3):
        time.sleep(0.7)
        if orbit.status(run_id)["state"] != "running":
            break
        kill_shepherd(orbit, run_id)
        orbit("scheduler", "tick")
    status = orbit.wait_for(run_id, finished, timeout=120)
    assert status["state"] == "succeeded", status
    assert log_lines(orbit, run_id) == [*numbered(1, FLOOD), "END", "after"]
    assert "shepherd-resumed" in [e["event"] for e in orbit.events(run_id)]


PACED = """
import sys, time
t0 = time.time()
for i in range(1, 250001):
    sys.stdout.write(f"{i:09d}-{0:090d}\\n")
    if i % 1000 == 0:
        sys.stdout.flush(); time.sleep(max(0, t0 + i / 30000 - time.time()))
print("END")
"""


def test_paced_flood_past_two_rotations_has_no_duplicates(orbit: Orbit, python_image: str) -> None:
    # at 3 MB/s the follow stream repeated the line at each rotation, and often the last.
    run_id = orbit.submit(
        "--image", python_image, "--no-project", "--cpus", "1", "--mem", "0.5",
        "--", "python3", "-c", PACED,
    )  # fmt: skip
    status = orbit.wait_for(run_id, finished, timeout=120)
    assert status["state"] == "succeeded", status
    assert log_lines(orbit, run_id) == [*numbered(1, 250_000), "END"]


def test_a_full_speed_flood_is_held_to_the_copy_and_copied_whole(
    orbit: Orbit, busybox: str
) -> None:
    # Docker hands its log back about half as fast as it takes it: without the shepherd's
    # valve on the attach stream, 10 s of this flood outran the copy and Docker rotated away
    # lines nobody had read (a gap, with about half the lines).
    run_id = flood_run(orbit, busybox, timed_flood(10) + "; echo after")
    status = orbit.wait_for(run_id, finished, timeout=180)
    assert status["state"] == "succeeded", status
    lines = log_lines(orbit, run_id)
    assert lines[-2].startswith("COUNT ") and lines[-1] == "after"
    count = int(lines[-2].split()[1])
    assert count > 117_000  # past one rotation of Docker's log at least
    assert lines[:-2] == numbered(1, count)
    record = exit_record(orbit, run_id)
    assert "log_incomplete" not in record and "log_incomplete" not in status
    assert_copied_cleanly(orbit, run_id)


@pytest.mark.parametrize("resumed", [False, True], ids=["first", "resumed"])
def test_a_stopped_shepherd_holds_the_container_back(
    orbit: Orbit, busybox: str, resumed: bool
) -> None:
    # The shepherd does not read its attach stream while stopped: Docker's pipe fills (about
    # 1 MB) and the container waits in its write, so nothing is rotated away unread.
    script = "echo first; sleep 2; " + AWK_FLOOD.format(start=1, end=700_000) + "; echo END"
    run_id = flood_run(orbit, busybox, script)
    container = orbit.wait_for(run_id, lambda s: s["state"] == "running")["container"]
    deadline = time.monotonic() + 10
    while "first" not in log_lines(orbit, run_id):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    if resumed:  # a successor attaches on resume, and holds the container as well
        killed = shepherd_pid(orbit, run_id)
        kill_shepherd(orbit, run_id)
        orbit("scheduler", "tick")
        deadline = time.monotonic() + 20
        while shepherd_pid(orbit, run_id) == killed:
            assert time.monotonic() < deadline, "no new shepherd"
            time.sleep(0.05)
    pid = shepherd_pid(orbit, run_id)
    time.sleep(0.5)  # attached (a resumed valve reads once the copy has caught up)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(3)
        held = docker_last_number(container)
        time.sleep(3)
        assert docker_last_number(container) == held < 700_000, "the container was not held"
    finally:
        os.kill(pid, signal.SIGCONT)
    status = orbit.wait_for(run_id, finished, timeout=120)
    assert status["state"] == "succeeded", status
    assert log_lines(orbit, run_id) == ["first", *numbered(1, 700_000), "END"]
    assert "log_incomplete" not in exit_record(orbit, run_id)
    if resumed:
        assert "shepherd-resumed" in [e["event"] for e in orbit.events(run_id)]


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_a_flooding_container_held_by_the_valve_stops_promptly(
    orbit: Orbit, busybox: str, how: str
) -> None:
    # The container waits in a write while the copy catches up: the stop must still end it
    # (SIGTERM, then SIGKILL after the grace), and the run settle with every line it wrote.
    # 9 s: time for the flood to get past a rotation even on a loaded machine, where the valve
    # holds it to a slow copy (3 s was not always enough), before the timeout stops it.
    options = ("--timeout", "0.15") if how == "timeout" else ()
    run_id = flood_run(orbit, busybox, timed_flood(0), *options)
    container = orbit.wait_for(run_id, lambda s: s["state"] == "running")["container"]
    deadline = time.monotonic() + 30
    while docker_last_number(container) < 200_000:  # past a rotation, held by the valve
        assert time.monotonic() < deadline, "the flood did not start"
        time.sleep(0.2)
    if how == "cancel":
        assert orbit("cancel", run_id).code == 0
    # sh, as PID 1, ignores SIGTERM: Docker kills it after the 10 s grace.
    status = orbit.wait_for(run_id, finished, timeout=60)
    assert status["state"] == ("cancelled" if how == "cancel" else "failed"), status
    record = exit_record(orbit, run_id)
    assert record["timed_out" if how == "timeout" else "cancelled"] is True
    assert "log_incomplete" not in record
    numbers = numbers_of(log_lines(orbit, run_id))
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) > 200_000


def test_a_container_that_ends_while_held_by_the_valve_settles(
    busybox: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Docker settles a container's exit holding the container's lock, which log reads wait
    # for, and cannot settle it while a write to the attach stream blocks: a valve still
    # holding the container back when it ends would wait for the copy, and the copy for it.
    import docker
    import docker.types

    from orbit.execute import logfollow, logvalve
    from orbit.execute.engine import Engine

    for module in (logfollow, logvalve):  # a stuck read fails the test sooner
        monkeypatch.setattr(module, "READ_TIMEOUT", 15.0)
    client = docker.from_env()
    container = client.containers.create(
        busybox,
        ["sh", "-c", AWK_FLOOD.format(start=1, end=2_000_000)],
        log_config=docker.types.LogConfig(
            type="json-file", config={"max-size": "20m", "max-file": "3"}
        ),
        labels={"orbit.home": str(tmp_path.resolve())},
    )
    try:
        valve = logvalve.Valve.attach(Engine(), container.id, synced=True)
        assert valve is not None
        container.start()
        container.reload()
        valve.watch(container.attrs["State"]["Pid"])
        copier = logfollow.LogCopier(Engine(), container.id, tmp_path, [], valve, 20 << 20)
        # Nothing is copied yet: the valve stops once about 24 MB of JSON are due.
        deadline = time.monotonic() + 60
        last, same = -1, 0
        while same < 10:
            assert time.monotonic() < deadline, "the container was not held"
            time.sleep(0.2)
            number = docker_last_number(container.name)
            last, same = number, same + 1 if number == last else 0
        assert valve.paused and 0 < last < 2_000_000
        container.kill()
        waited: list[dict] = []
        waiter = threading.Thread(target=lambda: waited.append(client.api.wait(container.id)))
        waiter.start()
        deadline = time.monotonic() + 60
        while waiter.is_alive():
            assert time.monotonic() < deadline, "the exit never settled"
            copier.poll()
            time.sleep(0.05)
        copier.poll(final=True)
        valve.close()
        copier.close()
        numbers = numbers_of((tmp_path / "log.txt").read_text().splitlines())
        assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= last
        assert copier.incomplete() is None
    finally:
        container.remove(force=True)


def settle_after_flood(orbit: Orbit, run_id: str, container: str) -> dict:
    """Wait for an unwatched flood to end, then let a tick's new shepherd settle the run."""
    deadline = time.monotonic() + 90
    while "FLOOD-DONE" not in docker_tail(container, 3):
        assert time.monotonic() < deadline, "the flood never finished"
        time.sleep(0.2)
    orbit("scheduler", "tick")
    status = orbit.wait_for(run_id, finished, timeout=120)
    assert status["state"] == "succeeded", status
    return status


def test_lines_docker_discarded_are_recorded_as_a_gap(orbit: Orbit, busybox: str) -> None:
    # A killed shepherd (its attach stream closes: the container runs free) while the
    # container writes far more than Docker keeps (15 MB here), and a successor only
    # afterwards: the lost part must be said, never silent, wherever the result is shown.
    orbit.configure(docker_log_mb=15)
    script = (
        "echo first; sleep 2; "
        + AWK_FLOOD.format(start=1, end=FLOOD)
        + "; echo FLOOD-DONE; sleep 2; echo after"
    )
    run_id = flood_run(orbit, busybox, script, "-n", "fk")
    status = orbit.wait_for(run_id, lambda s: s["state"] == "running")
    deadline = time.monotonic() + 10
    while "first" not in log_lines(orbit, run_id):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    kill_shepherd(orbit, run_id)
    status = settle_after_flood(orbit, run_id, status["container"])
    lines = log_lines(orbit, run_id)
    assert lines[0] == "first" and lines[-2:] == ["FLOOD-DONE", "after"]
    numbers = [int(line[:9]) for line in lines[1:-2]]
    assert numbers == sorted(set(numbers)) and numbers[-1] == FLOOD  # in order, once each
    assert len(numbers) < FLOOD
    incomplete = exit_record(orbit, run_id)["log_incomplete"]
    assert incomplete["gaps"] == 1 and incomplete["lines_written"] == len(lines)
    gap = incomplete["ranges"][0]
    assert gap["after"] < gap["before"] and gap["at_byte"] == len("first\n")
    assert status["log_incomplete"] == incomplete
    note = "log incomplete: 1 gap (Docker discarded output before it was copied)"
    assert note in orbit("show", run_id).out
    assert orbit("wait", run_id).out == f"run {run_id} (fk) succeeded; {note}\n"
    row = next(line for line in orbit("ps", "-a").out.splitlines() if " fk " in line)
    assert row.endswith(note), row
    shown = orbit("logs", "-n", "1", run_id)
    assert shown.out == "after\n" and shown.err == f"orbit: warning: run {run_id} (fk): {note}\n"


def test_lines_discarded_before_anything_was_copied_are_recorded_as_a_gap(
    orbit: Orbit, busybox: str
) -> None:
    # As above, but the shepherd dies before the first line (no anchor): its successor finds
    # the retained log's first line as its start, and the discarded beginning was silent.
    orbit.configure(docker_log_mb=15)
    script = "sleep 2; " + AWK_FLOOD.format(start=1, end=FLOOD) + "; echo FLOOD-DONE"
    run_id = flood_run(orbit, busybox, script)
    status = orbit.wait_for(run_id, lambda s: s["state"] == "running")
    kill_shepherd(orbit, run_id)
    assert (orbit.run_dir(run_id) / "log.txt").read_text() == ""
    status = settle_after_flood(orbit, run_id, status["container"])
    lines = log_lines(orbit, run_id)
    numbers = numbers_of(lines)
    assert numbers == list(range(numbers[0], FLOOD + 1)) and numbers[0] > 1  # the start is gone
    incomplete = exit_record(orbit, run_id)["log_incomplete"]
    assert incomplete is not None and incomplete["gaps"] == 1
    gap = incomplete["ranges"][0]
    assert gap["after"] is None and gap["before"] and gap["at_byte"] == 0
    assert status["log_incomplete"] == incomplete
    assert "log incomplete: 1 gap" in orbit("show", run_id).out


def test_secrets_split_by_docker_or_spread_over_lines_are_redacted(
    orbit: Orbit, busybox: str
) -> None:
    # a value cut by Docker's 16 KiB line split, and a multi-line (PEM-like) value.
    orbit.environ["MYSECRET"] = "s3cr3t-XYZ"
    orbit.environ["MYKEY"] = "-----BEGIN KEY-----\nkeyline-ONE-abcdef\n-----END KEY-----"
    script = (
        'echo plain=$MYSECRET; sleep 1; echo "$MYKEY"; echo "one line: $MYKEY" | tr "\\n" " "; '
        "echo; "
        'head -c 16379 /dev/zero | tr "\\0" a; echo "$MYSECRET-tail"; '
        'head -c 40000 /dev/zero | tr "\\0" b; echo "$MYSECRET"; echo "$MYKEY" >&2'
    )
    # A real process, so that the shepherd's log reaches shepherd.log.
    proc = orbit.proc(
        "run", "--image", busybox, *SMALL, "--pass-env", "MYSECRET", "--pass-env", "MYKEY",
        "-w", "--", "sh", "-c", script,
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    log = (orbit.run_dir("1") / "log.txt").read_text()
    assert "s3cr3t-XYZ" not in log and "keyline-ONE" not in log and "BEGIN KEY" not in log
    lines = log.splitlines()
    assert "plain=[redacted]" in lines
    assert "a" * 16379 + "[redacted]-tail" in lines
    assert "b" * 40000 + "[redacted]" in lines
    assert lines.count("[redacted]") >= 2  # the value printed alone, on stdout and stderr
    assert_copied_cleanly(orbit, "1")


def test_old_log_pos_format_is_continued(orbit: Orbit, busybox: str) -> None:
    # A run started by the previous Orbit: its shepherd left log.pos in the old format.
    run_id = orbit.submit(
        "--image", busybox, *SMALL, "--", "sh", "-c",
        "echo a; echo b >&2; sleep 3; echo c; sleep 0.3; echo d >&2",
    )  # fmt: skip
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    deadline = time.monotonic() + 10
    while len(log_lines(orbit, run_id)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    kill_shepherd(orbit, run_id)
    container = orbit.status(run_id)["container"]
    stamped = subprocess.run(
        ["docker", "logs", "--timestamps", container], capture_output=True, text=True
    )
    from orbit.execute.logfollow import parse_ts_ns

    out = parse_ts_ns(stamped.stdout.split()[0].encode())
    err = parse_ts_ns(stamped.stderr.split()[0].encode())
    (orbit.run_dir(run_id) / "log.txt").write_text("a\nb\n")
    old = {"size": 4, "out": [out, 1], "err": [err, 1]}
    (orbit.run_dir(run_id) / "log.pos").write_text(json.dumps(old))
    orbit("scheduler", "tick")
    status = orbit.wait_for(run_id, finished)
    assert status["state"] == "succeeded", status
    assert log_lines(orbit, run_id) == ["a", "b", "c", "d"]
    assert "anchor" in json.loads((orbit.run_dir(run_id) / "log.pos").read_text())


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs (root only: `mount`); the test grows it to end the shortage."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_waits_and_settles_with_the_real_result(
    busybox: str, small_disk: Path, tmp_path: Path
) -> None:
    # the shepherd died on ENOSPC and the run stayed running after its container exited.
    orbit = Orbit(small_disk / "home", tmp_path)
    try:
        script = AWK_FLOOD.format(start=1, end=100_000) + "; echo END; exit 3"  # 10 MB
        run_id = flood_run(orbit, busybox, script)
        container = orbit.wait_for(run_id, lambda s: s["state"] == "running")["container"]
        deadline = time.monotonic() + 60
        while "END" not in docker_tail(container, 1):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(4)  # the container has exited; the disk is still full
        from orbit.store.locks import is_locked

        assert is_locked(orbit.run_dir(run_id) / "shepherd.lock"), "the shepherd died"
        assert orbit.status(run_id)["state"] == "running"
        assert not (orbit.run_dir(run_id) / "exit.json").exists()
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        status = orbit.wait_for(run_id, finished, timeout=60)
        assert status["state"] == "failed" and status["exit_code"] == 3, status
        assert log_lines(orbit, run_id) == [*numbered(1, 100_000), "END"]
        assert "log_incomplete" not in status
        assert [e["event"] for e in orbit.events(run_id)].count("failed") == 1
    finally:
        from conftest import _cleanup_containers

        _cleanup_containers(orbit.home)


def test_a_full_disk_holds_a_flood_back_and_loses_nothing(
    busybox: str, small_disk: Path, tmp_path: Path
) -> None:
    # 50 MB of output while log.txt cannot grow: the copy stops, so the valve holds the
    # container back before Docker rotates away what was not copied (a gap without it).
    orbit = Orbit(small_disk / "home", tmp_path)
    try:
        script = AWK_FLOOD.format(start=1, end=500_000) + "; echo END"
        run_id = flood_run(orbit, busybox, script)
        container = orbit.wait_for(run_id, lambda s: s["state"] == "running")["container"]
        deadline = time.monotonic() + 60
        last, same = -1, 0
        while same < 10:  # 2 s without a new line: held
            assert time.monotonic() < deadline, "the container was not held"
            time.sleep(0.2)
            number = docker_last_number(container)
            last, same = number, same + 1 if number == last else 0
        assert 0 < last < 500_000 and orbit.status(run_id)["state"] == "running"
        subprocess.run(["mount", "-o", "remount,size=128m", str(small_disk)], check=True)
        status = orbit.wait_for(run_id, finished, timeout=120)
        assert status["state"] == "succeeded", status
        assert log_lines(orbit, run_id) == [*numbered(1, 500_000), "END"]
        assert "log_incomplete" not in status
    finally:
        from conftest import _cleanup_containers

        _cleanup_containers(orbit.home)


def test_a_held_half_line_survives_a_shepherd_kill(orbit: Orbit, busybox: str) -> None:
    # Docker emits the first 16 KiB of the line at once, the rest only at its newline, 3 s
    # later: the killed shepherd held the first piece; its successor must take it up again.
    orbit.environ["MYSECRET"] = "s3cr3t-XYZ"
    run_id = orbit.submit(
        "--image", busybox, *SMALL, "--pass-env", "MYSECRET", "--", "sh", "-c",
        'echo before; head -c 16379 /dev/zero | tr "\\0" a; printf "$MYSECRET"; sleep 3; '
        "echo -tail; echo after",
    )  # fmt: skip
    container = orbit.wait_for(run_id, lambda s: s["state"] == "running")["container"]
    deadline = time.monotonic() + 10
    while "aaaa" not in docker_tail(container, 1):  # Docker has passed on the first piece
        assert time.monotonic() < deadline, "Docker never passed on the first piece"
        time.sleep(0.05)
    time.sleep(0.7)  # the shepherd has read it (it polls at least every 0.5 s) and holds it
    kill_shepherd(orbit, run_id)
    orbit("scheduler", "tick")
    status = orbit.wait_for(run_id, finished)
    assert status["state"] == "succeeded", status
    assert log_lines(orbit, run_id) == ["before", "a" * 16379 + "[redacted]-tail", "after"]
    assert_copied_cleanly(orbit, run_id)


def test_a_progress_bar_of_many_pieces_is_copied_exactly_across_a_kill(
    orbit: Orbit, busybox: str
) -> None:
    # One 18 MB "line" drawn with \r: about 1,100 pieces that all carry the first one's
    # timestamp, more than a short read reaches back to.
    bar = 'awk \'BEGIN{for(i=0;i<200000;i++){printf "progress %09d %070d\\r", i, 0; '
    bar += 'if(i%20000==0) system("sleep 0.5")}}\''
    run_id = flood_run(orbit, busybox, f"echo start; {bar}; echo; echo done")
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    time.sleep(2.5)
    kill_shepherd(orbit, run_id)
    orbit("scheduler", "tick")
    status = orbit.wait_for(run_id, finished, timeout=60)
    assert status["state"] == "succeeded", status
    progress = b"".join(b"progress %09d %070d\r" % (i, 0) for i in range(200_000))
    expected = b"start\n" + progress + b"\ndone\n"
    assert (orbit.run_dir(run_id) / "log.txt").read_bytes() == expected

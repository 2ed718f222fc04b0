"""Hardening of the scheduler and shepherd side:
stuck lock holders are named, lost markers are rebuilt, damaged runs do not leak containers or
leases, shepherds keep none of the submitter's environment, containers have a pids limit, and
a fresh home is private. Against a real Docker engine, real processes and a second real uid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ORBIT_PY, SMALL, Orbit, kill_shepherd, shepherd_pid

from orbit.store.locks import is_locked, try_lock

OTHER_UID = 4322  # a second user: no account needed, only another uid


def container_names(home: Path) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-a", "--format", "{{.Names}}", "--filter", f"label=orbit.home={home}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def wait_until(pred: object, timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def next_shepherd_pid(orbit: Orbit, run_id: str, old: int) -> int:
    """The pid of the shepherd that replaced `old` (it writes shepherd.pid once it runs)."""
    wait_until(lambda: shepherd_pid(orbit, run_id) != old, 30, "a new shepherd")
    return shepherd_pid(orbit, run_id)


def running(status: dict[str, object]) -> bool:
    return status.get("state") == "running"


def finished(status: dict[str, object]) -> bool:
    return status.get("state") in ("succeeded", "failed", "cancelled", "lost")


def environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def comm_of(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


# --- a pids limit on every container ------------------------------------------------------


def test_containers_get_a_pids_limit(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "sleep", "30")
    orbit.wait_for(run_id, running)
    name = container_names(orbit.home)[0]
    inspect = subprocess.run(
        ["docker", "inspect", "--format", "{{.HostConfig.PidsLimit}}", name],
        capture_output=True,
        text=True,
        check=True,
    )
    assert inspect.stdout.strip() == "4096"
    assert orbit("cancel", run_id).code == 0


def test_pids_limit_setting_bounds_a_forking_run(orbit: Orbit, busybox: str) -> None:
    orbit.configure(pids_limit=40)
    script = "i=0; while [ $i -lt 60 ]; do sleep 2 & i=$((i+1)); done; wait; echo done"
    res = orbit("run", "--image", busybox, *SMALL, "-w", "--", "sh", "-c", script)
    assert res.code == orbit.status("1")["exit_code"] != 0  # run -w exits with the shell's code
    log = (orbit.run_dir("1") / "log.txt").read_text()
    assert "can't fork" in log
    assert "done" not in log


@pytest.mark.parametrize("value", ["0", "1.5", "-3", "true"])
def test_pids_limit_must_be_a_positive_whole_number(orbit: Orbit, value: str) -> None:
    res = orbit("config", "set", "pids_limit", value)
    assert res.code == 2
    assert "pids_limit must be a whole number > 0" in res.err
    assert orbit("config", "set", "pids_limit", "100").code == 0


@pytest.mark.parametrize("value", ["2", "10.5", "-3", "true"])
def test_docker_log_mb_must_be_a_whole_number_of_at_least_3(orbit: Orbit, value: str) -> None:
    res = orbit("config", "set", "docker_log_mb", value)
    assert res.code == 2
    assert "docker_log_mb must be a whole number ≥ 3" in res.err
    assert orbit("config", "set", "docker_log_mb", "30").code == 0


# --- the shepherd's environment and name --------------------------------


def test_shepherds_keep_none_of_the_submitters_environment(orbit: Orbit, busybox: str) -> None:
    orbit.environ.update(MYSECRET="s3cr3t-XYZ-123", AWS_SECRET_ACCESS_KEY="aws-key-do-not-keep")
    script = "sleep 2; echo $MYSECRET; sleep 30"
    proc = orbit.proc(
        "run", "--image", busybox, *SMALL, "--pass-env", "MYSECRET", "--", "sh", "-c", script
    )
    assert proc.wait(60) == 0
    # Fork mode (the CLI's default).
    pid = shepherd_pid(orbit, "1")
    env = environ_of(pid)
    assert f"ORBIT_HOME={orbit.home}".encode() in env  # what it needs is there
    assert b"s3cr3t-XYZ" not in env and b"aws-key" not in env
    assert b"MYSECRET" not in env and b"AWS_SECRET" not in env
    assert comm_of(pid) == "orbit-shepherd"
    # Exec mode (the timer's and `scheduler run`'s), started from the same environment.
    kill_shepherd(orbit, "1")
    tick = orbit.proc("scheduler", "tick")
    assert tick.wait(60) == 0
    env = environ_of(next_shepherd_pid(orbit, "1", pid))
    assert f"ORBIT_HOME={orbit.home}".encode() in env
    assert b"s3cr3t-XYZ" not in env and b"aws-key" not in env
    # The secret still reached the container, through runtime/secrets/, and is redacted.
    wait_until(lambda: "[redacted]" in (orbit.run_dir("1") / "log.txt").read_text(), 20, "log")
    assert "s3cr3t" not in (orbit.run_dir("1") / "log.txt").read_text()
    assert orbit("cancel", "1").code == 0


def test_exec_mode_shepherds_are_named_orbit_shepherd(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "sleep", "30")
    orbit.wait_for(run_id, running)
    old = kill_shepherd(orbit, run_id)
    assert orbit("scheduler", "tick").code == 0
    pid = next_shepherd_pid(orbit, run_id, old)  # written once the shepherd runs
    assert comm_of(pid) == "orbit-shepherd"
    assert orbit("cancel", run_id).code == 0


# --- a shepherd never writes to the caller's terminal ------------------------


def test_a_failing_shepherd_start_prints_nothing_to_the_caller(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "sh", "-c", "sleep 3; echo end")
    orbit.wait_for(run_id, running)
    kill_shepherd(orbit, run_id)
    log = orbit.run_dir(run_id) / "shepherd.log"
    log.unlink()
    log.mkdir()  # the new shepherd cannot open its log (as with a root-owned shepherd.log)
    proc = orbit.proc("scheduler", "tick")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "Traceback" not in out + err and "shepherd for run" not in out + err
    assert err == ""
    status = orbit.wait_for(run_id, finished, 60)  # the shepherd ran anyway, without a log
    assert status["state"] == "succeeded"
    assert (orbit.run_dir(run_id) / "log.txt").read_text() == "end\n"


# --- a stuck scheduler lock holder is named ------------------------------------------------


def _fake_gpus(path: Path) -> None:
    path.write_text("gpus:\n  - {index: 0, name: Stand-in, memory_gb: 16}\n")


# `orbit scheduler tick` whose GPU query never returns (argv[1]: the checkout).
HANGING_TICK = """
import sys, time
sys.path.insert(0, sys.argv[1])
from orbit.sched import gpus
gpus.FakeGpus.read = lambda self, indices=None: time.sleep(600)
sys.argv = ["orbit", "scheduler", "tick"]
from orbit.__main__ import entry
entry()
"""


def test_a_stuck_scheduler_lock_is_named(tmp_path: Path, busybox: str) -> None:
    # Home A: the lock taken by a foreign process (`flock`), as by a tick that hangs.
    a = Orbit(tmp_path / "a", tmp_path)
    lock_a = a.home / "locks" / "scheduler.lock"
    assert a("scheduler", "tick").code == 0
    # -o: `flock` itself holds the lock, not the `sleep` it starts, so killing it frees it.
    flock = subprocess.Popen(["flock", "-o", str(lock_a), "sleep", "300"], start_new_session=True)
    # Home B: a real tick, hung in its GPU query (as an NVML call can hang), then stopped
    # (Ctrl-Z). A FIFO as the stand-in no longer hangs anything: files are read without
    # blocking, so the hang is put in the query itself.
    b = Orbit(tmp_path / "b", tmp_path)
    gpus = tmp_path / "gpus.yaml"
    _fake_gpus(gpus)
    b.configure(fake_gpus=str(gpus))
    held = try_lock(b.home / "locks" / "scheduler.lock")  # keep the run queued for now
    assert held is not None
    run_b = b.submit("--image", busybox, *SMALL, "--gpus", "1", "--", "true")
    held.close()
    tick_b = subprocess.Popen(
        [sys.executable, "-c", HANGING_TICK, str(Path(ORBIT_PY).parent)],
        cwd=tmp_path,
        env=b.environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: is_locked(b.home / "locks" / "scheduler.lock"), what="B's tick")
        # Stopped only once it has noted itself as the holder (it does so right after taking
        # the lock; on a loaded machine that can take more than a moment).
        note = b.home / "locks" / "scheduler.lock.holder"
        wait_until(lambda: note.exists() and f'"pid": {tick_b.pid},' in note.read_text(),
                   what="B's holder note")  # fmt: skip
        os.kill(tick_b.pid, signal.SIGSTOP)
        wait_until(lambda: is_locked(lock_a), what="flock")
        run_a = a.submit("--image", busybox, *SMALL, "--", "echo", "ran")
        quick = a("scheduler", "tick")  # held for less than 30 s: not yet called stuck
        assert "another tick is running" in quick.out
        time.sleep(31)

        tick = a("scheduler", "tick")
        assert tick.code == 0
        assert f"problem: scheduler lock held by pid {flock.pid} (flock " in tick.out
        assert "for 3" in tick.out and "kill " in tick.out
        tick = b("scheduler", "tick")
        expected = f"scheduler lock held by pid {tick_b.pid} (orbit scheduler tick, stopped) for 3"
        assert expected in tick.out
        assert f"kill -CONT {tick_b.pid}" in tick.out
        assert expected in b("ps").err
        # (B's resources and doctor would query the GPUs too: they are checked on A.)
        expected = f"scheduler lock held by pid {flock.pid} (flock "
        problems = a("resources", "--json").json()["problems"]
        assert sum(expected in p for p in problems) == 1, problems  # said once
        assert expected in a("scheduler", "status").out
        doctor = a("doctor", "--json").json()
        check = next(c for c in doctor["checks"] if c["name"] == "scheduler lock")
        assert check["status"] == "FAIL" and expected in check["detail"]
        # `orbit wait` says why it does not move (it ticks every 5 s).
        wait = a.proc("wait", run_a)
        time.sleep(7)
        wait.kill()
        assert f"scheduler lock held by pid {flock.pid}" in wait.communicate()[1]
        assert a.status(run_a)["state"] == "queued"
    finally:
        os.killpg(flock.pid, signal.SIGKILL)  # flock and its sleep
        flock.wait()
        os.kill(tick_b.pid, signal.SIGKILL)
        tick_b.wait()
    # A dead holder never blocks: the kernel dropped its lock, and nothing else stands in.
    assert a("wait", run_a).code == 0
    assert "ran" in (a.run_dir(run_a) / "log.txt").read_text()
    gpus.unlink()
    _fake_gpus(gpus)
    assert b("wait", run_b).code == 0
    for home in (a.home, b.home):
        wait_until(lambda h=home: container_names(h) == [], what="containers removed")


# --- lost markers are rebuilt, and a lease is never counted twice ---------------------------


def test_a_lost_queue_marker_is_rebuilt(orbit: Orbit, busybox: str) -> None:
    orbit.configure(total_cpus=2)
    big1 = orbit.submit("--image", busybox, "--no-project", "--cpus", "2", "--mem", "0.25",
                        "--", "sleep", "3")  # fmt: skip
    big2 = orbit.submit("--image", busybox, "--no-project", "--cpus", "2", "--mem", "0.25",
                        "--", "echo", "ran")  # fmt: skip
    (orbit.home / "queue" / big2).unlink()
    orbit.wait_for(big1, finished, 60)
    time.sleep(1)
    assert orbit("scheduler", "tick").code == 0
    status = orbit.wait_for(big2, finished, 60)
    assert status["state"] == "succeeded"
    assert (orbit.run_dir(big2) / "log.txt").read_text() == "ran\n"


@pytest.mark.parametrize("scanned", ["while-queued", "before-submit"])
def test_a_run_that_lost_its_active_marker_still_holds_its_lease(
    orbit: Orbit, busybox: str, scanned: str
) -> None:
    """The tick that would admit the second run finds the first: in the runs the last full
    scan saw active, or among the runs submitted since."""
    orbit.configure(total_cpus=2)
    opts = ("--image", busybox, "--no-project", "--cpus", "1.5", "--mem", "0.25", "--")
    if scanned == "before-submit":
        assert orbit("run", *opts[:-1], "-w", "--", "true").code == 0
        assert orbit("scheduler", "tick").code == 0  # a full scan: no active run, next id 2
    first = orbit.submit(*opts, "sleep", "30")
    orbit.wait_for(first, running)
    (orbit.home / "active" / first).unlink()
    second = orbit.submit(*opts, "echo", "second")  # its inline tick must not admit it
    time.sleep(1)
    status = orbit.status(second)
    assert status["state"] == "queued", status
    assert "1.5 of 2 leased" in status["reason"]
    assert (orbit.home / "active" / first).exists()  # rebuilt
    leases = orbit("resources", "--json").json()["leases"]
    assert [lease["id"] for lease in leases] == [first]
    assert [r["id"] for r in orbit("ps", "--json").json()["runs"]] == [first, second]
    assert orbit("cancel", first).code == 0
    assert orbit("wait", second).code == 0


def test_a_run_submitted_during_a_tick_is_not_called_a_lost_marker(
    orbit: Orbit, busybox: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A run submitted after a tick read the markers, with its marker, is found by the tick's
    marker check (handled, as it should be) but is not reported as one that lost its marker
    (seen under 20 concurrent `orbit run`)."""
    from orbit.sched import tick
    from orbit.store.home import Home
    from orbit.store.runs import RunStore

    orbit.configure(total_cpus=2)
    opts = ("--image", busybox, "--no-project", "--cpus", "2", "--mem", "0.25", "--")
    first = orbit.submit(*opts, "sleep", "30")
    assert orbit("scheduler", "tick").code == 0  # a full scan: records the next id
    home = Home.from_environ(orbit.environ)
    seen = set(RunStore(home).active_ids())  # the markers, as a tick reads them first
    second = orbit.submit(*opts, "echo", "second")  # queued, with its queue/ marker
    assert (orbit.home / "queue" / second).exists()
    with caplog.at_level("WARNING", logger=tick.__name__):
        found = tick._unmarked_since_scan(home, RunStore(home), set(seen))
        missing = tick._unmarked(home, RunStore(home), set(seen), tick.TickReport())
    assert found is not None and [r.id for r in found] == [second]
    assert missing == [second]
    assert "lost" not in caplog.text
    assert orbit("cancel", first, second).code == 0


# --- a running run's files damaged ---------------------------------------------------------


@pytest.mark.parametrize("damaged", ["status.yaml", "run.yaml"])
def test_a_damaged_running_run_leaks_no_container_and_keeps_its_lease(
    orbit: Orbit, busybox: str, damaged: str
) -> None:
    orbit.configure(total_cpus=2)
    opts = ("--image", busybox, "--no-project", "--cpus", "1.5", "--mem", "0.25", "--")
    first = orbit.submit(*opts, "sh", "-c", "sleep 4; echo first")
    orbit.wait_for(first, running)
    path = orbit.run_dir(first) / damaged
    if damaged == "status.yaml":
        path.write_bytes(path.read_bytes()[:40])  # cut short
    else:
        path.write_bytes(b"\x00\xffgarbage: [\n")
    second = orbit.submit(*opts, "echo", "second")
    res = orbit("resources", "--json").json()
    assert res["cpus"]["leased"] == 1.5  # the unreadable run still counts
    assert any(f"{first}/{damaged}" in p for p in res["problems"])
    assert orbit.status(second)["state"] == "queued"
    # Its container exits: the shepherd does not crash, and removes it anyway.
    wait_until(lambda: container_names(orbit.home) == [], 60, "the container removed")
    wait_until(lambda: not is_locked(orbit.run_dir(first) / "shepherd.lock"), 30, "shepherd end")
    shepherd_log = (orbit.run_dir(first) / "shepherd.log").read_text()
    assert "Traceback" not in shepherd_log
    assert json.loads((orbit.run_dir(first) / "exit.json").read_text())["exit_code"] == 0
    tick = orbit("scheduler", "tick")
    if damaged == "status.yaml":
        # Repaired from its history and exit.json; the queue moves on.
        assert tick.code == 0
        assert orbit.status(first)["state"] == "succeeded"
        assert (orbit.run_dir(first) / "status.yaml.broken").read_bytes() != b""
        assert orbit.events(first)[-1]["event"] == "repaired"
        assert orbit("wait", second).code == 0
        wait_until(lambda: not (orbit.home / "active" / first).exists(), 30, "marker removed")
    else:
        # Not repairable here: it keeps its lease until removed by hand.
        assert f"{first}/run.yaml" in tick.out
        assert (orbit.home / "active" / first).exists()
        assert orbit.status(second)["state"] == "queued"
        assert orbit("resources", "--json").json()["cpus"]["leased"] == 1.5


def test_a_status_is_not_rebuilt_over_a_run_yaml_cut_short(orbit: Orbit, busybox: str) -> None:
    """Both files damaged, run.yaml still valid YAML: nothing to rebuild from; the damaged
    status.yaml is left as it is, with no `repaired` event, and the run keeps its marker."""
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "sh", "-c", "sleep 3; echo done")
    orbit.wait_for(run_id, running)
    kill_shepherd(orbit, run_id)
    path = orbit.run_dir(run_id) / "status.yaml"
    damaged = path.read_bytes()[:60]
    path.write_bytes(damaged)
    (orbit.run_dir(run_id) / "run.yaml").write_text("garbage:\n")
    tick = orbit("scheduler", "tick", "--json").json()
    assert tick["repaired"] == [] and any(f"{run_id}/" in p for p in tick["problems"]), tick
    assert path.read_bytes() == damaged
    assert not (orbit.run_dir(run_id) / "status.yaml.broken").exists()
    assert "repaired" not in [e["event"] for e in orbit.events(run_id)]
    assert (orbit.home / "active" / run_id).exists()


def test_a_damaged_status_of_a_run_whose_shepherd_died_is_rebuilt(
    orbit: Orbit, busybox: str
) -> None:
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "sh", "-c", "sleep 3; echo done")
    orbit.wait_for(run_id, running)
    kill_shepherd(orbit, run_id)
    path = orbit.run_dir(run_id) / "status.yaml"
    path.write_bytes(path.read_bytes()[:60])
    tick = orbit("scheduler", "tick", "--json").json()
    assert tick["repaired"] == [run_id] and tick["problems"] == []
    status = orbit.status(run_id)
    assert status["state"] == "running" and status["container"] == container_names(orbit.home)[0]
    assert status["lease"] == {"cpus": 1.0, "mem_gb": 0.25, "gpus": []}
    assert orbit("wait", run_id).code == 0  # the new shepherd watched it to the end
    assert (orbit.run_dir(run_id) / "log.txt").read_text() == "done\n"
    assert [e["event"] for e in orbit.events(run_id)][-3:] == [
        "repaired",
        "shepherd-resumed",
        "succeeded",
    ]


# --- `orbit rm` after a shepherd died before removing its container ------------------------


def test_rm_removes_the_container_a_dead_shepherd_left(orbit: Orbit, busybox: str) -> None:
    for _attempt in range(5):
        run_id = orbit.submit("--image", busybox, *SMALL, "--", "sh", "-c", "sleep 2; echo x")
        orbit.wait_for(run_id, running)
        pid = shepherd_pid(orbit, run_id)
        # Holding the scheduler lock makes the shepherd's tick (between settling and removing
        # the container) wait 0.2 s: time to stop the shepherd there.
        held = try_lock(orbit.home / "locks" / "scheduler.lock")
        assert held is not None
        status = orbit.run_dir(run_id) / "status.yaml"
        wait_until(lambda s=status: "state: succeeded" in s.read_text(), 60, "settled")
        os.kill(pid, signal.SIGSTOP)
        held.close()
        if container_names(orbit.home):
            break
        os.kill(pid, signal.SIGCONT)
    else:
        pytest.skip("could not stop a shepherd between settling and removing the container")
    try:
        assert orbit("rm", "-y", run_id).code == 0
        assert container_names(orbit.home) == []
    finally:
        os.kill(pid, signal.SIGKILL)
    assert orbit("scheduler", "tick").code == 0
    assert container_names(orbit.home) == []
    assert not (orbit.home / "active" / run_id).exists()


def test_rm_refuses_while_a_container_may_be_left_and_docker_is_down(
    orbit: Orbit, busybox: str
) -> None:
    assert orbit("run", "--image", busybox, *SMALL, "-w", "--", "true").code == 0
    wait_until(lambda: not is_locked(orbit.run_dir("1") / "shepherd.lock"), what="clean-up")
    (orbit.home / "active" / "1").touch()  # as a shepherd that died before its clean-up leaves it
    orbit.environ["DOCKER_HOST"] = f"unix://{orbit.home}/no-docker.sock"
    proc = orbit.proc("rm", "-y", "1")
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 4, err
    assert err.startswith("orbit: run 1 may still have a container, and Docker is not reachable")
    assert len(err.splitlines()) == 1
    assert orbit.run_dir("1").is_dir()
    del orbit.environ["DOCKER_HOST"]
    assert orbit("rm", "-y", "1").code == 0
    assert not (orbit.home / "active" / "1").exists()


# --- a fresh home is private ------------------------------------------------------------------


def _as_other_user(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups", *cmd],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_fresh_home_is_readable_by_its_owner_only(open_dir: Path, busybox: str) -> None:
    home = open_dir / "orbit-home"
    env = {**os.environ, "ORBIT_HOME": str(home)}
    env.pop("ORBIT_DATA", None)

    def orbit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, ORBIT_PY, *args], env=env, capture_output=True, text=True, timeout=120
        )

    assert orbit("config", "set", "count_outside_use", "false").returncode == 0
    script = 'echo "API_KEY=sk-live-123"; echo result > "$ORBIT_OUTPUT/out.txt"'
    res = orbit("run", "--image", busybox, *SMALL, "-w", "--", "sh", "-c", script)
    assert res.returncode == 0, res.stderr
    assert orbit("note", "1", "private note").returncode == 0
    run = home / "runs" / "1"
    assert (run / "output" / "out.txt").read_text() == "result\n"  # the container could write
    assert home.stat().st_mode & 0o777 == 0o700
    for path in (run / "log.txt", run / "notes.jsonl", run / "status.yaml", home / "index.jsonl"):
        assert path.stat().st_mode & 0o077 == 0, path
    for cmd in (
        ("ls", str(home / "runs")),
        ("cat", str(run / "log.txt")),
        ("cat", str(run / "notes.jsonl")),
        ("cat", str(run / "output" / "out.txt")),
        ("cat", str(home / "index.jsonl")),
    ):
        other = _as_other_user(*cmd)
        assert other.returncode != 0 and "Permission denied" in other.stderr, cmd
    doctor = json.loads(orbit("doctor", "--json").stdout)
    assert {"name": "home access", "status": "OK"}.items() <= next(
        c for c in doctor["checks"] if c["name"] == "home access"
    ).items()
    # Sharing with the group is a deliberate chmod; what Orbit writes next follows it.
    subprocess.run(["chmod", "-R", "g+rX", str(home)], check=True)
    assert orbit("note", "1", "shared note").returncode == 0
    assert orbit("run", "--image", busybox, *SMALL, "-w", "--", "true").returncode == 0
    assert (home / "runs" / "2" / "status.yaml").stat().st_mode & 0o777 == 0o640
    # A home anyone can read is reported.
    home.chmod(0o755)
    doctor = json.loads(orbit("doctor", "--json").stdout)
    check = next(c for c in doctor["checks"] if c["name"] == "home access")
    assert check["status"] == "WARN" and "chmod -R go-rwx" in check["fix"]

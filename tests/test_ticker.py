"""The ticker: with nothing ticking this home on a clock, one short-lived process per home moves
a waiting queue, and only while runs wait (orbit/service/ticker.py, orbit/sched/clock.py).

No supervisor is installed here. A run waits because its GPU (the documented YAML stand-in,
docs/gpus.md) is used by a process outside Orbit; the test frees it by editing the stand-in, as
that process ending would, and types no orbit command after that.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from conftest import SMALL, Orbit, stop_ticker
from test_gpu_scheduling import ALICE, ALICE_HOLDS_0, gpu, stand_in, write_gpus

from orbit.store.locks import is_locked, lock_holder


def lock(orbit: Orbit) -> Path:
    return orbit.home / "locks" / "ticker.lock"


def until(pred: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


def ticker_pid(orbit: Orbit) -> int:
    """The live ticker's pid, once it holds the lock itself: the kernel's holder of the lock
    and the pid in runtime/ticker.json agree (while it starts, the lock is still its
    starter's)."""
    info = orbit.home / "runtime" / "ticker.json"

    def settled() -> bool:
        holder = lock_holder(lock(orbit))
        try:
            noted = json.loads(info.read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return False
        return holder is not None and holder.pid == noted

    until(settled, 15, "no ticker holds the lock")
    return int(json.loads(info.read_text())["pid"])


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def ticker_processes(orbit: Orbit) -> list[psutil.Process]:
    """Live `python -m orbit.service.ticker` processes of this test's home."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if "orbit.service.ticker" not in (proc.info["cmdline"] or []):
                continue
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("ORBIT_HOME") == str(orbit.home):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def starts(orbit: Orbit) -> int:
    """How many tickers have started for this home (each logs one `ticking` line)."""
    log = orbit.home / "runtime" / "ticker.log"
    return log.read_text().count(" ticking ") if log.exists() else 0


def waiting_run(orbit: Orbit, tmp_path: Path, busybox: str, *cmd: str) -> tuple[str, Path]:
    """A run queued behind a GPU that a process outside Orbit uses."""
    path = stand_in(orbit, tmp_path, 1, processes=[ALICE])
    orbit.configure(count_outside_use=False, scheduler_interval_s=1)
    run_id = orbit.submit("--image", busybox, *SMALL, "--gpus", "1", "--", *(cmd or ("true",)))
    status = orbit.status(run_id)
    assert status["state"] == "queued"
    assert status["reason"] == f"waiting for 1 GPU: {ALICE_HOLDS_0}"
    return run_id, path


# --- (1) + (5): the queue moves by the ticker alone, and status shows it ---------------------
def test_a_freed_gpu_starts_the_waiting_run_with_nobody_typing(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    path = stand_in(orbit, tmp_path, 1, processes=[ALICE])
    orbit.configure(count_outside_use=False, scheduler_interval_s=1)
    orbit.environ["AWS_SECRET_ACCESS_KEY"] = "s3cret"  # what a caller had set: never the ticker's
    # The submit is a real process that exits (the ticker must outlive it), holding a
    # descriptor of its caller's (the ticker must not keep it).
    sentinel = tmp_path / "caller's file"
    sentinel.write_text("")
    fd = os.open(sentinel, os.O_RDONLY)
    try:
        submit = orbit.proc(
            "run", "--json", "--image", busybox, *SMALL, "--gpus", "1", "--", "true", pass_fds=(fd,)
        )
        out, err = submit.communicate(timeout=60)
    finally:
        os.close(fd)
    assert submit.returncode == 0, err
    run_id = str(json.loads(out)["id"])
    assert orbit.status(run_id)["state"] == "queued"
    pid = ticker_pid(orbit)
    assert not gone(pid)
    assert os.getsid(pid) != os.getsid(0)  # its own session: closing a terminal cannot end it
    links = {n: os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
    assert str(sentinel) not in links.values()
    assert (links["0"], links["1"]) == ("/dev/null", str(orbit.home / "runtime" / "ticker.log"))
    assert str(lock(orbit)) in links.values()
    environ = psutil.Process(pid).environ()
    assert environ["ORBIT_HOME"] == str(orbit.home) and "AWS_SECRET_ACCESS_KEY" not in environ
    assert environ["ORBIT_FAKE_GPUS"] == str(path)

    # (5) `orbit scheduler status`, text and --json.
    data = orbit("scheduler", "status", "--json").json()
    assert data["ticker"]["running"] is True and data["ticker"]["pid"] == pid
    assert data["ticker"]["interval_s"] == 1 and data["ticker"]["started_at"]
    assert data["queued"] == 1 and data["supervised"] is False
    text = orbit("scheduler", "status").out
    assert f"ticker      running (pid {pid}, since {data['ticker']['started_at']}, every 1 s)" in (
        text
    )
    assert "runs        1 queued, 0 active" in text

    time.sleep(2.5)  # ticks meanwhile change nothing: the GPU is still in use
    assert orbit.status(run_id)["state"] == "queued"
    freed = time.time()
    write_gpus(path, [gpu(0)])  # the outside process is gone; no orbit command follows
    status = orbit.wait_for(run_id, lambda s: s["state"] == "succeeded", timeout=60)
    admitted = [e for e in orbit.events(run_id) if e["event"] == "admitted"]
    assert [e["actor"] for e in admitted] == [f"ticker:{pid}"]
    delay = datetime_s(status["admitted_at"]) - freed
    assert delay < 10, f"admitted {delay:.1f} s after the GPU was freed"
    print(f"\nadmitted {delay:.2f} s after the GPU was freed (ticker every 1 s)")

    # (3) The queue is empty: the ticker exits and frees its lock.
    until(lambda: gone(pid) and not is_locked(lock(orbit)), 15, "the ticker did not exit")
    assert not (orbit.home / "runtime" / "ticker.json").exists()
    assert orbit("scheduler", "status", "--json").json()["ticker"]["running"] is False
    assert "stopped: queue empty" in (orbit.home / "runtime" / "ticker.log").read_text()


def datetime_s(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


# --- (2) one ticker per home, however many ticks race -----------------------------------------
def test_racing_ticks_start_one_ticker(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    waiting_run(orbit, tmp_path, busybox)
    ticker_pid(orbit)
    stop_ticker(orbit.home)  # the run still waits, and no ticker lives
    before = starts(orbit)
    procs = [orbit.proc("scheduler", "tick") for _ in range(10)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    pid = ticker_pid(orbit)
    time.sleep(1.0)  # a second ticker, had one started, would be up by now
    assert [p.pid for p in ticker_processes(orbit)] == [pid]
    assert starts(orbit) == before + 1
    # Ten ticks more, in this process: the live ticker is left alone.
    for _ in range(10):
        assert orbit("scheduler", "tick").code == 0
    assert [p.pid for p in ticker_processes(orbit)] == [pid]
    assert starts(orbit) == before + 1


# --- (3) the ticker exits once nothing waits ----------------------------------------------------
def test_the_ticker_exits_when_the_queue_empties(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    run_id, _ = waiting_run(orbit, tmp_path, busybox)
    pid = ticker_pid(orbit)
    assert orbit("cancel", run_id).code == 0
    until(lambda: gone(pid) and not is_locked(lock(orbit)), 15, "the ticker did not exit")
    assert ticker_processes(orbit) == []


def test_the_ticker_exits_when_its_home_is_deleted(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    waiting_run(orbit, tmp_path, busybox)
    pid = ticker_pid(orbit)
    moved = tmp_path / "moved-away"
    try:  # kept for a look after a failure
        shutil.copytree(orbit.home, moved, symlinks=True)
    except shutil.Error:
        pass  # a file the live ticker removed meanwhile (runtime/tick.requested) is left out

    def delete() -> bool:  # a tick in progress may write into runtime/ while it goes
        shutil.rmtree(orbit.home, ignore_errors=True)
        return not orbit.home.exists()

    until(delete, 15, "the home could not be deleted")
    until(lambda: gone(pid), 15, "the ticker outlived its home")


# --- (4) no ticker while a clock ticks, or while nothing waits ----------------------------------
def test_no_ticker_when_nothing_waits(orbit: Orbit, busybox: str) -> None:
    orbit.configure(count_outside_use=False, scheduler_interval_s=1)
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "true")
    orbit.wait_for(run_id, lambda s: s["state"] == "succeeded")
    assert orbit("scheduler", "tick").code == 0
    time.sleep(1.0)
    assert starts(orbit) == 0 and not is_locked(lock(orbit))


def test_no_ticker_while_scheduler_run_ticks_and_one_when_it_stops(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    stand_in(orbit, tmp_path, 1, processes=[ALICE])
    orbit.configure(count_outside_use=False, scheduler_interval_s=1)
    loop = orbit.proc("scheduler", "run", "--interval", "1")
    try:
        until(lambda: is_locked(orbit.home / "locks" / "scheduler-run.lock"), 30, "no loop")
        run_id = orbit.submit("--image", busybox, *SMALL, "--gpus", "1", "--", "true")
        assert orbit.status(run_id)["state"] == "queued"
        for _ in range(3):
            assert orbit("scheduler", "tick").code == 0
        time.sleep(2.0)  # the loop ticks twice meanwhile
        assert starts(orbit) == 0 and not is_locked(lock(orbit))
    finally:
        loop.send_signal(signal.SIGTERM)
        _, err = loop.communicate(timeout=30)
    assert loop.returncode == 0, err
    # The loop stopped with the run still waiting: the ticker takes the queue over.
    ticker_pid(orbit)
    assert starts(orbit) == 1


def test_a_recent_clock_tick_holds_the_ticker_back_and_a_stale_one_does_not(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    stand_in(orbit, tmp_path, 1, processes=[ALICE])
    orbit.configure(count_outside_use=False, scheduler_interval_s=1)
    # What the timer's (or the cron line's) tick runs: it notes the clock in runtime/clock.json.
    assert orbit("scheduler", "tick", "--clock", "60").code == 0
    orbit.submit("--image", busybox, *SMALL, "--gpus", "1", "--", "true")
    assert orbit("scheduler", "tick").code == 0
    time.sleep(0.5)
    assert starts(orbit) == 0 and not is_locked(lock(orbit))
    age = orbit("scheduler", "status", "--json").json()["last_clock_tick_age_s"]
    assert 0 <= age < 60
    # The timer stopped 5 minutes ago (2 missed ticks and more): it no longer counts.
    record = orbit.home / "runtime" / "clock.json"
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "at": data["at"] - 300}))
    assert orbit("scheduler", "tick").code == 0
    ticker_pid(orbit)
    assert starts(orbit) == 1


def test_the_ticker_module_refuses_a_second_copy(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    """Run by hand while a ticker lives, `python -m orbit.service.ticker` leaves at once."""
    waiting_run(orbit, tmp_path, busybox)
    pid = ticker_pid(orbit)
    env = {**orbit.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "orbit.service.ticker"], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert [p.pid for p in ticker_processes(orbit)] == [pid]

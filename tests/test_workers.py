"""The one background-worker pattern (orbit/store/worker.py) and the one tick loop
(orbit/service/tickloop.py), on a temporary home with nothing queued: no Docker needed.

The ticker, the sender, the probe and the bench driver are tested as themselves against real
Docker in test_ticker.py, test_notify_delivery.py, test_nodes.py and test_bench_engine.py.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orbit.errors import ExitCode
from orbit.sched.clock import TICKER_LOG, ticker_lock, ticker_worker
from orbit.sched.tick import TickReport
from orbit.service.tickloop import TickLoop, describe, loop_status
from orbit.store.home import Home
from orbit.store.locks import is_locked, release, try_lock
from orbit.store.worker import Worker, stop_on_signals

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path: Path) -> Home:
    environ = {**os.environ, "ORBIT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    environ.pop("ORBIT_DATA", None)
    h = Home(tmp_path / "home", environ)
    h.ensure()
    return h


def until(pred: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)


# --- the tick loop ----------------------------------------------------------------------------
def test_the_loop_ticks_at_once_then_at_its_pace_and_never_in_a_burst(home: Home) -> None:
    began: list[float] = []
    reports: list[TickReport] = []

    def on_tick(report: TickReport) -> None:
        began.append(time.monotonic())
        reports.append(report)
        if len(began) == 2:
            time.sleep(0.9)  # a slow tick: three intervals and more

    def ended() -> str | None:
        return "enough" if len(began) == 5 else None

    start = time.monotonic()
    loop = TickLoop(home, "test", threading.Event(), lambda _: 0.3, on_tick, pytest.fail, ended)
    assert loop.run() == "enough"
    assert all(r.ran for r in reports)
    assert began[0] - start < 0.3  # the first tick at once
    gaps = [b - a for a, b in itertools.pairwise(began)]
    assert 0.25 < gaps[0] < 0.6, gaps  # the pace
    assert 0.85 < gaps[1] < 1.15, gaps  # after the slow tick: one tick at once ...
    assert 0.25 < gaps[2] < 0.6 and 0.25 < gaps[3] < 0.6, gaps  # ... then the pace, no burst


def test_a_tick_that_raises_is_reported_and_the_loop_goes_on(home: Home) -> None:
    errors: list[Exception] = []
    home.config_path.write_text("scheduler_interval_s: [not a number\n")  # unreadable YAML
    loop = TickLoop(home, "test", threading.Event(), lambda _: 0.05, lambda r: None,
                    errors.append, lambda: "twice" if len(errors) == 2 else None)  # fmt: skip
    assert loop.run() == "twice"
    assert len(errors) == 2 and "config.yaml" in str(errors[0])


def test_a_stop_ends_the_wait_at_once(home: Home) -> None:
    stop = threading.Event()
    ticks: list[float] = []
    loop = TickLoop(home, "test", stop, lambda _: 60.0, lambda r: ticks.append(1), pytest.fail)
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    started = time.monotonic()
    assert loop.run() == "stopped by a signal"
    assert ticks == [1] and time.monotonic() - started < 5


def test_a_loop_is_described_while_it_holds_its_lock(home: Home) -> None:
    lock, info = home.locks_dir / "loop.lock", home.runtime_dir / "loop.json"
    assert loop_status(lock, info).as_dict() == {
        "state": "not running",
        "running": False,
        "pid": None,
        "interval_s": None,
        "started_at": None,
    }
    handle = try_lock(lock)
    assert handle is not None
    try:
        assert loop_status(lock, info).state == "starting"
        describe(info, 2.0)
        status = loop_status(lock, info)
        assert status.pid == os.getpid() and status.interval_s == 2.0 and status.running
        assert status.state == f"running (pid {os.getpid()}, since {status.started_at}, every 2 s)"
    finally:
        release(handle)
    assert not loop_status(lock, info).running  # the file stays; the lock is the liveness


# --- stop requests ----------------------------------------------------------------------------
def test_a_signal_sets_the_stop_and_a_second_ends_the_process() -> None:
    stop = threading.Event()
    before = signal.getsignal(signal.SIGTERM)
    restore = stop_on_signals(stop)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        until(stop.is_set, 5, "SIGTERM did not set the stop")
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) == before
    # A second one, in a process of its own: the default action ends it.
    code = (
        "import os, signal, threading, time\n"
        "from orbit.store.worker import stop_on_signals\n"
        "stop = threading.Event(); stop_on_signals(stop)\n"
        "os.kill(os.getpid(), signal.SIGTERM); stop.wait(5); print('stopping', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGTERM); time.sleep(5); print('still here')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=30)  # fmt: skip
    assert done.stdout == "stopping\n" and done.returncode == -signal.SIGTERM, done


# --- starting a worker ------------------------------------------------------------------------
def test_a_worker_starts_detached_adopts_its_lock_and_exits_when_idle(home: Home) -> None:
    worker = ticker_worker(home)
    log = home.runtime_dir / TICKER_LOG
    handle = try_lock(ticker_lock(home))
    assert handle is not None
    try:
        assert not worker.wake(home)  # a live holder: nothing is started
    finally:
        release(handle)
    assert not log.exists()
    assert worker.wake(home)  # nothing queued: it ticks no queue and leaves
    done = lambda: log.exists() and "stopped: queue empty" in log.read_text()  # noqa: E731
    until(done, 30, "the worker did not finish")
    until(lambda: not is_locked(ticker_lock(home)), 10, "the lock is still held")
    first, last = log.read_text().splitlines()
    assert f" ticker {first.split()[3]} ticking {home.root}" in first  # TIME NAME PID message
    assert last.endswith("stopped: queue empty")
    assert stat.S_IMODE(log.stat().st_mode) & 0o077 == 0  # the default log mode, 0600


def test_a_worker_that_cannot_start_is_logged_not_raised(
    home: Home, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("")
    worker = Worker("x", "the test worker", "orbit.service.ticker", blocked / "x.lock", blocked)
    with caplog.at_level(logging.WARNING):
        assert not worker.wake(home)
    assert "could not start the test worker" in caplog.text
    assert not worker.wake(home, needed=lambda: False)  # nothing for it to do: not even tried


def test_a_worker_ended_by_an_orbit_error_says_it_in_one_line(home: Home) -> None:
    """`python -m orbit.nodes.probe HOME NAME` for a node the home does not know."""
    done = subprocess.run([sys.executable, "-m", "orbit.nodes.probe", str(home.root), "nosuch"],
                          capture_output=True, text=True, env=home.environ, timeout=60)  # fmt: skip
    assert done.returncode == ExitCode.NOT_FOUND, done
    [line] = done.stderr.splitlines()
    wanted = (
        "stopped: no node 'nosuch' (none yet: add one with `orbit node add NAME ssh://[user@]host`)"
    )
    assert " probe " in line and line.endswith(wanted)
    assert not is_locked(home.locks_dir / "node-nosuch.probe.lock")

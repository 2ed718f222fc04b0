"""The supervisor: systemd units, the cron line, `orbit scheduler run|status`, concurrent ticks.

No test touches the machine's own systemd or crontab: HOME, XDG_CONFIG_HOME and
XDG_RUNTIME_DIR point into tmp_path (so `systemctl --user` finds no user manager, as on a
server without one), and ORBIT_CRONTAB names a small crontab program that keeps the table in a
file (cron itself is not under test; the table's content is).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Orbit

from orbit.errors import ExitCode
from orbit.store.childenv import PACKAGE_PARENT
from orbit.store.locks import release, try_lock
from orbit.store.settings import SCHEMA

FAKE_CRONTAB = """#!/bin/sh
# crontab -l / crontab -, with the table in a file beside this script.
T="$(dirname "$0")/table"
case "$1" in
  -l) if [ -f "$T" ]; then cat "$T"; else echo "no crontab for $(id -un)" >&2; exit 1; fi ;;
  -) cat > "$T" ;;
  *) echo "usage: crontab [-l | -]" >&2; exit 1 ;;
esac
"""
OTHER_LINE = "0 3 * * * /usr/local/bin/backup --quiet # nightly"


@pytest.fixture
def user(orbit: Orbit, tmp_path: Path) -> Path:
    """A user account in tmp_path: its home, config and runtime directories, its crontab."""
    home = tmp_path / "user"
    runtime = home / "run"
    runtime.mkdir(parents=True, mode=0o700)
    cron = home / "cron"
    cron.mkdir()
    program = cron / "crontab"
    program.write_text(FAKE_CRONTAB)
    program.chmod(0o755)
    orbit.environ.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_RUNTIME_DIR=str(runtime),
        ORBIT_CRONTAB=str(program),
    )
    orbit.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
    return home


def unit_dir(user: Path) -> Path:
    return user / ".config" / "systemd" / "user"


def crontab(user: Path) -> str:
    table = user / "cron" / "table"
    return table.read_text() if table.exists() else ""


def expected_cron_line(home: Path) -> str:
    return (
        f"* * * * * ORBIT_HOME={home} PYTHONPATH={PACKAGE_PARENT} {sys.executable} "
        f"-m orbit scheduler tick --clock 60 >/dev/null 2>&1 # orbit-tick {home}"
    )


def two_cpus(orbit: Orbit) -> None:
    """A budget of 2 CPUs, leased whatever else loads the test machine (these tests are about
    admission, not about measuring outside use)."""
    settings: dict[str, object] = {"total_cpus": 2}
    if "count_outside_use" in SCHEMA:
        settings["count_outside_use"] = False
    orbit.configure(**settings)


# --- systemd -------------------------------------------------------------------------------
def test_rendered_units_pass_systemd_analyze_verify(orbit: Orbit, user: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd"
    res = orbit("scheduler", "install", "--systemd", "--json")
    assert res.code == 0, res.err
    installed = res.json()
    units = unit_dir(user)
    service, timer = units / "orbit-tick.service", units / "orbit-tick.timer"
    assert installed["files"] == [str(service), str(timer)]
    done = subprocess.run(
        [analyze, "--user", "verify", str(service), str(timer)],
        capture_output=True,
        text=True,
        env=orbit.environ,
        timeout=60,
    )
    # verify exits 0 even for unknown keys or bad values: any complaint at all is a failure.
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done

    text = service.read_text()
    assert f"# orbit-home: {orbit.home}\n" in text
    assert "\nType=oneshot\n" in text and "\nKillMode=process\n" in text
    assert f"\nEnvironment=ORBIT_HOME={orbit.home} PYTHONPATH={PACKAGE_PARENT}\n" in text
    assert f"\nExecStart={sys.executable} -m orbit scheduler tick --clock 30\n" in text
    text = timer.read_text()
    assert "\nOnUnitActiveSec=30s\n" in text and "\nAccuracySec=1s\n" in text
    assert "\nUnit=orbit-tick.service\n" in text and "\nWantedBy=timers.target\n" in text

    # No user manager here: the units are written and enabled (a symlink, made offline), not
    # started, and both the result and the status say so and what to run.
    assert installed["enabled"] is True and installed["started"] is False
    assert "no user systemd reachable" in installed["problem"]
    assert installed["todo"].endswith("systemctl --user start orbit-tick.timer")
    assert (units / "timers.target.wants" / "orbit-tick.timer").resolve() == timer
    human = orbit("scheduler", "install", "--systemd")
    assert "NOT started" in human.out and "to finish: systemctl --user" in human.out
    sd = orbit("scheduler", "status", "--json").json()["systemd"]
    assert sd["installed"] is True and sd["enabled"] is True and sd["active"] is None
    assert sd["state"].startswith("enabled, not running") and sd["interval_s"] == 30


def test_units_quote_a_home_with_spaces_and_percent(orbit: Orbit, user: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd"
    odd = orbit.home.parent / "my home 100%"
    orbit.environ["ORBIT_HOME"] = str(odd)
    res = orbit("scheduler", "install", "--systemd", "--interval", "45", "--json")
    assert res.code == 0, res.err
    service = unit_dir(user) / "orbit-tick.service"
    done = subprocess.run(
        [analyze, "--user", "verify", str(service), str(unit_dir(user) / "orbit-tick.timer")],
        capture_output=True,
        text=True,
        env=orbit.environ,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done
    assert f'Environment="ORBIT_HOME={odd}%"' in service.read_text()  # % doubled, quoted
    assert "OnUnitActiveSec=45s" in (unit_dir(user) / "orbit-tick.timer").read_text()


def test_install_twice_is_idempotent_and_uninstall_removes_only_its_own(
    orbit: Orbit, user: Path
) -> None:
    first = orbit("scheduler", "install", "--systemd", "--json").json()
    units = unit_dir(user)
    before = {p.name: p.read_text() for p in units.glob("orbit-tick.*")}
    second = orbit("scheduler", "install", "--systemd", "--json").json()
    assert first["changed"] is True and second["changed"] is False
    assert {p.name: p.read_text() for p in units.glob("orbit-tick.*")} == before
    changed = orbit("scheduler", "install", "--systemd", "--interval", "90", "--json").json()
    assert changed["changed"] is True and changed["interval_s"] == 90

    # Another home may neither replace nor remove this home's units (one timer per user).
    mine = dict(orbit.environ)
    orbit.environ["ORBIT_HOME"] = str(orbit.home.parent / "other")
    refused = orbit("scheduler", "install", "--systemd")
    assert refused.code == ExitCode.CONFLICT and str(orbit.home) in refused.err
    left = orbit("scheduler", "uninstall", "--systemd", "--json").json()["uninstalled"]
    assert left == [{"kind": "systemd", "removed": [], "note": left[0]["note"]}]
    assert "left in place" in left[0]["note"] and (units / "orbit-tick.timer").exists()

    orbit.environ.clear()
    orbit.environ.update(mine)
    gone = orbit("scheduler", "uninstall", "--systemd", "--json").json()["uninstalled"][0]
    assert sorted(gone["removed"]) == sorted(str(units / n) for n in before)
    assert not list(units.glob("orbit-tick.*"))
    assert not (units / "timers.target.wants" / "orbit-tick.timer").is_symlink()
    again = orbit("scheduler", "uninstall", "--systemd", "--json").json()["uninstalled"][0]
    assert again == {"kind": "systemd", "removed": [], "note": "not installed"}


def test_a_unit_not_written_by_orbit_is_left_alone(orbit: Orbit, user: Path) -> None:
    units = unit_dir(user)
    units.mkdir(parents=True)
    (units / "orbit-tick.timer").write_text("[Timer]\nOnUnitActiveSec=5s\n")
    res = orbit("scheduler", "install", "--systemd")
    assert res.code == ExitCode.CONFLICT and "not written by Orbit" in res.err
    assert orbit("scheduler", "uninstall", "--systemd").code == 0
    assert (units / "orbit-tick.timer").read_text() == "[Timer]\nOnUnitActiveSec=5s\n"


# --- cron ----------------------------------------------------------------------------------
def test_cron_line_content_idempotence_and_uninstall(orbit: Orbit, user: Path) -> None:
    (user / "cron" / "table").write_text(OTHER_LINE + "\n")
    res = orbit("scheduler", "install", "--cron", "--json")
    assert res.code == 0, res.err
    line = expected_cron_line(orbit.home)
    assert res.json()["line"] == line and res.json()["changed"] is True
    assert crontab(user) == f"{OTHER_LINE}\n{line}\n"
    again = orbit("scheduler", "install", "--cron", "--json").json()
    assert again["changed"] is False and crontab(user) == f"{OTHER_LINE}\n{line}\n"

    # A second home gets its own line; each uninstall removes exactly its own.
    mine = dict(orbit.environ)
    other = orbit.home.parent / "other"
    orbit.environ["ORBIT_HOME"] = str(other)
    assert orbit("scheduler", "install", "--cron").code == 0
    assert crontab(user) == f"{OTHER_LINE}\n{line}\n{expected_cron_line(other)}\n"
    orbit.environ.clear()
    orbit.environ.update(mine)

    cron = orbit("scheduler", "status", "--json").json()["cron"]
    assert cron["installed"] is True and cron["line"] == line
    gone = orbit("scheduler", "uninstall", "--cron", "--json").json()["uninstalled"]
    assert gone == [{"kind": "cron", "removed": [line], "note": None}]
    assert crontab(user) == f"{OTHER_LINE}\n{expected_cron_line(other)}\n"
    assert orbit("scheduler", "status", "--json").json()["cron"]["installed"] is False


def test_cron_escapes_percent(orbit: Orbit, user: Path) -> None:
    orbit.environ["ORBIT_HOME"] = str(orbit.home.parent / "h%1")
    assert orbit("scheduler", "install", "--cron").code == 0
    # cron turns a bare % into a newline; \% reaches the shell as %.
    assert crontab(user).rstrip("\n").endswith(f"# orbit-tick {orbit.home.parent}/h\\%1")
    assert "%" not in crontab(user).replace("\\%", "")
    assert orbit("scheduler", "uninstall", "--cron").code == 0
    assert crontab(user) == ""


def test_missing_crontab_is_one_line_with_the_fix(orbit: Orbit, user: Path) -> None:
    del orbit.environ["ORBIT_CRONTAB"]
    orbit.environ["PATH"] = str(user / "run")  # an empty directory: no crontab on PATH
    res = orbit("scheduler", "install", "--cron")
    assert res.code != 0 and res.out == ""
    assert res.err == (
        "orbit: crontab not found: install cron (`apt-get install cron`) or use --systemd\n"
    )
    orbit.environ["ORBIT_CRONTAB"] = str(user / "nowhere")
    res = orbit("scheduler", "install", "--cron")
    assert res.code != 0 and "ORBIT_CRONTAB" in res.err and res.err.count("\n") == 1
    # Uninstalling both kinds still works without cron; only an explicit --cron fails.
    assert orbit("scheduler", "uninstall").code == 0
    assert orbit("scheduler", "uninstall", "--cron").code != 0


# --- status ----------------------------------------------------------------------------------
def test_status_json_keys(orbit: Orbit, user: Path) -> None:
    assert orbit("scheduler", "tick").code == 0
    data = orbit("scheduler", "status", "--json").json()
    assert set(data) == {
        "home",
        "last_tick",
        "last_tick_age_s",
        "last_clock_tick_age_s",
        "queued",
        "active",
        "supervised",
        "systemd",
        "cron",
        "foreground",
        "ticker",
    }
    assert set(data["systemd"]) == {
        "state",
        "unit_dir",
        "installed",
        "home",
        "interval_s",
        "enabled",
        "active",
        "problem",
        "linger",
    }
    assert set(data["cron"]) == {"state", "installed", "line", "daemon_running", "problem"}
    assert set(data["foreground"]) == {"state", "running", "pid", "interval_s", "started_at"}
    assert set(data["ticker"]) == {"state", "running", "pid", "interval_s", "started_at"}
    assert data["ticker"]["running"] is False and data["last_clock_tick_age_s"] is None
    assert data["home"] == str(orbit.home) and data["supervised"] is False
    assert data["last_tick"] == (orbit.home / "runtime" / "last_tick").read_text()
    assert 0 <= data["last_tick_age_s"] < 60
    assert (data["queued"], data["active"]) == (0, 0)
    assert data["systemd"]["state"] == "not installed" and data["cron"]["state"] == "not installed"
    human = orbit("scheduler", "status")
    assert human.code == 0 and "nothing ticks this home on a clock" in human.out


# --- `orbit scheduler run` ---------------------------------------------------------------------
def test_foreground_loop_ticks_admits_and_stops_on_sigterm(orbit: Orbit, busybox: str) -> None:
    two_cpus(orbit)
    # A submit whose inline tick cannot get the lock leaves its run queued and a request behind:
    # the next tick that gets the lock (here, the loop's) admits it.
    lock = try_lock(orbit.home / "locks" / "scheduler.lock")
    assert lock is not None
    try:
        run_id = orbit.submit("--no-project", "--image", busybox, "--cpus", "1", "--mem", "0.1",
                              "--", "true")  # fmt: skip
        assert orbit.status(run_id)["state"] == "queued"
        loop = orbit.proc("scheduler", "run", "--interval", "1", "--json")
        time.sleep(1.5)  # it ticks, finds the lock held, and leaves the work to the holder
        assert orbit.status(run_id)["state"] == "queued"
    finally:
        release(lock)
    try:
        orbit.wait_for(run_id, lambda s: s["state"] == "succeeded", timeout=60)
        last_tick = orbit.home / "runtime" / "last_tick"
        first = last_tick.read_text()
        deadline = time.monotonic() + 10
        while last_tick.read_text() == first:
            assert time.monotonic() < deadline, "runtime/last_tick did not advance"
            time.sleep(0.1)

        fg = orbit("scheduler", "status", "--json").json()["foreground"]
        assert fg["running"] is True and fg["pid"] == loop.pid and fg["interval_s"] == 1
        second = orbit("scheduler", "run", "--interval", "1")
        assert second.code == ExitCode.CONFLICT and "already ticks this home" in second.err

        started = time.monotonic()
        loop.send_signal(signal.SIGTERM)
        out, err = loop.communicate(timeout=10)
        assert loop.returncode == 0, err
        assert time.monotonic() - started < 5
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    lines = [json.loads(line) for line in out.splitlines()]
    assert any(line["admitted"] == [run_id] for line in lines), out
    assert all(line["admitted"] or line["repaired"] or line["problems"] for line in lines)
    assert "stopped" in err
    fg = orbit("scheduler", "status", "--json").json()["foreground"]
    assert fg == {
        "state": "not running",
        "running": False,
        "pid": None,
        "interval_s": None,
        "started_at": None,
    }


def test_foreground_loop_stops_on_sigint_and_cleans_up(orbit: Orbit) -> None:
    loop = orbit.proc("scheduler", "run", "--interval", "5")
    try:
        runtime = orbit.home / "runtime" / "scheduler-run.json"
        deadline = time.monotonic() + 20
        while not runtime.exists():
            assert time.monotonic() < deadline and loop.poll() is None, loop.stderr
            time.sleep(0.05)
        loop.send_signal(signal.SIGINT)
        # It stops once the tick in flight has finished its writes: on a loaded machine the
        # first tick (imports and all) can take a while.
        _, err = loop.communicate(timeout=60)
        assert loop.returncode == 0, err
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    assert not runtime.exists()


def test_a_tick_starts_shepherds_as_fresh_lean_processes(orbit: Orbit, busybox: str) -> None:
    lock = try_lock(orbit.home / "locks" / "scheduler.lock")
    assert lock is not None
    try:
        run_id = orbit.submit("--no-project", "--image", busybox, "--cpus", "0.5", "--mem", "0.1",
                              "--", "sleep", "30")  # fmt: skip
    finally:
        release(lock)
    tick = orbit("scheduler", "tick", "--json")
    assert tick.code == 0 and tick.json()["admitted"] == [run_id], tick.out
    pid_file = orbit.run_dir(run_id) / "shepherd.pid"
    deadline = time.monotonic() + 20
    while not pid_file.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    cmdline = Path(f"/proc/{int(pid_file.read_text())}/cmdline").read_bytes().split(b"\0")
    home = str(orbit.home.resolve()).encode()
    assert cmdline[1:6] == [b"-S", b"-m", b"orbit.execute.shepherd_main", home, run_id.encode()]
    status = Path(f"/proc/{int(pid_file.read_text())}/status").read_text()
    assert "Name:\torbit-shepherd" in status
    assert orbit("cancel", run_id).code == 0
    orbit.wait_for(run_id, lambda s: s["state"] == "cancelled", timeout=60)


# --- concurrent ticks ----------------------------------------------------------------------
# `orbit scheduler tick` in a fresh process that has done its imports and waits at a barrier,
# so that all of them tick within a millisecond or two of each other.
TICK_AT_BARRIER = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from orbit.cli import main
from orbit.__main__ import quick_exit
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.001)
quick_exit(main(["scheduler", "tick", "--spawn", sys.argv[4]]))
"""


def test_concurrent_ticks_never_double_admit(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    two_cpus(orbit)
    submit = ("run", "--no-project", "--image", busybox, "--cpus", "1", "--mem", "0.1", "--json")
    go = tmp_path / "go"
    ticks = []
    for i in range(8):
        argv = [TICK_AT_BARRIER, str(PACKAGE_PARENT), str(tmp_path / f"ready{i}"), str(go)]
        ticks.append(
            subprocess.Popen(
                [sys.executable, "-c", *argv, ("fork", "exec")[i % 2]],
                env=orbit.environ,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    # Three submits find the scheduler lock held, so their runs wait, queued, for the ticks.
    lock = try_lock(orbit.home / "locks" / "scheduler.lock")
    assert lock is not None
    try:
        early = [orbit.proc(*submit, "--", "true") for _ in range(3)]
        for proc in early:
            proc.wait(timeout=120)
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready{i}").exists() for i in range(8)):
            assert time.monotonic() < deadline, "the tick processes never got ready"
            time.sleep(0.01)
    finally:
        release(lock)
    # All eight tick at once, and two more submits race them.
    late = [orbit.proc(*submit, "--", "true") for _ in range(2)]
    go.touch()
    ids = []
    for proc in [*ticks, *early, *late]:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        if proc in early or proc in late:
            ids.append(json.loads(out)["id"])
    assert sorted(ids) == ["1", "2", "3", "4", "5"]
    for run_id in ids:  # nothing ticks on a clock here: every run finished through the ticks
        orbit.wait_for(run_id, lambda s: s["state"] == "succeeded", timeout=120)

    edges = []
    for run_id in ids:
        events = orbit.events(run_id)
        admitted = [e["time"] for e in events if e["event"] == "admitted"]
        final = [e["time"] for e in events if e["event"] in ("succeeded", "failed", "lost")]
        assert len(admitted) == 1 and len(final) == 1, events
        edges += [(admitted[0], 1), (final[0], -1)]
    # ISO times of one clock sort as text; at the same instant an end comes before a start.
    running = peak = 0
    for _, step in sorted(edges):
        running += step
        peak = max(peak, running)
    assert peak <= 2, sorted(edges)
    deadline = time.monotonic() + 30  # markers go once the containers are removed
    while os.listdir(orbit.home / "queue") or os.listdir(orbit.home / "active"):
        assert time.monotonic() < deadline, "queue/ or active/ markers were left"
        time.sleep(0.1)


def test_units_and_cron_carry_the_gpu_variables_of_the_home(tmp_path: Path) -> None:
    """A supervised tick decides as `orbit run` does: ORBIT_GPUS and ORBIT_FAKE_GPUS travel into
    the tick's units and cron line (and nothing else of the caller's environment)."""
    from orbit.service.supervisor import cron_line, render_units
    from orbit.store.home import Home

    stand_in = tmp_path / "gpus.yaml"
    environ = {"ORBIT_GPUS": "0,1", "ORBIT_FAKE_GPUS": str(stand_in), "AWS_SECRET": "k3y"}
    home = Home(tmp_path / "home", environ)
    service = render_units(home, 30.0)["orbit-tick.service"]
    line = cron_line(home)
    for text in (service, line):
        assert "ORBIT_GPUS=0,1" in text and f"ORBIT_FAKE_GPUS={stand_in}" in text
        assert "AWS_SECRET" not in text and "k3y" not in text

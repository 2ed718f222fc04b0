"""Damaged and blocking files in a home: each is named with its repair, and the rest of the
home goes on working (docs/architecture.md, "Crash safety"; the reliability audit's P14).

Commands that could hang on old code run as real processes with a deadline.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import SMALL, Orbit, Result

from orbit.errors import ExitCode
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore


def finished(orbit: Orbit, proc: subprocess.Popen[str], timeout: float = 30) -> Result:
    """The process's result; a process still running at the deadline is killed and fails."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"{proc.args} still running after {timeout} s") from None
    return Result(proc.returncode, out, err)


def done_runs(orbit: Orbit, n: int) -> list[str]:
    store = RunStore(Home(orbit.home))
    return [
        store.create(
            {"name": f"d{i}", "command": ["true"]},
            state=RunState.SUCCEEDED,
            reason="",
            actor="test",
        ).id
        for i in range(n)
    ]


def rows(res: Result) -> dict[str, dict[str, object]]:
    assert res.code == 0, res.err
    return {r["id"]: r for r in res.json()["runs"]}


# --- run files that are not files ---------------------------------------------------------------
def test_a_fifo_status_yaml_blocks_no_reader(orbit: Orbit, busybox: str) -> None:
    """A FIFO (a stand-in for a file on a hung mount) as a finished run's status.yaml: `ps -a`,
    the tick and `run -w` carry on, and the run is an unreadable row."""
    fifo_run, other = done_runs(orbit, 2)
    status = orbit.run_dir(fifo_run) / "status.yaml"
    status.unlink()
    os.mkfifo(status)

    listed = rows(finished(orbit, orbit.proc("ps", "-a", "--json")))
    assert listed[other]["state"] == "succeeded"
    assert listed[fifo_run]["state"] == "unreadable"
    assert listed[fifo_run]["error"] == f"{status}: unreadable (not a regular file)"
    shown = finished(orbit, orbit.proc("show", fifo_run))
    assert shown.code == ExitCode.CORRUPT
    assert shown.err == f"orbit: {status}: unreadable (not a regular file)\n"
    assert finished(orbit, orbit.proc("show", other)).code == 0
    assert finished(orbit, orbit.proc("scheduler", "tick")).code == 0
    res = finished(
        orbit, orbit.proc("run", "--image", busybox, *SMALL, "-w", "--", "sh", "-c", "exit 3")
    )
    assert res.code == 3, res.err


def test_a_fifo_log_txt_is_named_not_waited_on(orbit: Orbit) -> None:
    """`orbit logs` of a run whose log.txt is a FIFO: one line, exit 6, no hang (with its
    status.yaml damaged too, the same)."""
    (run,) = done_runs(orbit, 1)
    log = orbit.run_dir(run) / "log.txt"
    log.unlink(missing_ok=True)
    os.mkfifo(log)
    want = f"orbit: {log}: unreadable (not a regular file)\n"
    res = finished(orbit, orbit.proc("logs", run), timeout=20)
    assert (res.code, res.err) == (ExitCode.CORRUPT, want)
    (orbit.run_dir(run) / "status.yaml").write_text("state: [\n")
    res = finished(orbit, orbit.proc("logs", run), timeout=20)
    assert (res.code, res.err) == (ExitCode.CORRUPT, want)


@pytest.mark.parametrize("name", ["status.yaml", "run.yaml"])
def test_an_oversized_run_file_is_unreadable_not_slow(orbit: Orbit, name: str) -> None:
    big, other = done_runs(orbit, 2)
    path = orbit.run_dir(big) / name
    text = path.read_text()
    path.write_text(text + "# padding\n" * 200_000)  # 2 MB, still valid YAML
    problem = f"{path}: unreadable (too large: 2.0 MB; the limit is 1 MB)"
    shown = orbit("show", big)
    assert (shown.code, shown.err) == (ExitCode.CORRUPT, f"orbit: {problem}\n")
    listed = rows(orbit("ps", "-a", "--json"))
    assert listed[other]["state"] == "succeeded"
    if name == "status.yaml":  # run.yaml never changes: its listing row stands
        assert (listed[big]["state"], listed[big]["error"]) == ("unreadable", problem)


# --- config.yaml -------------------------------------------------------------------------------
def one_line(res: Result, code: ExitCode) -> str:
    assert res.code == code, f"exit {res.code} (wanted {code.name}): {res.err}"
    assert "Traceback" not in res.err and len(res.err.splitlines()) == 1, res.err
    return res.err.strip()


def doctor(orbit: Orbit) -> dict[str, dict[str, str]]:
    res = orbit("doctor", "--json")
    assert "Traceback" not in res.err
    checks: dict[str, dict[str, str]] = {}
    for check in res.json()["checks"]:
        checks.setdefault(check["name"], check)
    assert res.code == (ExitCode.OK if res.json()["ok"] else ExitCode.ENVIRONMENT)
    return checks


def test_an_empty_config_yaml_holds_the_defaults(orbit: Orbit, busybox: str) -> None:
    (orbit.home / "config.yaml").write_text("")
    shown = orbit("config", "--json")
    assert shown.code == 0, shown.err
    assert shown.json()["default_cpus"] == 4.0
    assert orbit("ps", "-a").code == 0
    assert doctor(orbit)["config"]["status"] == "OK"
    res = orbit("run", "--image", busybox, *SMALL, "-w", "--", "true")
    assert res.code == 0, res.err


DAMAGED = {"garbage": b"\x00\xff{", "a list": b"- a\n- b\n", "bad YAML": b"total_cpus: [1\n"}


@pytest.mark.docker  # doctor's other checks, the engine's among them, still pass
@pytest.mark.parametrize("content", DAMAGED.values(), ids=DAMAGED.keys())
def test_a_damaged_config_yaml_is_named_with_its_repair(orbit: Orbit, content: bytes) -> None:
    path = orbit.home / "config.yaml"
    path.write_bytes(content)
    line = one_line(orbit("resources"), ExitCode.CORRUPT)
    assert line.startswith(f"orbit: {path}: ")
    assert line.endswith(
        "; fix it, or `orbit config reset` (moves it aside as "
        "config.yaml.damaged-<time>; the settings become the defaults)"
    )

    checks = doctor(orbit)
    assert checks["config"]["status"] == "FAIL"
    assert checks["config"]["detail"] == line.removeprefix("orbit: ").split("; ")[0]
    assert "orbit config reset" in checks["config"]["fix"]
    assert checks["docker"]["status"] == "OK"  # the rest is still checked
    assert "data directory" in checks

    res = orbit("config", "set", "default_cpus", "1")
    assert res.code == 0, res.err
    aside = sorted(orbit.home.glob("config.yaml.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == content  # nothing lost
    assert res.err == (
        f"orbit: warning: {path} could not be read; moved it to {aside[0]} (copy settings back "
        "from it): default_cpus is set, the others are the defaults\n"
    )
    assert orbit("config", "--json").json()["default_cpus"] == 1
    assert orbit("resources").code == 0


def test_a_config_yaml_symlink_loop_is_damaged_not_the_defaults(orbit: Orbit) -> None:
    path = orbit.home / "config.yaml"
    path.unlink()
    path.symlink_to(path.name)  # a loop: exists() says False, yet something is there
    line = one_line(orbit("resources"), ExitCode.CORRUPT)
    assert line.startswith(f"orbit: {path}: unreadable (") and "orbit config reset" in line
    assert orbit("config", "reset").code == 0
    assert orbit("resources").code == 0
    assert [p.is_symlink() for p in orbit.home.glob("config.yaml.*")] == [True]


def test_config_reset_moves_the_file_aside(orbit: Orbit, tmp_path: Path) -> None:
    path = orbit.home / "config.yaml"
    path.write_bytes(b"\x00\xff{")
    res = orbit("config", "reset")
    assert res.code == 0, res.err
    (aside,) = orbit.home.glob("config.yaml.damaged-*")
    assert res.out == f"moved {path} to {aside}: the settings are the defaults\n"
    assert aside.read_bytes() == b"\x00\xff{" and not path.exists()
    assert orbit("resources").code == 0

    # A readable file goes aside as .old-, keeping the data directory (the runs are there).
    assert orbit("config", "data", str(tmp_path / "data")).code == 0
    assert orbit("config", "set", "default_cpus", "1").code == 0
    res = orbit("config", "reset")
    assert res.code == 0, res.err
    (old,) = orbit.home.glob("config.yaml.old-*")
    assert "default_cpus: 1" in old.read_text()
    settings = orbit("config", "--json").json()
    assert settings["data_dir"] == str(tmp_path / "data") and settings["default_cpus"] == 4.0
    assert orbit("config", "reset").code == 0  # a second one, in the same second
    assert len(list(orbit.home.glob("config.yaml.old-*"))) == 2


def test_doctor_names_every_damaged_home_file(orbit: Orbit) -> None:
    files = {
        "config": "config.yaml",
        "nodes": "nodes.yaml",
        "notify": "notify.yaml",
        "auth profiles": "auth.json",
        "datasets": "datasets.yaml",
    }
    for name in files.values():
        (orbit.home / name).write_bytes(b"\x00\xff{")
    checks = doctor(orbit)
    for check, name in files.items():
        assert checks[check]["status"] == "FAIL", checks[check]
        assert str(orbit.home / name) in checks[check]["detail"]
        assert checks[check]["fix"]


# --- capacity settings -------------------------------------------------------------------------
def test_config_set_refuses_more_than_the_machine_has(orbit: Orbit) -> None:
    cores = os.cpu_count() or 1
    line = one_line(orbit("config", "set", "total_cpus", str(cores + 6)), ExitCode.USAGE)
    assert line == (
        f"orbit: total_cpus {cores + 6} is more than this machine's {cores} CPUs; "
        "`orbit config set total_cpus null` uses them all"
    )
    line = one_line(orbit("config", "set", "total_mem_gb", "100000"), ExitCode.USAGE)
    assert "total_mem_gb 100000 is more than this machine's" in line
    assert orbit("config", "--json").json()["total_cpus"] is None
    assert orbit("config", "set", "total_cpus", str(cores)).code == 0


def test_a_total_above_the_machine_in_the_file_fails_no_run(orbit: Orbit, busybox: str) -> None:
    cores = os.cpu_count() or 1
    orbit.configure(total_cpus=cores + 6)
    res = orbit("run", "--image", busybox, "--no-project", "--mem", "0.25", "-w", "--", "true")
    assert res.code == 0, res.err  # the default CPUs are the machine's at most
    assert orbit.status("1")["lease"]["cpus"] <= cores
    line = one_line(
        orbit("run", "--image", busybox, *SMALL[:1], "--cpus", str(cores + 1), "--", "true"),
        ExitCode.USAGE,
    )
    assert f"can never start: it needs {cores + 1} CPUs but this machine has {cores} CPUs" in line
    check = doctor(orbit)["total_cpus"]
    assert check["status"] == "WARN" and f"more than this machine's {cores} CPUs" in check["detail"]


# --- a running run with a damaged status.yaml --------------------------------------------------
def test_a_running_run_with_a_garbled_status_is_counted_and_cancelled(
    orbit: Orbit, busybox: str
) -> None:
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "sleep", "60")
    orbit.wait_for(run_id, lambda s: s["state"] == "running", timeout=30)
    status = orbit.run_dir(run_id) / "status.yaml"
    status.write_bytes(b"\x00\xff{")

    leases = orbit("resources", "--json").json()["leases"]
    assert [(lease["id"], lease["cpus"]) for lease in leases] == [(run_id, 1.0)]
    res = orbit("cancel", "--json", run_id)
    assert res.code == 0, res.err
    assert res.json()["runs"] == [
        {"id": run_id, "state": "cancelled", "reason": "cancelled by user"}
    ]
    events = [e["event"] for e in orbit.events(run_id)]
    assert events[-3:] == ["repaired", "cancel-requested", "cancelled"]
    assert (orbit.run_dir(run_id) / "status.yaml.broken").read_bytes() == b"\x00\xff{"


# --- a cancel that comes after the command exited -------------------------------------------
def test_a_cancel_after_the_command_exited_keeps_its_result(orbit: Orbit, busybox: str) -> None:
    """Each run's shepherd is held (SIGSTOP) while its command exits 0 and a cancel is
    requested: when it goes on, it may see the request before the exit and send a stop to a
    container that had already ended (the race of the reliability audit's D10, made likely; 4
    runs at once). Every run is recorded as it ended, succeeded, never as cancelled."""
    import signal

    from conftest import shepherd_pid

    from orbit.execute.control import request_cancel

    small = ("--no-project", "--cpus", "0.25", "--mem", "0.1")
    ids = [
        orbit.submit("--image", busybox, *small, "--", "sh", "-c", "sleep 1; exit 0")
        for _ in range(4)
    ]
    for run_id in ids:
        orbit.wait_for(run_id, lambda s: s["state"] == "running", timeout=30)
    pids = [shepherd_pid(orbit, run_id) for run_id in ids]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        label = f"label=orbit.home={orbit.home.resolve()}"
        listing = ["docker", "ps", "-a", "--filter", label, "--format", "{{.Status}}"]
        deadline = time.monotonic() + 30
        while subprocess.run(listing, capture_output=True, text=True).stdout.count("Exited") < 4:
            assert time.monotonic() < deadline, "the containers never exited"
            time.sleep(0.1)
        for run_id in ids:
            request_cancel(RunStore(Home(orbit.home)), run_id, actor="test")
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    for run_id in ids:
        status = orbit.wait_for(run_id, lambda s: s["state"] != "running", timeout=30)
        assert (status["state"], status["exit_code"]) == ("succeeded", 0), status
        record = json.loads((orbit.run_dir(run_id) / "exit.json").read_text())
        assert record["cancelled"] is False
        late = record.get("cancel_late")  # the shepherd saw the request before the exit
        assert status["reason"] == ("the cancel came after it had exited" if late else None)

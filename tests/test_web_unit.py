"""`orbit web --install|--uninstall`: the web view's systemd user unit.

As in test_supervisor.py, no test touches the machine's own systemd: HOME, XDG_CONFIG_HOME and
XDG_RUNTIME_DIR point into tmp_path, so `systemctl --user` finds no user manager.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Orbit

from orbit.errors import ExitCode
from orbit.store.childenv import PACKAGE_PARENT


@pytest.fixture
def user(orbit: Orbit, tmp_path: Path) -> Path:
    home = tmp_path / "user"
    runtime = home / "run"
    runtime.mkdir(parents=True, mode=0o700)
    orbit.environ.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_RUNTIME_DIR=str(runtime),
    )
    orbit.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
    return home


def unit_path(user: Path) -> Path:
    return user / ".config" / "systemd" / "user" / "orbit-web.service"


def verify(orbit: Orbit, unit: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd"
    done = subprocess.run(
        [analyze, "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        env=orbit.environ,
        timeout=60,
    )
    # verify exits 0 even for unknown keys or bad values: any complaint at all is a failure.
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done


def test_install_writes_a_unit_that_verifies_and_says_how_to_start_it(
    orbit: Orbit, user: Path
) -> None:
    res = orbit("web", "--install", "--json")
    assert res.code == 0, res.err
    data = res.json()
    unit = unit_path(user)
    assert set(data) == {
        "kind",
        "changed",
        "files",
        "line",
        "enabled",
        "started",
        "interval_s",
        "todo",
        "problem",
    }
    assert data["kind"] == "systemd" and data["files"] == [str(unit)] and data["changed"] is True
    verify(orbit, unit)
    text = unit.read_text()
    assert f"# orbit-home: {orbit.home}\n" in text
    assert f"\nEnvironment=ORBIT_HOME={orbit.home} PYTHONPATH={PACKAGE_PARENT}\n" in text
    assert f"\nExecStart={sys.executable} -m orbit web --serve\n" in text  # the foreground server
    assert "\nRestart=on-failure\n" in text and "\nWantedBy=default.target\n" in text

    # No user manager here: written and enabled (a symlink, made offline), not started.
    assert data["enabled"] is True and data["started"] is False
    assert "no user systemd reachable" in data["problem"]
    assert data["todo"].endswith("systemctl --user start orbit-web.service")
    wants = unit.parent / "default.target.wants" / "orbit-web.service"
    assert wants.resolve() == unit
    human = orbit("web", "--install")
    assert human.code == 0 and f"unchanged {unit}" in human.out
    assert "NOT started" in human.out and "to finish: systemctl --user" in human.out
    status = orbit("scheduler", "status")
    assert "orbit-web.service enabled" in status.out, status.out


def test_install_with_a_port_and_a_home_with_spaces_and_percent(orbit: Orbit, user: Path) -> None:
    odd = orbit.home.parent / "my home 100%"
    orbit.environ["ORBIT_HOME"] = str(odd)
    assert orbit("web", "--install", "--port", "8123").code == 0
    unit = unit_path(user)
    verify(orbit, unit)
    text = unit.read_text()
    assert f'Environment="ORBIT_HOME={odd}%"' in text  # % doubled, quoted
    assert "-m orbit web --serve --port 8123\n" in text


def test_install_twice_is_idempotent_and_uninstall_removes_it(orbit: Orbit, user: Path) -> None:
    unit = unit_path(user)
    first = orbit("web", "--install", "--json").json()
    before = unit.read_text()
    second = orbit("web", "--install", "--json").json()
    assert first["changed"] is True and second["changed"] is False
    assert unit.read_text() == before
    changed = orbit("web", "--install", "--port", "8124", "--json").json()
    assert changed["changed"] is True

    gone = orbit("web", "--uninstall", "--json").json()["uninstalled"]
    assert gone == [{"kind": "systemd", "removed": [str(unit)], "note": None}]
    assert not unit.exists()
    assert not (unit.parent / "default.target.wants" / "orbit-web.service").is_symlink()
    again = orbit("web", "--uninstall", "--json").json()["uninstalled"]
    assert again == [{"kind": "systemd", "removed": [], "note": "not installed"}]
    assert "no unit" in orbit("scheduler", "status").out


def test_a_unit_of_another_home_is_refused_and_left_in_place(orbit: Orbit, user: Path) -> None:
    unit = unit_path(user)
    assert orbit("web", "--install").code == 0
    before = unit.read_text()
    mine = dict(orbit.environ)
    orbit.environ["ORBIT_HOME"] = str(orbit.home.parent / "other")
    refused = orbit("web", "--install")
    assert refused.code == ExitCode.CONFLICT and str(orbit.home) in refused.err
    assert "orbit web --uninstall" in refused.err and refused.err.count("\n") == 1
    left = orbit("web", "--uninstall", "--json").json()["uninstalled"][0]
    assert left["removed"] == [] and "left in place" in left["note"]
    assert unit.read_text() == before
    assert "not this home" in orbit("scheduler", "status").out

    orbit.environ.clear()
    orbit.environ.update(mine)
    assert orbit("web", "--uninstall").code == 0 and not unit.exists()


def test_a_unit_not_written_by_orbit_is_left_alone(orbit: Orbit, user: Path) -> None:
    unit = unit_path(user)
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    res = orbit("web", "--install")
    assert res.code == ExitCode.CONFLICT and "not written by Orbit" in res.err
    assert orbit("web", "--uninstall").code == 0
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"


def test_install_and_stop_cannot_be_combined(orbit: Orbit, user: Path) -> None:
    res = orbit("web", "--install", "--uninstall")
    assert res.code == ExitCode.USAGE and "cannot be combined" in res.err
    assert orbit("web", "1", "--install").code == ExitCode.USAGE

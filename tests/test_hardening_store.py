"""The home against the machine and against damage: unreadable run directories, a full or
read-only disk, another user's files, broken runs.

Non-root cases run real `python orbit.py` processes as a real user (`orbit-tester-PID`, in the
docker group, created for the session and removed with its home at its end); disk cases use a
small tmpfs mounted as the home's file system.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    ORBIT_PY,
    SMALL,
    TESTER,
    Orbit,
    Result,
    _cleanup_containers,
    readable_site_packages,
    real_user,
    remove_stale_testers,
)

from orbit.errors import ExitCode

SYSTEM_PYTHON = "/usr/bin/python3"


def one_line_error(res: Result, code: int, *words: str) -> None:
    """`res` failed with `code` and one line `orbit: …` holding `words`, no traceback."""
    assert res.code == code, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("orbit: "), res.err
    assert "internal error" not in res.err and "Traceback" not in res.err, res.err
    for word in words:
        assert word in res.err, res.err


def test_the_sessions_user_is_removed_with_its_home(tester: tuple[int, int]) -> None:
    name = f"orbit-tester-{_dead_pid()}"
    with real_user(name) as (uid, _):
        home = Path(pwd.getpwnam(name).pw_dir)
        assert (
            home.is_dir()
            and "docker"
            in subprocess.run(
                ["id", "-nG", name], capture_output=True, text=True, check=True
            ).stdout.split()
        )
        left = subprocess.Popen(["setpriv", f"--reuid={uid}", "sleep", "60"])  # left behind
    assert left.wait(10) == -9
    with pytest.raises(KeyError):
        pwd.getpwnam(name)
    assert not home.exists()
    subprocess.run(["useradd", "-m", name], check=True, capture_output=True)  # a crashed session's
    removed = remove_stale_testers()  # (with any other crashed session's on this machine)
    assert name in removed and TESTER not in removed, removed
    assert pwd.getpwnam(TESTER)  # this live session's user is kept
    assert not home.exists()


def _dead_pid() -> int:
    import psutil

    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid += 1
    return pid


@pytest.fixture(scope="session")
def user_site() -> Iterator[Path]:
    """Orbit's dependencies in a directory every user can read."""
    dest = readable_site_packages(Path(tempfile.mkdtemp(prefix="orbit-site-")))
    yield dest
    shutil.rmtree(dest, ignore_errors=True)


class User:
    """`python orbit.py …` as orbit-tester against one ORBIT_HOME."""

    def __init__(self, home: Path, ids: tuple[int, int], site: Path) -> None:
        self.home = home
        self.uid, self.gid = ids
        self.site = site

    def __call__(self, *args: str, timeout: float = 120) -> Result:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": f"/home/{TESTER}",
            "USER": TESTER,
            "ORBIT_HOME": str(self.home),
            "PYTHONPATH": str(self.site),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        cmd = [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--init-groups",
            SYSTEM_PYTHON,
            ORBIT_PY,
            *args,
        ]
        proc = subprocess.run(
            cmd, env=env, cwd=self.home.parent, capture_output=True, text=True, timeout=timeout
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)


def write_config(home: Path) -> None:
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text("format: 1\ncount_outside_use: false\n")


@pytest.fixture
def user(tester: tuple[int, int], user_site: Path, open_dir: Path) -> User:
    """orbit-tester with a home of its own."""
    home = open_dir / "home"
    write_config(home)
    for path in (home, home / "config.yaml"):
        os.chown(path, *tester)
    return User(home, tester, user_site)


def containers(home: Path) -> list[str]:
    """The ids of the containers of `home`'s runs."""
    return subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=orbit.home={home.resolve()}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def wait_state(home: Path, run_id: str, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    path = home / "runs" / run_id / "status.yaml"
    while time.monotonic() < deadline:
        try:
            if f"state: {state}\n" in path.read_text():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never became {state}")


# --- one unreadable run directory ----------------------------------------------------------
def test_an_unreadable_run_directory_does_not_wedge_the_home(user: User, busybox: str) -> None:
    small = ("--image", busybox, *SMALL)
    assert user("run", *small, "-w", "--", "true").code == 0  # 1
    assert user("run", *small, "-w", "--", "true").code == 0  # 2
    assert user("run", *small, "-n", "long", "--", "sleep", "60").code == 0  # 3
    wait_state(user.home, "3", "running")
    for run_id in ("2", "3"):
        (user.home / "runs" / run_id).chmod(0)
    try:
        ps = user("ps")
        assert ps.code == 0, ps
        assert "unreadable" in ps.out and "runs/3" in ps.out and "ermission denied" in ps.out
        tick = user("scheduler", "tick")
        assert tick.code == 0, tick
        assert "problem:" in tick.out and "runs/3" in tick.out
        after = user("run", *small, "-w", "--", "echo", "still-works")  # 4
        assert after.code == 0, after
        assert "still-works" in after.out
        assert user("show", "1").code == 0
        assert user("wait", "1", "4").code == 0
        one_line_error(user("show", "2"), ExitCode.CORRUPT, "runs/2", "ermission denied")
        one_line_error(user("logs", "2"), ExitCode.ENVIRONMENT, "log.txt: permission denied")
        listing = user("ps", "-a", "--json")
        assert listing.code == 0, listing
        states = {r["id"]: r["state"] for r in json.loads(listing.out)["runs"]}
        assert states == {
            "1": "succeeded",
            "2": "unreadable",
            "3": "unreadable",
            "4": "succeeded",
        }
        removed = user("rm", "--force", "-y", "2", "3")
        assert removed.code == 0, removed
        assert sorted(os.listdir(user.home / "runs")) == ["1", "4"]
        assert containers(user.home) == []  # run 3's, removed first
        assert user("ps", "-a", "--json").code == 0
    finally:
        for run_id in ("2", "3"):
            if (user.home / "runs" / run_id).exists():
                (user.home / "runs" / run_id).chmod(0o755)


# --- wait -g and ps -g with unreadable members ----------------------------------------------
def test_wait_for_a_group_never_reports_success_over_an_unreadable_member(
    orbit: Orbit, busybox: str
) -> None:
    for i, code in enumerate((0, 1, 0), start=1):
        orbit.submit(
            "--image",
            busybox,
            *SMALL,
            "-n",
            f"grp{i}",
            "-g",
            "grp",
            "--",
            "sh",
            "-c",
            f"exit {code}",
        )
    assert orbit("wait", "-g", "grp").code == ExitCode.RUN_FAILED
    status = orbit.run_dir("2") / "status.yaml"
    status.write_bytes(status.read_bytes()[:40])  # run 2 failed; now nobody can read that
    (orbit.home / "runs" / "notes.txt").write_text("a stray file is no member of any group")
    res = orbit("wait", "-g", "grp", "--json")
    assert res.code == ExitCode.CORRUPT, res
    data = res.json()
    assert data["ok"] is False
    assert {r["id"]: r["state"] for r in data["runs"]} == {
        "1": "succeeded",
        "2": "unreadable",
        "3": "succeeded",
    }
    text = orbit("wait", "-g", "grp")
    assert text.code == ExitCode.CORRUPT
    assert "run 2 (grp2) unreadable: " in text.out and "status.yaml" in text.out


def test_wait_for_a_group_counts_a_member_damaged_while_it_runs(orbit: Orbit, busybox: str) -> None:
    orbit.submit("--image", busybox, *SMALL, "-g", "grp", "--", "true")
    long = orbit.submit("--image", busybox, *SMALL, "-g", "grp", "--", "sleep", "30")
    orbit.wait_for(long, lambda s: s["state"] == "running")
    # Neither file can be read: its group is unknown, so it may be a member.
    (orbit.run_dir(long) / "run.yaml").write_bytes(b"\x00\xff{{ not yaml")
    (orbit.run_dir(long) / "status.yaml").write_bytes(b"state: runn")
    started = time.monotonic()
    res = orbit("wait", "-g", "grp")
    assert res.code == ExitCode.CORRUPT, res
    assert "run 1 succeeded" in res.out and f"run {long} unreadable" in res.out
    assert time.monotonic() - started < 20  # not waiting for the damaged run's end


@pytest.mark.parametrize("damage", ["cut", "emptied"])
def test_a_run_yaml_cut_at_a_line_break_is_unreadable(
    orbit: Orbit, busybox: str, damage: str
) -> None:
    """Still valid YAML, but without the keys it had: never read as a run with no image, no
    command and no resources (it was admitted over a full machine, and left out of its group)."""
    orbit.configure(total_cpus=2)
    big = orbit.submit("--image", busybox, *SMALL, "-g", "grp", "--", "sleep", "30")
    orbit.wait_for(big, lambda s: s["state"] == "running")
    opts = ("--image", busybox, "--no-project", "--cpus", "2", "--mem", "0.25", "-g", "grp")
    queued = orbit.submit(*opts, "--", "echo", "second")
    spec = orbit.run_dir(queued) / "run.yaml"
    text = spec.read_text()
    spec.write_text("garbage:\n" if damage == "emptied" else text[: text.index("\nenv:") + 1])
    tick = orbit("scheduler", "tick", "--json").json()
    assert queued not in tick["admitted"], tick
    assert orbit.status(queued)["state"] == "queued"
    shown = orbit("show", queued)
    assert shown.code == ExitCode.CORRUPT and "run.yaml: missing" in shown.err, shown
    orbit("cancel", big)
    res = orbit("wait", "-g", "grp")
    assert res.code == ExitCode.CORRUPT and f"run {queued} unreadable" in res.out, res


def test_ps_lists_an_unreadable_run_under_its_own_group_only(orbit: Orbit, busybox: str) -> None:
    for group in ("a", "b"):
        assert orbit("run", "--image", busybox, *SMALL, "-g", group, "-w", "--", "true").code == 0
    status = orbit.run_dir("2") / "status.yaml"
    status.write_bytes(status.read_bytes()[:40])  # run.yaml still says group b

    def listed(group: str) -> list[tuple[str, str]]:
        res = orbit("ps", "-a", "-g", group, "--json")
        assert res.code == 0, res
        return [(r["id"], r["state"]) for r in res.json()["runs"]]

    assert listed("a") == [("1", "succeeded")]
    assert listed("b") == [("2", "unreadable")]


# --- a full or read-only disk ------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Orbit]:
    """An Orbit whose home is on its own 8 MiB tmpfs."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], check=True)
    work = tmp_path / "work"
    work.mkdir()
    orbit = Orbit(disk / "home", work)
    try:
        yield orbit
    finally:
        _cleanup_containers(orbit.home)
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def settled(orbit: Orbit, timeout: float = 30) -> None:
    """Wait until no run holds a marker (its shepherd removed the container and left)."""
    deadline = time.monotonic() + timeout
    while any(os.listdir(orbit.home / d) for d in ("queue", "active")):
        assert time.monotonic() < deadline, "a run never settled"
        time.sleep(0.05)


def test_a_full_disk_is_named_and_leaves_nothing_behind(small_disk: Orbit, busybox: str) -> None:
    orbit = small_disk
    assert orbit("run", "--image", busybox, *SMALL, "-w", "--", "echo", "before").code == 0
    settled(orbit)
    fill(orbit.home.parent / "filler")
    res = orbit("run", "--image", busybox, *SMALL, "--", "true")
    one_line_error(res, ExitCode.ENVIRONMENT, "no space left on device", str(orbit.home))
    assert sorted(os.listdir(orbit.home / "runs")) == ["1"]  # no empty runs/2
    for args in (("ps",), ("ps", "-a"), ("show", "1"), ("wait", "1"), ("logs", "1")):
        res = orbit(*args)
        assert res.code == 0 and not res.err, (args, res)
    tick = orbit("scheduler", "tick", "--json")
    assert tick.code == 0, tick
    assert any("no space left on device" in p for p in tick.json()["problems"])
    removed = orbit("rm", "-y", "1")  # how space is made: it must work on a full disk
    assert removed.code == 0, removed
    assert os.listdir(orbit.home / "runs") == []
    (orbit.home.parent / "filler").unlink()
    assert orbit("run", "--image", busybox, *SMALL, "-w", "--", "echo", "after").code == 0


def test_a_read_only_home_is_named(small_disk: Orbit, busybox: str) -> None:
    orbit = small_disk
    assert orbit("run", "--image", busybox, *SMALL, "-w", "--", "true").code == 0
    settled(orbit)
    disk = str(orbit.home.parent)
    for _ in range(50):  # a shepherd may still be closing its files
        if subprocess.run(["mount", "-o", "remount,ro", disk], capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("could not remount the home read-only")
    res = orbit("run", "--image", busybox, *SMALL, "--", "true")
    one_line_error(res, ExitCode.ENVIRONMENT, "read-only file system")
    one_line_error(orbit("note", "1", "x"), ExitCode.ENVIRONMENT, "notes.jsonl: read-only")
    assert orbit("ps", "-a").code == 0
    assert orbit("show", "1").code == 0


# --- another user's files ----------------------------------------------------------------
def test_a_private_home_of_another_user_is_a_named_permission_error(
    tester: tuple[int, int], user_site: Path, open_dir: Path
) -> None:
    home = open_dir / "roots-home"
    write_config(home)
    home.chmod(0o700)
    user = User(home, tester, user_site)
    for args in (("ps",), ("ps", "-a"), ("scheduler", "tick")):
        one_line_error(
            user(*args),
            ExitCode.ENVIRONMENT,
            ": permission denied",
            f"({home} belongs to root, mode 0700; you are {TESTER})",
        )


def test_a_read_only_home_of_another_user_refuses_changes_by_name(
    tester: tuple[int, int], user_site: Path, open_dir: Path, busybox: str
) -> None:
    root = Orbit(open_dir / "home", open_dir)
    assert root("run", "--image", busybox, *SMALL, "-w", "--", "echo", "hi").code == 0
    long = root.submit("--image", busybox, *SMALL, "--", "sleep", "60")
    root.wait_for(long, lambda s: s["state"] == "running")
    user = User(root.home, tester, user_site)
    assert user("ps", "-a").code == 0
    assert user("show", "1").code == 0
    assert user("logs", "1").out == "hi\n"
    one_line_error(
        user("cancel", long), ExitCode.ENVIRONMENT, "permission denied", "belongs to root"
    )
    assert root.status(long)["state"] == "running"
    one_line_error(user("rm", "-y", "1"), ExitCode.ENVIRONMENT, "permission denied")
    assert (root.home / "runs" / "1" / "status.yaml").exists()
    one_line_error(user("note", "1", "hi"), ExitCode.ENVIRONMENT, "notes.jsonl: permission denied")
    one_line_error(user("scheduler", "tick"), ExitCode.ENVIRONMENT, "permission denied")


# --- broken runs, tiny values, a hung Docker ------------------------------------------------
def test_logs_of_a_run_whose_status_is_broken(orbit: Orbit, busybox: str) -> None:
    assert orbit("run", "--image", busybox, *SMALL, "-w", "--", "echo", "kept").code == 0
    (orbit.run_dir("1") / "status.yaml").write_text("state: [")
    res = orbit("logs", "1")
    assert res.code == 0, res
    assert res.out == "kept\n"
    assert res.err.startswith("orbit: warning: ") and "status.yaml" in res.err
    assert orbit("logs", "1", "--json").json()["log"] == "kept\n"
    one_line_error(orbit("logs", "-f", "1"), ExitCode.CORRUPT, "status.yaml")


def test_rm_force_deletes_a_broken_run_and_its_container(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "sleep", "60")
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    (orbit.run_dir(run_id) / "status.yaml").write_text("garbage: [")
    one_line_error(orbit("rm", "-y", run_id), ExitCode.CORRUPT, f"orbit rm --force {run_id}")
    res = orbit("rm", "--force", "-y", run_id)
    assert res.code == 0, res
    assert not orbit.run_dir(run_id).exists()
    assert not (orbit.home / "active" / run_id).exists()
    assert containers(orbit.home) == []
    assert orbit("ps", "-a", "--json").json()["runs"] == []


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--cpus", "1e-9", "at least 0.01 CPUs"),
        ("--mem", "0.005", "6 MiB"),
        ("--mem", "1e-7", "6 MiB"),
        ("--timeout", "1e-9", "at least 1 second"),
    ],
)
def test_tiny_resources_are_refused_at_submit(
    orbit: Orbit, busybox: str, option: str, value: str, words: str
) -> None:
    res = orbit("run", "--image", busybox, "--no-project", option, value, "--", "true")
    one_line_error(res, ExitCode.USAGE, option, words)
    assert not (orbit.home / "runs").exists() or not any((orbit.home / "runs").iterdir())


def test_smallest_memory_docker_accepts_is_accepted(orbit: Orbit, busybox: str) -> None:
    res = orbit("run", "--image", busybox, "--no-project", "--mem", "0.006", "-w", "--", "true")
    assert res.code == 0, res


@pytest.mark.slow
def test_a_hung_docker_is_named(tmp_path: Path) -> None:
    path = tmp_path / "hung.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:  # accepts, and never answers
        try:
            while True:
                accepted.append(server.accept()[0])
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    code = "from orbit.execute.docker_ops import connect\nconnect(timeout=2)\n"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "DOCKER_HOST": f"unix://{path}"},
            cwd=Path(ORBIT_PY).parent,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.close()
        for conn in accepted:
            conn.close()
    assert "Docker did not answer within 2 s" in proc.stderr, proc.stderr

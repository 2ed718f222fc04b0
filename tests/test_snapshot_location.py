"""Code snapshots live beside runs/ under the data directory, move with it, and runs submitted
while they were kept in ORBIT_HOME/snapshots/ (as whole tars) still find theirs (real Docker,
real Git)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from conftest import Orbit, git_repo
from test_lifecycle import container_names

from orbit.errors import ExitCode
from orbit.store.files import read_yaml

ONE = ("--cpus", "1", "--mem", "0.25")


def data_run_dir(data: Path, run_id: str) -> Path:
    return data / "runs" / run_id


def final_state(data: Path, run_id: str, timeout: float = 60) -> str:
    """The run's state once it has finished (`orbit wait` would hang on a run stuck starting)."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = read_yaml(data_run_dir(data, run_id) / "status.yaml")["state"]
        if state in ("succeeded", "failed", "cancelled", "lost"):
            return state
        time.sleep(0.1)
    return state


def tars(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.tar")) if folder.is_dir() else []


def snapshots(folder: Path) -> list[str]:
    """The snapshots in `folder`: manifests and the tars older Orbits wrote."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in [*folder.glob("*.manifest"), *folder.glob("*.tar")])


def as_old_tar(snapshots_dir: Path, snap: str, dest: Path) -> None:
    """Turn the snapshot `snap` into the tar an older Orbit would have written at `dest` (the
    same tar, made whole), and drop its manifest."""
    from orbit.execute import snapstore, workspace

    entries, _ = snapstore.read_manifest(snapshots_dir, snap)
    source = workspace.Source(snap, None, snapshots_dir, entries)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(b"".join(source.stream(os.getuid(), os.getgid())))
    snapstore.manifest_path(snapshots_dir, snap).unlink()


def test_snapshots_go_to_the_data_directory_and_move_with_it(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    project = git_repo(tmp_path / "proj", {"train.py": "print('from the snapshot')\n"})
    data = tmp_path / "big-disk"
    assert orbit("config", "data", str(data)).code == 0
    first = orbit.submit(
        "--image", busybox, *ONE, "--project", str(project), "--", "cat", "train.py"
    )
    assert orbit("wait", first).code == 0
    assert "from the snapshot" in (data_run_dir(data, first) / "log.txt").read_text()
    snap = read_yaml(data_run_dir(data, first) / "run.yaml")["project"]["snapshot"]
    assert snapshots(data / "snapshots") == [f"{snap}.manifest"]
    assert len(list((data / "snapshots" / "packs").iterdir())) == 1
    assert not (orbit.home / "snapshots").exists()  # nothing on the home's disk

    # A tar left in ORBIT_HOME/snapshots by an older Orbit moves along too.
    (orbit.home / "snapshots").mkdir()
    (orbit.home / "snapshots" / "0123abcd.tar").write_bytes(b"an older snapshot")
    other = tmp_path / "other-disk"
    res = orbit("config", "data", str(other), "--move")
    assert res.code == 0, res.err
    assert res.out.strip() == f"data directory: {other} (1 runs and 2 snapshots moved)"
    assert snapshots(other / "snapshots") == sorted([f"{snap}.manifest", "0123abcd.tar"])
    assert len(list((other / "snapshots" / "packs").iterdir())) == 1  # its contents came too
    assert not (data / "snapshots").exists() and not (orbit.home / "snapshots").exists()
    assert (other / "snapshots" / "0123abcd.tar").read_bytes() == b"an older snapshot"

    # The same tree is stored once: a new run reuses the moved snapshot and sees the code.
    again = orbit.submit(
        "--image", busybox, *ONE, "--project", str(project), "--", "cat", "train.py"
    )
    assert orbit("wait", again).code == 0
    assert snapshots(other / "snapshots") == sorted([f"{snap}.manifest", "0123abcd.tar"])
    assert len(list((other / "snapshots" / "packs").iterdir())) == 1
    assert "from the snapshot" in (data_run_dir(other, again) / "log.txt").read_text()


def test_a_run_whose_snapshot_is_in_the_old_place_still_starts(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    project = git_repo(tmp_path / "proj", {"train.py": "print('old place')\n"})
    data = tmp_path / "big-disk"
    assert orbit("config", "data", str(data)).code == 0
    orbit.configure(total_cpus=1)
    blocker = orbit.submit("--image", busybox, "--no-project", *ONE, "--", "sleep", "60")
    queued = orbit.submit(
        "--image", busybox, *ONE, "--project", str(project), "--", "cat", "train.py"
    )
    assert read_yaml(data_run_dir(data, queued) / "status.yaml")["state"] == "queued"
    # As if submitted by an Orbit that kept snapshots in ORBIT_HOME as tars: put its tar there.
    snap = read_yaml(data_run_dir(data, queued) / "run.yaml")["project"]["snapshot"]
    as_old_tar(data / "snapshots", snap, orbit.home / "snapshots" / f"{snap}.tar")
    assert orbit("cancel", blocker).code == 0
    assert final_state(data, queued) == "succeeded"
    assert "old place" in (data_run_dir(data, queued) / "log.txt").read_text()


def test_moving_the_data_directory_is_refused_while_a_run_is_queued(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    project = git_repo(tmp_path / "proj", {"train.py": "print('x')\n"})
    orbit.configure(total_cpus=1)
    blocker = orbit.submit("--image", busybox, "--no-project", *ONE, "--", "sleep", "60")
    orbit.submit("--image", busybox, *ONE, "--project", str(project), "--", "true")
    res = orbit("config", "data", str(tmp_path / "elsewhere"), "--move")
    assert res.code == ExitCode.CONFLICT
    assert len(snapshots(orbit.home / "snapshots")) == 1  # nothing moved: the run needs it
    assert orbit("cancel", blocker).code == 0


def test_a_run_whose_snapshot_is_gone_fails_with_the_reason(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    """A run that cannot start ends: a missing snapshot fails it (before, its shepherd died on the
    missing file and every tick started another, leaving the run `starting` forever)."""
    project = git_repo(tmp_path / "proj", {"train.py": "print('x')\n"})
    orbit.configure(total_cpus=1)
    blocker = orbit.submit("--image", busybox, "--no-project", *ONE, "--", "sleep", "60")
    queued = orbit.submit("--image", busybox, *ONE, "--project", str(project), "--", "true")
    snap = read_yaml(orbit.run_dir(queued) / "run.yaml")["project"]["snapshot"]
    (orbit.home / "snapshots" / f"{snap}.manifest").unlink()
    assert orbit("cancel", blocker).code == 0
    assert final_state(orbit.home, queued) == "failed"
    status = read_yaml(orbit.run_dir(queued) / "status.yaml")
    assert f"the code snapshot {snap} is gone" in status["reason"]
    res = orbit("wait", queued)
    assert res.code == ExitCode.RUN_FAILED
    # Refused before its container was created (the blocker's may still be being removed).
    assert not [n for n in container_names(orbit) if n.endswith(f"-{queued}")]

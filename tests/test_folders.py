"""Folders (`--folder`, `orbit mv`, `orbit folders`, `orbit export`) against real Docker."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import Orbit

from orbit.errors import ExitCode
from orbit.store.files import read_yaml

SMALL = ("--no-project", "--cpus", "0.1", "--mem", "0.1")


def folder_of(orbit: Orbit, run_id: str) -> str | None:
    """The folder as every reader sees it: show, ps (index rows), and ps after a lost index."""
    shown = orbit("show", "--json", run_id).json()["folder"]
    rows = {r["id"]: r["folder"] for r in orbit("ps", "-a", "--json").json()["runs"]}
    (orbit.home / "index.jsonl").unlink(missing_ok=True)
    rebuilt = {r["id"]: r["folder"] for r in orbit("ps", "-a", "--json").json()["runs"]}
    assert shown == rows[run_id] == rebuilt[run_id]
    return shown  # type: ignore[no-any-return]


def make_runs(orbit: Orbit, image: str, folder: str, group: str, n: int) -> list[str]:
    """n finished runs in `folder`, each writing output/result.txt."""
    values = ",".join(str(i) for i in range(1, n + 1))
    res = orbit(
        "sweep", *SMALL, "--image", image, "--folder", folder, "-g", group, "-p", f"i={values}",
        "-w", "--json", "--", "sh", "-c", 'echo "result {i}" > $ORBIT_OUTPUT/result.txt',
    )  # fmt: skip
    assert res.code == 0, res.err
    return [r["id"] for r in res.json()["runs"]]


def test_mv_changes_the_folder_everywhere_and_keeps_run_yaml(orbit: Orbit, busybox: str) -> None:
    a, b, c = make_runs(orbit, busybox, "/papers//ablation/", "g", 3)
    assert read_yaml(orbit.run_dir(a) / "run.yaml")["folder"] == "papers/ablation"  # normalized
    assert folder_of(orbit, a) == "papers/ablation"

    res = orbit("mv", a, b, "papers/final", "--json")
    assert res.code == 0, res.err
    assert res.json() == {"folder": "papers/final", "moved": [a, b], "jobs": []}
    assert folder_of(orbit, a) == folder_of(orbit, b) == "papers/final"
    assert folder_of(orbit, c) == "papers/ablation"
    # run.yaml is never rewritten; status.yaml holds the new folder.
    assert read_yaml(orbit.run_dir(a) / "run.yaml")["folder"] == "papers/ablation"
    assert orbit.status(a)["folder"] == "papers/final"
    moved = orbit.events(a)[-1]
    assert moved["event"] == "moved" and moved["folder"] == "papers/final"
    assert moved["state"] == "succeeded"

    # Moving again to the same folder changes nothing (no new event).
    n_events = len(orbit.events(a))
    assert orbit("mv", a, "papers/final").code == 0
    assert len(orbit.events(a)) == n_events

    # `/` is the top level: the folder is null even though run.yaml names one.
    text = orbit("mv", a, "/")
    assert text.code == 0 and text.out == f"moved 1 run(s) to the top level: {a}\n"
    assert folder_of(orbit, a) is None
    assert "\n  folder " not in orbit("show", a).out

    # One unknown run or a bad folder: nothing moves.
    assert orbit("mv", b, "nope", "elsewhere").code == ExitCode.NOT_FOUND
    assert orbit("mv", b, "../out").code == ExitCode.USAGE
    assert folder_of(orbit, b) == "papers/final"


def test_mv_of_an_active_run_survives_its_later_transitions(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit(*SMALL, "--image", busybox, "--folder", "x", "--", "sleep", "1")
    assert orbit("mv", run_id, "y/z").code == 0
    assert orbit("wait", run_id).code == 0
    assert orbit.status(run_id)["state"] == "succeeded"
    assert folder_of(orbit, run_id) == "y/z"


def test_folders_counts_a_tree(orbit: Orbit, busybox: str) -> None:
    assert "no folders (0 run(s) at the top level)" in orbit("folders").out
    ids = make_runs(orbit, busybox, "papers/ablation", "g", 4)
    assert orbit("mv", ids[0], "papers").code == 0
    assert orbit("mv", ids[1], "rcb/noskills/deep").code == 0
    assert orbit("mv", ids[2], "/").code == 0
    out = orbit("folders", "--json").json()
    for row in out["folders"]:
        assert (row.pop("jobs"), row.pop("direct_jobs")) == (0, 0)
    assert out == {
        "folders": [
            {"path": "papers", "runs": 2, "direct": 1},
            {"path": "papers/ablation", "runs": 1, "direct": 1},
            {"path": "rcb", "runs": 1, "direct": 0},
            {"path": "rcb/noskills", "runs": 1, "direct": 0},
            {"path": "rcb/noskills/deep", "runs": 1, "direct": 1},
        ],
        "top_level": 1,
        "top_level_jobs": 0,
    }
    assert orbit("folders").out.splitlines() == [
        "FOLDER       RUNS  HERE",
        "papers/      2     1",
        "  ablation/  1     1",
        "rcb/         1     0",
        "  noskills/  1     0",
        "    deep/    1     1",
        "(top level)  1     1",
    ]


def test_export_is_a_real_copy_of_finished_runs(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    a, b = make_runs(orbit, busybox, "rcb", "g", 2)
    assert orbit("mv", b, "rcb/noskills").code == 0
    outside = make_runs(orbit, busybox, "other", "h", 1)[0]
    active = orbit.submit(*SMALL, "--image", busybox, "--folder", "rcb/live", "--", "sleep", "30")

    dest = tmp_path / "copy"
    res = orbit("export", "rcb", str(dest), "--json")
    assert res.code == 0, res.err
    out = res.json()
    assert out["folder"] == "rcb" and out["dir"] == str(dest)
    assert out["exported"] == [
        {"id": a, "folder": "rcb", "path": str(dest / "rcb" / a)},
        {"id": b, "folder": "rcb/noskills", "path": str(dest / "rcb" / "noskills" / b)},
    ]
    assert out["skipped"] == [{"id": active, "state": orbit.status(active)["state"]}]
    assert not (dest / "rcb" / "live").exists()
    assert not (dest / "other").exists() and outside

    copy = dest / "rcb" / a
    original = orbit.run_dir(a)
    names = set(os.listdir(copy))
    assert {"run.yaml", "status.yaml", "events.jsonl", "log.txt", "output"} <= names
    assert not {".lock", "shepherd.lock", "shepherd.pid"} & names
    assert not [n for n in os.listdir(dest / "rcb") if n.startswith(".")]  # no temp dirs left
    assert (copy / "output" / "result.txt").read_text() == "result 1\n"

    # A real copy: changing it leaves the run alone (no links, no shared inodes).
    result = copy / "output" / "result.txt"
    assert not result.is_symlink()
    assert result.stat().st_ino != (original / "output" / "result.txt").stat().st_ino
    result.write_text("edited\n")
    (copy / "notes.jsonl").write_text(json.dumps({"text": "edited"}) + "\n")
    assert (original / "output" / "result.txt").read_text() == "result 1\n"
    assert (original / "notes.jsonl").read_text() == ""
    assert orbit("show", "--json", a).json()["state"] == "succeeded"

    # Exporting again never overwrites: refused before anything is copied.
    again = orbit("export", "rcb", str(dest))
    assert again.code == ExitCode.CONFLICT and "not overwriting" in again.err
    assert result.read_text() == "edited\n"

    # Text output, into a fresh directory (relative to the current directory).
    text = orbit("export", "rcb/noskills", "second")
    assert text.code == 0, text.err
    assert text.out == f"exported 1 run(s) of rcb/noskills to {orbit.cwd / 'second'}: {b}\n"
    assert (orbit.cwd / "second" / "rcb" / "noskills" / b / "run.yaml").exists()


def test_export_refusals(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    (run_id,) = make_runs(orbit, busybox, "f", "g", 1)
    # The shepherd deletes its disk reserve before the run is seen finished (an export racing
    # that deletion failed); one left behind (a shepherd killed there) is not exported.
    reserve = orbit.run_dir(run_id) / ".disk-reserve"
    assert not reserve.exists()
    reserve.write_bytes(bytes(16))
    target = tmp_path / "t"
    (target / "f" / run_id).mkdir(parents=True)
    (target / "f" / run_id / "keep.txt").write_text("mine")
    res = orbit("export", "f", str(target))
    assert res.code == ExitCode.CONFLICT and str(target / "f" / run_id) in res.err
    assert os.listdir(target / "f" / run_id) == ["keep.txt"]
    # An empty target directory is fine.
    os.unlink(target / "f" / run_id / "keep.txt")
    assert orbit("export", "f", str(target)).code == 0
    assert (target / "f" / run_id / "run.yaml").exists()
    assert not (target / "f" / run_id / ".disk-reserve").exists()

    assert orbit("export", "nothing", str(tmp_path / "x")).code == ExitCode.NOT_FOUND
    assert orbit("export", "/", str(tmp_path / "x")).code == ExitCode.USAGE
    assert orbit("export", "../f", str(tmp_path / "x")).code == ExitCode.USAGE
    inside = orbit("export", "f", str(orbit.home / "runs" / "copy"))
    assert inside.code == ExitCode.USAGE and "run directory" in inside.err
    assert sorted(os.listdir(orbit.home / "runs")) == [run_id]
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert orbit("export", "f", str(a_file)).code == ExitCode.USAGE


def test_export_refuses_a_folder_that_escapes_the_target(orbit: Orbit, tmp_path: Path) -> None:
    """A run filed before --folder was checked may name `..`: it never leaves DIR."""
    from orbit.store.home import Home
    from orbit.store.model import RunState
    from orbit.store.runs import RunStore

    store = RunStore(Home(orbit.home))
    spec = {"folder": "a/../../escaped", "command": ["true"]}
    run = store.create(spec, state=RunState.SUCCEEDED, reason="", actor="test")
    res = orbit("export", "a", str(tmp_path / "out" / "inner"))
    assert res.code == ExitCode.USAGE and f"orbit mv {run.id} FOLDER" in res.err
    assert not (tmp_path / "out").exists() and not (tmp_path / "escaped").exists()

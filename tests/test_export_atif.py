"""`orbit export --atif`: the agent sessions of a group's, a folder's and a bench job's runs as
a trajectory dataset, every file checked against Harbor's own ATIF models.

The runs are real (busybox, real Docker); their sessions are the hand-written transcripts of
tests/transcripts.py (after what Claude Code and Codex write), copied into each finished run's
session/ as the conversation tests do. The bench job is a real toy job (oracle) whose solve run
gets a transcript the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import SMALL, Orbit, _cleanup_containers
from docker_setup import BUSYBOX_IMAGE, PYTHON_IMAGE
from harbor.models.trajectories import Trajectory
from transcripts import SESSION, THREAD, claude_lines, codex_lines

from orbit.errors import ExitCode

TESTS = Path(__file__).resolve().parent
ROLLOUT = f"2026/11/30/rollout-2026-11-30T10-00-00-{THREAD}.jsonl"
CHECK = "echo 1 > /logs/verifier/reward.txt"


@dataclass
class Home:
    orbit: Orbit
    claude: str  # one Claude Code session
    both: str  # a Claude Code session and a Codex rollout
    silent: str  # no session
    running: str  # still running: its session is not over
    elsewhere: str  # another group and folder, with a session


def finished(orbit: Orbit, *args: str) -> str:
    run_id = orbit.submit("--image", BUSYBOX_IMAGE, *SMALL, *args, "--", "true")
    status = orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 60)
    assert status["state"] == "succeeded", status
    return run_id


def give_session(orbit: Orbit, run_id: str, *, codex: bool = False) -> None:
    session = orbit.run_dir(run_id) / "session"
    session.mkdir(exist_ok=True)
    (session / f"{SESSION}.jsonl").write_text("\n".join(claude_lines()) + "\n")
    if codex:
        (session / ROLLOUT).parent.mkdir(parents=True)
        (session / ROLLOUT).write_text("\n".join(codex_lines()) + "\n")


@pytest.fixture(scope="module")
def home(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    root = tmp_path_factory.mktemp("export-atif")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    mine = ("-g", "study", "--folder", "papers/atif")
    claude = finished(orbit, *mine, "-t", "lr=0.1")
    both = finished(orbit, *mine, "-t", "lr=0.2")
    silent = finished(orbit, *mine)
    elsewhere = finished(orbit, "-g", "other", "--folder", "drafts")
    for run_id in (claude, elsewhere):
        give_session(orbit, run_id)
    give_session(orbit, both, codex=True)
    running = orbit.submit("--image", BUSYBOX_IMAGE, *SMALL, *mine, "--", "sleep", "300")
    orbit.wait_for(running, lambda s: s.get("state") == "running", 60)
    give_session(orbit, running)
    try:
        yield Home(orbit, claude, both, silent, running, elsewhere)
    finally:
        orbit("cancel", running)
        _cleanup_containers(orbit.home)


def read_dataset(folder: Path) -> tuple[list[dict[str, Any]], dict[str, Trajectory]]:
    """The index's lines and every trajectory file, validated by Harbor's models."""
    index = [json.loads(line) for line in (folder / "index.jsonl").read_text().splitlines()]
    files = sorted(p.name for p in folder.glob("*.json") if p.name != "dataset.json")
    assert files == sorted(line["file"] for line in index)
    return index, {
        name: Trajectory.model_validate_json((folder / name).read_text()) for name in files
    }


def test_a_group_exports_one_file_per_session_with_its_outcome(home: Home, tmp_path: Path) -> None:
    dest = tmp_path / "data"
    res = home.orbit("export", "--atif", "-g", "study", str(dest), "--json")
    assert res.code == 0, res.err
    out = res.json()
    assert set(out) == {"format", "dir", "selection", "files", "runs", "skipped"}
    assert out["selection"] == {"group": "study"} and out["dir"] == str(dest.resolve())
    index, trajectories = read_dataset(dest)
    assert index == out["files"]
    by_file = {line["file"]: line for line in index}
    assert set(by_file) == {f"{home.claude}.json", f"{home.both}.json", f"{home.both}.1.json"}
    assert out["runs"] == 2
    skipped = {s["id"]: s for s in out["skipped"]}
    assert set(skipped) == {home.silent, home.running}
    assert skipped[home.silent]["why"] == "no agent session recorded"
    assert skipped[home.running]["state"] == "running"
    for name, traj in trajectories.items():
        line = by_file[name]
        assert line["run"] == name.split(".")[0] and line["steps"] == len(traj.steps) > 0
        assert traj.extra is not None and line["orbit"] == traj.extra["orbit"]
        assert line["orbit"]["run"] == line["run"] and line["orbit"]["group"] == "study"
        assert line["session_id"] == traj.session_id
    sessions = {
        trajectories[f"{home.both}.json"].session_id,
        trajectories[f"{home.both}.1.json"].session_id,
    }
    assert sessions == {SESSION, THREAD}
    manifest = json.loads((dest / "dataset.json").read_text())
    assert manifest["format"] == 1 and manifest["files"] == index and "dir" not in manifest
    assert manifest["skipped"] == out["skipped"] and manifest["exported_at"]
    # Nothing but the dataset is left: the temporary directory beside it is gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_folder_exports_its_subfolders_runs_and_people_get_a_summary(
    home: Home, tmp_path: Path
) -> None:
    dest = tmp_path / "papers"
    res = home.orbit("export", "--atif", "papers", str(dest))
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0] == (
        f"wrote 3 trajectory file(s) of 2 run(s) of folder papers to {dest.resolve()} "
        f"(index: {dest.resolve() / 'index.jsonl'})"
    )
    assert f"skipped run {home.silent}: no agent session recorded" in lines
    index, _ = read_dataset(dest)
    assert {line["run"] for line in index} == {home.claude, home.both}
    res = home.orbit("export", "--atif", "drafts", str(tmp_path / "drafts"), "--json")
    assert res.code == 0, res.err
    assert [f["file"] for f in res.json()["files"]] == [f"{home.elsewhere}.json"]


def test_a_second_export_into_the_same_dir_is_refused(home: Home, tmp_path: Path) -> None:
    dest = tmp_path / "data"
    assert home.orbit("export", "--atif", "-g", "other", str(dest)).code == 0
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    res = home.orbit("export", "--atif", "-g", "study", str(dest))
    assert res.code == ExitCode.CONFLICT
    assert res.err == (
        f"orbit: not overwriting {dest.resolve()}: it is not empty; export to another directory\n"
    )
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (
        home.orbit("export", "--atif", "-g", "other", str(empty)).code == 0
    )  # an empty DIR is fine
    assert (empty / "index.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("-g", "nope", "D"), ExitCode.NOT_FOUND, "no runs in group 'nope'"),
        (
            ("nofolder", "D"),
            ExitCode.NOT_FOUND,
            "no runs in folder 'nofolder' (see `orbit folders`)",
        ),
        (("--job", "j99", "D"), ExitCode.NOT_FOUND, "no job 'j99' (see `orbit bench jobs`)"),
        (
            ("-g", "study", "--job", "j1", "D"),
            ExitCode.USAGE,
            "give one of FOLDER, -g GROUP or --job JOB",
        ),
        (("-g", "study"), ExitCode.USAGE, "expected DIR (usage: orbit export --atif"),
        (("papers",), ExitCode.USAGE, "expected FOLDER DIR (usage: orbit export --atif"),
        (("/", "D"), ExitCode.USAGE, "give the folder to export"),
        (("-g", "study", "FILE"), ExitCode.USAGE, "exists and is not a directory"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    home: Home, tmp_path: Path, args: tuple[str, ...], code: int, message: str
) -> None:
    (tmp_path / "FILE").write_text("x")
    res = home.orbit("export", "--atif", *args, cwd=tmp_path)
    assert res.code == code, res.err
    assert res.err.startswith("orbit: ") and message in res.err and res.err.count("\n") == 1, (
        res.err
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


def test_no_session_to_export_and_options_that_need_atif(home: Home, tmp_path: Path) -> None:
    finished(home.orbit, "-g", "quiet")
    res = home.orbit("export", "--atif", "-g", "quiet", str(tmp_path / "d"))
    assert res.code == ExitCode.NOT_FOUND
    assert res.err.startswith("orbit: no agent session to export in group quiet (1 run(s) skipped")
    assert list(tmp_path.iterdir()) == []  # neither DIR nor the temporary directory beside it
    res = home.orbit("export", "-g", "study", str(tmp_path / "d"))
    assert res.code == ExitCode.USAGE and "-g and --job go with --atif" in res.err
    res = home.orbit("export", "papers")
    assert res.code == ExitCode.USAGE
    assert res.err == "orbit: expected FOLDER DIR (usage: orbit export FOLDER DIR [--json])\n"
    inside = home.orbit.home / "runs" / "x"
    res = home.orbit("export", "--atif", "-g", "study", str(inside))
    assert res.code == ExitCode.USAGE and "cannot export into Orbit's run directory" in res.err


def test_a_bench_job_exports_its_solve_sessions_with_the_trial_score(
    home: Home, tmp_path: Path
) -> None:
    orbit = home.orbit
    toy = tmp_path / "toy" / "add"
    toy.mkdir(parents=True)
    task = {"image": PYTHON_IMAGE, "solve": "true", "check": CHECK, "instruction": "say ok"}
    (toy / "task.json").write_text(json.dumps(task))
    orbit.environ["PYTHONPATH"] = str(TESTS)
    res = orbit("bench", "add", "toy", str(toy.parent), "--adapter", "python:bench_toy:ToyAdapter")
    assert res.code == 0, res.err
    res = orbit("bench", "run", "toy", "-m", "oracle", "--seeds", "2", "-w", "--json")
    assert res.code == 0, res.err
    job = res.json()
    job_id = job["job"]["id"]
    trials = {t["runs"]["solve"]: t for t in job["trials"]}
    first, second = sorted(trials)
    give_session(orbit, first)  # the second solve recorded no session
    dest = tmp_path / "job"
    res = orbit("export", "--atif", "--job", job_id, str(dest), "--json")
    assert res.code == 0, res.err
    out = res.json()
    assert out["selection"] == {"job": job_id}
    assert [(s["id"], s["why"]) for s in out["skipped"]] == [(second, "no agent session recorded")]
    index, trajectories = read_dataset(dest)
    (line,) = index
    assert line["file"] == f"{first}.json"
    trial = trials[first]
    assert line["orbit"]["bench"] == {
        "job": job_id, "trial": trial["id"], "phase": "solve", "evaluation": "valid", "score": 1.0,
    }  # fmt: skip
    extra = trajectories[f"{first}.json"].extra
    assert extra is not None and extra["orbit"] == line["orbit"]
    res = orbit("export", "--atif", "--job", job_id, str(tmp_path / "again"))
    assert res.code == 0 and res.out.startswith(
        f"wrote 1 trajectory file(s) of 1 run(s) of job {job_id}"
    )
    # The trial's outcome goes with its run whichever way the run is chosen.
    res = orbit("export", "--atif", "-g", f"bench-{job_id}", str(tmp_path / "group"), "--json")
    assert res.code == 0, res.err
    assert [f["orbit"]["bench"] for f in res.json()["files"]] == [line["orbit"]["bench"]]

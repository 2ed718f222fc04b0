"""Runs written in one batch (orbit/store/creation.py, as `orbit sweep` writes them): the same
files as a run written alone, whole runs only when the writer fails or is killed at any
instant, and ids never handed out twice beside concurrent submits. Real files, no Docker."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orbit.sched.tick import tick
from orbit.store import batches, groups, secrets
from orbit.store.creation import NewRun, create_runs
from orbit.store.files import YamlBatch, _simple_part, dump_yaml, read_jsonl, read_yaml
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.store.runs import Broken, RunStore
from orbit.store.secrets import Secrets

FILES = {
    "run.yaml",
    "status.yaml",
    "events.jsonl",
    "log.txt",
    "metrics.jsonl",
    "notes.jsonl",
    "output",
    "code.diff",
}


def spec(i: int) -> dict[str, Any]:
    return {
        "name": f"lr{i}",
        "group": "g",
        "group_cap": None,
        "tags": {"seed": "1"},
        "params": {"lr": str(i)},
        "image": "orbit-test/busybox:1",
        "command": ["echo", str(i)],
        "resources": {"cpus": 1.0, "mem_gb": 0.25, "gpus": 0},
        "env": {},
    }


DIFF = {"code.diff": b"diff\n"}


def batch(n: int) -> list[NewRun]:
    return [NewRun(spec(i), DIFF) for i in range(n)]


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path / "home", {})


def visible(home: Home) -> list[str]:
    return sorted((n for n in os.listdir(home.runs_dir) if not n.startswith(".")), key=int)


def check_whole(home: Home) -> list[str]:
    """Every run directory that is not empty (an id being claimed) is a whole run; its ids."""
    whole = []
    for run_id in visible(home):
        names = set(os.listdir(home.runs_dir / run_id))
        if not names:
            continue
        assert names == FILES, (run_id, names)
        run = RunStore(home).load(run_id)
        assert run.spec["id"] == run_id and run.state.value == "queued"
        assert [e["event"] for e in read_jsonl(run.path("events.jsonl"))] == ["submitted"]
        assert (home.queue_dir / run_id).exists()  # a run that appears has its marker
        whole.append(run_id)
    return whole


# --- the file contract -------------------------------------------------------------------------
def test_a_batch_writes_what_a_run_written_alone_gets(home: Home) -> None:
    store = RunStore(home)
    alone = store.create(spec(0), reason="waiting", actor="test", extra_files={"code.diff": b"d"})
    runs = create_runs(
        home, [NewRun(spec(0), {"code.diff": b"d"})] * 3, reason="waiting", actor="test"
    )
    assert [r.id for r in runs] == ["2", "3", "4"]
    for run in runs:
        assert sorted(os.listdir(run.dir)) == sorted(os.listdir(alone.dir))
        for name in ("run.yaml", "status.yaml", "events.jsonl"):
            mine = run.path(name).read_text().replace(f'id: "{run.id}"', 'id: "1"')
            theirs = alone.path(name).read_text()
            stamp = read_yaml(alone.path("status.yaml"))["submitted_at"]
            assert mine.replace(run.status["submitted_at"], stamp) == theirs, name
        assert run.path("run.yaml").stat().st_mode == alone.path("run.yaml").stat().st_mode
        assert store.load(run.id).spec == run.spec and store.load(run.id).status == run.status
    assert (home.runtime_dir / "next_id").read_text() == "5\n"
    rows = [row for row in store.list_rows() if not isinstance(row, Broken)]
    assert [row["id"] for row in rows] == ["1", "2", "3", "4"]


@pytest.mark.parametrize(
    "data",
    [
        {"a": "yes", "b": "1e-4", "c": "line one\nline two", "d": "x" * 250, "e": "ünï"},
        {"cmd": ["sh", "-c", "echo {lr} 'q' \"d\" # not a comment: x"], "n": None, "f": 1.5},
        {"nested": {"list": [{"k": "v"}, []], "empty": {}}, "t": True, "i": 3},
    ],
)
def test_yaml_batch_writes_dump_yaml_text(data: dict[str, Any]) -> None:
    texts = YamlBatch()
    for i in range(3):
        varied = {"id": str(i), **data, "params": {"lr": str(i)}}
        assert texts.dump(varied) == dump_yaml(varied)


TRICKY = [
    "5", "bench-5", "2026-12-03", "yes", "No", "on", "=", "<<", "~", "null", "1_000", "0x1f",
    "0o17", "1e3", "1E-4", ".5", "12.5.3", "inf", "nan", "-x", "+1", "a/b.c", "x=1", "v1.2+3",
    "_", "A" * 64, "A" * 65, "3e-4", "0", "007", "1.0", "1.", "true", "Y", "y", "ok-",
    "2026-12-03T12:48:38", "x" * 63 + "=", "b-", None, True, False, 0, -7, 10**20, 1.5,
]  # fmt: skip


@pytest.mark.parametrize("value", TRICKY)
def test_yaml_batch_writes_simple_values_as_pyyaml_does(value: Any) -> None:
    """The values written without PyYAML (files._simple_part) give dump_yaml's bytes, alone,
    in a flat mapping and in a list; so do the keys."""
    for data in (
        {"k": value},
        {"params": {"lr": value, "seed": 3}},
        {"command": ["python", value]},
        {"m": {}, "l": []},
        {str(value): 1},
    ):
        assert YamlBatch().dump(data) == dump_yaml(data), data


def test_yaml_batch_writes_a_sweeps_varying_keys_without_pyyaml() -> None:
    assert _simple_part("id", "5") == 'id: "5"\n'
    assert _simple_part("params", {"i": 5}) == "params:\n  i: 5\n"
    assert _simple_part("f", 1.5) is None  # floats go to PyYAML


def test_yaml_batch_dumps_whole_a_mapping_that_shares_an_object() -> None:
    shared = {"k": "v"}
    data = {"a": shared, "b": shared}
    assert "&id001" in dump_yaml(data)
    assert YamlBatch().dump(data) == dump_yaml(data)


# --- failures and kills ------------------------------------------------------------------------
def test_a_batch_that_fails_while_revealing_keeps_whole_runs_only(home: Home) -> None:
    def stop_after_three(run: Run) -> None:
        if run.id == "3":
            raise RuntimeError("killed while revealing")

    with pytest.raises(RuntimeError):
        create_runs(home, batch(8), reason="waiting", actor="test", revealed=stop_after_three)
    assert check_whole(home) == ["1", "2", "3"]
    assert visible(home) == ["1", "2", "3"]
    assert sorted(os.listdir(home.queue_dir)) == ["1", "2", "3"]
    assert not [n for n in os.listdir(home.runs_dir) if n.startswith(".")]
    # The ids of the runs not written are not handed out again: the counter is past them.
    assert RunStore(home).create(spec(9), reason="w", actor="test").id == "9"


def test_a_batch_that_fails_while_staging_leaves_nothing(home: Home) -> None:
    def fail(run_id: str, staging: Path) -> None:
        if run_id == "4":
            raise OSError(28, "No space left on device")

    runs = batch(6)
    runs[3] = NewRun(spec(3), prepare=fail)
    with pytest.raises(OSError):
        create_runs(home, runs, reason="waiting", actor="test")
    assert os.listdir(home.runs_dir) == [] and os.listdir(home.queue_dir) == []


WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {repo!r})
sys.path.insert(0, {tests!r})
from test_batch_submit import secret_batch
from orbit.store.creation import create_runs
from orbit.store.home import Home
home = Home(Path({root!r}), {{}})
create_runs(home, secret_batch(home, {n}), reason="waiting", actor="test")
"""


def secret_batch(home: Home, n: int) -> list[NewRun]:
    """A batch whose runs have secrets (--pass-env), written before each run appears."""

    def keep(run_id: str, staging: Path) -> None:
        secrets.write(home, run_id, secrets.Secrets(env={"TOKEN": "hunter22"}))

    return [NewRun(spec(i), DIFF, keep) for i in range(n)]


def kill_writer(home: Home, n: int, when: str) -> None:
    """Start a process writing a batch of `n` runs and kill it (SIGKILL) at `when`."""
    repo, tests = str(Path(__file__).parents[1]), str(Path(__file__).parent)
    code = WRITER.format(repo=repo, tests=tests, root=str(home.root), n=n)
    home.ensure()
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        names = os.listdir(home.runs_dir)
        if when == "staging" and sum(n.startswith(".staging-") for n in names) >= 20:
            break
        if when == "revealing" and len(os.listdir(home.queue_dir)) >= 20:
            break
        if when == "random" and time.monotonic() > deadline - 60 + 0.3 + os.getpid() % 7 / 10:
            break
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def leftovers(home: Home) -> list[str]:
    """What a submit may leave that is no run: hidden or empty run directories, batch
    records, secrets of runs that do not exist."""
    left = [n for n in os.listdir(home.runs_dir) if n.startswith(".")]
    left += [n for n in visible(home) if not os.listdir(home.runs_dir / n)]
    folder = batches.batches_dir(home)
    left += [f"batches/{n}" for n in (os.listdir(folder) if folder.exists() else [])]
    left += [f"secrets/{i}" for i in secrets.listed(home) if i not in visible(home)]
    return left


@pytest.mark.slow
@pytest.mark.parametrize("when", ["staging", "revealing", "random"])
def test_a_batch_killed_at_any_instant_is_all_or_nothing_after_the_next_tick(
    home: Home, when: str
) -> None:
    n = 300
    kill_writer(home, n, when)
    whole = check_whole(home)
    if when == "staging":
        assert whole == []
    if when == "revealing":
        assert 0 < len(whole) < n
    started: list[str] = []
    report = tick(home, spawn=lambda h, run_id: started.append(run_id), actor="test")
    assert report.problems == []
    # The tick revealed the rest of a batch killed while revealing (its runs are whole and
    # synced), or cleared one killed before: nothing is left half-way, nothing hidden.
    ids = visible(home)
    assert len(ids) in (0, n), len(ids)
    assert leftovers(home) == []
    for run_id in ids:
        assert set(os.listdir(home.runs_dir / run_id)) - {".lock"} == FILES  # (the tick's lock)
        assert RunStore(home).load(run_id).state.value in ("queued", "starting")
        assert secrets.read(home, run_id).env == {"TOKEN": "hunter22"}
    assert set(started) <= set(ids) and set(report.waiting) <= set(ids)
    assert sorted(report.repaired, key=int) == sorted(set(ids) - set(whole), key=int)
    gone = groups.interrupted(home, "g")
    if ids or (when == "random" and not gone):  # (killed before its batch began)
        assert gone == []
    else:  # the group says what it lacks
        assert [(x["count"], len(x["ids"])) for x in gone] == [(n, n)]
        assert "a launch of 300 runs was killed" in groups.interrupted_text("g", gone)
    # The next submit gets an id no run of the killed batch has.
    (fresh,) = create_runs(home, batch(1), reason="w", actor="test")
    assert int(fresh.id) > max((int(i) for i in ids), default=0)
    assert set(os.listdir(fresh.dir)) == FILES
    assert groups.interrupted(home, "g") == gone  # no launch recorded: still in force
    groups.record_launch(home, "g", {"kind": "sweep", "count": n})
    assert groups.interrupted(home, "g") == []  # launched again: the note is superseded


def test_a_batch_being_written_is_left_alone_by_the_tick(home: Home) -> None:
    """A live writer's batch (its lock held) is neither revealed nor cleared; its runs'
    secrets stay. Its record names the group and the ids, staged or not."""
    seen: dict[str, Any] = {}

    def look(run_id: str, staging: Path) -> None:
        secrets.write(home, run_id, secrets.Secrets(env={"TOKEN": "hunter22"}))
        if run_id == "3":
            (record,) = batches.pending(home, "g")
            seen["record"] = (record.ids, record.phase)
            seen["report"] = tick(home, spawn=lambda h, i: None, actor="test")
            seen["secrets"] = secrets.listed(home)

    runs = [NewRun(spec(i), DIFF, look) for i in range(4)]
    create_runs(home, runs, reason="waiting", actor="test")
    assert seen["record"] == (["1", "2", "3", "4"], "staging")
    assert seen["report"].repaired == [] and seen["secrets"] == ["1", "2", "3"]
    assert check_whole(home) == ["1", "2", "3", "4"] and leftovers(home) == []


def test_secrets_of_runs_that_never_appeared_or_finished_are_dropped_by_the_tick(
    home: Home,
) -> None:
    """An older submit killed before its marker (no batch record), a run removed by hand, a
    finished run: their secrets go; a queued run's stay, and a bench job's files are not a run's."""
    store = RunStore(home)
    keep = Secrets(env={"TOKEN": "hunter22"})
    queued = store.create(spec(1), reason="w", actor="test")
    done = store.create(spec(2), reason="w", actor="test")
    store.transition(done.id, RunState.CANCELLED, actor="test")
    for run_id in (queued.id, done.id, "7"):
        secrets.write(home, run_id, keep)
    (home.runs_dir / ".staging-7").mkdir()  # what an old killed `orbit run` left
    (home.secrets_dir / "bench-j1.json").write_text("{}")
    # Temporary files of writers killed mid-write: a run's secrets, a batch's record.
    (home.secrets_dir / ".8.json.0a1b2c.tmp").write_text('{"env": {"TOKEN": "hunter22"}}')
    folder = batches.batches_dir(home)
    folder.mkdir(exist_ok=True)
    (folder / "9-1.lock").write_text("")
    (folder / ".9-1.json.0a1b2c.tmp").write_text("{}")
    tick(home, spawn=lambda h, i: None, actor="test")
    assert secrets.listed(home) == [queued.id]
    assert sorted(os.listdir(home.secrets_dir)) == [f"{queued.id}.json", "bench-j1.json"]
    assert os.listdir(folder) == []


# --- concurrent submits ------------------------------------------------------------------------
def _submit(root: str, barrier: Any, out: Any, size: int) -> None:
    home = Home(Path(root), {})
    barrier.wait()
    if size == 1:
        run = RunStore(home).create(spec(0), reason="w", actor="test", extra_files=DIFF)
        out.put([run.id])
    else:
        out.put([r.id for r in create_runs(home, batch(size), reason="w", actor="test")])


@pytest.mark.slow
def test_batches_and_single_runs_submitted_at_once_never_share_an_id(home: Home) -> None:
    sizes = [200, 1, 1, 150, 1, 1, 1, 1]
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(sizes))
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_submit, args=(str(home.root), barrier, out, size)) for size in sizes
    ]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    ids = [i for ids in got for i in ids]
    assert sorted(ids, key=int) == [str(i) for i in range(1, sum(sizes) + 1)]
    assert check_whole(home) == sorted(ids, key=int)
    for ids_of_one in got:  # each batch in order, whatever ran between its ids
        assert ids_of_one == sorted(ids_of_one, key=int)

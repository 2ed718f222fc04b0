"""orbit/store and orbit/sched/plan.py without Docker: real files in a temporary home."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from orbit.errors import ConflictError, CorruptError, ExitCode, NotFoundError
from orbit.store import index
from orbit.store.files import append_jsonl, atomic_write, read_jsonl, read_yaml, write_yaml
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.store.runs import Broken, RunStore


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(Home(tmp_path / "home"))


def make(
    store: RunStore,
    name: str | None = None,
    *,
    state: RunState = RunState.SUCCEEDED,
    group: str | None = None,
) -> Run:
    spec = {
        "name": name,
        "group": group,
        "image": "orbit-test/busybox:1",
        "command": ["true"],
        "resources": {"cpus": 1.0, "mem_gb": 1.0},
    }
    return store.create(spec, state=state, reason="made by a test", actor="test")


def temp_files(folder: Path) -> list[str]:
    return [n for n in os.listdir(folder) if n.endswith(".tmp")]


# --- files ------------------------------------------------------------------------------------
def test_atomic_write_replaces_whole_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "status.yaml"
    atomic_write(target, b"first\n")
    atomic_write(target, b"second\n", mode=0o600)
    assert target.read_bytes() == b"second\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["status.yaml"]


def test_atomic_write_that_fails_keeps_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "status.yaml"
    target.write_bytes(b"old\n")
    with pytest.raises(TypeError):
        atomic_write(target, "text, not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old\n"
    # A rename that fails (the target is a directory) also cleans up after itself.
    folder = tmp_path / "taken"
    (folder / "inner").mkdir(parents=True)
    with pytest.raises(OSError):
        atomic_write(folder, b"data")
    assert temp_files(tmp_path) == []
    assert os.listdir(folder) == ["inner"]


def test_yaml_round_trip(tmp_path: Path) -> None:
    data = {"format": 1, "reason": "waiting for 2 GPUs: GPU 0 leased to 3fa9 …", "n": [1, 2]}
    write_yaml(tmp_path / "a.yaml", data)
    assert read_yaml(tmp_path / "a.yaml") == data
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "missing"),
        (b"state: queued\nreason: 'waiting for 8 CP", "not valid YAML"),
        (b"state: [queued\n", "not valid YAML"),
        (b"- queued\n- running\n", "expected a mapping"),
        (b"queued\n", "expected a mapping"),
        (b"", "expected a mapping"),
        (b"state: \xff\xfe queued\n", "unreadable"),
    ],
    ids=["missing", "truncated", "invalid", "list", "scalar", "empty", "not-utf8"],
)
def test_read_yaml_problems_are_one_line_corrupt_errors(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "status.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CorruptError) as info:
        read_yaml(path)
    message = str(info.value)
    assert info.value.exit_code == ExitCode.CORRUPT
    assert message.startswith(str(path))
    assert problem in message
    assert "\n" not in message


def test_read_jsonl_skips_torn_and_foreign_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append_jsonl(path, {"event": "submitted", "text": "ü"})
    with open(path, "ab") as fh:
        fh.write(b"\n[1, 2]\nnot json\n   \n")
    append_jsonl(path, {"event": "admitted"})
    with open(path, "ab") as fh:
        fh.write(b'{"event": "start')  # a writer killed mid-line
    assert read_jsonl(path) == [{"event": "submitted", "text": "ü"}, {"event": "admitted"}]
    assert read_jsonl(tmp_path / "absent.jsonl") == []


def _append_many(path: str, writer: int) -> None:
    for i in range(100):
        append_jsonl(Path(path), {"writer": writer, "i": i, "pad": "x" * 4000})


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), w)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    lines = path.read_bytes().splitlines()
    assert len(lines) == 600
    seen = {(obj["writer"], obj["i"]) for obj in map(json.loads, lines)}
    assert len(seen) == 600


# --- ids --------------------------------------------------------------------------------------
def test_ids_are_short_increasing_and_never_reused(store: RunStore) -> None:
    ids = [make(store).id for _ in range(3)]
    assert ids == ["1", "2", "3"]
    store.remove(store.load("3"))
    assert make(store).id == "4"


def test_id_allocation_retries_when_the_directory_exists(store: RunStore) -> None:
    make(store)
    make(store)
    counter = store.home.runtime_dir / "next_id"
    counter.write_text("1\n")  # stale: ids 1 and 2 are taken
    assert make(store).id == "3"
    counter.unlink()  # lost: recomputed from the directories
    assert make(store).id == "4"
    counter.write_text("garbage")
    assert make(store).id == "5"
    (store.home.runs_dir / ".staging-6").mkdir()  # an id claimed by a submit still writing
    assert make(store).id == "7"
    listed = [r["id"] for r in store.list_rows() if isinstance(r, dict)]
    assert listed == ["1", "2", "3", "4", "5", "7"]
    assert [n for n in os.listdir(store.home.runs_dir) if n.startswith(".")] == [".staging-6"]


def _check_allocation(store: RunStore, ids: list[str]) -> None:
    assert sorted(ids, key=int) == [str(n) for n in range(1, 21)]
    assert sorted(os.listdir(store.home.runs_dir), key=int) == [str(n) for n in range(1, 21)]
    for run_id in ids:
        assert store.load(run_id).spec["id"] == run_id  # every directory complete
    assert (store.home.runtime_dir / "next_id").read_text().strip() == "21"


def test_twenty_threads_allocate_twenty_distinct_ids(store: RunStore) -> None:
    barrier = threading.Barrier(20)
    ids: list[str] = []
    errors: list[BaseException] = []

    def submit() -> None:
        try:
            barrier.wait()
            ids.append(make(store).id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    _check_allocation(store, ids)


def _submit_in_process(root: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    out.put(make(RunStore(Home(Path(root)))).id)


def test_twenty_processes_allocate_twenty_distinct_ids(store: RunStore) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(20)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_submit_in_process, args=(str(store.home.root), barrier, out))
        for _ in range(20)
    ]
    for p in procs:
        p.start()
    ids = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    _check_allocation(store, ids)


def test_a_crashed_create_leaves_no_directory(store: RunStore) -> None:
    def fail(run_id: str, staging: Path) -> None:
        raise RuntimeError("killed while writing")

    with pytest.raises(RuntimeError):
        store.create({"command": ["true"]}, reason="x", actor="test", prepare=fail)
    assert os.listdir(store.home.runs_dir) == []
    assert os.listdir(store.home.queue_dir) == []


# --- resolve ----------------------------------------------------------------------------------
def test_resolve_by_id_prefix_and_name(store: RunStore) -> None:
    for n in range(1, 21):
        make(store, name="alpha" if n == 7 else f"run-{n}")
    assert store.resolve("1").id == "1"  # an exact id wins over the prefix of 10…19
    assert store.resolve(" 12 ").id == "12"
    assert store.resolve("alpha").id == "7"
    store.remove(store.load("2"))
    assert store.resolve("2").id == "20"  # the only id starting with 2 now


@pytest.mark.parametrize("ref", ["99", "nobody", "../runs/1", "/etc", ".staging-1", ""])
def test_resolve_unknown(store: RunStore, ref: str) -> None:
    make(store)
    with pytest.raises(NotFoundError) as info:
        store.resolve(ref)
    assert info.value.exit_code == ExitCode.NOT_FOUND


def test_resolve_path_outside_runs_is_not_a_run(store: RunStore) -> None:
    run = make(store)
    with pytest.raises(NotFoundError):
        store.resolve(str(run.dir))


def test_resolve_ambiguous(store: RunStore) -> None:
    for n in range(1, 13):
        make(store, name="dup" if n in (4, 11) else None)
    store.remove(store.load("1"))
    with pytest.raises(NotFoundError, match=r"'1' is ambiguous: it matches runs 10, 11, 12"):
        store.resolve("1")
    with pytest.raises(NotFoundError, match=r"'dup' is ambiguous: it matches runs 4, 11"):
        store.resolve("dup")


def test_resolve_by_name_without_the_index(store: RunStore) -> None:
    make(store, name="alpha")
    make(store, name="beta")
    store.home.index_path.unlink()
    assert store.resolve("beta").id == "2"


# --- index ------------------------------------------------------------------------------------
def _index_lines(store: RunStore) -> list[dict[str, Any]]:
    return read_jsonl(store.home.index_path)


def test_list_rows_reads_the_cache_until_status_changes(store: RunStore) -> None:
    make(store, name="a")
    run = make(store, name="b")
    rows, _ = index.read(store.home.index_path)
    # A cached row whose mtime still matches is believed without opening the run.
    index.append(store.home.index_path, {**rows["2"], "reason": "from the cache"})
    lines = len(_index_lines(store))
    listed = [r for r in store.list_rows() if isinstance(r, dict)]
    assert [r["reason"] for r in listed] == ["made by a test", "from the cache"]
    assert len(_index_lines(store)) == lines  # nothing re-read, nothing appended

    # A hand edit changes the mtime: the run is read from disk and the index repaired.
    status_path = run.path("status.yaml")
    before = status_path.stat().st_mtime_ns
    write_yaml(status_path, {**run.status, "reason": "edited by hand"})
    os.utime(status_path, ns=(before + 10**9, before + 10**9))
    listed = [r for r in store.list_rows() if isinstance(r, dict)]
    assert [r["reason"] for r in listed] == ["made by a test", "edited by hand"]
    assert index.read(store.home.index_path)[0]["2"]["reason"] == "edited by hand"


def test_deleted_index_is_rebuilt(store: RunStore) -> None:
    for name in ("a", "b", "c"):
        make(store, name=name)
    store.home.index_path.unlink()
    assert [r["name"] for r in store.list_rows() if isinstance(r, dict)] == ["a", "b", "c"]
    rows, n_lines = index.read(store.home.index_path)
    assert sorted(rows) == ["1", "2", "3"] and n_lines == 3
    store.list_rows()
    assert index.read(store.home.index_path)[1] == 3  # the rebuilt rows are used as they are


def test_garbage_in_the_index_is_ignored(store: RunStore) -> None:
    make(store, name="a")
    with open(store.home.index_path, "ab") as fh:
        fh.write(b'[1]\n{"no id": true}\nnonsense\n{"id": "1", "state": "runn')
    assert [r["name"] for r in store.list_rows() if isinstance(r, dict)] == ["a"]


def test_index_is_compacted(store: RunStore) -> None:
    run = make(store, state=RunState.QUEUED)
    for i in range(120):
        store.update(run.id, lambda r, i=i: {"reason": f"waiting {i}"}, actor="test")
    assert len(_index_lines(store)) == 121
    rows = store.list_rows()
    assert [r["reason"] for r in rows if isinstance(r, dict)] == ["waiting 119"]
    assert len(_index_lines(store)) == 1


def test_broken_runs_are_listed_and_never_stop_the_listing(store: RunStore) -> None:
    for _ in range(6):
        make(store)
    runs = store.home.runs_dir
    # cut inside a quoted value, as a crashed non-atomic writer or a full disk would leave it
    (runs / "2" / "status.yaml").write_bytes(b"format: 1\nstate: succeeded\nreason: 'made by")
    (runs / "3" / "status.yaml").write_text("format: 1\nstate: exploded\n")
    (runs / "4" / "run.yaml").unlink()
    (runs / "5" / "status.yaml").unlink()
    (runs / "stray.txt").write_text("not a run")
    (runs / "77").mkdir()  # an id being claimed right now: not listed
    rows = store.list_rows()
    good = [r["id"] for r in rows if isinstance(r, dict)]
    broken = {b.id: b.problem for b in rows if isinstance(b, Broken)}
    # Run 4 is listed from the cache: the index keys rows on status.yaml only, so a lost
    # run.yaml shows when the run is opened (below), not in the listing.
    assert good == ["1", "4", "6"]
    assert sorted(broken) == ["2", "3", "5", "stray.txt"]
    assert "not valid YAML" in broken["2"]
    assert "unknown state 'exploded'" in broken["3"]
    assert "status.yaml missing" in broken["5"]
    assert "not a run directory" in broken["stray.txt"]
    assert all("\n" not in p for p in broken.values())
    loaded = store.load_many(["1", "4", "99"])
    assert isinstance(loaded[0], Run)
    assert isinstance(loaded[1], Broken) and "run.yaml: missing" in loaded[1].problem
    assert isinstance(loaded[2], Broken) and "no run '99'" in loaded[2].problem


# --- changes and removal ----------------------------------------------------------------------
def test_transitions_are_checked(store: RunStore) -> None:
    run = make(store, state=RunState.QUEUED)
    store.transition(run.id, RunState.CANCELLED, actor="test", reason="cancelled by user")
    with pytest.raises(ConflictError, match="is cancelled; cannot become running"):
        store.transition(run.id, RunState.RUNNING, actor="test")
    events = [e["event"] for e in store.events(run.id)]
    assert events == ["submitted", "cancelled"]


def test_remove_refuses_active_runs(store: RunStore) -> None:
    run = make(store, state=RunState.QUEUED)
    with pytest.raises(ConflictError) as info:
        store.remove(run)
    assert info.value.exit_code == ExitCode.CONFLICT
    assert run.dir.is_dir() and (store.home.queue_dir / run.id).exists()


def test_remove_deletes_a_finished_run_for_good(store: RunStore) -> None:
    make(store, name="keep")
    gone = make(store, name="gone")
    store.list_rows()
    store.remove(gone)
    assert sorted(os.listdir(store.home.runs_dir)) == ["1"]  # no .removing-2 left behind
    assert [r["name"] for r in store.list_rows() if isinstance(r, dict)] == ["keep"]
    with pytest.raises(NotFoundError):
        store.resolve("gone")

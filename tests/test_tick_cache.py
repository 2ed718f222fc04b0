"""cache/tick-runs.jsonl (orbit/store/runcache.py): the tick takes unchanged runs from it, sees
every change Orbit or a person makes, and treats a missing or damaged cache as empty. Real files
and the real CLI; no Docker (the queued runs ask for more than the machine has, so nothing is
admitted)."""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit

from orbit.sched.clock import ticker_lock
from orbit.sched.tick import tick
from orbit.store import runcache
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.model import Run, RunState
from orbit.store.runs import Broken, RunStore

# Past the window in which a file's stamp is not trusted yet (runcache.RACY_FINE_NS).
SETTLE_S = 0.15


def spec(i: int, cpus: float = 4.0) -> dict[str, Any]:
    """What an `orbit sweep` writes, with the types Orbit writes: strings that look like
    numbers or bools, floats, ints, None, bools, nested lists and mappings."""
    return {
        "name": f"lr{i}",
        "group": "g",
        "group_cap": None,
        "folder": None,
        "tags": {"lr": "1e-4", "flag": "yes", "n": "1", "note": 'café\u2028\n"x"\\'},
        "params": {"i": str(i)},
        "image": "orbit-test/busybox:1",
        "command": ["sh", "-c", "echo 1: yes"],
        "resources": {"cpus": cpus, "mem_gb": 0.25, "gpus": 0, "gpu_mem_gb": None},
        "env": {"A": "", "B": "0"},
        "mounts": [{"source": "/tmp", "target": "/data", "read_only": True}],
        "timeout_min": 1.5,
    }


@pytest.fixture
def no_ticker(orbit: Orbit) -> Iterator[None]:
    """Hold the ticker's lock, so that no ticker ticks the home beside the test's ticks."""
    home = Home(orbit.home, {})
    home.ensure()
    handle = try_lock(ticker_lock(home))
    assert handle is not None
    yield
    release(handle)


@pytest.fixture
def store(orbit: Orbit, no_ticker: None) -> RunStore:
    orbit.configure(total_cpus=2)
    return RunStore(Home(orbit.home, {}))


def queued_runs(store: RunStore, n: int) -> list[str]:
    ids = [store.create(spec(i), reason="w", actor="test").id for i in range(n)]
    return ids


def cached(store: RunStore) -> dict[str, Any]:
    """The runs the cache records, by id ({} without a cache file)."""
    path = Path(runcache.cache_path(store))
    if not path.exists():
        return {}
    header, *lines = path.read_text().splitlines()
    assert json.loads(header) == {"format": 1, "runs_dir": str(store.home.runs_dir)}
    return {entry[0]: entry for entry in map(json.loads, lines)}


def load(store: RunStore, ids: list[str]) -> list[Run | Broken]:
    """What a tick pass does: read the cache, load the runs through it, save it."""
    cache = runcache.RunCache(store)
    try:
        return cache.load_many(ids)
    finally:
        cache.save()


def strict(value: Any) -> Any:
    """`value` with each leaf paired with its type, so == also compares types (1 vs 1.0 vs True)."""
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strict(v) for v in value]
    return (type(value).__name__, value)


def warm(store: RunStore, ids: list[str]) -> list[Run | Broken]:
    """Parse the runs once, old enough to be recorded; then the cached reading."""
    time.sleep(SETTLE_S)
    load(store, ids)
    return load(store, ids)


def test_cached_runs_are_exactly_what_the_yaml_gives(store: RunStore) -> None:
    ids = queued_runs(store, 3)
    store.update(ids[0], lambda run: {"peaks": {"cpu": 0.5, "mem_gb": 1, "ok": False}}, actor="t")
    runs = warm(store, ids)
    assert set(cached(store)) == set(ids)
    assert all(isinstance(r, Run) and r.stamp is not None for r in runs)  # from the cache
    from_disk = store.load_many(ids)
    assert runs == from_disk
    for a, b in zip(runs, from_disk, strict=True):
        assert isinstance(a, Run) and isinstance(b, Run)
        assert strict(a.spec) == strict(b.spec) and strict(a.status) == strict(b.status)
        assert isinstance(a.status["submitted_at"], str)  # a timestamp stays a string


def test_a_tick_decides_the_same_with_and_without_the_cache(store: RunStore) -> None:
    ids = queued_runs(store, 4)
    home = store.home
    spawned: list[str] = []
    first = tick(home, spawn=lambda h, i: spawned.append(i), actor="test")
    time.sleep(SETTLE_S)  # the reasons it wrote are recorded by the next tick
    second = tick(home, spawn=lambda h, i: spawned.append(i), actor="test")
    assert set(cached(store)) == set(ids)
    third = tick(home, spawn=lambda h, i: spawned.append(i), actor="test")  # from the cache
    os.unlink(runcache.cache_path(store))
    fourth = tick(home, spawn=lambda h, i: spawned.append(i), actor="test")  # from disk
    reports = [r.as_dict() for r in (first, second, third, fourth)]
    assert reports[1:] == [reports[0]] * 3
    assert sorted(first.waiting) == ids and "4 CPUs" in first.waiting[ids[0]]
    assert spawned == [] and first.problems == []


def test_a_run_changed_by_orbit_is_read_again(orbit: Orbit, store: RunStore) -> None:
    ids = queued_runs(store, 3)
    warm(store, ids)
    assert orbit("cancel", ids[0]).code == 0
    assert orbit("mv", ids[1], "papers/a").code == 0
    runs = {r.id: r for r in load(store, ids)}
    assert isinstance(runs[ids[0]], Run) and runs[ids[0]].state is RunState.CANCELLED
    assert isinstance(runs[ids[1]], Run) and runs[ids[1]].folder == "papers/a"
    report = tick(store.home, spawn=lambda h, i: None, actor="test")
    assert sorted(report.waiting) == ids[1:]


def test_a_run_removed_leaves_the_cache(orbit: Orbit, store: RunStore) -> None:
    ids = queued_runs(store, 3)
    tick(store.home, spawn=lambda h, i: None, actor="test")
    time.sleep(SETTLE_S)
    tick(store.home, spawn=lambda h, i: None, actor="test")
    assert set(cached(store)) == set(ids)
    assert orbit("cancel", ids[2]).code == 0  # its tick drops it: no longer queued
    assert orbit("rm", "-y", ids[2]).code == 0
    report = tick(store.home, spawn=lambda h, i: None, actor="test")
    assert sorted(report.waiting) == ids[:2] and report.problems == []
    assert set(cached(store)) == set(ids[:2])


def edit_in_place(path: Path, old: str, new: str, *, keep_mtime: bool = False) -> None:
    """Change the file's bytes without replacing it (same inode), as some editors do."""
    assert len(old) == len(new)
    before = os.stat(path)
    text = path.read_text()
    assert old in text
    with open(path, "r+") as f:
        f.write(text.replace(old, new))
    if keep_mtime:  # a person (or a tool) that puts the mtime back: the ctime still moves
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_a_hand_edit_that_keeps_the_size_is_seen(store: RunStore, keep_mtime: bool) -> None:
    ids = queued_runs(store, 2)
    warm(store, ids)
    status, spec = store.run_dir(ids[0]) / "status.yaml", store.run_dir(ids[1]) / "run.yaml"
    edit_in_place(status, "reason: w", "reason: x", keep_mtime=keep_mtime)
    edit_in_place(spec, "name: lr1", "name: lr9", keep_mtime=keep_mtime)
    runs = load(store, ids)
    assert isinstance(runs[0], Run) and runs[0].reason == "x"
    assert isinstance(runs[1], Run) and runs[1].name == "lr9"
    assert runs == store.load_many(ids)


def test_a_truncated_status_is_seen(store: RunStore) -> None:
    ids = queued_runs(store, 2)
    warm(store, ids)
    path = store.run_dir(ids[0]) / "status.yaml"
    os.truncate(path, len(path.read_bytes()) // 2)
    runs = load(store, ids)
    assert isinstance(runs[0], Broken) and isinstance(runs[1], Run)
    assert ids[0] not in cached(store)
    report = tick(store.home, spawn=lambda h, i: None, actor="test")
    assert any(ids[0] in p for p in report.problems) and list(report.waiting) == [ids[1]]


HEADER = b'{"format": 1, "runs_dir": "RUNS"}\n'


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"garbage\x00\xff",
        b'{"format": 1, "runs_dir": ',
        b'{"format": 2, "runs_dir": "RUNS"}\n',
        b"[1, 2]\n",
        b'{"format": 1, "runs_dir": "/elsewhere/runs"}\n',
        HEADER + b'["1",[1,2,3,4]',  # cut short
        HEADER + b'["1"]\n["2",[],[],{},{}]\n["3",null,null,null,null]\n',
        HEADER + b'["2",[1,2,3,4],[1,2,3,4],{},{}]\n',  # under another id
    ],
)
def test_a_damaged_cache_is_ignored_and_replaced(store: RunStore, damage: bytes) -> None:
    ids = queued_runs(store, 3)
    time.sleep(SETTLE_S)
    path = Path(runcache.cache_path(store))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(damage.replace(b"RUNS", str(store.home.runs_dir).encode()))
    assert load(store, ids) == store.load_many(ids)
    assert set(cached(store)) == set(ids)  # rewritten whole
    assert all(isinstance(r, Run) and r.stamp is not None for r in load(store, ids))


def test_a_cache_entry_whose_stamps_match_but_content_is_foreign_is_not_trusted_blindly(
    store: RunStore,
) -> None:
    """An entry is only as good as its stamps: one of another shape is parsed from disk."""
    ids = queued_runs(store, 1)
    warm(store, ids)
    path = Path(runcache.cache_path(store))
    header, line = path.read_text().splitlines()
    entry = json.loads(line)
    entry[3] = "not a mapping"
    path.write_text(f"{header}\n{json.dumps(entry)}\n")
    (run,) = load(store, ids)
    assert run == store.load(ids[0]) and isinstance(run, Run) and run.stamp is None


def test_a_just_written_run_is_not_recorded(store: RunStore) -> None:
    ids = queued_runs(store, 1)
    load(store, ids)
    assert cached(store) == {}  # its stamp is not trusted yet: parsed again next time


def test_what_the_caller_changes_never_reaches_the_cache(store: RunStore) -> None:
    ids = queued_runs(store, 2)
    time.sleep(SETTLE_S)
    load(store, ids[:1])  # recorded: a hit below
    cache = runcache.RunCache(store)
    runs = cache.load_many(ids)  # a hit and a miss
    for run in runs:
        assert isinstance(run, Run)
        run.status["reason"] = "changed in memory"
        run.spec["resources"]["cpus"] = 99
    again = cache.load_many(ids)  # the same pass asks again
    cache.save()
    assert again == store.load_many(ids)
    assert load(store, ids) == store.load_many(ids)
    assert all(isinstance(r, Run) and r.stamp is not None for r in load(store, ids))


@pytest.mark.parametrize(
    "value",
    [
        datetime.date(2026, 1, 1),
        datetime.datetime(2026, 1, 1, 12, 0),
        {1: "int key"},
        {None: "null key"},
        float("nan"),
        float("inf"),
        (1, 2),
        {1, 2},
        b"bytes",
        [{"deep": [datetime.date(2026, 1, 1)]}],
    ],
)
def test_values_json_would_change_are_not_exact(value: object) -> None:
    assert not runcache.exact(value)
    assert not runcache.exact({"tags": {"x": value}})


def test_values_orbit_writes_are_exact() -> None:
    value = {"a": [1, 1.0, -0.0, 1e-300, True, None, "1e-4", "", {"b": []}], "c": {}}
    assert runcache.exact(value)
    assert strict(json.loads(json.dumps(value))) == strict(value)


def test_a_run_yaml_edited_to_hold_a_date_is_always_parsed(store: RunStore) -> None:
    """A value JSON cannot give back (here an unquoted date a person typed) keeps its run out
    of the cache: parsed from disk every time, with the type YAML gives."""
    ids = queued_runs(store, 2)
    path = store.run_dir(ids[0]) / "run.yaml"
    text = path.read_text()
    assert 'lr: "1e-4"' in text
    path.write_text(text.replace('lr: "1e-4"', "lr: 2026-01-01"))
    runs = warm(store, ids)
    assert isinstance(runs[0], Run) and runs[0].stamp is None  # parsed, not cached
    assert runs[0].spec["tags"]["lr"] == datetime.date(2026, 1, 1)
    assert set(cached(store)) == {ids[1]}

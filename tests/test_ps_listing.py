"""The listing snapshot of `orbit ps -a` (store/listing.py, cli/ps_table.py): served while
nothing changed, never once something Orbit does changes what the listing shows.

Each test makes the snapshot trustworthy (its signal's mtimes older than RACY_S), lists once to
write it, then *poisons* it (a name only the snapshot holds) so that a listing served from it
shows. After the change under test, the poison must be gone and the change shown.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit

from orbit.cli.ps_table import cells_of, fill, render, template
from orbit.store import listing
from orbit.store.files import write_yaml
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.store.runs import RunStore

POISON = "served-from-the-snapshot"


def make(store: RunStore, name: str, state: RunState = RunState.SUCCEEDED) -> Run:
    spec = {
        "name": name,
        "group": "g",
        "image": "orbit-test/busybox:1",
        "command": ["true"],
        "resources": {"cpus": 1.0, "mem_gb": 1.0},
    }
    return store.create(spec, state=state, reason="made by a test", actor="test")


def settle(home: Home) -> None:
    """Age the signal's mtimes past RACY_S, as if the last change was a while ago."""
    past = time.time() - 10
    for path in (home.runs_dir, home.index_path):
        os.utime(path, (past, past))


def poison(home: Home) -> None:
    """Rename the run `one` to POISON in the snapshot, keeping its header (so its signal)."""
    path = Path(listing.path_of(home))
    head, _, body = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    offset, length, _crc = header["sections"]["ps"]
    tpl = json.loads(body[offset : offset + length])
    tpl["lines"] = [tpl["lines"][0]] + [line.replace("one", POISON) for line in tpl["lines"][1:]]
    raw = json.dumps(tpl).encode() + b"\n"
    header["sections"] = {"ps": [0, len(raw), zlib.crc32(raw)]}
    path.write_bytes(json.dumps(header).encode() + b"\n" + raw)


@pytest.fixture
def served(orbit: Orbit) -> tuple[Orbit, RunStore]:
    """A home of three finished runs and a queued one whose `ps -a` is served from a poisoned
    snapshot."""
    store = RunStore(Home.from_environ(orbit.environ))
    make(store, "one")
    make(store, "two", RunState.FAILED)
    make(store, "three")
    make(store, "waiting", RunState.QUEUED)
    settle(store.home)
    first = orbit("ps", "-a")
    assert first.code == 0 and "one" in first.out
    assert os.path.exists(listing.path_of(store.home))
    poison(store.home)
    assert POISON in orbit("ps", "-a").out
    return orbit, store


def listed(orbit: Orbit) -> str:
    result = orbit("ps", "-a")
    assert result.code == 0, result.err
    return result.out


def test_a_snapshot_is_not_written_while_the_last_change_is_recent(orbit: Orbit) -> None:
    store = RunStore(Home.from_environ(orbit.environ))
    make(store, "one")
    assert "one" in listed(orbit)
    assert not os.path.exists(listing.path_of(store.home))  # a change may share its mtime


def test_a_new_run_is_listed(served: tuple[Orbit, RunStore]) -> None:
    orbit, store = served
    make(store, "four")
    out = listed(orbit)
    assert POISON not in out and "four" in out


def test_a_state_change_is_listed(served: tuple[Orbit, RunStore]) -> None:
    orbit, store = served
    store.transition("4", RunState.CANCELLED, actor="test", reason="cancelled by a test")
    out = listed(orbit)
    assert POISON not in out and "cancelled by a test" in out


def test_an_active_run_changed_without_its_index_line_is_listed(
    served: tuple[Orbit, RunStore],
) -> None:
    """A writer killed between status.yaml and index.jsonl: an active run is watched."""
    orbit, store = served
    run = store.load("4")
    write_yaml(run.dir / "status.yaml", {**run.status, "reason": "changed, index not told"})
    out = listed(orbit)
    assert POISON not in out and "changed, index not told" in out


def test_an_active_run_damaged_by_hand_is_listed(served: tuple[Orbit, RunStore]) -> None:
    orbit, store = served
    (store.run_dir("4") / "status.yaml").write_text("format: 1\nstate: queu")
    out = listed(orbit)
    assert POISON not in out and "unreadable" in out and "one" in out


def test_a_removed_run_is_not_listed(served: tuple[Orbit, RunStore]) -> None:
    orbit, _store = served
    assert orbit("rm", "--yes", "1").code == 0
    out = listed(orbit)
    assert POISON not in out and "three" in out
    assert not any(line.split()[0] == "1" for line in out.splitlines()[1:])


def test_a_run_deleted_by_hand_is_not_listed(served: tuple[Orbit, RunStore]) -> None:
    orbit, store = served
    shutil.rmtree(store.run_dir("1"))
    out = listed(orbit)
    assert POISON not in out and "three" in out


def test_a_move_to_another_folder_is_seen(served: tuple[Orbit, RunStore]) -> None:
    orbit, _store = served
    assert orbit("mv", "1", "papers/x").code == 0
    assert POISON not in listed(orbit)
    rows = orbit("ps", "-a", "--json").json()["runs"]
    assert [r["folder"] for r in rows if r["id"] == "1"] == ["papers/x"]


def test_a_note_changes_nothing_listed(served: tuple[Orbit, RunStore]) -> None:
    """Notes are not in the listing: the snapshot stays valid."""
    orbit, _store = served
    assert orbit("note", "1", "looks good").code == 0
    assert POISON in listed(orbit)


def test_a_hand_edit_of_a_finished_run_shows_from_the_next_change(
    served: tuple[Orbit, RunStore],
) -> None:
    """Documented: a finished run's files edited by hand are not watched; the next change
    anywhere in the home (or a deleted snapshot) brings them in."""
    orbit, store = served
    path = store.run_dir("2") / "status.yaml"
    path.write_text(path.read_text().replace("made by a test", "edited by hand"))
    assert POISON in listed(orbit)
    make(store, "four")
    out = listed(orbit)
    assert POISON not in out and "edited by hand" in out


def test_a_deleted_index_or_another_data_directory_is_seen(
    served: tuple[Orbit, RunStore], tmp_path: Path
) -> None:
    orbit, store = served
    store.home.index_path.unlink()
    assert POISON not in listed(orbit)
    settle(store.home)
    listed(orbit)
    poison(store.home)
    assert POISON in listed(orbit)
    orbit.environ["ORBIT_DATA"] = str(tmp_path / "elsewhere")
    assert listed(orbit) == "no runs\n"


@pytest.mark.parametrize(
    "damage",
    [b"", b"garbage\n", b'{"format": 2}\n', None],
    ids=["empty", "garbage", "newer", "bad-crc"],
)
def test_a_damaged_snapshot_is_ignored(
    served: tuple[Orbit, RunStore], damage: bytes | None
) -> None:
    orbit, store = served
    path = Path(listing.path_of(store.home))
    if damage is None:
        data = bytearray(path.read_bytes())
        data[-10] ^= 0x01  # one bit of the section
        damage = bytes(data)
    path.write_bytes(damage)
    out = listed(orbit)
    assert POISON not in out and "one" in out


# --- after a change: only the runs that changed are read again ----------------------------
STALE = "xyzzy"  # as wide as "three": the columns keep their widths


def poison_unchanged(home: Home, name: str) -> None:
    """Rename run `name` to STALE in every section of the snapshot (its table, cells and
    stamps kept consistent): a listing after a change that reads only the runs that changed
    still shows it; one that read every run would not."""
    path = Path(listing.path_of(home))
    head, _, body = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    sections = {}
    for key, (offset, length, _crc) in header["sections"].items():
        sections[key] = json.loads(body[offset : offset + length])
    tpl, cells = sections["ps"], sections["cells"]
    tpl["lines"] = [tpl["lines"][0]] + [line.replace(name, STALE) for line in tpl["lines"][1:]]
    sections["cells"] = [[STALE if cell == name else cell for cell in c] for c in cells]
    out = b""
    header["sections"] = {}
    for key, value in sections.items():
        raw = json.dumps(value).encode() + b"\n"
        header["sections"][key] = [len(out), len(raw), zlib.crc32(raw)]
        out += raw
    path.write_bytes(json.dumps(header).encode() + b"\n" + out)


def ageless(text: str) -> str:
    return re.sub(r"\S+ ago *", "AGE ", text)


@pytest.fixture
def changing(orbit: Orbit) -> tuple[Orbit, RunStore]:
    """A home of three finished runs and a queued one whose snapshot has run `three` renamed
    STALE; nothing changed since, so `ps -a` is served from it."""
    store = RunStore(Home.from_environ(orbit.environ))
    make(store, "one")
    make(store, "two", RunState.FAILED)
    make(store, "three")
    make(store, "waiting", RunState.QUEUED)
    settle(store.home)
    assert "three" in listed(orbit)
    poison_unchanged(store.home, "three")
    assert STALE in listed(orbit)
    return orbit, store


def truth(orbit: Orbit, store: RunStore) -> str:
    Path(listing.path_of(store.home)).unlink()
    return listed(orbit)


def test_a_change_reads_only_the_run_that_changed(changing: tuple[Orbit, RunStore]) -> None:
    orbit, store = changing
    store.update("2", lambda run: {"reason": "a longer reason than any before"}, actor="test")
    out = listed(orbit)
    assert STALE in out and "a longer reason than any before" in out
    assert ageless(out.replace(STALE, "three")) == ageless(truth(orbit, store))


def test_a_wider_cell_after_a_change_widens_its_column(changing: tuple[Orbit, RunStore]) -> None:
    orbit, store = changing
    wide = "a-run-name-wider-than-every-other-one-listed"
    store.update("2", lambda run: {"folder": "elsewhere"}, actor="test")
    spec = store.load("2").spec
    write_yaml(store.run_dir("2") / "run.yaml", {**spec, "name": wide})
    store.update("2", lambda run: {"reason": "renamed"}, actor="test")
    out = listed(orbit)
    assert STALE in out and wide in out
    header = out.splitlines()[0]
    assert header.index("STATE") == out.splitlines()[1].index("succeeded")
    assert ageless(out.replace(STALE, "three")) == ageless(truth(orbit, store))


@pytest.mark.parametrize(
    "what", ["new run", "removed", "deleted by hand", "damaged dir", "stray file", "state"]
)
def test_a_listing_after_a_change_is_the_listing_of_every_run(
    changing: tuple[Orbit, RunStore], what: str
) -> None:
    orbit, store = changing
    if what == "new run":
        make(store, "four")
    elif what == "removed":
        assert orbit("rm", "--yes", "1").code == 0
    elif what == "deleted by hand":
        shutil.rmtree(store.run_dir("1"))
    elif what == "damaged dir":
        (store.home.runs_dir / "77").mkdir()
        (store.home.runs_dir / "77" / "status.yaml").write_text("state: [torn")
    elif what == "stray file":
        (store.home.runs_dir / "78").write_text("not a run")
    else:
        store.transition("4", RunState.CANCELLED, actor="test", reason="cancelled by a test")
    out = listed(orbit)
    assert STALE in out
    assert ageless(out.replace(STALE, "three")) == ageless(truth(orbit, store))


def test_a_hand_edit_shows_from_the_next_change_after_a_change(
    changing: tuple[Orbit, RunStore],
) -> None:
    """As documented: the next change anywhere brings in a finished run edited by hand (each
    run's status.yaml is checked against its row's stamp; only that one is read again)."""
    orbit, store = changing
    path = store.run_dir("2") / "status.yaml"
    path.write_text(path.read_text().replace("made by a test", "edited by hand"))
    assert "edited by hand" not in listed(orbit)
    make(store, "four")
    out = listed(orbit)
    assert STALE in out and "edited by hand" in out and "four" in out


# --- the template gives what the table gives ---------------------------------------------
def rows() -> list[dict[str, Any]]:
    base = {
        "group": None,
        "params": {},
        "cpus": 1.0,
        "mem_gb": 0.25,
        "reason": None,
        "error_line": None,
        "state": "succeeded",
    }
    return [
        {**base, "id": "1", "name": "a", "submitted_at": "2026-11-30T06:56:54.968+00:00"},
        {
            **base,
            "id": "2",
            "name": None,
            "group": "sweep",
            "state": "failed",
            "reason": "exit code 1",
            "error_line": "ValueError: boom",
            "params": {"lr": 0.1},
            "submitted_at": "2026-11-29T01:02:03.000+00:00",
        },
        {"id": "3", "state": "unreadable", "error": "runs/3/status.yaml: missing"},
        {**base, "id": "10", "name": "no-time", "submitted_at": None, "cpus": None},
    ]


@pytest.mark.parametrize("seconds", [1, 75, 4000, 200000, 9e7])
def test_a_filled_template_is_the_table(seconds: float) -> None:
    cells = cells_of(rows())
    now_us = cells[0][4] + int(seconds * 1_000_000)
    direct, filled = io.StringIO(), io.StringIO()
    render(direct, cells, now_us)
    tpl = template(cells)
    assert tpl is not None
    fill(filled, json.loads(json.dumps(tpl)), now_us)
    assert filled.getvalue() == direct.getvalue()
    assert "lr=0.1" in direct.getvalue()


def test_no_template_for_a_cell_with_a_line_break() -> None:
    cells = cells_of([{**rows()[0], "name": "two\nlines"}])
    assert template(cells) is None


def test_a_template_made_from_an_older_one_is_the_template() -> None:
    """Reuse keeps the older lines only while no column changes width: checked against a
    template made from nothing, for changes that widen, narrow, keep, add and remove rows
    and the PARAMS column."""
    from orbit.cli.ps_table import Reuse

    rng = random.Random(7)
    base = rows()[:2] + rows()[3:]
    quick = 0
    for _ in range(300):
        old = [
            {**rng.choice(base), "id": str(i), "name": "n" * rng.randrange(0, 12)}
            for i in range(1, rng.randrange(2, 8))
        ]
        new = []
        for r in old:
            roll = rng.random()
            if roll < 0.15:
                continue  # removed
            if roll < 0.5:
                r = {**r, "name": "n" * rng.randrange(0, 12)}
            if roll < 0.6:
                r = {**r, "params": {} if rng.random() < 0.5 else {"lr": 0.1}}
            new.append(r)
        new.append({**base[0], "id": str(len(old) + 1)})  # a new run
        old_cells, new_cells = cells_of(old), cells_of(new)
        tpl = template(old_cells)
        assert tpl is not None
        before = {c[0]: c for c in old_cells}
        same = {c[0] for c in new_cells if before.get(c[0]) == c}
        changed = ({c[0] for c in old_cells} | {c[0] for c in new_cells}) - same
        reuse = Reuse(tpl, old_cells, changed)
        quick += reuse.template(new_cells) is not None
        assert template(new_cells, reuse) == template(new_cells)
    assert quick > 50  # most changes keep the columns: the older lines were reused


def test_ages_shown_to_the_minute_are_those_of_the_table() -> None:
    """fill computes an age of an hour or more once per minute of age: the same text as
    `render`'s age of each row, at every second of a minute and across hour and day edges."""
    base = rows()[0]
    epoch_us = cells_of([base])[0][4]
    offsets = [3600 - 1, 3600, 3659.5, 3660, 86399.99, 86400, 90061.2, *range(7190, 7330, 7)]
    cells = []
    for i, back in enumerate(offsets):
        cells.append([*cells_of([{**base, "id": str(i)}])[0]])
        cells[-1][4] = epoch_us - int(back * 1_000_000)
    for now_us in (epoch_us, epoch_us + 1, epoch_us + 999_999):
        direct, filled = io.StringIO(), io.StringIO()
        render(direct, cells, now_us)
        tpl = template(cells)
        assert tpl is not None
        fill(filled, tpl, now_us)
        assert filled.getvalue() == direct.getvalue()

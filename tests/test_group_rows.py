"""One group's listing rows (store/grouprows.py, cache/groups/<key>.json): always what
`list_rows` answers for the group; served from the snapshot only while nothing changed.

As in test_ps_listing.py, a test makes the snapshot trustworthy (settled mtimes), reads once to
write it, then *poisons* it (a name only the snapshot holds) so that rows served from it show.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
import test_store
from conftest import Orbit
from test_ps_listing import settle

from orbit.store import grouprows, listing
from orbit.store.files import write_yaml
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.store.runs import Broken, RunStore

POISON = "served-from-the-snapshot"


def make(
    store: RunStore, name: str, group: str | None, state: RunState = RunState.SUCCEEDED
) -> Run:
    return test_store.make(store, name, state=state, group=group)


def expected(store: RunStore, group: str) -> list[Any]:
    """What list_rows says of the group, comparable across calls."""
    return [
        ("broken", r.id) if isinstance(r, Broken) else (r["id"], r["name"], r["state"], r["st"])
        for r in store.list_rows()
        if (r.may_be_in(group) if isinstance(r, Broken) else r.get("group") == group)
    ]


def got(store: RunStore, group: str) -> list[Any]:
    return [
        ("broken", r.id) if isinstance(r, Broken) else (r["id"], r["name"], r["state"], r["st"])
        for r in grouprows.rows(store, group)
    ]


def path_of(home: Home, group: str) -> Path:
    return Path(listing.path_of(home, grouprows.name_of(group)))


def poison(home: Home, group: str) -> None:
    """Rename every member row to POISON in the snapshot, keeping its header (so its signal)."""
    path = path_of(home, group)
    head, _, body = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    sections = {}
    for name, (offset, length, _crc) in header["sections"].items():
        sections[name] = json.loads(body[offset : offset + length])
    for member in sections["members"]:
        if isinstance(member, dict):
            member["name"] = POISON
    raw = b""
    header["sections"] = {}
    for name, value in sections.items():
        line = json.dumps(value).encode() + b"\n"
        header["sections"][name] = [len(raw), len(line), zlib.crc32(line)]
        raw += line
    path.write_bytes(json.dumps(header).encode() + b"\n" + raw)


@pytest.fixture
def served(orbit: Orbit) -> RunStore:
    """A home with runs in groups g and h and none, whose group g is served from a poisoned
    snapshot."""
    store = RunStore(Home.from_environ(orbit.environ))
    make(store, "one", "g")
    make(store, "two", "h", RunState.FAILED)
    make(store, "three", "g", RunState.FAILED)
    make(store, "four", None)
    settle(store.home)
    assert got(store, "g") == expected(store, "g")
    assert path_of(store.home, "g").exists()
    poison(store.home, "g")
    names = [r["name"] for r in grouprows.rows(store, "g") if isinstance(r, dict)]
    assert names == [POISON, POISON]
    return store


def names(store: RunStore, group: str) -> list[str]:
    return [r["name"] for r in grouprows.rows(store, group) if isinstance(r, dict)]


def test_no_snapshot_while_the_last_change_is_recent(orbit: Orbit) -> None:
    store = RunStore(Home.from_environ(orbit.environ))
    make(store, "one", "g")
    assert names(store, "g") == ["one"]
    assert not path_of(store.home, "g").exists()  # a change may share its mtime


def test_a_new_run_anywhere_ends_the_snapshot(served: RunStore) -> None:
    make(served, "five", "h")
    assert names(served, "g") == ["one", "three"]
    assert got(served, "g") == expected(served, "g")


def test_a_new_member_is_listed(served: RunStore) -> None:
    make(served, "five", "g")
    assert names(served, "g") == ["one", "three", "five"]


def test_a_change_of_another_group_ends_the_snapshot(served: RunStore) -> None:
    two = next(r for r in served.list_rows() if isinstance(r, dict) and r["name"] == "two")
    served.update(two["id"], lambda _r: {"folder": "elsewhere"}, actor="test")
    assert names(served, "g") == ["one", "three"]


def test_a_removed_member_is_gone(served: RunStore) -> None:
    one = next(r for r in served.list_rows() if isinstance(r, dict) and r["name"] == "one")
    served.remove_dir(one["id"])
    assert names(served, "g") == ["three"]
    assert got(served, "g") == expected(served, "g")


def test_a_hand_edit_of_a_members_status_shows_from_the_snapshot(served: RunStore) -> None:
    """Each member is checked against its status.yaml as list_rows checks every run."""
    one = next(r for r in grouprows.rows(served, "g") if isinstance(r, dict))
    status_path = served.run_dir(one["id"]) / "status.yaml"
    run = served.load(one["id"])
    write_yaml(status_path, {**run.status, "state": "cancelled"}, durable=False)
    rows = [r for r in grouprows.rows(served, "g") if isinstance(r, dict)]
    assert [(r["name"], r["state"]) for r in rows] == [("one", "cancelled"), (POISON, "failed")]
    assert got(served, "g") == expected(served, "g")


def test_an_unreadable_run_is_in_every_group_and_read_again(orbit: Orbit) -> None:
    store = RunStore(Home.from_environ(orbit.environ))
    make(store, "one", "g")
    bad = make(store, "bad", "g")
    saved = {name: (bad.dir / name).read_bytes() for name in ("run.yaml", "status.yaml")}
    for name in saved:
        (bad.dir / name).write_text("{{ not yaml")
    settle(store.home)
    assert (
        got(store, "g")
        == expected(store, "g")
        == [("1", "one", "succeeded", ANY), ("broken", bad.id)]
    )
    assert path_of(store.home, "g").exists()
    assert got(store, "g") == expected(store, "g")  # from the snapshot
    assert got(store, "h") == [("broken", bad.id)]
    # Repaired by hand (nothing the signal sees): read again from the snapshot's id.
    for name, data in saved.items():
        (bad.dir / name).write_bytes(data)
    assert names(store, "g") == ["one", "bad"]
    assert got(store, "g") == expected(store, "g")


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b"not json\n"),
        lambda p: p.write_bytes(p.read_bytes()[:-5] + b"xxxx\n"),  # a section fails its CRC
        lambda p: p.write_bytes(b""),
    ],
)
def test_a_damaged_snapshot_is_read_again(served: RunStore, damage: Any) -> None:
    damage(path_of(served.home, "g"))
    assert names(served, "g") == ["one", "three"]
    assert got(served, "g") == expected(served, "g")
    settle(served.home)
    assert names(served, "g") == ["one", "three"]


def test_another_groups_snapshot_is_not_served(served: RunStore) -> None:
    """A file holding group g's members under h's name (as a hash collision would) is not h's."""
    os.replace(path_of(served.home, "g"), path_of(served.home, "h"))
    assert names(served, "h") == ["two"]


def test_lessons_and_failures_of_a_group_are_the_same_from_the_snapshot(orbit: Orbit) -> None:
    store = RunStore(Home.from_environ(orbit.environ))
    for i in range(4):
        run = make(store, f"r{i}", "g", RunState.FAILED if i % 2 else RunState.SUCCEEDED)
        if i % 2:
            store.update(run.id, lambda _r: {"error_excerpt": "ValueError: bad lr"}, actor="t")
    make(store, "other", "h", RunState.FAILED)
    settle(store.home)
    first = [orbit("lessons", "-g", "g", "--json"), orbit("failures", "-g", "g", "--json")]
    assert all(r.code == 0 for r in first), [r.err for r in first]
    assert path_of(store.home, "g").exists()
    again = [orbit("lessons", "-g", "g", "--json"), orbit("failures", "-g", "g", "--json")]
    path_of(store.home, "g").unlink()
    whole = [orbit("lessons", "-g", "g", "--json"), orbit("failures", "-g", "g", "--json")]

    def answers(results: list[Any]) -> list[str]:
        # Less `"read": N`: how many runs lessons read from their files, not from its cache.
        return [re.sub(r'"read": \d+', "", r.out) for r in results]

    assert answers(again) == answers(first) == answers(whole)
    assert "bad lr" in first[1].out

"""cache/groups/<key>.json: one group's listing rows, so that a question about a group
(`orbit lessons -g`, `orbit failures -g`) does not read the whole history.

`rows(store, group)` answers what `store.list_rows()` answers, kept to the group: its runs'
rows, and the Broken entries that may be in it (`Broken.may_be_in`), in id order. A run's
group is in its run.yaml, which Orbit never changes, so the group's members change only when
runs come or go; the snapshot (store/listing.py, under the name `groups/<key>`) holds them
while its change signal (index.jsonl and runs/) has not moved. Each member's row is then
checked against its status.yaml's stamp by `RunStore.row_of`, as `list_rows` checks every
run's, and the Broken ones are read again. When the signal moved (a run created, changed or
removed anywhere in the home), the whole listing is read and the snapshot written again.

Never the truth: a missing, damaged or foreign file costs one whole listing. Not seen, as
with cache/listing.json: a finished run moved into or out of the group by a hand edit of its
run.yaml, until the next change anywhere in the home.
"""

from __future__ import annotations

import hashlib
from typing import Any

from orbit.store import listing
from orbit.store.runs import Broken, RunStore


def name_of(group: str) -> str:
    """The snapshot's name under cache/ (listing.path_of)."""
    return f"groups/{hashlib.sha256(group.encode()).hexdigest()[:24]}"


def _in(row: dict[str, Any] | Broken, group: str) -> bool:
    if isinstance(row, Broken):
        return row.may_be_in(group)
    return bool(row.get("group") == group)


def rows(store: RunStore, group: str) -> list[dict[str, Any] | Broken]:
    """`[r for r in store.list_rows() if r is in group, or a Broken entry that may be]`, from
    the group's snapshot while nothing was created, changed or removed since it was made."""
    home = store.home
    name = name_of(group)
    snapshot = listing.load(home, name)
    if snapshot is not None and snapshot.fresh:
        found = _from(store, snapshot, group)
        if found is not None:
            return found
    before = listing.Signal(home, str(home.runs_dir))
    out = [r for r in store.list_rows() if _in(r, group)]
    members = [r if isinstance(r, dict) else r.id for r in out]
    listing.save(home, before, {}, {"group": group, "members": members}, name)
    return out


def _from(
    store: RunStore, snapshot: listing.Snapshot, group: str
) -> list[dict[str, Any] | Broken] | None:
    """The group's rows from its snapshot's members, each checked as `list_rows` checks it (a
    moved status.yaml is read again; a Broken entry, kept as its id, is read again); None when
    the snapshot is not this group's or is damaged."""
    members = snapshot.section("members")
    if snapshot.section("group") != group or not isinstance(members, list):
        return None
    runs_dir = str(store.home.runs_dir)
    out: list[dict[str, Any] | Broken] = []
    for member in members:
        if isinstance(member, dict) and isinstance(member.get("id"), str):
            row = store.row_of(member["id"], member, runs_dir)
        elif isinstance(member, str):
            row = store.row_of(member, None, runs_dir)
        else:
            return None
        if row is not None and _in(row, group):
            out.append(row)
    return out

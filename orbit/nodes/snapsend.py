"""A code snapshot sent to a node, once per content hash.

The primary sends a snapshot whole: a header line (JSON: the hash and, per file, its path,
kind, size, mtime and SHA-256) and then each distinct content once, end to end, in the order the
header first names it. The node checks every content against its SHA-256 and the snapshot's
hash against the entries, then stores one pack and one whole manifest (execute/snapstore.py),
the pack first, as a snapshot taken there would be: a manifest exists only once all it names
does, and a transfer cut short leaves nothing a run would read.
"""

from __future__ import annotations

import hashlib
import json
from typing import IO, Any

from orbit.errors import CorruptError, UsageError
from orbit.execute.snapshot import snapshot_hash
from orbit.execute.snapstore import (
    Entry,
    pack_path,
    read_manifest,
    write_manifest,
    write_pack,
)
from orbit.store.home import Home

MAX_HEADER = 64 << 20


def has(home: Home, snapshot: str) -> bool:
    try:
        read_manifest(home.snapshots_dir, snapshot)
    except (FileNotFoundError, CorruptError):
        return False
    return True


def export(home: Home, snapshot: str) -> bytes:
    """The snapshot as the node reads it (see the module's text)."""
    try:
        entries, _ = read_manifest(home.snapshots_dir, snapshot)
    except FileNotFoundError:
        raise CorruptError(
            f"the code snapshot {snapshot} is gone, or was stored whole by an older Orbit: "
            "submit the run again to send it to a node"
        ) from None
    order: list[Entry] = []
    seen: set[str] = set()
    for e in entries:
        if e.kind != "l" and e.ref not in seen:
            seen.add(e.ref)
            order.append(e)
    header = {
        "snapshot": snapshot,
        "entries": [[e.path, e.kind, e.size, e.mtime, e.ref] for e in entries],
    }
    parts = [json.dumps(header, separators=(",", ":")).encode() + b"\n"]
    handles: dict[str, IO[bytes]] = {}
    try:
        for e in order:
            fh = handles.get(e.pack)
            if fh is None:
                fh = handles[e.pack] = open(pack_path(home.snapshots_dir, e.pack), "rb")  # noqa: SIM115
            fh.seek(e.offset)
            data = fh.read(e.size)
            if len(data) != e.size:
                raise CorruptError(f"the pack of snapshot {snapshot} is cut short ({e.path})")
            parts.append(data)
    finally:
        for fh in handles.values():
            fh.close()
    return b"".join(parts)


def receive(home: Home, snapshot: str, stream: IO[bytes]) -> int:
    """Store a snapshot sent by `export`; the number of files. Nothing is kept unless all of
    it arrived and checks out."""
    if has(home, snapshot):
        return -1
    line = stream.readline(MAX_HEADER)
    try:
        header: dict[str, Any] = json.loads(line)
        rows = [
            Entry(str(p), str(k), int(s), int(m), str(r)) for p, k, s, m, r in header["entries"]
        ]
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"snapshot {snapshot}: bad header ({exc})") from None
    if header.get("snapshot") != snapshot or snapshot_hash(rows) != snapshot:
        raise UsageError(f"snapshot {snapshot}: its files do not hash to its name")
    contents: list[bytes] = []
    offsets: dict[str, int] = {}
    at = 0
    for e in rows:
        if e.kind == "l" or e.ref in offsets:
            continue
        data = stream.read(e.size)
        if len(data) != e.size or hashlib.sha256(data).hexdigest() != e.ref:
            raise UsageError(f"snapshot {snapshot}: {e.path} arrived damaged or cut short")
        contents.append(data)
        offsets[e.ref] = at
        at += e.size
    pack = write_pack(home.snapshots_dir, contents) if contents else ""
    placed = [e if e.kind == "l" else e._replace(pack=pack, offset=offsets[e.ref]) for e in rows]
    total = sum(e.size for e in rows if e.kind != "l")
    write_manifest(home.snapshots_dir, snapshot, placed, total, None)
    return len(rows)

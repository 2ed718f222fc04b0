"""The code snapshot store: packs of file contents and the manifests that name them.

Under the data directory's `snapshots/`:

    packs/<name>.pack     file contents end to end, each stored once; <name> is the SHA-256
                          of the pack (32 hex digits). A snapshot adds one pack holding only
                          the contents no earlier pack of its repository has.
    <hash>.manifest       one snapshot (JSON, `format: 1`): per file its path, kind, size,
                          mtime, SHA-256 and where it is (pack, offset). A manifest may list
                          only what changed since another (`base`), at most MAX_DEPTH deep.
    <hash>.tar            a snapshot an older Orbit wrote whole (read, never written)

Every file is written under a temporary name (starting with a dot) and renamed into place,
packs before the manifest that names them: a manifest exists only once all it needs does, and
a crash leaves at most temporary files, which nothing reads.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, NamedTuple

from orbit.errors import CorruptError
from orbit.store.files import atomic_write

MANIFEST_FORMAT = 1
MAX_DEPTH = 8  # manifests read to rebuild one snapshot, at most
# A delta larger than this share of the whole is written whole instead.
DELTA_SHARE = 0.25


class Entry(NamedTuple):
    """One file of a snapshot. `kind` is `f` (regular), `x` (executable) or `l` (symlink);
    `ref` is the content's SHA-256 (hex), or a symlink's target; `pack` and `offset` say where
    the content is (empty for a symlink, and while a new content has no place yet)."""

    path: str
    kind: str
    size: int
    mtime: int
    ref: str
    pack: str = ""
    offset: int = 0


def manifest_path(snapshots_dir: Path, snapshot_hash: str) -> Path:
    return snapshots_dir / f"{snapshot_hash}.manifest"


def pack_path(snapshots_dir: Path, name: str) -> Path:
    return snapshots_dir / "packs" / f"{name}.pack"


def read_manifest(snapshots_dir: Path, snapshot_hash: str) -> tuple[list[Entry], int]:
    """A snapshot's entries in path order and its manifest's depth. FileNotFoundError when
    there is no such manifest; CorruptError when it, or a manifest it builds on, is damaged
    or gone."""
    return _read(snapshots_dir, snapshot_hash, 0)


def _read(snapshots_dir: Path, snapshot_hash: str, depth: int) -> tuple[list[Entry], int]:
    path = manifest_path(snapshots_dir, snapshot_hash)
    raw = path.read_bytes()
    try:
        doc = json.loads(raw)
        if doc.get("format") != MANIFEST_FORMAT:
            raise CorruptError(f"{path}: unknown manifest format {doc.get('format')!r}")
        packs = doc["packs"]
        rows = [
            Entry(p, k, s, m, r, packs[i] if i >= 0 else "", o)
            for p, k, s, m, r, i, o in doc["entries"]
        ]
        base, drop = doc["base"], doc["drop"]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise CorruptError(f"{path} is damaged: {exc}") from None
    if base is None:
        return rows, 0
    if depth >= MAX_DEPTH:
        raise CorruptError(f"{path}: manifests built on each other deeper than {MAX_DEPTH}")
    try:
        base_rows, base_depth = _read(snapshots_dir, base, depth + 1)
    except FileNotFoundError:
        raise CorruptError(f"{path} builds on the snapshot {base}, which is gone") from None
    merged = {e.path: e for e in base_rows}
    for name in drop:
        merged.pop(name, None)
    for e in rows:
        merged[e.path] = e
    return sorted(merged.values()), base_depth + 1


def write_pack(snapshots_dir: Path, contents: list[bytes]) -> str:
    """Store `contents` end to end as one pack (whole or not at all); its name."""
    data = b"".join(contents)
    name = hashlib.sha256(data).hexdigest()[:32]
    path = pack_path(snapshots_dir, name)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, durable=False)  # not fsynced, like the tar before
    return name


def write_manifest(
    snapshots_dir: Path,
    snapshot_hash: str,
    entries: list[Entry],
    total: int,
    base: tuple[str, list[Entry], int] | None,
) -> int:
    """Write the snapshot's manifest, as the changes since `base` (its hash, entries and
    depth) when those are few and the chain stays short, else whole; its depth."""
    doc: dict[str, Any] = {"format": MANIFEST_FORMAT, "files": len(entries), "bytes": total}
    rows, drop, base_hash, depth = entries, [], None, 0
    if base is not None and base[2] < MAX_DEPTH - 1:
        old = {e.path: e for e in base[1]}
        changed = [e for e in entries if old.pop(e.path, None) != e]
        if len(changed) + len(old) <= DELTA_SHARE * len(entries):
            rows, drop, base_hash, depth = changed, sorted(old), base[0], base[2] + 1
    packs = sorted({e.pack for e in rows if e.pack})
    index = {name: i for i, name in enumerate(packs)}
    doc["base"] = base_hash
    doc["drop"] = drop
    doc["packs"] = packs
    doc["entries"] = [
        [e.path, e.kind, e.size, e.mtime, e.ref, index.get(e.pack, -1), e.offset] for e in rows
    ]
    data = json.dumps(doc, separators=(",", ":")).encode()
    atomic_write(manifest_path(snapshots_dir, snapshot_hash), data, durable=False)
    return depth

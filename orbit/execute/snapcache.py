"""The private caches of code snapshots, one set per repository, under
ORBIT_HOME/cache/snapshots/ (`<key>` is the SHA-256 of the repository's path, 24 hex digits):

    <key>.json   each file's stat and SHA-256, and where its content is stored
    <key>.tree   the tree last snapshotted (a digest of every path's stat), its snapshot, and
                 its code.diff with what that depended on
    <key>.last   the entries of the last snapshot written, with its manifest's depth (marshal:
                 read in milliseconds, where its manifests take a JSON parse per link)

All rebuildable and never the truth: a missing, damaged or foreign file reads as empty, and
one that cannot be written is logged and costs time, not correctness.
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
from pathlib import Path
from typing import Any

from orbit.store.files import atomic_write

log = logging.getLogger(__name__)

FORMAT = 1


def file_for(cache_dir: Path, root: Path, suffix: str) -> Path:
    """The repository's cache file with `suffix` (`.json`, `.tree`, `.diff`)."""
    key = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return cache_dir / f"{key}{suffix}"


def load_files(path: Path, root: Path) -> tuple[dict[str, list[Any]], str | None]:
    """path -> [mtime_ns, ctime_ns, size, ino, mode, sha, pack, offset] (pack "" when not
    known), and the repository's last snapshot."""
    doc = load(path, root)
    files, last = doc.get("files"), doc.get("last")
    if isinstance(files, dict) and isinstance(last, str | None):
        return files, last
    return {}, None


def load(path: Path, root: Path) -> dict[str, Any]:
    """A cache file of this repository and format, or {}."""
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.info("snapshot cache %s unusable: %s", path, exc)
        return {}
    if isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("root") == str(root):
        return doc
    return {}


def save(path: Path, root: Path, doc: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": FORMAT, "root": str(root), **doc}
        atomic_write(path, json.dumps(data, separators=(",", ":")).encode(), durable=False)
    except OSError as exc:  # a cache that cannot be written costs time, not correctness
        log.info("cannot write the snapshot cache %s: %s", path, exc)


def save_entries(path: Path, root: Path, snap: str, depth: int, entries: list[Any]) -> None:
    """Keep `snap`'s entries (tuples of str and int) and its manifest's depth."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = (FORMAT, str(root), snap, depth, [tuple(e) for e in entries])
        atomic_write(path, marshal.dumps(doc), durable=False)
    except OSError as exc:
        log.info("cannot write the snapshot cache %s: %s", path, exc)


def load_entries(path: Path, root: Path, snap: str) -> tuple[list[tuple[Any, ...]], int] | None:
    """The entries and depth `save_entries` kept for `snap`, or None."""
    try:
        doc = marshal.loads(path.read_bytes())
        if doc[:3] == (FORMAT, str(root), snap) and isinstance(doc[3], int):
            return list(doc[4]), doc[3]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, EOFError, TypeError, IndexError) as exc:
        log.info("snapshot cache %s unusable: %s", path, exc)
    return None


def cached_diff(stamp: dict[str, Any], tree: str, same_git: bool) -> str | None:
    """The last snapshot's code.diff, when HEAD, the index and every file are as they were
    then."""
    text = stamp.get("diff")
    return text if same_git and stamp.get("tree") == tree and isinstance(text, str) else None

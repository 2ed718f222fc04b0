"""Content-addressed code snapshots of a Git working tree.

The snapshot holds the tracked files plus the untracked files Git does not ignore, read from
the working tree as they are now (uncommitted edits included). Its hash covers paths, kinds
and contents; it names a manifest in the store (snapstore.py), whose packs hold each content
once: runs of an unchanged tree share one manifest, and a changed tree stores only the
contents that changed.

Only Git's read-only commands are used and files are only read: the repository is never
written. A private stat cache per repository (path -> mtime, ctime, size, inode, mode,
SHA-256, place in a pack) lets an unchanged file go unread, as Git's index does.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbit.errors import CorruptError, UsageError
from orbit.execute import snapcache
from orbit.execute.snapstore import (
    DELTA_SHARE,
    Entry,
    manifest_path,
    pack_path,
    read_manifest,
    write_manifest,
    write_pack,
)

log = logging.getLogger(__name__)

# A file modified this close to the moment it was hashed may change again within the same
# file system timestamp, unseen: its stat is not trusted (Git's "racily clean" entries). A
# time with a fraction of a second comes from a file system that keeps them (its clock ticks
# in milliseconds at most); a whole second may come from one that keeps 1 or 2 s (FAT).
RACY_FINE_NS = 100_000_000
RACY_COARSE_NS = 2_000_000_000


def _racy(st: os.stat_result, started_ns: int) -> bool:
    mtime = st.st_mtime_ns
    return mtime >= started_ns - (RACY_FINE_NS if mtime % 1_000_000_000 else RACY_COARSE_NS)


@dataclass
class Snapshot:
    root: Path
    commit: str | None
    dirty: bool
    hash: str
    files: int
    bytes: int
    diff: str
    stored: int = 0  # contents this snapshot had to store (0 for an unchanged tree)


def _git(root: Path, *args: str, check: bool = True) -> bytes:
    proc = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},  # never touch the index, even to refresh
    )
    if check and proc.returncode != 0:
        raise UsageError(proc.stderr.decode(errors="replace").strip().splitlines()[-1])
    return proc.stdout


def repo_root(path: Path) -> Path:
    return _locate(path)[0]


def _locate(path: Path) -> tuple[Path, Path, str | None]:
    """The repository's top-level directory, its index file and HEAD's commit (None in a
    repository without commits)."""
    if not path.is_dir():
        raise UsageError(f"project directory {path} does not exist")
    proc = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--show-toplevel", "--git-path", "index", "HEAD"],
        capture_output=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )
    lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) < 3:  # without commits Git fails on HEAD, after printing the rest
        raise UsageError(
            f"{path} is not inside a Git repository; use --project DIR, or --no-project to run "
            "without code"
        )
    top, index, head = lines[:3]
    commit = head if proc.returncode == 0 and len(head) in (40, 64) and head.isalnum() else None
    return Path(top), path / index, commit  # the index's path is relative to `path`, or absolute


# --- taking a snapshot -----------------------------------------------------------------------
def _start_git(
    root: Path, *args: str, index: str | None = None, settings: list[str] | None = None
) -> subprocess.Popen[bytes]:
    """`git [settings] -C root ARGS`, reading `index` in place of the repository's index."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    if index is not None:
        env["GIT_INDEX_FILE"] = index
    cmd = ["git", *(settings or []), "-C", str(root), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _private_index(index: Path, tmp: str) -> str:
    """A copy of the repository's index in `tmp`, for `git diff HEAD`: that command refreshes
    the index it reads and writes it back (GIT_OPTIONAL_LOCKS=0 does not stop it, Git 2.39),
    so it gets this copy, never the repository's own."""
    copy = os.path.join(tmp, "index")
    try:
        shutil.copyfile(index, copy)
    except FileNotFoundError:  # no index yet: Git reads the missing copy as an empty one
        pass
    return copy


def _output(proc: subprocess.Popen[bytes], check: bool = True) -> bytes:
    out, err = proc.communicate()
    if check and proc.returncode != 0:
        raise UsageError(err.decode(errors="replace").strip().splitlines()[-1])
    return out


# Git settings that weaken its stat check, held to their strict values for `git diff-files`.
_STRICT = [
    *("-c", "core.fileMode=true", "-c", "core.trustctime=true", "-c", "core.checkStat=default"),
    *("-c", "core.ignoreStat=false", "-c", "core.fsmonitor=false"),
]


def take(
    path: Path, snapshots_dir: Path, *, max_mb: float, cache_dir: Path | None = None
) -> Snapshot:
    """Snapshot the repository at `path` into `snapshots_dir`, storing only the contents it
    lacks. `cache_dir` holds the stat cache (none: every file is read).

    Whether anything changed since the repository's last snapshot (its stamp, snapcache.py)
    is decided the cheapest sure way: Git's own stat check (`git diff-files`, which reads the
    index and writes nothing) when the index is the one the stamp saw, else a stat of every
    file. Either way, only when something changed are files read."""
    root, index, head = _locate(path)
    started_ns = time.time_ns()
    tmp = tempfile.mkdtemp(prefix="orbit-snapshot-")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        stamp_file = snapcache.file_for(cache_dir, root, ".tree") if cache_dir is not None else None
        stamp = snapcache.load(stamp_file, root) if stamp_file is not None else {}
        index_key = _file_key(index)
        # Git's commands run side by side.
        procs = [
            _start_git(root, "ls-files", "-z", "--cached", "-v"),
            _start_git(root, "ls-files", "-z", "--others", "--exclude-standard"),
            _start_git(root, "diff-files", "-z", "--name-only", settings=_STRICT),
        ]
        git_tracked, git_others, git_dirty = procs
        # code.diff depends on HEAD, the index and the files: when the first two are as at the
        # last snapshot, the files decide (below) whether its diff is reused.
        same_git = bool(stamp) and stamp.get("head") == head and stamp.get("index") == index_key

        def start_diff() -> subprocess.Popen[bytes]:
            proc = _start_git(
                root, "diff", "--no-color", "--binary", "HEAD", index=_private_index(index, tmp)
            )
            procs.append(proc)
            return proc

        git_diff = start_diff() if head and not same_git else None
        others = _output(git_others).decode("utf-8", "surrogateescape").split("\0")
        untracked = [n for n in others if n]
        dirty_out = _output(git_dirty, check=False)
        dirty = None if git_dirty.returncode else dirty_out.decode("utf-8", "surrogateescape")
        # Files Git's check does not vouch for: the changed tracked ones and the untracked.
        watched = sorted({*(dirty or "").split("\0"), *untracked} - {""})
        watch = _keys(root, watched) if dirty is not None else None
        stats: list[tuple[str, os.stat_result]] = []
        known = (
            stamp.get("plain")
            and stamp.get("index") == index_key
            and watch is not None
            and isinstance(stamp.get("watch"), dict)
            and _manifest_size(snapshots_dir, stamp) is not None
        )  # the index as at a snapshot still stored, and Git vouches for the other files
        changed = _changed(stamp["watch"], watch) if known and watch is not None else None
        incremental = None
        # A few files changed since that snapshot (as few as its delta manifest may hold): only
        # they are read, on top of its manifest. Else every file is stat'ed (below).
        if changed and len(changed) <= DELTA_SHARE * max(int(stamp["files"]), 1):
            if head and git_diff is None:
                git_diff = start_diff()  # side by side with the reading of the changed files
            incremental = _take_changed(root, snapshots_dir, stamp, changed, max_mb, cache_dir)
        if changed == []:  # every file as at that snapshot, by Git's stat check
            tree, plain, unchanged = stamp["tree"], True, True
        elif incremental is not None:  # only the files Git's check did not vouch for were read
            snap_hash, files, total, stored, stats = incremental
            tree, plain, unchanged = _tree_after(stamp, watch or {}), True, False
        else:
            listing = _output(git_tracked).decode("utf-8", "surrogateescape").split("\0")
            # Plain entries only ("H"): Git's check skips assume-unchanged and skip-worktree
            # ones, so then every file is stat'ed here, every time.
            plain = all(e.startswith("H ") for e in listing if e)
            # Git's order (an unmerged path is listed once per stage); sorted when needed.
            stats = _stat_each(root, [n for n in dict.fromkeys(e[2:] for e in listing) if n])
            stats += _stat_each(root, untracked)
            tree = _digest(stats)
            unchanged = stamp.get("tree") == tree
            unchanged = unchanged and _manifest_size(snapshots_dir, stamp) is not None
        if unchanged:  # nothing changed since a snapshot still stored
            snap_hash, files, total, stored = stamp["snapshot"], stamp["files"], stamp["bytes"], 0
            _check_size(total, max_mb)
        elif incremental is None:
            snap_hash, files, total, stored = _take(
                root, snapshots_dir, stats, max_mb, cache_dir, started_ns
            )
        text = snapcache.cached_diff(stamp, tree, same_git)
        if text is None:
            if head and git_diff is None:
                git_diff = start_diff()
            text = _diff(root, _output(git_diff, check=False) if git_diff else b"", untracked)
        racy = any(_racy(st, started_ns) for _, st in stats)
        if stamp_file is not None and not racy:
            new = {"tree": tree, "snapshot": snap_hash, "files": files, "bytes": total}
            new.update(head=head, index=index_key, diff=text)
            new["manifest_size"] = _manifest_size(snapshots_dir, {"snapshot": snap_hash}, 0)
            new.update(plain=plain, watch=watch)
            if {**stamp, "format": None, "root": None} != {**new, "format": None, "root": None}:
                snapcache.save(stamp_file, root, new)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                proc.communicate()
        shutil.rmtree(tmp, ignore_errors=True)
    return Snapshot(root, head, bool(text or untracked), snap_hash, files, total, text, stored)


def _changed(before: dict[str, Any], now: dict[str, list[int] | None]) -> list[str]:
    """The paths whose stat differs between two `watch`es (the files Git's check did not vouch
    for then and now): with the index unchanged, every other file is as it was."""
    return sorted(n for n in {*before, *now} if before.get(n, 0) != now.get(n, 0))


def _tree_after(stamp: dict[str, Any], watch: dict[str, list[int] | None]) -> str:
    """The `tree` of a stamp after an incremental snapshot: not a digest of every file's stat
    (those were not stat'ed), but one no other tree has, for code.diff's reuse."""
    text = f"{stamp['tree']}\0{sorted(watch.items())}"
    return "w" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[1:]


def _take_changed(
    root: Path,
    snapshots_dir: Path,
    stamp: dict[str, Any],
    changed: list[str],
    max_mb: float,
    cache_dir: Path | None,
) -> tuple[str, int, int, int, list[tuple[str, os.stat_result]]] | None:
    """The snapshot of the tree as `stamp`'s snapshot with only the `changed` paths read
    again, stored as a manifest built on that one (its hash, files, bytes, contents stored,
    and the stats of the files read). None when that snapshot's entries cannot be read."""
    last = str(stamp["snapshot"])
    kept = None
    if cache_dir is not None:
        kept = snapcache.load_entries(snapcache.file_for(cache_dir, root, ".last"), root, last)
    if kept is not None:
        old, depth = [Entry(*e) for e in kept[0]], kept[1]
    else:
        try:
            old, depth = read_manifest(snapshots_dir, last)
        except (FileNotFoundError, CorruptError):
            return None
    by_path = dict(zip([e.path for e in old], old, strict=True))
    stats: list[tuple[str, os.stat_result]] = []
    total = int(stamp["bytes"])
    read: dict[str, bytes] = {}
    for name in changed:
        gone = by_path.pop(name, None)
        if gone is not None and gone.kind != "l":
            total -= gone.size
        try:
            st = os.lstat(f"{root}/{name}")
        except FileNotFoundError:
            continue  # deleted: not in the snapshot
        stats.append((name, st))
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(f"{root}/{name}")
            by_path[name] = Entry(name, "l", 0, int(st.st_mtime), target)
        elif stat.S_ISREG(st.st_mode):
            data = _read(root, name)
            sha = hashlib.sha256(data).hexdigest()
            read[sha] = data
            total += len(data)
            _check_size(total, max_mb)
            kind = "x" if st.st_mode & 0o111 else "f"
            by_path[name] = Entry(name, kind, len(data), int(st.st_mtime), sha)
        # directories (submodules) and other kinds are left out
    _check_size(total, max_mb)
    entries = sorted(by_path.values())
    snap_hash = snapshot_hash(entries)
    if _manifest_size(snapshots_dir, {"snapshot": snap_hash}, 0) is not None:
        return snap_hash, len(entries), total, 0, stats  # a tree already stored
    places = {e.ref: (e.pack, e.offset) for e in old if e.ref in read and e.pack}
    new = [data for sha, data in read.items() if sha not in places]
    pack_name = write_pack(snapshots_dir, new) if new else ""
    offset = 0
    for data in new:
        places[hashlib.sha256(data).hexdigest()] = (pack_name, offset)
        offset += len(data)
    for name, _ in stats:
        e = by_path.get(name)
        if e is not None and e.kind != "l":
            by_path[name] = e._replace(pack=places[e.ref][0], offset=places[e.ref][1])
    entries = sorted(by_path.values())
    depth = write_manifest(snapshots_dir, snap_hash, entries, total, (last, old, depth))
    if cache_dir is not None:
        entries_file = snapcache.file_for(cache_dir, root, ".last")
        snapcache.save_entries(entries_file, root, snap_hash, depth, entries)
    return snap_hash, len(entries), total, len(new), stats


def _keys(root: Path, names: list[str]) -> dict[str, list[int] | None]:
    """Each path's mode, mtime, ctime, size and inode (None: it does not exist)."""
    keys: dict[str, list[int] | None] = {}
    for name in names:
        try:
            st = os.lstat(f"{root}/{name}")
        except FileNotFoundError:
            keys[name] = None
            continue
        keys[name] = [st.st_mode, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]
    return keys


def _file_key(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _manifest_size(snapshots_dir: Path, stamp: dict[str, Any], expect: int = -1) -> int | None:
    """The size of the manifest `stamp` names; None when it is missing, or (unless `expect`
    is 0) not the size the stamp recorded (one emptied by a power cut is written again)."""
    try:
        size = manifest_path(snapshots_dir, str(stamp["snapshot"])).stat().st_size
    except (OSError, KeyError):
        return None
    return size if expect == 0 or size == stamp.get("manifest_size") else None


def _stat_each(root: Path, names: list[str]) -> list[tuple[str, os.stat_result]]:
    """Each of `names` that exists, with its lstat (a deleted file is not in the snapshot)."""
    prefix = f"{root}/"
    lstat = os.lstat
    stats = []
    for name in names:
        try:
            stats.append((name, lstat(prefix + name)))
        except FileNotFoundError:
            continue
    return stats


def _digest(stats: list[tuple[str, os.stat_result]]) -> str:
    """A digest of every path with its mode, mtime, ctime, size and inode: it changes whenever
    any file does."""
    text = "".join(
        [
            f"{n}\0{st.st_mode}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_size}\0{st.st_ino}\n"
            for n, st in stats
        ]
    )
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _take(
    root: Path,
    snapshots_dir: Path,
    stats: list[tuple[str, os.stat_result]],
    max_mb: float,
    cache_dir: Path | None,
    started_ns: int,
) -> tuple[str, int, int, int]:
    """Hash the tree, reading only the files the stat cache does not know as they are, and
    store what the store lacks: the snapshot's hash, files, bytes and contents stored."""
    cache_file = snapcache.file_for(cache_dir, root, ".json") if cache_dir is not None else None
    cache, last = snapcache.load_files(cache_file, root) if cache_file is not None else ({}, None)
    entries, unread, fresh, total = _scan(root, sorted(stats), cache, max_mb)
    read: dict[str, bytes] = {}
    for i, st in unread:
        entry = entries[i]
        data = _read(root, entry.path)
        sha = hashlib.sha256(data).hexdigest()
        read[sha] = data
        entries[i] = Entry(entry.path, entry.kind, len(data), entry.mtime, sha)
        total += len(data) - entry.size  # the file changed since its stat
        if not _racy(st, started_ns):
            fresh[entry.path] = [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]
            fresh[entry.path] += [st.st_mode, sha, "", 0]
    snap_hash = snapshot_hash(entries)
    stored = 0
    try:  # read whole, so that a manifest damaged by a power cut is written again
        _learn_places(fresh, read_manifest(snapshots_dir, snap_hash)[0])
    except (FileNotFoundError, CorruptError) as exc:  # a damaged manifest is written again
        if isinstance(exc, CorruptError):
            log.info("%s", exc)
        entries, stored = _store(root, snapshots_dir, entries, read, fresh)
        base = _base(snapshots_dir, last) if last != snap_hash else None
        depth = write_manifest(snapshots_dir, snap_hash, entries, total, base)
        if cache_dir is not None:
            entries_file = snapcache.file_for(cache_dir, root, ".last")
            snapcache.save_entries(entries_file, root, snap_hash, depth, entries)
    if cache_file is not None and (fresh != cache or last != snap_hash):
        snapcache.save(cache_file, root, {"last": snap_hash, "files": fresh})
    return snap_hash, len(entries), total, stored


def _check_size(total: int, max_mb: float) -> None:
    if total > max_mb * 1024 * 1024:
        raise UsageError(
            f"code snapshot is over {max_mb:g} MB; add data and weights to .gitignore and "
            "mount them: name a data folder once with `orbit data add NAME PATH` and run with "
            "-d NAME, or mount any path with -m SRC:DST; or use --no-snapshot"
        )


def _scan(
    root: Path, stats: list[tuple[str, os.stat_result]], cache: dict[str, list[Any]], max_mb: float
) -> tuple[list[Entry], list[tuple[int, os.stat_result]], dict[str, list[Any]], int]:
    """Stat every file: its entry (without `ref` when the cache does not know the file as it
    is), the files to read (index in the entries and stat), the cache entries still true, and
    the total size. Refuses a snapshot over `max_mb` before anything is read."""
    fresh: dict[str, list[Any]] = {}
    entries: list[Entry] = []
    unread: list[tuple[int, os.stat_result]] = []
    total = 0
    limit = max_mb * 1024 * 1024
    prefix = f"{root}/"
    is_link, is_reg = stat.S_ISLNK, stat.S_ISREG
    for name, st in stats:
        mode = st.st_mode
        if is_reg(mode):
            size = st.st_size
            total += size
            if total > limit:
                _check_size(total, max_mb)
            kind = "x" if mode & 0o111 else "f"
            known = cache.get(name)
            if (
                known is not None
                and known[0] == st.st_mtime_ns
                and known[1] == st.st_ctime_ns
                and known[2] == size
                and known[3] == st.st_ino
                and known[4] == mode
            ):
                fresh[name] = known
                entries.append(Entry(name, kind, size, int(st.st_mtime), known[5]))
            else:
                unread.append((len(entries), st))
                entries.append(Entry(name, kind, size, int(st.st_mtime), ""))
        elif is_link(mode):
            entries.append(Entry(name, "l", 0, int(st.st_mtime), os.readlink(prefix + name)))
        # directories (submodules) and other kinds are left out
    return entries, unread, fresh, total


def _read(root: Path, name: str) -> bytes:
    with open(f"{root}/{name}", "rb") as fh:
        return fh.read()


def snapshot_hash(entries: list[Entry]) -> str:
    """What `project.snapshot` names: SHA-256 over each entry's kind, path and object (or
    symlink target), in path order; 32 hex digits."""
    text = "".join([f"{e.kind} {e.path}\0{e.ref}\0" for e in entries])
    return hashlib.sha256(
        b"orbit-snapshot 1\0" + text.encode("utf-8", "surrogateescape")
    ).hexdigest()[:32]


def _store(
    root: Path,
    snapshots_dir: Path,
    entries: list[Entry],
    read: dict[str, bytes],
    fresh: dict[str, list[Any]],
) -> tuple[list[Entry], int]:
    """Place every file's content: where the cache says an earlier pack holds it, else in one
    new pack. The entries with their places, and how many contents were stored. A file the
    cache knows whose pack is gone is read again; should it no longer hash as the cache says
    (changed under the same stat), the snapshot is refused rather than stored wrong."""
    places: dict[str, tuple[str, int]] = {}
    packs: dict[str, bool] = {}
    for row in fresh.values():
        pack = row[6]
        if pack and pack not in packs:
            packs[pack] = pack_path(snapshots_dir, pack).is_file()
        if pack and packs[pack]:
            places[row[5]] = (pack, row[7])
    new: list[bytes] = []
    offsets: dict[str, int] = {}
    size = 0
    placed: list[Entry] = []
    for e in entries:
        if e.kind == "l":
            placed.append(e)
            continue
        if e.ref not in places and e.ref not in offsets:
            data = read.get(e.ref)
            if data is None:
                data = _read(root, e.path)
                if hashlib.sha256(data).hexdigest() != e.ref:
                    raise UsageError(f"{e.path} changed while it was being snapshotted; try again")
            offsets[e.ref] = size
            new.append(data)
            size += len(data)
        pack, offset = places.get(e.ref) or ("", offsets[e.ref])
        placed.append(e._replace(pack=pack, offset=offset))
    if new:
        name = write_pack(snapshots_dir, new)
        placed = [e._replace(pack=name) if e.kind != "l" and not e.pack else e for e in placed]
    _learn_places(fresh, placed)
    return placed, len(new)


def _learn_places(fresh: dict[str, list[Any]], entries: list[Entry]) -> None:
    """Note in the cache where each file's content is."""
    for e in entries:
        row = fresh.get(e.path)
        if row is not None and row[5] == e.ref and e.pack:
            row[6], row[7] = e.pack, e.offset


def _base(snapshots_dir: Path, last: str | None) -> tuple[str, list[Entry], int] | None:
    """The repository's previous snapshot, which a new manifest may build on."""
    if last is None:
        return None
    try:
        entries, depth = read_manifest(snapshots_dir, last)
    except (FileNotFoundError, CorruptError):
        return None
    return last, entries, depth


def describe_mount(path: Path) -> dict[str, object]:
    """What a read-only mounted repository was at submit time (no snapshot is taken)."""
    root = repo_root(path)
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).decode().strip() or None
    status = _git(root, "status", "--porcelain", check=False)
    return {"mode": "mount", "path": str(root), "commit": head, "dirty": bool(status.strip())}


def _diff(root: Path, tracked: bytes, untracked: list[str]) -> str:
    """Uncommitted changes: tracked edits against HEAD (`tracked`, Git's diff) plus untracked
    files as new files."""
    parts = [tracked]
    for name in untracked:
        parts.append(
            _git(
                root,
                "diff",
                "--no-color",
                "--binary",
                "--no-index",
                "--",
                "/dev/null",
                name,
                check=False,
            )
        )
    return b"".join(parts).decode("utf-8", "replace")

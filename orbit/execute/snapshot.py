"""Content-addressed code snapshots of a Git working tree.

The snapshot holds the tracked files plus the untracked files Git does not ignore, read from
the working tree as they are now (uncommitted edits included). Its hash covers paths, modes and
contents, so an unchanged tree is stored once as `snapshots/<hash>.tar` and shared by runs.
Only Git's read-only commands are used: the repository is never written to.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from orbit.errors import UsageError
from orbit.store.files import atomic_write


@dataclass
class Snapshot:
    root: Path
    commit: str | None
    dirty: bool
    hash: str
    files: int
    bytes: int
    diff: str


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
    if not path.is_dir():
        raise UsageError(f"project directory {path} does not exist")
    proc = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )
    if proc.returncode != 0:
        raise UsageError(
            f"{path} is not inside a Git repository; use --project DIR, or --no-project to run "
            "without code"
        )
    return Path(proc.stdout.strip())


def take(path: Path, snapshots_dir: Path, *, uid: int, gid: int, max_mb: float) -> Snapshot:
    root = repo_root(path)
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    names = sorted({n for n in listed.decode("utf-8", "surrogateescape").split("\0") if n})
    digest = hashlib.sha256()
    entries: list[tuple[str, os.stat_result, bytes | None]] = []
    total = 0
    for name in names:
        full = root / name
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            continue  # deleted in the working tree: not part of the snapshot
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(full)
            digest.update(f"L {name}\0{target}\0".encode("utf-8", "surrogateescape"))
            entries.append((name, st, target.encode("utf-8", "surrogateescape")))
        elif stat.S_ISREG(st.st_mode):
            data = full.read_bytes()
            total += len(data)
            if total > max_mb * 1024 * 1024:
                raise UsageError(
                    f"code snapshot is over {max_mb:g} MB; add data and weights to .gitignore "
                    "and mount them with -m, or use --no-snapshot"
                )
            mode = "x" if st.st_mode & 0o111 else "f"
            digest.update(f"{mode} {name}\0{len(data)}\0".encode("utf-8", "surrogateescape"))
            digest.update(data)
            entries.append((name, st, data))
        # directories (submodules) and other kinds are left out
    snap_hash = digest.hexdigest()[:32]
    snapshots_dir.mkdir(parents=True, exist_ok=True)
    tar_path = snapshots_dir / f"{snap_hash}.tar"
    if not tar_path.exists():
        atomic_write(tar_path, _tar(entries, uid, gid), durable=False)
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).decode().strip() or None
    diff = _diff(root, head)
    untracked = _git(root, "ls-files", "-z", "--others", "--exclude-standard")
    return Snapshot(root, head, bool(diff or untracked), snap_hash, len(entries), total, diff)


def describe_mount(path: Path) -> dict[str, object]:
    """What a read-only mounted repository was at submit time (no snapshot is taken)."""
    root = repo_root(path)
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).decode().strip() or None
    status = _git(root, "status", "--porcelain", check=False)
    return {"mode": "mount", "path": str(root), "commit": head, "dirty": bool(status.strip())}


def _tar(entries: list[tuple[str, os.stat_result, bytes | None]], uid: int, gid: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        made: set[str] = set()

        def add_dir(path: str) -> None:
            if path in made:
                return
            parent = path.rpartition("/")[0]
            if parent:
                add_dir(parent)
            info = tarfile.TarInfo(path)
            info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, uid, gid
            tar.addfile(info)
            made.add(path)

        add_dir("workspace")
        for name, st, data in entries:
            arcname = f"workspace/{name}"
            add_dir(arcname.rpartition("/")[0])
            info = tarfile.TarInfo(arcname)
            info.uid, info.gid, info.mtime = uid, gid, int(st.st_mtime)
            if stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = (data or b"").decode("utf-8", "surrogateescape")
                tar.addfile(info)
            else:
                info.mode = 0o755 if st.st_mode & 0o111 else 0o644
                info.size = len(data or b"")
                tar.addfile(info, io.BytesIO(data or b""))
    return buf.getvalue()


def _diff(root: Path, head: str | None) -> str:
    """Uncommitted changes: tracked edits against HEAD plus untracked files as new files."""
    parts = []
    if head:
        parts.append(_git(root, "diff", "--no-color", "--binary", "HEAD", check=False))
    untracked = _git(root, "ls-files", "-z", "--others", "--exclude-standard")
    for name in untracked.decode("utf-8", "surrogateescape").split("\0"):
        if name:
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

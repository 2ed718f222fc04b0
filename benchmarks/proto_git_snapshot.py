"""Prototype: the code snapshot on Git's own machinery, timed beside Orbit's store.

Issue 27, item 1 asks whether a private Git index (GIT_INDEX_FILE) and an object directory
under ORBIT_HOME (GIT_OBJECT_DIRECTORY, the repository's objects as an alternate) would make
snapshots faster and simpler than Orbit's own store (snapshot.py, snapstore.py, snapcache.py).
This script takes the same snapshot that way, of bench_snapshot.py's repository, and times it
beside `snapshot.take` and `git status --porcelain` in the same repeats:

    first     a fresh private index and object directory; `git add -A` (tracked files and
              the untracked ones Git does not ignore), `git write-tree`, and code.diff
              (`git diff --cached --binary HEAD` of the private index). `seeded`: the private
              index starts as a copy of the repository's (its stat cache and objects reused);
              `empty`: from nothing, every file hashed and written as a loose object
    second    nothing changed: the same three commands again
    edited    after a one-line edit of one file
    restore   the tree as a tar (`git archive`), against Orbit's tar from its packs
              (workspace.Source.stream), both read to the end

It is a measurement, not a code path: nothing here is used by Orbit. Last line: the seeded
Git way's edited snapshot over Orbit's, `git: X.XX`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from bench_snapshot import MAX_MB, edit, git_status, make_repo, timed

sys.path.insert(0, str(common.REPO))
from orbit.execute import snapshot, snapstore, workspace
from orbit.store.files import set_umask

PROG = "proto_git_snapshot"


class GitStore:
    """One repository's snapshots in a private index and object directory under `home`."""

    def __init__(self, repo: Path, home: Path, seeded: bool) -> None:
        self.repo, self.home, self.seeded = repo, home, seeded
        git_dir = repo / ".git"
        self.env = {
            **os.environ,
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_INDEX_FILE": str(home / "index"),
            "GIT_OBJECT_DIRECTORY": str(home / "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(git_dir / "objects"),
        }
        (home / "objects").mkdir(parents=True)
        if seeded and (git_dir / "index").exists():
            shutil.copyfile(git_dir / "index", home / "index")

    def git(self, *args: str) -> bytes:
        # The repository's own settings may weaken the snapshot (core.fileMode=false loses the
        # executable bit); they are held to Orbit's.
        cmd = ["git", "-c", "core.fileMode=true", "-C", str(self.repo), *args]
        return subprocess.run(cmd, check=True, capture_output=True, env=self.env).stdout

    def take(self) -> tuple[str, str]:
        """The snapshot's tree and its code.diff."""
        self.git("add", "-A")
        tree = self.git("write-tree").decode().strip()
        diff = self.git("diff", "--cached", "--no-color", "--binary", "HEAD").decode(
            "utf-8", "replace"
        )
        return tree, diff

    def restore(self, tree: str) -> int:
        """The tree as a tar, read to the end: its size."""
        cmd = ["git", "-C", str(self.repo), "archive", "--format=tar", tree]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=self.env)
        assert proc.stdout is not None
        size = 0
        while chunk := proc.stdout.read(1 << 20):
            size += len(chunk)
        if proc.wait():
            raise SystemExit(f"{PROG}: git archive failed")
        return size


def orbit_take(repo: Path, home: Path) -> str:
    return snapshot.take(repo, home / "snapshots", max_mb=MAX_MB, cache_dir=home / "cache").hash


def orbit_restore(store: Path, snap: str) -> int:
    entries, _ = snapstore.read_manifest(store / "snapshots", snap)
    source = workspace.Source(snap, None, store / "snapshots", entries)
    return sum(len(c) for c in source.stream(os.getuid(), os.getgid()))


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000, help="files in the repository")
    parser.add_argument("--repeats", type=int, default=5, help="alternated repeats (+1 warm-up)")
    args = parser.parse_args()
    print(f"{PROG}: {__doc__.splitlines()[0]}")
    print(common.machine(load=True))
    set_umask(0o077)
    tmp = Path(tempfile.mkdtemp(prefix="orbit-proto-git-"))
    kinds = ("orbit", "git seeded", "git empty")
    times: dict[str, dict[str, list[float]]] = {
        k: {"first": [], "second": [], "edited": [], "restore": [], "bytes": []} for k in kinds
    }
    status_times: list[float] = []
    try:
        repo = tmp / "repo"
        make_repo(repo, args.files)
        edits = 0
        for n in range(args.repeats + 1):  # round 0 warms up
            row: dict[str, dict[str, float]] = {}
            for kind in kinds:
                home = tmp / f"home-{n}-{kind.replace(' ', '-')}"
                take: Callable[[], str]
                restore: Callable[[str], int]
                if kind == "orbit":
                    take = partial(orbit_take, repo, home)
                    restore = partial(orbit_restore, home)
                else:
                    git = GitStore(repo, home, seeded=kind == "git seeded")
                    take = partial(lambda git: git.take()[0], git)
                    restore = git.restore
                first, a = timed(take)
                second, b = timed(take)
                assert a == b, f"{kind}: an unchanged tree gave another snapshot"
                before = du(home)
                edits += 1
                edit(repo, edits, args.files)
                edited, c = timed(take)
                added = du(home) - before
                restored, _ = timed(partial(restore, c))
                row[kind] = {
                    "first": first,
                    "second": second,
                    "edited": edited,
                    "restore": restored,
                    "bytes": added,
                }
                shutil.rmtree(home)
            status, _ = timed(lambda: git_status(repo))
            if n == 0:
                continue
            status_times.append(status)
            for kind, values in row.items():
                for key, value in values.items():
                    times[kind][key].append(value)
        print(f"repository: {args.files:,} files; repeats: {args.repeats} (+1 warm-up)")
        print(common.ms_header(24))
        for kind in kinds:
            for key in ("first", "second", "edited", "restore"):
                print(common.ms_row(f"{kind} {key}", times[kind][key], 24))
        print(common.ms_row("git status", status_times, 24))
        status = statistics.median(status_times)
        for kind in kinds:
            med = {k: statistics.median(v) for k, v in times[kind].items()}
            print(
                f"{kind}: edited/git status {med['edited'] / status:.2f}, "
                f"second/git status {med['second'] / status:.2f}, "
                f"edit stored {int(med['bytes']):,} bytes"
            )
        git_edit = statistics.median(times["git seeded"]["edited"])
        print(f"git: {git_edit / statistics.median(times['orbit']['edited']):.2f} (seeded, edited)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

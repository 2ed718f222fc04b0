"""Code snapshots: `orbit run`'s snapshot of an edited or unchanged repository over `git status`.

Generates a Git repository of --files files (about 1 KB each, so 20 MB for 20,000, in
folders of 50, with a symlink and an executable), dates its files an hour back and commits it
(a file changed just before a snapshot is read again by the next, see "racily clean" in
snapshot.py). Each repeat then uses a fresh snapshot store and stat cache
and times, in process, `snapshot.take` as `orbit run` calls it:

    first    the store and cache are empty: every file is read and stored
    second   nothing changed
    edited   one line of one file changed (a different file each repeat)

and prints the bytes the edit added to the store. `git status --porcelain` of the same
repository (with GIT_OPTIONAL_LOCKS=0, as the snapshot's Git commands: it does not write the
index back) is timed in every repeat, right after the edited snapshot. With --baseline-ref
REF the snapshot.py of that Git ref (e.g. the code before the object store) is timed in the
same repeats, alternated with this checkout's. A 1-file repository's first snapshot is timed
the same way (it must not get slower). With --docker, the shepherd's copy into a created
container is timed too: the snapshot as a prebuilt tar file (what the shepherd sent before)
against the tar made on the fly from the objects, alternated.

Also prints second/first (target ≤ 0.1) and second/`git status` (target ≤ 1.5). Last line:
`ratio: X (target ≤ 2)`, the median edited snapshot over the median `git status`.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

sys.path.insert(0, str(common.REPO))
from orbit.execute import snapshot
from orbit.store.files import set_umask

PROG = "bench_snapshot"
MAX_MB = 500.0


def make_repo(root: Path, files: int, extras: bool = True, seed: int = 1) -> None:
    rnd = random.Random(seed)
    root.mkdir(parents=True)
    for i in range(files):
        folder = root / f"pkg{i // 500:03d}" / f"sub{(i // 50) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = "".join(f"value_{i}_{j} = {rnd.random()!r}  # line {j}\n" for j in range(24))
        (folder / f"mod{i:05d}.py").write_text(lines)
    if extras:
        (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
        (root / "run.sh").chmod(0o755)
        (root / "link.py").symlink_to("run.sh")
    hour_ago = time.time() - 3600  # before `git add`, so that Git's index holds these times
    for folder, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(folder, name), (hour_ago, hour_ago), follow_symlinks=False)
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)


def load_ref(ref: str, tmp: Path) -> ModuleType:
    """snapshot.py as it was at Git ref `ref` of this checkout, imported as its own module."""
    proc = subprocess.run(
        ["git", "-C", str(common.REPO), "show", f"{ref}:orbit/execute/snapshot.py"],
        capture_output=True,
    )
    if proc.returncode:
        raise SystemExit(f"{PROG}: {proc.stderr.decode().strip()}")
    path = tmp / "snapshot_baseline.py"
    path.write_bytes(proc.stdout)
    spec = importlib.util.spec_from_file_location("snapshot_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def taker(module: ModuleType, store: Path) -> Callable[[Path], Any]:
    """`take` of `module` into `store` (its stat cache beside it), whatever its signature."""
    params = inspect.signature(module.take).parameters
    kwargs: dict[str, Any] = {"max_mb": MAX_MB}
    if "uid" in params:
        kwargs.update(uid=os.getuid(), gid=os.getgid())
    if "cache_dir" in params:
        kwargs["cache_dir"] = store / "cache"
    return lambda repo: module.take(repo, store / "snapshots", **kwargs)


def stored_bytes(store: Path) -> int:
    return sum(p.stat().st_size for p in store.rglob("*") if p.is_file())


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def git_status(repo: Path) -> None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    cmd = ["git", "-C", str(repo), "status", "--porcelain"]
    subprocess.run(cmd, check=True, capture_output=True, env=env)


def edit(repo: Path, n: int, files: int) -> None:
    i = (n * 7919) % files
    path = repo / f"pkg{i // 500:03d}" / f"sub{(i // 50) % 10}" / f"mod{i:05d}.py"
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = f"edited_{n} = {n}\n"
    path.write_text("".join(lines))


def bench_repo(
    repo: Path, files: int, versions: dict[str, ModuleType], repeats: int, tmp: Path
) -> dict[str, dict[str, list[float]]]:
    """For each version: first, second and edited times per repeat, and the edit's bytes."""
    out: dict[str, dict[str, list[float]]] = {
        v: {"first": [], "second": [], "edited": [], "edit_bytes": [], "stored": [], "status": []}
        for v in versions
    }
    edits = 0
    for n in range(repeats + 1):  # round 0 warms up (file system caches, imports)
        for name, module in versions.items():
            store = tmp / f"store-{name}-{n}"
            take = taker(module, store)
            first, a = timed(lambda take=take: take(repo))
            second, b = timed(lambda take=take: take(repo))
            assert a.hash == b.hash, "an unchanged tree gave another snapshot"
            before = stored_bytes(store / "snapshots")
            edits += 1
            edit(repo, edits, files)
            edited, c = timed(lambda take=take: take(repo))
            status, _ = timed(lambda: git_status(repo))
            added = stored_bytes(store / "snapshots") - before
            shutil.rmtree(store)
            if n == 0:
                continue
            row = out[name]
            row["first"].append(first)
            row["second"].append(second)
            row["edited"].append(edited)
            row["status"].append(status)
            row["edit_bytes"].append(added)
            row["stored"].append(getattr(c, "stored", -1))
    return out


def report(title: str, results: dict[str, dict[str, list[float]]]) -> None:
    print(f"\n{title}")
    print(common.ms_header(24))
    for name, row in results.items():
        for key in ("first", "second", "edited", "status"):
            print(common.ms_row(f"{name} {key}", row[key], 24))
    for name, row in results.items():
        first = statistics.median(row["first"])
        status = statistics.median(row["status"])
        print(
            f"{name}: second/first {statistics.median(row['second']) / first:.3f}, "
            f"edited/first {statistics.median(row['edited']) / first:.3f}, "
            f"edited/status {statistics.median(row['edited']) / status:.2f}, "
            f"second/status {statistics.median(row['second']) / status:.2f}, "
            f"edit stored {int(statistics.median(row['edit_bytes'])):,} bytes"
            + (
                f" ({int(statistics.median(row['stored']))} contents stored)"
                if row["stored"][0] >= 0
                else ""
            )
        )


def bench_copy(repo: Path, image: str, repeats: int, tmp: Path) -> None:
    """put_archive into a created container: a tar file against the stream from objects."""
    import docker

    from orbit.execute import snapstore, workspace

    store = tmp / "store-copy"
    snap = taker(snapshot, store)(repo)
    entries, _ = snapstore.read_manifest(store / "snapshots", snap.hash)
    source = workspace.Source(snap.hash, None, store / "snapshots", entries)
    tar = tmp / "prebuilt.tar"
    tar.write_bytes(b"".join(source.stream(os.getuid(), os.getgid())))
    client = docker.from_env()
    times: dict[str, list[float]] = {"tar file": [], "from objects": []}

    def copy(kind: str) -> float:
        container = client.containers.create(image, ["true"], labels={"orbit.bench": "1"})
        try:
            t0 = time.perf_counter()
            if kind == "tar file":
                with open(tar, "rb") as fh:
                    container.put_archive("/", fh)
            else:
                container.put_archive("/", source.stream(os.getuid(), os.getgid()))
            return time.perf_counter() - t0
        finally:
            container.remove(force=True)

    for kind in times:
        copy(kind)  # warm-up
    for _ in range(repeats):
        for kind in times:
            times[kind].append(copy(kind))
    print(f"\nshepherd's copy into /workspace ({snap.files} files, {snap.bytes:,} bytes)")
    print(common.ms_header(24))
    for kind, values in times.items():
        print(common.ms_row(kind, values, 24))
    ratio = statistics.median(times["from objects"]) / statistics.median(times["tar file"])
    print(f"from objects / tar file: {ratio:.2f} (target ≤ 1)")


def main() -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000, help="files in the repository")
    parser.add_argument("--repeats", type=int, default=7, help="alternated repeats (+1 warm-up)")
    parser.add_argument("--baseline-ref", help="also time snapshot.py of this Git ref")
    parser.add_argument("--docker", action="store_true", help="also time the shepherd's copy")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    common.add_image_option(parser)
    args = parser.parse_args()
    if args.docker:
        common.require_docker(args.image, PROG)
    print(f"{PROG}: {__doc__.splitlines()[0]}")
    print(common.machine(docker=args.docker, load=True))
    set_umask(0o077)  # as `orbit run` does for a private home (Home.apply_umask)
    tmp = Path(tempfile.mkdtemp(prefix="orbit-bench-snapshot-"))
    try:
        versions: dict[str, ModuleType] = {"orbit": snapshot}
        if args.baseline_ref:
            versions = {args.baseline_ref: load_ref(args.baseline_ref, tmp), "orbit": snapshot}
        make_repo(tmp / "small", 1, extras=False)
        t0 = time.perf_counter()
        make_repo(tmp / "repo", args.files)
        print(f"repository: {args.files:,} files, made in {time.perf_counter() - t0:.1f} s")
        print(f"versions: {', '.join(versions)}; repeats: {args.repeats} (+1 warm-up)")
        report("1-file repository", bench_repo(tmp / "small", 1, versions, args.repeats, tmp))
        results = bench_repo(tmp / "repo", args.files, versions, args.repeats, tmp)
        report(f"{args.files:,}-file repository", results)
        if args.docker:
            bench_copy(tmp / "repo", args.image, args.repeats, tmp)
        row = results["orbit"]
        status = statistics.median(row["status"])
        second = statistics.median(row["second"])
        print(f"second/first: {second / statistics.median(row['first']):.3f} (target ≤ 0.1)")
        print(f"unchanged: second/git status {second / status:.2f} (target ≤ 1.5)")
        print(common.ratio_line(statistics.median(row["edited"]) / status, 2))
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Server time of the runs list as a sweep table over a large history, cold and warm.

It fills a temporary ORBIT_HOME with finished runs (10,000 by default, written as bench_ps.py
writes them, each with sweep params `lr`, `seed`, `opt` and a metrics.jsonl of 50 lines × 3 keys
with the shepherd's metrics.summary.json), then times GET of each path below in-process (a
plain WSGI call with the X-Orbit-Token header): *cold*, the first request of a fresh Python
process (nothing cached but the OS's page cache), the median of COLD_PROCESSES processes; *warm*,
the median of N repeats after it in the same process.

    /                                   the default view (the 50 newest runs)
    /?where=lr<1e-3                     a param expression over every run
    /?where=loss<0.3                    a metric expression: every run's summary is read
    /?metric=loss&stat=final&stat=min&sort=final:loss   sorted by a metric over every run
    /?group=sweep-7&metric=loss&metric=acc              one sweep with two metric columns

`--tree DIR` times another checkout's orbit/ against the same home (e.g. an export of the
commit before this table: `git archive b62a245 | tar -x -C DIR`); paths it does not know are
then plain lists. Standalone: `python benchmarks/bench_table.py [--runs N] [--repeats N]`; no
Docker.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P

import bench_ps
from common import REPO, machine

sys.path.insert(0, str(REPO))

from orbit.review.series import Follower
from orbit.review.sidecar import SIDECAR
from orbit.store.home import Home
from orbit.web.context import load_or_create_token

COLD_PROCESSES = 3
PATHS = (
    "/",
    "/?where=lr<1e-3",
    "/?where=loss<0.3",
    "/?metric=loss&stat=final&stat=min&sort=final:loss",
    "/?group=sweep-7&metric=loss&metric=acc",
)
# One fresh process: build the app from TREE, GET the path once (cold), then N more (warm).
CHILD = """
import json, sys, time
tree, bench, home, token, path, repeats = sys.argv[1:7]
sys.path.insert(0, tree)
from orbit.store.home import Home
from orbit.web.app import make_app  # from TREE: bench_web below finds orbit already imported
sys.path.insert(0, bench)
from bench_web import wsgi_get
app = make_app(Home.from_environ({"ORBIT_HOME": home}))
_, body, cold = wsgi_get(app, path, token)
warm = [wsgi_get(app, path, token)[2] for _ in range(int(repeats))]
print(json.dumps({"cold": cold, "warm": warm, "bytes": len(body)}))
"""


def spec_with_params(i: int, rng: random.Random) -> dict[str, Any]:
    spec = ORIGINAL_SPEC(i, rng)
    lr, seed = spec["command"][3], spec["command"][5]
    spec["params"] = {"lr": lr, "seed": seed, "opt": "sgd" if i % 3 else "adam"}
    return spec


ORIGINAL_SPEC = bench_ps.spec_for


def sidecars(home: Home) -> str:
    """A metrics file and the shepherd's sidecar for every run (written afresh)."""
    t0 = time.perf_counter()
    rng = random.Random(2)
    for run_dir in sorted(home.runs_dir.iterdir()):
        path = run_dir / "metrics.jsonl"
        scale = rng.uniform(0.1, 2.0)
        with open(path, "w") as fh:
            for step in range(1, 51):
                line = {"step": step, "loss": scale / step, "acc": 1 - scale / (step + 1)}
                fh.write(json.dumps(line) + "\n")
        path.with_name(SIDECAR).unlink(missing_ok=True)
        Follower(path).update()
    return f"metrics and sidecars written in {time.perf_counter() - t0:.1f} s"


def time_path(tree: Path, home: Path, token: str, path: str, repeats: int) -> dict[str, Any]:
    """Cold: the median over COLD_PROCESSES fresh processes; warm: the median of their repeats."""
    colds: list[float] = []
    warms: list[float] = []
    size = 0
    for _ in range(COLD_PROCESSES):
        argv = [str(tree), str(Path(__file__).parent), str(home), token, path, str(repeats)]
        out = subprocess.run(
            [sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, check=False
        )
        if out.returncode != 0:
            raise SystemExit(f"bench_table: GET {path} failed:\n{out.stderr}")
        got = json.loads(out.stdout.strip().splitlines()[-1])
        colds.append(got["cold"])
        warms.extend(got["warm"])
        size = got["bytes"]
    return {"cold": statistics.median(colds), "warm": statistics.median(warms), "bytes": size}


def main() -> int:
    parser = argparse.ArgumentParser(description="Server time of the runs list as a table.")
    parser.add_argument("--runs", type=int, default=10_000, help="runs in the home (10,000)")
    parser.add_argument("--repeats", type=int, default=5, help="warm requests per process (5)")
    parser.add_argument("--tree", type=Path, action="append", default=[], help="also time DIR")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home")
    parser.add_argument(
        "--home", type=Path, help="a home an earlier --keep left (its sidecars are rewritten)"
    )
    args = parser.parse_args()
    if args.runs < 1 or args.repeats < 1:
        parser.error("--runs and --repeats must be at least 1")
    print("bench_table: the runs list as a sweep table, cold and warm")
    print(machine(load=True))
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-table-"))
    try:
        if args.home:
            home = Home.from_environ({"ORBIT_HOME": str(args.home.resolve())})
            print(f"history: {args.home}; {sidecars(home)}")
        else:
            home = Home.from_environ({"ORBIT_HOME": str(scratch / "home")})
            bench_ps.spec_for = spec_with_params
            print(f"history: {bench_ps.fill(home, args.runs)}; {sidecars(home)}")
        token = load_or_create_token(home)
        for tree in [REPO, *args.tree]:
            print(f"\n== {tree} ==")
            print(f"{'GET':<54}{'cold ms':>10}{'warm ms':>10}{'KB':>8}")
            for path in PATHS:
                t = time_path(tree.resolve(), home.root, token, path, args.repeats)
                print(
                    f"{path:<54}{t['cold'] * 1000:>10.0f}{t['warm'] * 1000:>10.0f}"
                    f"{t['bytes'] / 1000:>8.0f}"
                )
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

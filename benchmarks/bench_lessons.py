#!/usr/bin/env python3
"""Latency of `orbit lessons -g GROUP` over a 10,000-run group, first call and warm call,
against a bare interpreter start and a plain read of index.jsonl.

It fills a temporary ORBIT_HOME the way bench_ps.py does (its `fill`: RunStore.create with
the final status, events, exit.json and leftover files of a finished run), with every run in
one group `bench` and params `lr` × `seed` (a sweep of 10,000 runs: the worst case for one
digest). Each run then gets a metrics.jsonl of 50 lines (`step`, `loss`), each failed run an
`error_excerpt` (a traceback whose last line names one of three causes; RunStore.update, as
settling writes it), every 100th run a note, and the group one note. Then it times

    python orbit.py lessons -g bench   first call: no cache file (it is deleted before each)
    python orbit.py lessons -g bench   warm: the cache is current, nothing changed
    python orbit.py ps -a              the listing every command pays (index.jsonl, a stat a run)
    python -c pass                     the floor: interpreter start and exit
    read index.jsonl                   python -c: json.loads of every line of the index

the first calls before the rest (each takes seconds: every run's run.yaml and status.yaml are
parsed), then the others alternated after one warm-up each, and prints the medians, p90s, each
over `-c pass`, and last `ratio: X.XX (target ≤ 3)`: warm over `ps -a`. The issue's target is
absolute, a warm call under a second; the line before the ratio says whether it was met.

With two sizes, `--runs 10000,100000 --home DIR` takes the homes bench_ps.py filled (`bench_ps.py
--home DIR --runs 10000,100000`: DIR/10000 and DIR/100000, whose runs are never written; Orbit
writes only its caches there) and times, alternated between the homes,

    python orbit.py lessons -g G       warm (G: --group, default sweep-7, a sweep of 28 runs, 4
    python orbit.py failures -g G      failed, the same runs in both homes: the history grows, the
    python -c pass                     question does not)

and prints each command's larger-home median over its smaller-home one; the last line is the
larger of the two, `ratio: X.XX (target ≤ 1.5)`.

Standalone: `python benchmarks/bench_lessons.py [--runs N[,M]] [--repeats N] [--home DIR]`; no
Docker needed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, bench_ps.py

import bench_ps
from common import (
    REPO,
    add_orbit_options,
    alternate,
    child_environ,
    machine,
    ms_header,
    ms_row,
    ratio_line,
    setup_lines,
    timed,
)

TARGET = 3.0  # warm over `orbit ps -a`: the same listing, plus one stat a run and the digest
TARGET_GROWTH = 1.5  # 100,000 finished runs over 10,000, the same group
ABSOLUTE_S = 1.0
GROUP = "bench"
sys.path.insert(0, str(REPO))

from orbit.review.lessons import Scope, cache_path  # noqa: E402
from orbit.store.files import append_jsonl  # noqa: E402
from orbit.store.home import Home  # noqa: E402
from orbit.store.notes import add_group_note  # noqa: E402
from orbit.store.runs import RunStore  # noqa: E402

LRS = ("1e-4", "3e-4", "1e-3", "3e-3", "1e-2")
CAUSES = (
    "FloatingPointError: loss diverged to 4.3e+07 at step 4",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-17.npy'",
)
_sweep_spec = bench_ps.spec_for


def spec_for(i: int, rng: random.Random) -> dict[str, Any]:
    """bench_ps's request, in one group with the params of an lr × seed sweep."""
    spec = _sweep_spec(i, rng)
    lr, seed = LRS[i % len(LRS)], str(i // len(LRS) % 20)
    spec.update(group=GROUP, params={"lr": lr, "seed": seed}, name=f"lr{lr}-s{seed}-{i}")
    return spec


def fill(home: Home, n_runs: int) -> str:
    bench_ps.spec_for = spec_for  # fill() writes every run from this request
    account = bench_ps.fill(home, n_runs)
    store = RunStore(home)
    rng = random.Random(2)
    failed = 0
    for row in store.list_rows():
        assert isinstance(row, dict)
        run_id, state = row["id"], row["state"]
        run_dir = store.run_dir(run_id)
        floor = 0.1 + int(run_id) % len(LRS) * 0.05  # run i has lr LRS[i % 5] (bar run 1)
        lines = "".join(
            json.dumps({"step": s, "loss": floor + 2.0 / s + rng.random() * 0.01}) + "\n"
            for s in range(1, 51)
        )
        (run_dir / "metrics.jsonl").write_text(lines)
        if state == "failed":
            failed += 1
            cause = CAUSES[int(run_id) % len(CAUSES)]
            excerpt = f'Traceback (most recent call last):\n  File "train.py", line 12\n{cause}'
            store.update(run_id, lambda _r, e=excerpt: {"error_excerpt": e}, actor="bench")
        if int(run_id) % 100 == 0:
            append_jsonl(run_dir / "notes.jsonl", {"time": row["finished_at"], "author": "bench",
                                                   "text": f"looked at run {run_id}"})  # fmt: skip
    add_group_note(home, GROUP, "lr=1e-4 is the best so far; 1e-2 diverges", "bench")
    return f"{account}; metrics for each, {failed} error excerpts, notes on every 100th"


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Time `orbit lessons -g` over one group of many finished runs (first and "
        "warm call) against `python -c pass` and a plain read of index.jsonl.",
    )
    parser.add_argument(
        "--runs",
        default="10000",
        help="runs in the group (10,000); two sizes N,M: the group --group of the homes "
        "DIR/N and DIR/M that bench_ps.py --home DIR filled",
    )
    parser.add_argument("--group", default="sweep-7", help="with two sizes (sweep-7)")
    parser.add_argument("--repeats", type=int, default=15, help="timed warm calls (15)")
    parser.add_argument("--first", type=int, default=3, help="timed first calls (3)")
    parser.add_argument("--home", type=Path, help="use this ORBIT_HOME (filled when empty; kept)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary ORBIT_HOME")
    add_orbit_options(parser)
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.runs.split(",")]
    except ValueError:
        parser.error("--runs must be N or N,M")
    if min(sizes) < 1 or len(sizes) > 2 or args.repeats < 1 or args.first < 1:
        parser.error("--runs (N or N,M), --repeats and --first must be at least 1")
    if len(sizes) == 2:
        if args.home is None:
            parser.error("two sizes need --home DIR (the homes bench_ps.py --home DIR filled)")
        return growth(args, sizes)
    args.runs = sizes[0]

    print("bench_lessons: wall time of `orbit lessons -g bench`, first and warm call, vs "
          "`python -c pass` and reading index.jsonl")  # fmt: skip
    print(machine())
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-lessons-"))
    root = args.home.resolve() if args.home else scratch / "home"
    home = Home.from_environ({"ORBIT_HOME": str(root)})
    pycache = None if args.env_as_is else scratch / "pycache"
    env = child_environ(root, pycache)
    orbit_py = args.orbit.resolve()
    print(setup_lines(orbit_py, root, pycache))
    lessons = [sys.executable, str(orbit_py), "lessons", "-g", GROUP]
    read_index = [sys.executable, "-c", "import json,sys\nfor line in open(sys.argv[1],'rb'): "
                  "json.loads(line)", str(home.index_path)]  # fmt: skip
    cache = cache_path(RunStore(home), Scope(group=GROUP))
    try:
        if home.runs_dir.is_dir() and any(home.runs_dir.iterdir()):
            print("history: reusing the existing runs")
        else:
            print(f"history: {fill(home, args.runs)}")
        commands = {
            "warm": lessons,
            "ps -a": [sys.executable, str(orbit_py), "ps", "-a"],
            "-c pass": [sys.executable, "-c", "pass"],
            "index": read_index,
        }
        first: list[float] = []
        for _ in range(args.first):
            cache.unlink(missing_ok=True)
            first.append(timed(lessons, env, "bench_lessons"))
        print(f"cache file: {cache.stat().st_size / 1e6:.1f} MB")
        times = alternate(commands, env, "bench_lessons", args.repeats)
    finally:
        if args.home or args.keep:
            print(f"kept ORBIT_HOME: {root}")
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)

    times = {"first": first, **times}
    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print(f"{ms_header(10)}{'vs -c pass':>12}")
    for key, values in times.items():
        print(f"{ms_row(key, values, 10)}{med[key] / med['-c pass']:11.2f}x")
    print()
    met = "met" if med["warm"] < ABSOLUTE_S else "MISSED"
    print(f"warm call: {med['warm'] * 1000:.0f} ms (target < {ABSOLUTE_S * 1000:.0f} ms: {met})")
    print(ratio_line(med["warm"] / med["ps -a"], TARGET))
    return 0


def growth(args: argparse.Namespace, sizes: list[int]) -> int:
    """`lessons -g G` and `failures -g G` in two homes bench_ps.py filled, alternated."""
    print(f"bench_lessons: `orbit lessons -g {args.group}` and `orbit failures -g {args.group}`"
          f" over {sizes[0]:,} and {sizes[1]:,} finished runs")  # fmt: skip
    print(machine(load=True))
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-lessons-"))
    pycache = None if args.env_as_is else scratch / "pycache"
    orbit_py = args.orbit.resolve()
    commands: dict[str, list[str]] = {}
    envs: dict[str, dict[str, str]] = {}
    for n in sizes:
        root = args.home.resolve() / str(n)
        if not (root / "runs").is_dir():
            raise SystemExit(f"bench_lessons: {root} holds no runs (fill it with bench_ps.py)")
        rows = [r for r in RunStore(Home.from_environ({"ORBIT_HOME": str(root)})).list_rows()
                if isinstance(r, dict) and r.get("group") == args.group]  # fmt: skip
        failed = sum(r.get("state") == "failed" for r in rows)
        print(f"home {root}: group {args.group}: {len(rows)} runs, {failed} failed")
        for what in ("lessons", "failures"):
            name = f"{what} {n}"
            commands[name] = [sys.executable, str(orbit_py), what, "-g", args.group]
            envs[name] = child_environ(root, pycache)
    print(setup_lines(orbit_py, args.home.resolve(), pycache))
    commands["-c pass"] = [sys.executable, "-c", "pass"]
    envs["-c pass"] = child_environ(args.home.resolve(), pycache)
    try:
        for key, cmd in commands.items():
            timed(cmd, envs[key], "bench_lessons")  # warm-up (caches, bytecode)
        times: dict[str, list[float]] = {k: [] for k in commands}
        print(f"repeats: {args.repeats} (+1 warm-up each), alternated: {', '.join(commands)}")
        for _ in range(args.repeats):
            for key, cmd in commands.items():
                times[key].append(timed(cmd, envs[key], "bench_lessons"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print(f"{ms_header(16)}{'vs -c pass':>12}")
    for key, values in times.items():
        print(f"{ms_row(key, values, 16)}{med[key] / med['-c pass']:11.2f}x")
    print()
    worst = 0.0
    for what in ("lessons", "failures"):
        ratio = med[f"{what} {sizes[1]}"] / med[f"{what} {sizes[0]}"]
        worst = max(worst, ratio)
        print(f"{what} -g {args.group}, {sizes[1]:,} over {sizes[0]:,}: {ratio:.2f} "
              f"(target ≤ {TARGET_GROWTH:g})")  # fmt: skip
    print(ratio_line(worst, TARGET_GROWTH))
    return 0


if __name__ == "__main__":
    sys.exit(main())

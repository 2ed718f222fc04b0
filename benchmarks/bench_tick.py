#!/usr/bin/env python3
"""Cost of one scheduler tick with a long history and a full queue, and whether it grows.

Two temporary homes hold 100 queued runs that cannot start (each asks for every CPU while one
running run leases them all) and a history of finished runs: 1,000 in one, 10,000 in the
other. It times, after one unmeasured warm-up, alternating the homes,

    in-process:  orbit.sched.tick.tick(home, spawn=<refuses>)       (median of --repeats, 20)
    end to end:  python orbit.py scheduler tick > /dev/null         (median of --e2e, 10)
    baseline:    python -c pass                                     (alternated with the above)

The tick must never start a shepherd here (nothing fits, and the running run's shepherd is
alive: this script holds its lock), so the spawner raises if it is called. With nothing
changed between ticks this is the steady state a supervisor sees every few seconds; the
script also times ticks where every queued run's reason changes each time (the totals
alternate between 4 and 5 CPUs), which rewrites 100 status files per tick, and ticks with
count_outside_use on, 0.35 s apart, counting the statuses they rewrite (on a busy machine
the reasons quote the load, which changes from tick to tick).

Last line: `ratio: X.XX (target ≤ 1.25)`, the steady in-process median with 10,000 finished
runs over the one with 1,000: a tick must touch only the queue/ and active/ markers and the runs
they name, so the history must not show. The absolute target is < 100 ms in-process.

With `--home DIR` the histories are not written: the homes bench_ps.py filled (`bench_ps.py
--home DIR --runs 10000,100000`) are used through private copies (run directories hard-linked,
as bench_web.py does; `--copies DIR2` keeps them for later calls, since a copy of 100,000 runs
takes minutes), DIR/N for each size N of `--finished` (e.g. 10000,100000), and the running and
queued runs are added to each copy (and removed again at the end).

Standalone: `python benchmarks/bench_tick.py [--finished 1000,10000] [--repeats N] [--home DIR
[--copies DIR2]]`; no Docker.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P

from common import (
    REPO,
    TEST_ONLY_ENV,
    add_orbit_options,
    admit,
    child_environ,
    index_lines,
    machine,
    p90,
    ratio_line,
    reused_copy,
    timed,
)

TARGET_RATIO = 1.25
TARGET_MS = 100.0
QUEUED = 100
TOTAL_CPUS = 4.0
OUTSIDE_GAP_S = 0.35  # sched/outside.py measures only over at least 0.3 s
sys.path.insert(0, str(REPO))

from orbit.sched.clock import note_clock_tick  # noqa: E402
from orbit.store.files import write_yaml  # noqa: E402
from orbit.store.home import Home  # noqa: E402
from orbit.store.locks import try_lock  # noqa: E402
from orbit.store.model import Run, RunState, now_iso  # noqa: E402
from orbit.store.runs import RunStore  # noqa: E402


def spec(i: int, cpus: float, command: list[str]) -> dict[str, Any]:
    """A request shaped like execute/submit.py's."""
    return {
        "name": f"run-{i}",
        "group": f"sweep-{i // 50}",
        "group_cap": None,
        "folder": None,
        "tags": {"seed": str(i % 5)},
        "params": {},
        "image": "orbit-test/busybox:1",
        "dockerfile": None,
        "command": command,
        "resources": {
            "cpus": cpus,
            "mem_gb": 0.25,
            "gpus": 0,
            "gpu_mem_gb": None,
            "gpu_ids": None,
        },
        "env": {},
        "pass_env": [],
        "mounts": [],
        "network": "bridge",
        "timeout_min": None,
        "user": f"{os.getuid()}:{os.getgid()}",
        "project": {"mode": "none"},
        "node": platform.node(),
        "submitted_by": {"user": os.environ.get("USER") or str(os.getuid()), "pid": 4242},
    }


def add_finished(store: RunStore, start: int, n: int) -> float:
    """`n` succeeded runs through RunStore.create; seconds per run."""
    t0 = time.perf_counter()
    for i in range(start, start + n):
        status = {
            "started_at": now_iso(),
            "finished_at": now_iso(),
            "exit_code": 0,
            "lease": {"cpus": 1.0, "mem_gb": 0.25, "gpus": []},
            "reason": None,
        }
        store.create(
            spec(i, 1.0, ["python", "train.py", "--seed", str(i)]),
            state=RunState.SUCCEEDED,
            reason="",
            actor="bench",
            status_fields=status,
        )
    return (time.perf_counter() - t0) / max(1, n)


def add_running(store: RunStore) -> Any:
    """One running run that leases every CPU; returns the held lock of its 'shepherd'."""
    run = store.create(spec(0, TOTAL_CPUS, ["sleep", "inf"]), reason="", actor="bench")
    admit(store, run.id, "bench", {"cpus": TOTAL_CPUS, "mem_gb": 0.25, "gpus": []})
    store.transition(run.id, RunState.RUNNING, actor="bench", event="started", reason=None)
    lock = try_lock(run.path("shepherd.lock"))  # the tick sees a live shepherd
    if lock is None:
        raise SystemExit("bench_tick: cannot hold the running run's shepherd lock")
    return lock


def configure(root: Path, total_cpus: float, outside: bool = False) -> None:
    write_yaml(
        root / "config.yaml",
        {
            "format": 1,
            "total_cpus": total_cpus,
            "total_mem_gb": 64.0,
            "count_outside_use": outside,
        },
        durable=False,
    )


def refuse(home: Home, run_id: str) -> None:
    raise SystemExit(f"bench_tick: the tick tried to start a shepherd for run {run_id}")


def tick_in_process(root: Path, env: dict[str, str]) -> tuple[float, Any]:
    from orbit.sched.tick import tick

    home = Home(root, env)  # fresh, as each CLI process or supervisor tick has
    t0 = time.perf_counter()
    report = tick(home, spawn=refuse, actor="bench")
    elapsed = time.perf_counter() - t0
    if not report.ran or report.admitted or report.problems or len(report.waiting) != QUEUED:
        raise SystemExit(f"bench_tick: unexpected tick: {report.as_dict()}")
    return elapsed, report


def clear_active(root: Path, env: dict[str, str]) -> None:
    """Remove the active runs of a copied home (this script's, left by an earlier call) and
    the stale queue/ and active/ markers of finished ones (bench_ps.py's template run leaves
    one): the copy holds only finished runs, and the tick has nothing to start or repair."""
    home = Home(root, env)
    store = RunStore(home)
    for run in store.load_many(store.active_ids()):
        if isinstance(run, Run) and run.state.active:
            store.remove_dir(run.id)
        else:
            (home.queue_dir / run.id).unlink(missing_ok=True)
            (home.active_dir / run.id).unlink(missing_ok=True)


def build_home(
    root: Path, env: dict[str, str], finished: int, copied: bool = False
) -> tuple[Any, float]:
    """A home with one running run (its 'shepherd' lock held), QUEUED runs that cannot start,
    and `finished` succeeded runs (`copied`: a copy already holding its history); the held
    lock and the seconds per finished run written."""
    home = Home(root, env)
    home.ensure()
    if copied:
        clear_active(root, env)
    configure(root, TOTAL_CPUS)
    # A clock "ticks" this home: the queued runs here never fit, and a ticker started by the
    # measured ticks would tick beside them (and hold the scheduler lock) for nothing.
    note_clock_tick(home, 3600.0)
    store = RunStore(home)
    lock = add_running(store)
    for i in range(QUEUED):
        store.create(spec(i + 1, TOTAL_CPUS, ["true"]), reason="", actor="bench")
    if copied:
        return lock, 0.0
    return lock, add_finished(store, QUEUED + 2, finished)


def measure(
    homes: dict[int, Path], env: dict[str, str], args: argparse.Namespace
) -> dict[int, dict[str, list[float]]]:
    """Every figure for every home, the homes alternated so that a busy machine slows all."""
    out: dict[int, dict[str, list[float]]] = {n: {} for n in homes}
    envs = {n: {**env, "ORBIT_HOME": str(root)} for n, root in homes.items()}

    def record(n: int, key: str, value: float) -> None:
        out[n].setdefault(key, []).append(value)

    for root in homes.values():
        configure(root, TOTAL_CPUS)
        tick_in_process(root, env)  # warm-up: writes the 100 reasons once
    for _ in range(args.repeats):
        for n, root in homes.items():
            record(n, "steady", tick_in_process(root, envs[n])[0])
    for i in range(args.repeats):
        for n, root in homes.items():
            configure(root, TOTAL_CPUS + (i + 1) % 2)  # every queued run's reason changes
            record(n, "churn", tick_in_process(root, envs[n])[0])
    # count_outside_use: true (the default), ticks OUTSIDE_GAP_S apart so that each one
    # measures: on a busy machine the reasons then quote the load, which changes every tick.
    for n, root in homes.items():
        configure(root, TOTAL_CPUS, outside=True)
        tick_in_process(root, envs[n])
    for _ in range(args.repeats):
        time.sleep(OUTSIDE_GAP_S)
        for n, root in homes.items():
            before = index_lines(root / "index.jsonl")
            record(n, "outside", tick_in_process(root, envs[n])[0])
            record(n, "rewrites", float(index_lines(root / "index.jsonl") - before))
    for n, root in homes.items():
        configure(root, TOTAL_CPUS)
        tick_in_process(root, envs[n])
    e2e_cmd = [sys.executable, str(args.orbit), "scheduler", "tick"]
    floor_cmd = [sys.executable, "-c", "pass"]
    for n in homes:
        timed(e2e_cmd, envs[n], "bench_tick")  # warm-up (and bytecode)
    timed(floor_cmd, env, "bench_tick")
    for _ in range(args.e2e):
        for n in homes:
            record(n, "e2e", timed(e2e_cmd, envs[n], "bench_tick"))
            record(n, "floor", timed(floor_cmd, env, "bench_tick"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Time the scheduler tick with 100 queued runs over two history sizes."
    )
    parser.add_argument(
        "--finished",
        default="1000,10000",
        help="history sizes, ascending, comma-separated (default 1000,10000)",
    )
    parser.add_argument("--repeats", type=int, default=20, help="in-process ticks each (20)")
    parser.add_argument("--e2e", type=int, default=10, help="`orbit scheduler tick` runs (10)")
    parser.add_argument(
        "--home",
        type=Path,
        help="take each history from DIR/N, a home bench_ps.py --home DIR filled (never "
        "written: a private copy is used)",
    )
    parser.add_argument("--copies", type=Path, help="with --home: keep the copies here, reuse")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes")
    add_orbit_options(parser, "the orbit.py to time end to end (default: this checkout's)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.finished.split(",") if s.strip()]
    if not sizes or sizes != sorted(sizes) or sizes[0] < 0 or args.repeats < 1 or args.e2e < 1:
        parser.error("--finished must be ascending counts; --repeats and --e2e at least 1")
    args.orbit = args.orbit.resolve()

    print(f"bench_tick: one scheduler tick with {QUEUED} queued runs (none can start)")
    print(f"  and 1 running run, over {' and '.join(f'{n:,}' for n in sizes)} finished runs")
    print(machine(load=True))
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-tick-"))
    pycache = None if args.env_as_is else scratch / "pycache"
    env = child_environ(None, pycache, drop=TEST_ONLY_ENV)
    print(f"orbit:   {args.orbit}")
    print(f"homes:   {scratch}/home-N")
    homes = {n: scratch / f"home-{n}" for n in sizes}
    locks = []
    try:
        for n in sizes:
            if args.home is not None:
                src = args.home.resolve() / str(n)
                homes[n] = reused_copy(src, args.copies, scratch, "bench_tick")
            root = homes[n]
            lock, per = build_home(root, {**env, "ORBIT_HOME": str(root)}, n, args.home is not None)
            locks.append(lock)
            if args.home is None:
                print(f"home-{n}: {n:,} finished runs written ({per * 1000:.2f} ms/run)")
        print(f"repeats: {args.repeats} in-process ticks, {args.e2e} end to end, homes alternated")
        results = measure(homes, env, args)
    finally:
        for lock in locks:
            lock.close()
        if args.copies is not None:
            for root in homes.values():
                clear_active(root, {**env, "ORBIT_HOME": str(root)})
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    print()
    print("medians. in-process: nothing changed since the last tick (the steady state);")
    print("reasons: every queued run's reason changes; outside: count_outside_use on, ticks")
    print("0.35 s apart, with the statuses each rewrote; e2e: python orbit.py scheduler tick")
    print(
        f"{'finished':>10}{'in-process':>12}{'p90':>9}{'reasons':>10}{'outside':>10}"
        f"{'rewrites':>10}{'e2e':>9}{'-c pass':>9}"
    )
    for size, r in results.items():
        med = {k: statistics.median(v) * 1000 for k, v in r.items()}
        print(
            f"{size:>10,}{med['steady']:>10.1f}ms{p90(r['steady']) * 1000:>7.1f}ms"
            f"{med['churn']:>8.1f}ms{med['outside']:>8.1f}ms"
            f"{statistics.median(r['rewrites']):>10.0f}"
            f"{med['e2e']:>7.1f}ms{med['floor']:>7.1f}ms"
        )
    first, last = results[sizes[0]], results[sizes[-1]]
    steady_last = statistics.median(last["steady"]) * 1000
    print()
    verdict = "under" if steady_last < TARGET_MS else "OVER"
    print(
        f"tick at {sizes[-1]:,} finished: {steady_last:.1f} ms in-process ({verdict} the "
        f"{TARGET_MS:g} ms target)"
    )
    growth = statistics.median(last["steady"]) / statistics.median(first["steady"])
    print(ratio_line(growth, TARGET_RATIO))
    return 0


if __name__ == "__main__":
    sys.exit(main())

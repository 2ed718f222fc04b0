#!/usr/bin/env python3
"""How long `orbit sweep` takes to submit 1,000 runs, against a plain loop writing their files.

Timed, per repeat, from the spawn of the process to its exit (wall clock):

    orbit:    python orbit.py sweep -g bench --no-project --image IMAGE --cpus 1 --mem 0.1
                  -p i=1,…,1000 -- true
    baseline: python -c <a loop>: for each of the 1,000 runs, `mkdir` its directory and its
              output/, write run.yaml, status.yaml and events.jsonl (the sizes Orbit writes),
              create log.txt, metrics.jsonl and notes.jsonl empty; no fsync, no lock

Each orbit repeat gets a fresh ORBIT_HOME (total_cpus 2, count_outside_use off) holding one
running run that leases both CPUs (the script holds its shepherd.lock, so the tick sees a
live shepherd): nothing can start, and the time is the submission alone: the image check,
every run written, fsynced, queued and indexed, the sweep's tick (which admits nothing) and
the printed table. A clock is noted as ticking the home, so that the tick starts no ticker
in the background. The runs keep the reason they were born with; the next tick gives each
the planner's: that tick (`orbit scheduler tick`) is timed after each repeat and printed too,
outside the target. Repeats alternate orbit and baseline (one warm-up of each first); the
figures are medians. The last line is

    sweep of 1000 runs submitted: X ms (target < 1000 ms); baseline Y ms (ratio R)

Standalone: `python benchmarks/bench_sweep_submit.py [--runs N] [--repeats N]`; needs Docker
and the test images (scripts/build-test-images.sh) for the image check.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P

from common import (
    REPO,
    TEST_ONLY_ENV,
    add_image_option,
    add_orbit_options,
    admit,
    child_environ,
    machine,
    ms_header,
    ms_row,
    require_docker,
    timed,
)

sys.path.insert(0, str(REPO))

from orbit.sched.clock import note_clock_tick
from orbit.store.files import write_yaml
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.model import RunState
from orbit.store.runs import RunStore

TARGET_MS = 1000.0
TOTAL_CPUS = 2.0

BASELINE = r"""
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
spec, status, event = b"x" * 700, b"x" * 230, b"x" * 110
def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
for i in range(1, n + 1):
    d = f"{root}/{i}"
    os.mkdir(d)
    os.mkdir(f"{d}/output")
    write(f"{d}/run.yaml", spec)
    write(f"{d}/status.yaml", status)
    write(f"{d}/events.jsonl", event)
    for name in ("log.txt", "metrics.jsonl", "notes.jsonl"):
        write(f"{d}/{name}", b"")
"""


def make_home(root: Path, environ: dict[str, str]) -> Any:
    """A home where nothing can start: one running run leases every CPU; its held lock."""
    home = Home(root, environ)
    home.ensure()
    config = {"format": 1, "total_cpus": TOTAL_CPUS, "total_mem_gb": 64.0}
    write_yaml(root / "config.yaml", {**config, "count_outside_use": False}, durable=False)
    note_clock_tick(home, 3600.0)
    store = RunStore(home)
    spec = {"name": "blocker", "group": None, "command": ["sleep", "inf"], "params": {}}
    spec["resources"] = {"cpus": TOTAL_CPUS, "mem_gb": 0.25, "gpus": 0}
    run = store.create(spec, reason="", actor="bench")
    admit(store, run.id, "bench", {"cpus": TOTAL_CPUS, "mem_gb": 0.25, "gpus": []})
    store.transition(run.id, RunState.RUNNING, actor="bench", event="started", reason=None)
    lock = try_lock(run.path("shepherd.lock"))
    if lock is None:
        raise SystemExit("bench_sweep_submit: cannot hold the blocker's shepherd lock")
    return lock


def check(root: Path, n: int) -> None:
    """Every run is there, whole and queued."""
    queued = os.listdir(root / "queue")
    runs = [p for p in os.listdir(root / "runs") if not p.startswith(".")]
    if len(queued) != n or len(runs) != n + 1:
        raise SystemExit(f"bench_sweep_submit: {len(queued)} queued, {len(runs)} runs, not {n}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Time `orbit sweep` submitting N runs that cannot start, against a plain "
        "Python loop writing the same files, alternated."
    )
    parser.add_argument("--runs", type=int, default=1000, help="runs in the sweep (1000)")
    parser.add_argument("--repeats", type=int, default=7, help="alternated repeats (7)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes")
    add_image_option(parser)
    add_orbit_options(parser)
    args = parser.parse_args()
    if args.runs < 1 or args.repeats < 1:
        parser.error("--runs and --repeats must be at least 1")
    orbit_py = args.orbit.resolve()
    require_docker(args.image, "bench_sweep_submit")
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-submit-"))
    pycache = None if args.env_as_is else scratch / "pycache"
    values = ",".join(str(i) for i in range(1, args.runs + 1))
    sweep = [sys.executable, str(orbit_py), "sweep", "-g", "bench", "--no-project"]
    sweep += ["--image", args.image, "--cpus", "1", "--mem", "0.1", "-p", f"i={values}"]
    sweep += ["--", "true"]

    print(f"bench_sweep_submit: `orbit sweep` of {args.runs} runs that cannot start")
    print(machine(docker=True, load=True))
    print(f"orbit:   {orbit_py}")
    print(f"repeats: {args.repeats} (+1 warm-up each), alternated: orbit, baseline")
    times: dict[str, list[float]] = {"orbit": [], "baseline": [], "next tick": []}
    try:
        for i in range(args.repeats + 1):
            root = scratch / f"home-{i}"
            env = child_environ(root, pycache, drop=TEST_ONLY_ENV)
            lock = make_home(root, env)
            try:
                took = timed(sweep, env, "bench_sweep_submit")
                check(root, args.runs)
                tick = timed([sys.executable, str(orbit_py), "scheduler", "tick"], env, "tick")
            finally:
                release(lock)
            plain = scratch / f"plain-{i}"
            plain.mkdir()
            cmd = [sys.executable, "-c", BASELINE, str(plain), str(args.runs)]
            base = timed(cmd, env, "bench_sweep_submit baseline")
            if i == 0:
                continue  # the warm-up
            times["orbit"].append(took)
            times["baseline"].append(base)
            times["next tick"].append(tick)
            print(
                f"  repeat {i}: orbit {took * 1000:.0f} ms, baseline {base * 1000:.0f} ms, "
                f"next tick {tick * 1000:.0f} ms",
                flush=True,
            )
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    print()
    print(ms_header(12))
    for name, values_s in times.items():
        print(ms_row(name, values_s, 12))
    orbit_ms = statistics.median(times["orbit"]) * 1000
    base_ms = statistics.median(times["baseline"]) * 1000
    per_run = orbit_ms / args.runs
    print(f"per run: {per_run:.2f} ms; the next tick, giving each run its reason, is not timed")
    print()
    print(
        f"sweep of {args.runs} runs submitted: {orbit_ms:.0f} ms (target < {TARGET_MS:.0f} ms); "
        f"baseline {base_ms:.0f} ms (ratio {orbit_ms / base_ms:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

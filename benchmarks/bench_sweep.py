#!/usr/bin/env python3
"""Throughput of a sweep of no-op runs drained by Orbit, against `xargs -P 2 docker run --rm`.

Each round runs, in alternation, the same 100 containers (`true` in orbit-test/busybox:1, one
CPU and 0.1 GiB each, two at a time):

    orbit:  python orbit.py sweep -g bench --no-project --image IMAGE --cpus 1 --mem 0.1
                -p i=1,…,100 -w -- true            (config: total_cpus 2, so 2 run at once)
    docker: seq 100 | xargs -P 2 -I{} docker run --rm --cpus 1 --memory 0.1g IMAGE true

against a fresh temporary ORBIT_HOME per round. Orbit's time runs from the sweep command's
start to its return (every run finished); the seconds until its last shepherd has removed
its container are reported too. It prints both times and throughputs, where Orbit's time
went (from the runs' events and statuses), and last `ratio: X.XX (target ≥ 0.8)`: Orbit's
throughput over the baseline's (median over rounds).

count_outside_use is off by default, so that what Docker and the shepherds use between
containers does not count against Orbit's own two slots; --count-outside-use keeps the
default (on) to see what that costs.

Standalone: `python benchmarks/bench_sweep.py [--runs N] [--rounds N]`; needs Docker and the
test images (scripts/build-test-images.sh).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P

from common import (
    TEST_ONLY_ENV,
    add_image_option,
    add_orbit_options,
    child_environ,
    machine,
    ratio_line,
    require_docker,
    run_records,
    stamp,
    wait_for_shepherds,
)

TARGET = 0.95  # issue 13
PARALLEL = 2
MEM_BYTES = int(0.1 * 1024**3)


def run_orbit(
    scratch: Path, n: int, image: str, args: argparse.Namespace, round_no: int
) -> dict[str, Any]:
    home = scratch / f"home-{round_no}"
    home.mkdir()
    config = {"format": 1, "total_cpus": float(PARALLEL)}
    if not args.count_outside_use:
        config["count_outside_use"] = False
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    pycache = None if args.env_as_is else scratch / "pycache"
    env = child_environ(home, pycache, drop=TEST_ONLY_ENV)
    values = ",".join(str(i) for i in range(1, n + 1))
    cmd = [sys.executable, str(args.orbit), "sweep", "-g", "bench", "--json", "-w"]
    cmd += ["--no-project", "--image", image, "--cpus", "1", "--mem", "0.1", "-p", f"i={values}"]
    cmd += ["--", "true"]
    t0 = time.perf_counter()
    wall0 = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_sweep: orbit sweep failed ({proc.returncode}):\n{proc.stderr}")
    result = json.loads(proc.stdout)
    ids = [str(r["id"]) for r in result["runs"]]
    if len(ids) != n or not result["ok"]:
        raise SystemExit(f"bench_sweep: the sweep did not succeed: {proc.stdout[:2000]}")
    wait_for_shepherds(
        home, 60.0, 0.01, "bench_sweep: shepherds still alive a minute after the sweep"
    )
    clean = time.perf_counter() - t0
    return {"elapsed": elapsed, "clean": clean, **phases(home, ids, wall0)}


def phases(home: Path, ids: list[str], wall0: float) -> dict[str, float]:
    """Where Orbit's time went, from the runs' own records."""
    submitted, admitted, started, finished, final = [], [], [], [], []
    leased = 0.0
    pids = set()
    for run_id in ids:
        events, status = run_records(home / "runs" / run_id)
        pids.add((home / "runs" / run_id / "shepherd.pid").read_text().strip())
        sub = stamp(events["submitted"]["time"])
        adm = stamp(events["admitted"]["time"])
        c0, c1 = stamp(status.get("started_at")), stamp(status.get("finished_at"))
        end = stamp(events[status["state"]]["time"])
        assert sub and adm and c0 and c1 and end
        submitted.append(sub)
        admitted.append(adm)
        started.append(c0 - adm)
        finished.append(end - c1)
        final.append(end)
        leased += end - adm
    span = max(final) - min(admitted)
    # How long a slot stays empty: from a release to the admission that refills it.
    refill = []
    for adm in sorted(admitted)[PARALLEL:]:
        before = [end for end in final if end <= adm]
        if before:
            refill.append(adm - max(before))
    return {
        "submit_all": max(submitted) - wall0,  # launch to the batch's submit time (one for all)
        "first_admitted": min(admitted) - wall0,
        "admit_to_start": statistics.median(started),
        "exit_to_settled": statistics.median(finished),
        "leases_held": leased / span,  # average number of leases held while draining
        "release_to_admit": statistics.median(refill) if refill else 0.0,
        "processes": len(pids),  # shepherd processes: one follows the next run its tick admits
    }


def run_docker(n: int, image: str) -> float:
    cmd = (
        f"seq {n} | xargs -P {PARALLEL} -I{{}} docker run --rm --cpus 1 "
        f"--memory {MEM_BYTES}b {image} true"
    )
    t0 = time.perf_counter()
    proc = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_sweep: the docker baseline failed:\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Drain a sweep of no-op runs with Orbit (2 at a time) against "
        "`xargs -P 2 docker run --rm`, alternated."
    )
    parser.add_argument("--runs", type=int, default=100, help="containers per round (100)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of each (1)")
    add_image_option(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary ORBIT_HOMEs")
    parser.add_argument(
        "--count-outside-use",
        action="store_true",
        help="leave count_outside_use at its default (on) instead of turning it off",
    )
    add_orbit_options(parser)
    args = parser.parse_args()
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds must be at least 1")
    args.orbit = args.orbit.resolve()
    require_docker(args.image, "bench_sweep")

    print(f"bench_sweep: {args.runs} `true` containers, {PARALLEL} at a time")
    print(f"  orbit sweep -w (total_cpus {PARALLEL}, --cpus 1 --mem 0.1) vs xargs -P {PARALLEL}")
    print(machine(docker=True, load=True))
    print(f"orbit:   {args.orbit}")
    print(f"count_outside_use: {'default (on)' if args.count_outside_use else 'off'}")
    print(f"rounds: {args.rounds}, alternated orbit, docker (one docker warm-up first)")
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-sweep-"))
    orbit: list[dict[str, Any]] = []
    docker: list[float] = []
    try:
        run_docker(2, args.image)
        for i in range(args.rounds):
            orbit.append(run_orbit(scratch, args.runs, args.image, args, i))
            docker.append(run_docker(args.runs, args.image))
            o = orbit[-1]
            print(
                f"  round {i + 1}: orbit {o['elapsed']:.1f} s (shepherds done {o['clean']:.1f} s)"
                f"   docker {docker[-1]:.1f} s",
                flush=True,
            )
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    o_med = statistics.median(r["elapsed"] for r in orbit)
    c_med = statistics.median(r["clean"] for r in orbit)
    d_med = statistics.median(docker)
    print()
    print(f"{'':8}{'time':>9}{'runs/s':>9}")
    print(
        f"{'orbit':8}{o_med:8.1f}s{args.runs / o_med:9.2f}   (until every shepherd exited: "
        f"{c_med:.1f} s)"
    )
    print(f"{'docker':8}{d_med:8.1f}s{args.runs / d_med:9.2f}")
    print()
    print("orbit, from the runs' records (median over rounds):")
    labels = {
        "submit_all": "sweep start -> its runs' submit time, stamped as the batch starts (s)",
        "first_admitted": "sweep start -> first admission (s)",
        "admit_to_start": "admitted -> container StartedAt, median run (s)",
        "exit_to_settled": "container FinishedAt -> final event, median run (s)",
        "release_to_admit": "final event (lease released) -> next admission, median (s)",
        "leases_held": f"leases held on average, first admission to last release (of {PARALLEL})",
        "processes": "shepherd processes that followed the runs (shepherd.pid)",
    }
    for key, label in labels.items():
        print(f"  {statistics.median(r[key] for r in orbit):7.2f}  {label}")
    print()
    print(ratio_line(d_med / o_med, TARGET, at_least=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

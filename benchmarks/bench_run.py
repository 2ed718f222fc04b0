#!/usr/bin/env python3
"""Latency of `orbit run -w` for a trivial container, against a plain `docker run --rm`.

Each measured pair runs, in alternation,

    orbit:  python orbit.py run -w --no-project --image IMAGE --cpus 1 --mem 0.25 -- true
    docker: docker run --rm --cpus 1 --memory 256m IMAGE true

after one unmeasured warm-up of each, against a fresh temporary ORBIT_HOME. It prints the
median and p90 (nearest rank) of both, the phases of an orbit run taken from its events.jsonl
(median over the measured runs), where the time goes (the same container created, started and
waited for through the Engine API alone, `python -c pass`, and a `python -c` of the imports
`orbit run -w` makes, each measured once per pair), and last `ratio: X.XX (target ≤ 1.15)`,
the ratio of medians.

Between two commands the script waits (unmeasured) until the run's shepherd has exited, so the
background work orbit leaves behind (container removal, the final tick) cannot slow the next
command down; how long that tail lasted is reported too.

Standalone: `python benchmarks/bench_run.py [--pairs N]`; needs Docker and the test images
(scripts/build-test-images.sh).
"""

from __future__ import annotations

import argparse
import itertools
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # REPO: the checkout's orbit

from common import (
    add_image_option,
    add_orbit_options,
    child_environ,
    machine,
    ms_header,
    ms_row,
    ratio_line,
    require_docker,
    run_records,
    setup_lines,
    stamp,
    wait_for_shepherds,
)

TARGET = 1.15
RUN_PATH_IMPORTS = (
    "import sys; sys.path.insert(0, {!r}); import orbit.cli.run, orbit.cli.wait, "
    "orbit.execute.submit, orbit.sched.tick, orbit.execute.spawn, yaml"
)
SHEPHERD_TIMEOUT_S = 30.0


def run_orbit(home: Path, image: str, orbit_py: Path, env: dict[str, str]) -> dict[str, float]:
    cmd = [sys.executable, str(orbit_py), "run", "-w", "--no-project", "--image", image]
    cmd += ["--cpus", "1", "--mem", "0.25", "--", "true"]
    wall0 = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    wall1 = wall0 + elapsed
    if proc.returncode != 0:
        raise SystemExit(f"bench_run: orbit run failed ({proc.returncode}):\n{proc.stderr}")
    tail = wait_for_shepherds(
        home,
        SHEPHERD_TIMEOUT_S,
        0.005,
        f"bench_run: a shepherd of {home} is still alive after {SHEPHERD_TIMEOUT_S} s",
    )
    found = re.search(r"run (\d+)", proc.stderr)
    if not found:
        raise SystemExit(f"bench_run: cannot tell the run id from: {proc.stderr!r}")
    return {"elapsed": elapsed, "tail": tail, **timeline(home, found.group(1), wall0, wall1)}


def timeline(home: Path, run_id: str, wall0: float, wall1: float) -> dict[str, float]:
    """Phase durations (seconds) of one run from its events and status, launch to CLI return."""
    events, status = run_records(home / "runs" / run_id)
    final = next(e for e in events.values() if e["state"] in ("succeeded", "failed"))
    points = [
        ("launch -> submitted (CLI start, imports, submit)", wall0),
        ("submitted -> admitted (inline tick)", stamp(events["submitted"]["time"])),
        (
            "admitted -> container StartedAt (shepherd, create, start)",
            stamp(events["admitted"]["time"]),
        ),
        ("StartedAt -> FinishedAt (the container itself)", stamp(status.get("started_at"))),
        ("FinishedAt -> final event (shepherd settles)", stamp(status.get("finished_at"))),
        ("final event -> CLI returned (poll, exit)", stamp(final["time"])),
        ("", wall1),
    ]
    out = {}
    for (name, t), (_, t_next) in itertools.pairwise(points):
        if t is not None and t_next is not None:
            out[name] = t_next - t
    # For reference: when the shepherd wrote `started`, relative to the container's StartedAt.
    started_event = stamp(events.get("started", {}).get("time"))
    started_at = stamp(status.get("started_at"))
    if started_event is not None and started_at is not None:
        out["(StartedAt -> `started` event written)"] = started_event - started_at
    return out


def run_docker(image: str, env: dict[str, str]) -> float:
    cmd = ["docker", "run", "--rm", "--cpus", "1", "--memory", "256m", image, "true"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_run: docker run failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


def run_engine_floor(image: str) -> float:
    """The Docker engine's own part of a run: create, start and wait for the same container
    through the Engine API (Orbit's client, in this process; no CLI start), then remove it
    (untimed; `docker run --rm` and Orbit both remove after the exit is known)."""
    from orbit.execute.engine import Engine  # the checkout's: REPO is on sys.path

    engine = Engine()
    config = {
        "Image": image,
        "Cmd": ["true"],
        "HostConfig": {"NanoCpus": 10**9, "Memory": 256 * 2**20, "MemorySwap": 256 * 2**20},
    }
    t0 = time.perf_counter()
    container = engine.create(config)
    container.start()
    container.wait()
    elapsed = time.perf_counter() - t0
    container.remove(force=True)
    return elapsed


def run_python(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Time `orbit run -w … -- true` against `docker run --rm … true` "
        "(alternated pairs, one warm-up of each).",
    )
    parser.add_argument("--pairs", type=int, default=15, help="measured pairs (default 15)")
    add_image_option(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary ORBIT_HOME")
    add_orbit_options(parser)
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    require_docker(args.image, "bench_run")

    print("bench_run: wall time of `orbit run -w` (a `true` container, 1 CPU, 0.25 GiB)")
    print(f"  vs `docker run --rm --cpus 1 --memory 256m {args.image} true`")
    print(machine(docker=True))
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-run-"))
    home = scratch / "home"
    home.mkdir()
    # Measure Orbit's overhead, not admission: on a busy machine, counting use outside Orbit
    # would (rightly) hold a 1-CPU run back and the figure would say nothing about Orbit.
    (home / "config.yaml").write_text("format: 1\ncount_outside_use: false\n")
    print("config: count_outside_use false")
    pycache = None if args.env_as_is else scratch / "pycache"
    env = child_environ(home, pycache)
    orbit_py = args.orbit.resolve()
    print(setup_lines(orbit_py, home, pycache))
    print(f"pairs: {args.pairs} (+1 warm-up each), alternated orbit, docker, …")
    try:
        run_orbit(home, args.image, orbit_py, env)
        run_docker(args.image, env)
        orbit: list[dict[str, float]] = []
        docker: list[float] = []
        floor: list[float] = []
        bare: list[float] = []
        version: list[float] = []
        run_engine_floor(args.image)
        for i in range(args.pairs):
            orbit.append(run_orbit(home, args.image, orbit_py, env))
            docker.append(run_docker(args.image, env))
            floor.append(run_engine_floor(args.image))
            bare.append(run_python(["-c", "pass"], env))
            version.append(run_python(["-c", RUN_PATH_IMPORTS.format(str(orbit_py.parent))], env))
            print(
                f"  pair {i + 1:>2}: orbit {orbit[-1]['elapsed'] * 1000:7.1f} ms   "
                f"docker {docker[-1] * 1000:7.1f} ms",
                flush=True,
            )
    finally:
        if args.keep:
            print(f"kept ORBIT_HOME: {home}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    o_times = [r["elapsed"] for r in orbit]
    o_med, d_med = statistics.median(o_times), statistics.median(docker)
    print()
    print(ms_header(8))
    print(ms_row("orbit", o_times, 8))
    print(ms_row("docker", docker, 8))
    print()
    print("orbit run -w, phases (median over the measured runs):")
    names = [k for k in orbit[0] if k not in ("elapsed", "tail")]
    for name in names:
        values = [r[name] for r in orbit if name in r]
        print(f"  {statistics.median(values) * 1000:7.1f} ms  {name}")
    tail = statistics.median(r["tail"] for r in orbit)
    print(
        f"  {tail * 1000:7.1f} ms  (after the CLI returned: shepherd removes the container, ticks)"
    )
    f_med = statistics.median(floor)
    print()
    print("where the time goes (medians, measured in the same pairs):")
    print(f"  {f_med * 1000:7.1f} ms  the engine alone: create, start, wait through the API")
    print(f"  {(d_med - f_med) * 1000:7.1f} ms  docker run beyond it (the docker CLI)")
    print(f"  {(o_med - f_med) * 1000:7.1f} ms  orbit run -w beyond it, of which:")
    print(f"  {statistics.median(bare) * 1000:7.1f} ms    `python -c pass` (interpreter and site)")
    print(
        f"  {statistics.median(version) * 1000:7.1f} ms    `python -c` of the imports of"
        " `orbit run -w` (interpreter, site and Orbit's modules)"
    )
    print()
    print(ratio_line(o_med / d_med, TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())

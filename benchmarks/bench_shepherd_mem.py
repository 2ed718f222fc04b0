#!/usr/bin/env python3
"""Private memory of Orbit's shepherds, against a bare interpreter of the same Python.

Each round submits one sweep of N runs of `sleep S` (tiny leases, `count_outside_use: false`,
`total_cpus` high enough that every run starts at once), so that the first run's shepherd is
the one `orbit sweep` started ahead of its run and the others are started by the tick, waits
until every run is `running` and a further second, then reads RssAnon (private resident
memory: what each process costs the machine beyond the shared interpreter and libraries) of
every shepherd of the home. In the same round it starts N `python -c "import sys, time;
print(flush=True); time.sleep(S)"` of the same interpreter and environment and reads theirs
the same settling time after each has printed its line. Then both are stopped (`orbit
cancel`, a kill).

Each round also measures shepherds that carried on (a shepherd whose run ended follows the
next run its tick admits: docs/architecture.md): one sweep of 2N runs, `--cpus 1` in a home
of `total_cpus: N`, whose first N end one a second (run i sleeps i seconds) and whose last N
`sleep S`, so that each of the first N shepherds follows one of the last N. Once those are all
running, a shepherd whose pid is also a short run's `shepherd.pid` has carried on; the others
(a run another process's tick admitted) are counted as fresh.

It prints each round's medians, each kind's ratio (the median over all of its shepherds read
over the median over all bare interpreters read), and last `ratio: X.XX (target ≤ 1.5)`: the
worse of the two kinds.

Standalone: `python benchmarks/bench_shepherd_mem.py [--runs N] [--rounds R]`; needs Docker
and the test images (scripts/build-test-images.sh).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P

from common import (
    add_image_option,
    add_orbit_options,
    child_environ,
    machine,
    ratio_line,
    require_docker,
    setup_lines,
    shepherd_pids,
    wait_for_shepherds,
)

TARGET = 1.5
SETTLE_S = 1.0


def rss_anon_kb(pid: int) -> int | None:
    """RssAnon of a live process in kB; None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def states(home: Path) -> list[str]:
    found = []
    for status in sorted((home / "runs").glob("*/status.yaml")):
        for line in status.read_text().splitlines():
            if line.startswith("state:"):
                found.append(line.split(":", 1)[1].strip())
    return found


def shepherd_round(
    home: Path, orbit_py: Path, image: str, env: dict[str, str], runs: int, seconds: int
) -> list[int]:
    cmd = [sys.executable, str(orbit_py), "sweep", "-g", "mem", "--no-project", "--image", image]
    cmd += ["--cpus", "0.1", "--mem", "0.05", "-p", "i=" + ",".join(map(str, range(runs)))]
    cmd += ["--", "sleep", str(seconds)]
    before = set(p.name for p in (home / "runs").glob("*")) if (home / "runs").exists() else set()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    ids = sorted(p.name for p in (home / "runs").glob("*") if p.name not in before)
    deadline = time.monotonic() + 60
    while states(home).count("running") < runs:
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_shepherd_mem: runs not all running: {states(home)}")
        time.sleep(0.1)
    time.sleep(SETTLE_S)
    values = [v for v in (rss_anon_kb(p) for p in shepherd_pids(home)) if v is not None]
    subprocess.run(
        [sys.executable, str(orbit_py), "cancel", *[i for i in ids if i.isdigit()]],
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_shepherds(home, 60, 0.1, "bench_shepherd_mem: shepherds still alive after cancel")
    return values


def pid_of(run_dir: Path) -> int | None:
    try:
        return int((run_dir / "shepherd.pid").read_text())
    except (OSError, ValueError):
        return None


def carried_round(
    home: Path, orbit_py: Path, image: str, env: dict[str, str], runs: int, seconds: int
) -> tuple[list[int], list[int]]:
    """RssAnon of the shepherds that followed a run before theirs, and of the fresh ones."""
    cmd = [sys.executable, str(orbit_py), "sweep", "-g", "carried", "--no-project"]
    cmd += ["--image", image, "--cpus", "1", "--mem", "0.05"]
    cmd += ["-p", "i=" + ",".join(map(str, range(2 * runs)))]
    # Run i < N ends after i seconds, alone: its shepherd's tick admits one run, which it follows.
    cmd += [
        "--",
        "sh",
        "-c",
        f"if [ {{i}} -lt {runs} ]; then sleep {{i}}; else sleep {seconds}; fi",
    ]
    before = set(p.name for p in (home / "runs").glob("*")) if (home / "runs").exists() else set()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    ids = sorted((p.name for p in (home / "runs").glob("*") if p.name not in before), key=int)
    short, long = ids[:runs], ids[runs:]
    deadline = time.monotonic() + 120 + runs
    while states_of(home, long).count("running") < runs:
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_shepherd_mem: runs not all running: {states(home)}")
        time.sleep(0.1)
    time.sleep(SETTLE_S)
    earlier = {pid_of(home / "runs" / i) for i in short}
    carried: list[int] = []
    fresh: list[int] = []
    for run_id in long:
        pid = pid_of(home / "runs" / run_id)
        value = rss_anon_kb(pid) if pid is not None else None
        if value is not None:
            (carried if pid in earlier else fresh).append(value)
    subprocess.run(
        [sys.executable, str(orbit_py), "cancel", *long],
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_shepherds(home, 60, 0.1, "bench_shepherd_mem: shepherds still alive after cancel")
    return carried, fresh


def states_of(home: Path, ids: list[str]) -> list[str]:
    found = []
    for run_id in ids:
        for line in (home / "runs" / run_id / "status.yaml").read_text().splitlines():
            if line.startswith("state:"):
                found.append(line.split(":", 1)[1].strip())
    return found


def bare_round(env: dict[str, str], runs: int, seconds: int) -> list[int]:
    # Each says when it has started (a loaded machine can take more than the settling time
    # to start an interpreter, which would then be read half-loaded).
    code = f"import sys, time; print(flush=True); time.sleep({seconds})"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
        for _ in range(runs)
    ]
    for proc in procs:
        assert proc.stdout is not None
        proc.stdout.readline()
    time.sleep(SETTLE_S)
    values = [v for v in (rss_anon_kb(p.pid) for p in procs) if v is not None]
    for proc in procs:
        proc.kill()
        proc.wait()
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description="RssAnon of shepherds vs bare interpreters.")
    parser.add_argument("--runs", type=int, default=8, help="runs per round (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--seconds", type=int, default=30, help="each run's sleep (default 30)")
    add_image_option(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary ORBIT_HOME")
    add_orbit_options(parser)
    args = parser.parse_args()
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds must be at least 1")
    require_docker(args.image, "bench_shepherd_mem")

    print("bench_shepherd_mem: RssAnon of the shepherds of N running `sleep` runs")
    print(f"  vs `{Path(sys.executable).name} -c 'import time; time.sleep(…)'`")
    print(machine(docker=True))
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-mem-"))
    home = scratch / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        f"format: 1\ncount_outside_use: false\ntotal_cpus: {args.runs}\n"
    )
    pycache = None if args.env_as_is else scratch / "pycache"
    env = child_environ(home, pycache)
    orbit_py = args.orbit.resolve()
    print(setup_lines(orbit_py, home, pycache))
    print(f"rounds: {args.rounds} of {args.runs} runs, alternated shepherds, bare interpreters")
    shepherds: list[int] = []
    carried: list[int] = []
    bare: list[int] = []
    try:
        for i in range(args.rounds):
            s = shepherd_round(home, orbit_py, args.image, env, args.runs, args.seconds)
            c, f = carried_round(home, orbit_py, args.image, env, args.runs, args.seconds)
            b = bare_round(env, args.runs, args.seconds)
            shepherds += s + f
            carried += c
            bare += b
            print(
                f"  round {i + 1}: shepherds {statistics.median(s) / 1024:.2f} MB "
                f"(n={len(s)}, {min(s) / 1024:.2f}–{max(s) / 1024:.2f})   "
                f"carried on {mb(c)} (n={len(c)}; fresh beside them {mb(f)}, n={len(f)})   "
                f"bare {statistics.median(b) / 1024:.2f} MB (n={len(b)})",
                flush=True,
            )
    finally:
        if args.keep:
            print(f"kept ORBIT_HOME: {home}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    s_med, b_med = statistics.median(shepherds), statistics.median(bare)
    print()
    print(f"shepherd RssAnon  median {s_med / 1024:.2f} MB, max {max(shepherds) / 1024:.2f} MB")
    if carried:
        c_med = statistics.median(carried)
        print(f"carried on        median {c_med / 1024:.2f} MB, max {max(carried) / 1024:.2f} MB")
    print(f"bare python       median {b_med / 1024:.2f} MB")
    print()
    print(f"fresh shepherds: {s_med / b_med:.2f}")
    if not carried:
        print("carried on: none measured (every run of the long half got a fresh shepherd)")
        worst = s_med / b_med
    else:
        print(f"carried on: {c_med / b_med:.2f}")
        worst = max(s_med, c_med) / b_med
    print(ratio_line(worst, TARGET))
    return 0


def mb(values: list[int]) -> str:
    return f"{statistics.median(values) / 1024:.2f} MB" if values else "-"


if __name__ == "__main__":
    sys.exit(main())

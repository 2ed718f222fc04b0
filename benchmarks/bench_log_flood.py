#!/usr/bin/env python3
"""The shepherd's CPU under a log flood, against the CPU of the run it copies.

One run, leased 0.5 CPU, prints numbered 100-byte lines as fast as it can for 10 s (busybox
awk), then `COUNT n`:

    orbit run -w --no-project --image IMAGE --cpus 0.5 --mem 0.25 -- sh -c 'awk …'

It prints the shepherd's CPU seconds (user + system, all its threads: `shepherd_cpu_s` of
exit.json, or, for an Orbit that does not record it, the last value read from /proc while the
shepherd lived), the container's CPU seconds (its cgroup: `peaks.cpu_seconds`), Docker's
daemon CPU seconds over the run (from /proc, for context: dockerd encodes and decodes every
line), the lines expected and written (missing, duplicated, out of order), and last

    ratio: X.XX (target ≤ 1)

the shepherd's CPU over the run's lease (`lease`: 0.5 core × the container's run time, what
the run may use), the median over `--runs` runs. `used` is the shepherd's CPU over the
container's own CPU time (its cgroup): in such a flood the container itself does little (it
writes into a pipe, and waits while the valve holds it; Docker's daemon encodes, stores and
hands back every line), so that time is small and varies from run to run; the shepherd's CPU
per line written (`us/line`) is the steadier figure. `settle` is the time from the container's
`FinishedAt` to the run's final event. `lines/s` is the lines the container wrote per second of
its flood: the shepherd's valve holds it to the pace of the copy, so `written` equals `expected`
with no gap (an Orbit without the valve, `--orbit`, shows a faster flood, fewer lines written
and a gap).

Standalone: `python benchmarks/bench_log_flood.py [--runs N] [--seconds S]`; needs Docker and
the test images (scripts/build-test-images.sh). `--orbit PATH` measures another checkout.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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
    run_records,
    setup_lines,
    shepherd_pids,
    wait_for_shepherds,
)

TARGET = 1.0
TICKS = os.sysconf("SC_CLK_TCK")


def flood_script(seconds: float) -> str:
    # srand() returns the previous seed, so `srand(); srand()` reads the clock (whole seconds).
    return (
        "awk 'BEGIN{srand(); t=srand(); "
        'for(i=1;;i++){printf "%09d-%090d\\n", i, 0; '
        f"if(i%5000==0){{srand(); if(srand()-t>={seconds:g}) break}}}} "
        'print "COUNT " i}\''
    )


def proc_cpu(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) of a live process; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def dockerd_pid() -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == "dockerd":
                    return int(entry)
            except OSError:
                continue
    return None


class ShepherdWatch(threading.Thread):
    """Reads the CPU time of the home's shepherds every 0.1 s (for an Orbit that does not
    record its own)."""

    def __init__(self, home: Path) -> None:
        super().__init__(daemon=True)
        self.home = home
        self.seen: dict[int, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for pid in shepherd_pids(self.home):
                cpu = proc_cpu(pid)
                if cpu is not None:
                    self.seen[pid] = cpu
            time.sleep(0.1)

    def total(self) -> float:
        return sum(self.seen.values())


def check_lines(log: Path) -> tuple[int, int, int, int, int]:
    """(expected, written, missing, duplicated, out of order) numbered lines of log.txt."""
    numbers: list[int] = []
    expected = 0
    with open(log, "rb") as fh:
        for line in fh:
            if line.startswith(b"COUNT "):
                expected = int(line.split()[1])
            elif len(line) == 101 and line[9:10] == b"-":
                numbers.append(int(line[:9]))
    unique = set(numbers)
    missing = len(set(range(1, expected + 1)) - unique)
    backwards = sum(1 for a, b in itertools.pairwise(numbers) if b <= a)
    return expected, len(numbers), missing, len(numbers) - len(unique), backwards


def one_run(args: argparse.Namespace, env: dict[str, str], home: Path) -> dict[str, float]:
    watch = ShepherdWatch(home)
    watch.start()
    daemon = dockerd_pid()
    daemon0 = proc_cpu(daemon) if daemon else None
    cmd = [sys.executable, str(args.orbit), "run", "-w", "--json", "--no-project"]
    cmd += ["--image", args.image, "--cpus", "0.5", "--mem", "0.25", "--"]
    cmd += ["sh", "-c", flood_script(args.seconds)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_log_flood: orbit run failed:\n{proc.stderr}")
    run_id = str(json.loads(proc.stdout)["id"])
    wait_for_shepherds(home, 120, 0.1, "bench_log_flood: a shepherd did not exit")
    watch.done.set()
    watch.join()
    daemon1 = proc_cpu(daemon) if daemon else None
    run_dir = home / "runs" / run_id
    record = json.loads((run_dir / "exit.json").read_text())
    _, status = run_records(run_dir)
    expected, written, missing, dups, backwards = check_lines(run_dir / "log.txt")
    events, _ = run_records(run_dir)
    return {
        "shepherd": float(record.get("shepherd_cpu_s") or watch.total()),
        "container": float((status.get("peaks") or {}).get("cpu_seconds") or 0.0),
        "dockerd": (daemon1 - daemon0) if daemon0 is not None and daemon1 is not None else -1,
        "lease": 0.5 * _run_seconds(status),
        "wall": wall,
        "expected": expected,
        "written": written,
        "missing": missing,
        "dups": dups,
        "backwards": backwards,
        "gaps": float(bool(record.get("log_incomplete"))),
        "settle": _settle_seconds(events, status),
    }


def _run_seconds(status: dict) -> float:
    """The container's run time, StartedAt → FinishedAt."""
    from datetime import datetime

    try:
        start = datetime.fromisoformat(status["started_at"]).timestamp()
        end = datetime.fromisoformat(status["finished_at"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return 0.0
    return max(end - start, 0.0)


def _settle_seconds(events: dict, status: dict) -> float:
    """Container FinishedAt → the final event (how long copying the rest took)."""
    from datetime import datetime

    try:
        end = datetime.fromisoformat(status["finished_at"]).timestamp()
        final = datetime.fromisoformat(events[status["state"]]["time"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return -1.0
    return final - end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="flood runs (default 3)")
    parser.add_argument("--seconds", type=float, default=10, help="flood length (default 10)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home")
    add_image_option(parser)
    add_orbit_options(parser)
    args = parser.parse_args()
    require_docker(args.image, "bench_log_flood")
    home = Path(tempfile.mkdtemp(prefix="orbit-bench-flood-"))
    (home / "config.yaml").write_text("format: 1\ncount_outside_use: false\n")
    pycache = None if args.env_as_is else Path(tempfile.mkdtemp(prefix="orbit-bench-pyc-"))
    env = child_environ(home, pycache, drop=("ORBIT_FAKE_GPUS", "ORBIT_DATA"))
    print(f"bench_log_flood: {args.seconds:g} s awk flood of 100-byte lines, --cpus 0.5")
    print(machine(docker=True, load=True))
    print(setup_lines(args.orbit, home, pycache))
    head = (
        f"{'run':>4}{'shepherd':>10}{'lease':>8}{'container':>11}{'dockerd':>9}"
        f"{'ratio':>7}{'used':>6}"
        f"{'expected':>10}{'written':>9}{'missing':>9}{'dups':>6}{'back':>6}{'gap':>5}"
        f"{'wall':>7}{'settle':>8}{'us/line':>9}{'lines/s':>9}"
    )
    print(head)
    ratios = []
    try:
        for i in range(1, args.runs + 1):
            r = one_run(args, env, home)
            ratio = r["shepherd"] / r["lease"] if r["lease"] > 0 else float("inf")
            used = r["shepherd"] / r["container"] if r["container"] > 0 else float("inf")
            ratios.append(ratio)
            print(
                f"{i:>4}{r['shepherd']:>9.2f}s{r['lease']:>7.2f}s{r['container']:>10.2f}s"
                f"{r['dockerd']:>8.2f}s{ratio:>7.2f}{used:>6.2f}{r['expected']:>10.0f}{r['written']:>9.0f}{r['missing']:>9.0f}"
                f"{r['dups']:>6.0f}{r['backwards']:>6.0f}{'yes' if r['gaps'] else 'no':>5}"
                f"{r['wall']:>6.1f}s{r['settle']:>7.1f}s"
                f"{1e6 * r['shepherd'] / max(r['written'], 1):>9.1f}"
                f"{r['expected'] / args.seconds:>9.0f}"
            )
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
        if pycache is not None:
            shutil.rmtree(pycache, ignore_errors=True)
    print(ratio_line(statistics.median(ratios), TARGET))


if __name__ == "__main__":
    main()

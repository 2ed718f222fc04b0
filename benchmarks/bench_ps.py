#!/usr/bin/env python3
"""Latency of `orbit ps -a` over a large history, against a bare interpreter start.

It fills a temporary ORBIT_HOME with finished runs (10,000 by default), then times, in
alternation after one unmeasured warm-up of each,

    python orbit.py ps -a > /dev/null      (nothing changed: the listing snapshot)
    python -c pass                         (the floor: interpreter start and exit)
    python orbit.py ps > /dev/null         (active runs only: the queue/ and active/ markers)
    ps -a with cache/listing.json deleted  (no snapshot: the listing index plus one stat
                                            per run, and a new snapshot written; through
                                            `sh -c`, which adds about 1 ms)

then, from the snapshot the last of those wrote, alternates `python -c pass` with

    python orbit.py ps -a > /dev/null      right after a change (untimed, just before): one
                                            finished run's status.yaml rewritten and its
                                            index line appended, as `orbit mv` does; another
                                            run each round

and prints the medians, p90s, `after a change, N runs: X.XX (target ≤ 3)` and last
`ratio: X.XX (target ≤ 1.5)`, ps -a over `-c pass`. With two sizes (`--runs 10000,100000`,
homes DIR/10000 and DIR/100000 under `--home DIR`), each is measured in turn and the last
line is ps -a of the larger over the smaller (target ≤ 1.5; the printed table grows with
the runs), after the same ratio for `ps` and for `ps -a` after a change.

How the history is made: one template run goes through the real code path — RunStore.create,
then the same store calls the tick and the shepherd make (admitted → started → exit.json →
finalize), plus the lock and log files those processes leave behind — so its directory is
exactly what a finished `orbit run` leaves. Every other run is written with RunStore.create too
(state succeeded/failed/cancelled, its final status, and through `prepare` the same events,
exit.json and leftover files), and its file set is checked against the template's. That writes
index.jsonl as the CLI does; one `orbit ps -a` afterwards checks that it needs no rebuild.

Standalone: `python benchmarks/bench_ps.py [--runs N[,M]] [--repeats N] [--home DIR]`; no
Docker needed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P

from common import (
    REPO,
    add_orbit_options,
    admit,
    alternate,
    child_environ,
    index_lines,
    machine,
    ms_header,
    ms_row,
    ratio_line,
    setup_lines,
    timed,
)

TARGET = 1.5  # ps -a over -c pass, nothing changed
TARGET_CHANGED = 3.0  # ps -a right after a change over -c pass
TARGET_SCALE = 1.5  # with two sizes: ps -a over the larger history over the smaller
sys.path.insert(0, str(REPO))

from orbit.store.exitrecord import finalize_from_exit, write_exit  # noqa: E402
from orbit.store.exitrecord import outcome as settle  # noqa: E402
from orbit.store.files import append_jsonl  # noqa: E402
from orbit.store.home import Home  # noqa: E402
from orbit.store.model import Run, RunState, now_iso  # noqa: E402
from orbit.store.runs import RunStore  # noqa: E402

# Files a run's processes leave beside the record: the per-run lock (RunStore.update), the
# shepherd's liveness lock, its log (execute/spawn.py) and pid (execute/shepherd.py). Checked
# against a real `orbit run -w … -- true` (no output, hence no log.pos) at commit a63a3b0.
LEFTOVERS = (".lock", "shepherd.lock", "shepherd.log", "shepherd.pid")
IMAGES = ("orbit-test/python:3", "orbit-test/busybox:1", "pytorch/pytorch:2.3.1-cuda12.1-runtime")


# --- filling ORBIT_HOME ----------------------------------------------------------------------
def spec_for(i: int, rng: random.Random) -> dict[str, Any]:
    """A request shaped like execute/submit.py's, varied like a real history of sweeps."""
    sweep = i // 40
    lr, seed = rng.choice(("1e-3", "3e-4", "1e-4")), rng.randrange(5)
    grouped = rng.random() < 0.6
    copy = rng.random() < 0.7
    command = ["python", "train.py", "--lr", lr, "--seed", str(seed)]
    project: dict[str, Any] = {"mode": "none"}
    if copy:
        digest = f"{rng.getrandbits(256):064x}"
        project = {
            "mode": "copy",
            "path": "/home/user/src/experiment",
            "commit": f"{rng.getrandbits(160):040x}",
            "dirty": rng.random() < 0.3,
            "snapshot": digest,
            "files": rng.randrange(20, 400),
            "bytes": rng.randrange(10_000, 5_000_000),
        }
    return {
        "name": f"lr{lr}-s{seed}-{i}" if rng.random() < 0.6 else None,
        "group": f"sweep-{sweep}" if grouped else None,
        "folder": "papers/ablation" if rng.random() < 0.2 else None,
        "tags": {"lr": lr, "seed": str(seed)} if grouped else {},
        "params": {},
        "image": rng.choice(IMAGES),
        "dockerfile": None,
        "command": command,
        "resources": {
            "cpus": float(rng.choice((1, 2, 4, 8))),
            "mem_gb": rng.choice((0.25, 4.0, 16.0, 32.0)),
        },
        "env": {"PYTHONUNBUFFERED": "1"} if rng.random() < 0.5 else {},
        "pass_env": [],
        "mounts": [],
        "network": "bridge",
        "timeout_min": rng.choice((None, None, 60.0, 240.0)),
        "user": f"{os.getuid()}:{os.getgid()}",
        "project": project,
        "node": platform.node(),
        "submitted_by": {"user": os.environ.get("USER") or str(os.getuid()), "pid": 4242},
    }


def outcome(roll: float, mem_gb: float) -> dict[str, Any]:
    """An exit record (exit.json); a uniform `roll` gives a realistic mix of results."""
    record: dict[str, Any] = {
        "exit_code": 0,
        "oom_killed": False,
        "oom_kill_count": 0,
        "kernel_oom_events": None,
        "docker_oom_killed": False,
        "timed_out": False,
        "timeout_min": None,
        "cancelled": False,
        "mem_limit_gb": mem_gb,
    }
    if roll < 0.10:
        record["exit_code"] = 1
    elif roll < 0.13:
        record.update(exit_code=137, oom_killed=True, oom_kill_count=1, docker_oom_killed=True)
    elif roll < 0.15:
        record.update(exit_code=None, cancelled=True)
    return record


def make_template(store: RunStore, rng: random.Random) -> Run:
    """One run through the real calls: create (queued), admit, start, exit.json, finalize."""
    home = store.home
    spec = spec_for(0, rng)
    spec["project"] = {"mode": "none"}
    run = store.create(spec, reason="waiting for the scheduler", actor="cli:4242")
    admit(store, run.id, "cli:4242", dict(spec["resources"]))  # sched/tick.py _admit
    for name in LEFTOVERS[1:]:  # execute/spawn.py, execute/shepherd.py
        (run.dir / name).write_text("4243\n" if name.endswith(".pid") else "")
    store.transition(  # execute/shepherd.py _watch
        run.id,
        RunState.RUNNING,
        actor=f"shepherd:{run.id}",
        event="started",
        reason=None,
        started_at=now_iso(),
        container=f"orbit-{home.tag}-{run.id}",
        container_id=f"{rng.getrandbits(256):064x}",
    )
    record = outcome(0.5, spec["resources"]["mem_gb"])  # a success
    record.update(finished_at=now_iso(), peaks={"mem_bytes": 0, "cpu_cores": 0.0})
    write_exit(run.dir, record)
    finalize_from_exit(store, run.id, actor=f"shepherd:{run.id}")
    return store.load(run.id)


def file_set(run_dir: Path) -> set[str]:
    return {p.name + ("/" if p.is_dir() else "") for p in run_dir.iterdir()}


def make_finished(store: RunStore, i: int, rng: random.Random) -> Run:
    """A finished run through RunStore.create with its final status, events and exit.json."""
    spec = spec_for(i, rng)
    res = spec["resources"]
    record = outcome(rng.random(), res["mem_gb"])
    state, reason = settle(record)
    # create stamps submitted_at itself, a moment from now: the rest follows it.
    base = datetime.now(UTC)
    admitted_at = now_iso(base + timedelta(seconds=0.05))
    started_at = now_iso(base + timedelta(seconds=0.5))
    now = now_iso(base + timedelta(seconds=0.5 + rng.uniform(1, 30)))
    peaks = {"mem_bytes": rng.randrange(1 << 20, 1 << 34), "cpu_cores": round(rng.random(), 2)}
    record.update(finished_at=now, peaks=peaks)
    actor = f"shepherd:{i}"
    container = {
        "container": f"orbit-{store.home.tag}-{i}",
        "container_id": f"{rng.getrandbits(256):064x}",
    }
    status = {
        "exit_code": record["exit_code"],
        "started_at": started_at,
        "finished_at": now,
        "lease": dict(res),
        "admitted_at": admitted_at,
        **container,
        "oom_killed": record["oom_killed"],
        "peaks": peaks,
    }

    def prepare(run_id: str, staging: Path) -> None:
        # create's own `submitted` line carries the final state: a real one says queued.
        events = staging / "events.jsonl"
        submitted = json.loads(events.read_text())
        events.unlink()
        append_jsonl(events, {**submitted, "state": "queued"})
        admitted = {
            "reason": "starting the container",
            "lease": dict(res),
            "admitted_at": admitted_at,
        }
        started = {"reason": None, "started_at": started_at, **container}
        final = {
            "reason": reason,
            "exit_code": record["exit_code"],
            "oom_killed": record["oom_killed"],
            "finished_at": now,
            "peaks": peaks,
        }
        lines = [
            ("admitted", "starting", "cli:4242", admitted),
            ("started", "running", actor, started),
            (state.value, state.value, actor, final),
        ]
        for (event, st, who, fields), at in zip(lines, (admitted_at, started_at, now), strict=True):
            append_jsonl(events, {"time": at, "event": event, "state": st, "actor": who, **fields})
        write_exit(staging, record)
        for name in LEFTOVERS:
            (staging / name).write_text("4243\n" if name.endswith(".pid") else "")

    extra = {"code.diff": b""} if spec["project"]["mode"] == "copy" else {}
    return store.create(
        spec,
        state=state,
        reason=reason or "",
        actor="cli:4242",
        extra_files=extra,
        status_fields={**status, "reason": reason},
        prepare=prepare,
    )


def fill(home: Home, n_runs: int) -> str:
    """Write `n_runs` finished runs; a one-line account of how."""
    store = RunStore(home)
    rng = random.Random(1)
    template = make_template(store, rng)
    expected = file_set(template.dir)
    print(f"template run {template.id}: {' '.join(sorted(expected))}")
    t0 = time.perf_counter()
    for i in range(2, n_runs + 1):
        run = make_finished(store, i, rng)
        if i == 2 or i % 1000 == 0:
            got = file_set(run.dir) - {"code.diff"}
            if got != expected:
                raise SystemExit(
                    f"bench_ps: run {run.id} has {sorted(got)}, not {sorted(expected)}"
                )
        if i % 2000 == 0:
            print(f"  {i} runs …", flush=True)
    took = time.perf_counter() - t0
    per = took / max(1, n_runs - 1) * 1000
    return f"{n_runs - 1} runs written with RunStore.create in {took:.1f} s ({per:.2f} ms/run)"


# --- timing ----------------------------------------------------------------------------------
def change(home: Home, round_no: int) -> None:
    """One change of the kind `orbit mv` makes: a finished run's status.yaml replaced and its
    index line appended (RunStore.update), another run each round."""
    run_id = str(2 + (round_no * 7919) % max(1, len(os.listdir(home.runs_dir)) - 1))
    RunStore(home).update(run_id, lambda run: {"folder": f"moved/{round_no}"}, actor="bench")


def measure(
    root: Path, n_runs: int, orbit_py: Path, pycache: Path | None, repeats: int, tag: str
) -> dict[str, list[float]]:
    """Fill (or reuse) the home at `root`, then time the commands there, alternated."""
    home = Home.from_environ({"ORBIT_HOME": str(root)})
    env = child_environ(root, pycache)
    ps_all = [sys.executable, str(orbit_py), "ps", "-a"]
    runs_dir = home.runs_dir
    existing = len(os.listdir(runs_dir)) if runs_dir.is_dir() else 0
    if existing:
        print(f"history{tag}: reusing {existing} existing run directories in {root}")
    else:
        print(f"history{tag}: {fill(home, n_runs)}")
    before = index_lines(home.index_path)
    timed(ps_all, env, "bench_ps")
    after = index_lines(home.index_path)
    rebuilt = "no rebuild needed" if after == before else f"{after - before} rows appended"
    print(f"index.jsonl{tag}: {before} lines before the first `ps -a`, {after} after ({rebuilt})")
    time.sleep(2.1)  # the signal settles (listing.RACY_S): the next `ps -a` writes a snapshot
    timed(ps_all, env, "bench_ps")
    snapshot = root / "cache" / "listing.json"
    commands = {
        "ps -a": ps_all,
        "-c pass": [sys.executable, "-c", "pass"],
        "ps": [sys.executable, str(orbit_py), "ps"],
        "ps -a stale": ["sh", "-c", 'rm -f "$0"; exec "$@"', str(snapshot), *ps_all],
    }
    times = alternate(commands, env, "bench_ps", repeats)
    # Then, with the snapshot the last stale listing wrote, each `ps -a` right after a change
    # (untimed, just before it); a snapshot is not rewritten while changes are this recent,
    # so each listing starts from that one: N changes since it by the Nth repeat.
    print(f"after a change{tag}: {repeats} rounds of a change, then `ps -a`, then `-c pass`")
    times["ps -a changed"], times["-c pass (2)"] = [], []
    for n in range(repeats):
        change(home, n)
        times["ps -a changed"].append(timed(ps_all, env, "bench_ps"))
        times["-c pass (2)"].append(timed(commands["-c pass"], env, "bench_ps"))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Time `orbit ps -a` over many finished runs against `python -c pass` "
        "(and `orbit ps`, and `ps -a` right after a change), alternated, one warm-up of each.",
    )
    parser.add_argument(
        "--runs",
        default="10000",
        help="runs in the home (10000); two sizes, e.g. 10000,100000, also print the larger "
        "over the smaller",
    )
    parser.add_argument("--repeats", type=int, default=15, help="timed runs of each (15)")
    parser.add_argument(
        "--home",
        type=Path,
        help="use this ORBIT_HOME (filled when it has no runs; kept); with two sizes, DIR/N",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary ORBIT_HOME")
    add_orbit_options(parser)
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.runs.split(",")]
    except ValueError:
        parser.error(f"--runs: expected N or N,M, got {args.runs!r}")
    if not 1 <= len(sizes) <= 2 or min(sizes) < 1 or args.repeats < 1:
        parser.error("--runs takes one or two sizes, each at least 1; --repeats at least 1")

    print("bench_ps: wall time of `orbit ps -a > /dev/null` vs `python -c pass` (and `orbit ps`)")
    print(machine())
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-ps-"))
    base = args.home.resolve() if args.home else scratch / "home"
    roots = {n: base / str(n) if len(sizes) > 1 else base for n in sizes}
    pycache = None if args.env_as_is else scratch / "pycache"
    orbit_py = args.orbit.resolve()
    print(setup_lines(orbit_py, roots[sizes[0]], pycache))
    results: dict[int, dict[str, float]] = {}
    try:
        for n in sizes:
            tag = f" ({n} runs)" if len(sizes) > 1 else ""
            times = measure(roots[n], n, orbit_py, pycache, args.repeats, tag)
            med = {k: statistics.median(v) for k, v in times.items()}
            results[n] = med
            print()
            print(f"{ms_header(14)}{'vs -c pass':>12}{tag}")
            for key, values in times.items():
                floor = med["-c pass (2)" if key == "ps -a changed" else "-c pass"]
                print(f"{ms_row(key, values, 14)}{med[key] / floor:11.2f}x")
            print()
    finally:
        if args.home or args.keep:
            print(f"kept ORBIT_HOME: {base}")
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)

    for n, med in results.items():
        after = med["ps -a changed"] / med["-c pass (2)"]
        print(f"after a change, {n} runs: {after:.2f} (target ≤ {TARGET_CHANGED:g})")
    if len(sizes) > 1:
        # The sizes are measured one after the other, so each median is taken over its own
        # `-c pass` first: a load that changed in between cancels out.
        small, large = sorted(sizes)

        def grown(key: str) -> float:
            floor = "-c pass (2)" if key == "ps -a changed" else "-c pass"
            return (results[large][key] / results[large][floor]) / (
                results[small][key] / results[small][floor]
            )

        print(
            f"-c pass, {large} runs' phase over {small}'s: "
            f"{results[large]['-c pass'] / results[small]['-c pass']:.2f}"
        )
        for key in ("ps", "ps -a changed", "ps -a stale"):
            print(f"{key}, {large} runs over {small} (each over its -c pass): {grown(key):.2f}")
        print(f"ps -a, {large} runs over {small} (each over its -c pass; one line a run):")
        print(ratio_line(grown("ps -a"), TARGET_SCALE))
        return 0
    med = results[sizes[0]]
    print(ratio_line(med["ps -a"] / med["-c pass"], TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())

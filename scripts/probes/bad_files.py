#!/usr/bin/env python3
"""The reliability audit's bad-file matrix (P14), rerun: damage one file of a home at a time and
see whether the rest of the home still works.

For each of 16 home files × {empty, garbage}, for a finished run's status.yaml replaced by a
FIFO, a directory and a symlink loop, and for a running run's garbled status.yaml, a fresh home
(runs 1 and 2 finished, 1 the damaged one) is asked, each as a real `python orbit.py` process
with a deadline: `ps -a`, `show 2`, `resources`, `logs 2`, `doctor` and a new `run -w` (admitted
by its tick); for the running run also `cancel`. Each answer is `ok` (exit 0; for doctor, its
list of checks, whatever they say), `refused` (one `orbit: …` line naming the damaged file and
a non-zero exit: the expected answer for a damaged config.yaml), `hang` (the deadline passed)
or `FAIL` (anything else). Prints one line per case and the counts; exit 1 when any `hang` or
`FAIL`.

    python scripts/probes/bad_files.py [--image orbit-test/busybox:1] [--only config.yaml]

Needs Docker and the image; writes only under a temporary directory, which it removes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from orbit.store.home import Home  # noqa: E402
from orbit.store.model import RunState  # noqa: E402
from orbit.store.runs import RunStore  # noqa: E402

GARBAGE = b"\x00\xff{garbage"
HOME_FILES = [
    "runs/1/run.yaml",
    "runs/1/status.yaml",
    "runs/1/events.jsonl",
    "runs/1/metrics.jsonl",
    "runs/1/exit.json",
    "index.jsonl",
    "cache/listing.json",
    "cache/tick-runs.jsonl",
    "runtime/next_id",
    "runtime/markers_checked",
    "locks/scheduler.lock",
    "nodes.yaml",
    "notify.yaml",
    "auth.json",
    "datasets.yaml",
    "config.yaml",
]
DEADLINE = 30.0


def orbit(home: Path, *args: str, timeout: float = DEADLINE) -> tuple[str, str]:
    """(verdict, detail) of one command."""
    env = {**os.environ, "ORBIT_HOME": str(home)}
    env.pop("ORBIT_DATA", None)
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "orbit.py"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return "hang", f"no answer within {timeout:.0f} s"
    err = done.stderr.strip()
    if "Traceback" in err or "internal error" in err:
        return "FAIL", err.splitlines()[-1]
    if args[0] == "doctor":
        try:
            checks = json.loads(done.stdout)["checks"]
        except (ValueError, KeyError):
            return "FAIL", f"exit {done.returncode}: {err}"
        failing = [f"{c['name']}: {c['detail']}" for c in checks if c["status"] == "FAIL"]
        return "ok", "; ".join(failing)
    if done.returncode == 0:
        return "ok", ""
    lines = err.splitlines()
    if len(lines) == 1 and lines[0].startswith("orbit: "):
        return "refused", f"exit {done.returncode}: {lines[0]}"
    return "FAIL", f"exit {done.returncode}: {err}"


def make_home(base: Path, image: str) -> Path:
    home = base / "home"
    home.mkdir()
    (home / "config.yaml").write_text("format: 1\ncount_outside_use: false\n")
    store = RunStore(Home(home))
    for i in (1, 2):
        store.create(
            {"name": f"done{i}", "image": image, "command": ["true"]},
            state=RunState.SUCCEEDED,
            reason="",
            actor="probe",
        )
        (home / "runs" / str(i) / "log.txt").write_text(f"line of run {i}\n")
        (home / "runs" / str(i) / "exit.json").write_text('{"format": 1, "exit_code": 0}\n')
    orbit(home, "ps", "-a")  # the listing caches exist, as in a home in use
    orbit(home, "scheduler", "tick")
    for name, text in {
        "nodes.yaml": "format: 1\nnodes: {}\n",
        "notify.yaml": "format: 1\nprofiles: {}\n",
        "auth.json": '{"format": 1, "profiles": {}}\n',
        "datasets.yaml": "format: 1\ndatasets: {}\n",
    }.items():
        path = home / name
        path.write_text(text)
        path.chmod(0o600)
    return home


def damage(path: Path, how: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(GARBAGE)
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "dir":
        path.mkdir()
    elif how == "symlink loop":
        os.symlink(path.name, path)


def commands(image: str) -> dict[str, list[str]]:
    run = ["run", "--no-project", "--image", image, "--cpus", "0.5", "--mem", "0.1", "-w", "--"]
    return {
        "ps -a": ["ps", "-a"],
        "show 2": ["show", "2"],
        "resources": ["resources"],
        "logs 2": ["logs", "2"],
        "doctor": ["doctor", "--json"],
        "new run": [*run, "true"],
    }


def case(image: str, target: str, how: str) -> dict[str, tuple[str, str]]:
    with tempfile.TemporaryDirectory(prefix="orbit-badfiles-", ignore_cleanup_errors=True) as tmp:
        home = make_home(Path(tmp), image)
        damage(home / target, how)
        results = {name: orbit(home, *argv) for name, argv in commands(image).items()}
        subprocess.run(["docker", "rm", "-f", *_containers(home)], capture_output=True, timeout=60)
        return results


def running_case(image: str) -> dict[str, tuple[str, str]]:
    """A running run whose status.yaml is garbled: counted by `resources`, stopped by cancel."""
    with tempfile.TemporaryDirectory(prefix="orbit-badfiles-", ignore_cleanup_errors=True) as tmp:
        home = make_home(Path(tmp), image)
        spec = ["--no-project", "--image", image, "--cpus", "0.5", "--mem", "0.1", "--json"]
        orbit(home, "run", *spec, "--", "sleep", "60")
        status = home / "runs" / "3" / "status.yaml"
        deadline = time.monotonic() + DEADLINE
        while "state: running" not in status.read_text():
            if time.monotonic() > deadline:
                return {"setup": ("FAIL", "run 3 never ran")}
            time.sleep(0.1)
        status.write_bytes(GARBAGE)
        results = {name: orbit(home, *argv) for name, argv in commands(image).items()}
        env = {**os.environ, "ORBIT_HOME": str(home)}
        shown = subprocess.run(
            [sys.executable, str(ROOT / "orbit.py"), "resources", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
        leased = [lease["id"] for lease in json.loads(shown.stdout or "{}").get("leases", [])]
        results["lease counted"] = ("ok", "") if "3" in leased else ("FAIL", f"leases {leased}")
        results["cancel 3"] = orbit(home, "cancel", "3")
        subprocess.run(["docker", "rm", "-f", *_containers(home)], capture_output=True, timeout=60)
        return results


def _containers(home: Path) -> list[str]:
    found = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=orbit.home={home.resolve()}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return found.stdout.split() or ["none"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="orbit-test/busybox:1")
    parser.add_argument("--only", help="one home file (as listed in HOME_FILES)")
    args = parser.parse_args()
    cases: list[tuple[str, str]] = [
        (f, how)
        for f in HOME_FILES
        if not args.only or f == args.only
        for how in ("empty", "garbage")
    ]
    if not args.only:
        cases += [("runs/1/status.yaml", how) for how in ("fifo", "dir", "symlink loop")]
    totals: Counter[str] = Counter()
    problems = []
    for target, how in cases:
        results = case(args.image, target, how)
        totals.update(v for v, _ in results.values())
        summary = " ".join(f"{name}={v}" for name, (v, _) in results.items())
        print(f"{target} ({how}): {summary}", flush=True)
        for name, (verdict, detail) in results.items():
            if verdict != "ok" or (name == "doctor" and detail):
                print(f"    {name}: {verdict} {detail}", flush=True)
            if verdict in ("hang", "FAIL"):
                problems.append(f"{target} ({how}) {name}: {verdict} {detail}")
    if not args.only:
        results = running_case(args.image)
        totals.update(v for v, _ in results.values())
        summary = " ".join(f"{name}={v}" for name, (v, _) in results.items())
        print(f"running run's status.yaml (garbage): {summary}", flush=True)
        problems += [f"running run {n}: {v} {d}" for n, (v, d) in results.items() if v != "ok"]
    print(
        f"\n{len(cases) + (0 if args.only else 1)} cases; "
        + ", ".join(f"{k} {totals[k]}" for k in ("ok", "refused", "hang", "FAIL"))
    )
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

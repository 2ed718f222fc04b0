"""Probe P5 of the reliability audit: SIGKILL a run's shepherd during a fast flood, again and
again, each kill followed by `orbit scheduler tick`; count the lines log.txt lost.

    python scripts/probes/flood_kill.py [--lines 400000] [--kills 12] [--docker-log-mb 150]

Runs against the Docker engine DOCKER_HOST names (the shared one by default) in a temporary
ORBIT_HOME, with the image orbit-test/busybox:1. `--docker-log-mb 60` gives Docker's log cap
of Orbit before docker_log_mb (20m × 3), for a before/after comparison. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "orbit-test/busybox:1"


def orbit(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORBIT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "orbit", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def status(home: Path, run_id: str) -> dict:
    return json.loads(orbit(home, "show", "--json", run_id).stdout or "{}")


def live_pid(run_dir: Path, not_pid: int) -> int | None:
    try:
        pid = int((run_dir / "shepherd.pid").read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid if pid != not_pid else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=400_000)
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--docker-log-mb", type=int, default=150)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="probe-p5-") as tmp:
        home = Path(tmp) / "home"
        orbit(home, "config", "set", "count_outside_use", "false")
        orbit(home, "config", "set", "docker_log_mb", str(args.docker_log_mb))
        awk = f"awk 'BEGIN{{for(i=1;i<={args.lines};i++) printf \"%09d-%090d\\n\", i, 0}}'"
        script = f"sleep 1; {awk}; echo END; sleep 1; echo after"
        res = orbit(home, "run", "--json", "--no-project", "--image", IMAGE, "--cpus", "1",
                    "--mem", "0.25", "-n", "fk", "--", "sh", "-c", script)  # fmt: skip
        if res.returncode != 0:
            print(res.stderr, file=sys.stderr)
            return 1
        run_id = str(json.loads(res.stdout)["id"])
        run_dir = home / "runs" / run_id
        killed, last = 0, 0
        deadline = time.monotonic() + 300
        while killed < args.kills and time.monotonic() < deadline:
            pid = live_pid(run_dir, last)
            if pid is None or status(home, run_id).get("state") != "running":
                time.sleep(0.05)
                continue
            time.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            killed, last = killed + 1, pid
            time.sleep(0.05)
            orbit(home, "scheduler", "tick")
        waited = orbit(home, "wait", run_id)
        lines = (run_dir / "log.txt").read_text().splitlines()
        numbers = {int(line[:9]) for line in lines if line[:9].isdigit()}
        out = {
            "probe": "P5 flood_kill",
            "docker_log_mb": args.docker_log_mb,
            "lines": args.lines,
            "kills": killed,
            "lost": args.lines - len(numbers),
            "duplicated": sum(1 for line in lines if line[:9].isdigit()) - len(numbers),
            "end_lines": [lines.count("END"), lines.count("after")],
            "wait": waited.stdout.strip(),
        }
        subprocess.run(["docker", "rm", "-f", status(home, run_id).get("container") or "x"],
                       capture_output=True, check=False)  # fmt: skip
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Probe P2 of the reliability audit: `orbit sweep` of 200 runs killed with -9 at several
moments (with and without --pass-env), then one tick; what is left.

    python scripts/probes/sweep_kill.py [--runs 200] [--delays 0.3,0.5,0.7,0.9,1.2]

A negative delay kills at the reveal instead: as soon as the first `queue/` marker appears.

Each try uses a fresh temporary ORBIT_HOME (count_outside_use: false) and the test image
orbit-test/busybox:1; runs are `true` at --cpus 0.05 --mem 0.01 and are cancelled after the
check, so no container is left running. Prints one line per try: runs revealed vs staged
before the tick, after it, debris (hidden or empty run directories, batch records), secrets
left, and what `wait -g` (run with a 1-s timeout, after cancelling) and `ps -g --json` say.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ORBIT = [sys.executable, str(Path(__file__).resolve().parents[2] / "orbit.py")]
ACTIVE = ("queued", "starting", "running")
B = ["--no-project", "--image", "orbit-test/busybox:1", "--cpus", "0.05", "--mem", "0.01"]


def state(home: Path) -> dict[str, int]:
    runs = home / "runs"
    names = os.listdir(runs) if runs.exists() else []
    visible = [n for n in names if not n.startswith(".")]
    full = [n for n in visible if (runs / n / "status.yaml").exists()]
    secrets = home / "runtime" / "secrets"
    batches = home / "runtime" / "batches"
    return {
        "visible": len(full),
        "staged": sum(n.startswith(".staging-") for n in names),
        "empty": len(visible) - len(full),
        "batches": len(os.listdir(batches)) if batches.exists() else 0,
        "secrets": len(os.listdir(secrets)) if secrets.exists() else 0,
    }


def one(n: int, delay: float, secret: bool) -> str:
    with tempfile.TemporaryDirectory(prefix="orbit-p2-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "config.yaml").write_text("format: 1\ncount_outside_use: false\n")
        env = {**os.environ, "ORBIT_HOME": str(home), "P2_SECRET": "hunter22"}
        extra = ["--pass-env", "P2_SECRET"] if secret else []
        values = ",".join(str(i) for i in range(n))
        argv = [*ORBIT, "sweep", *B, *extra, "-g", "sw", "-p", f"i={values}", "--", "true"]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if delay < 0:  # at the reveal: as soon as the first queue marker appears
            queue = home / "queue"
            while proc.poll() is None and not (queue.exists() and any(queue.iterdir())):
                time.sleep(0.0005)
        else:
            time.sleep(delay)
        proc.kill()
        proc.wait()
        before = state(home)

        def orbit(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*ORBIT, *args], env=env, capture_output=True, text=True, timeout=timeout
            )

        orbit("scheduler", "tick")
        after = state(home)
        ps = orbit("ps", "-a", "-g", "sw", "--json")
        listed = json.loads(ps.stdout) if ps.returncode == 0 else {}
        ids = [str(r["id"]) for r in listed.get("runs", []) if r.get("state") in ACTIVE]
        if ids:
            orbit("cancel", *ids)
        waited = orbit("wait", "-g", "sw")
        said = (waited.stderr.strip().splitlines() or [""])[-1][:90]
        moment = "reveal" if delay < 0 else f"{delay:.1f}s"
        return (
            f"delay {moment} secrets={'y' if secret else 'n'} killed rc={proc.returncode}: "
            f"before tick visible {before['visible']} staged {before['staged']} "
            f"empty {before['empty']} secrets {before['secrets']}; after tick visible "
            f"{after['visible']} staged {after['staged']} empty {after['empty']} batch records "
            f"{after['batches']} secrets {after['secrets']}; ps -g: "
            f"{len(listed.get('runs', []))} runs, interrupted "
            f"{[x['count'] for x in listed.get('interrupted', [])]}; wait -g exit "
            f"{waited.returncode}: {said!r}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--delays", default="0.3,0.5,0.7,0.9,1.2")
    args = parser.parse_args()
    for delay in (float(d) for d in args.delays.split(",")):
        for secret in (False, True):
            print(one(args.runs, delay, secret), flush=True)


if __name__ == "__main__":
    main()

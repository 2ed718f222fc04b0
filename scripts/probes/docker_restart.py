"""Probe P12 of the reliability audit: SIGKILL a Docker daemon under two running runs (and a
queued one) for about 20 s, start it again, and report what `ps` and `wait` said meanwhile
and what was recorded after.

    python scripts/probes/docker_restart.py [--down 20]

Uses the tests' second engine (tests/node_engine.py: its own dockerd, socket and bridge), never
the shared one. Prints one JSON object.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from node_engine import SecondEngine  # noqa: E402

IMAGE = "orbit-test/busybox:1"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--down", type=float, default=20.0)
    args = ap.parse_args()
    engine = SecondEngine()
    engine.start()
    try:
        with tempfile.TemporaryDirectory(prefix="probe-p12-") as tmp:
            env = {**os.environ, "ORBIT_HOME": f"{tmp}/home", "PYTHONPATH": str(ROOT)}
            env["DOCKER_HOST"] = engine.docker_host

            def orbit(*a: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
                argv = [sys.executable, "-m", "orbit", *a]
                return subprocess.run(argv, env=env, capture_output=True, text=True,
                                      timeout=timeout, check=False)  # fmt: skip

            orbit("config", "set", "count_outside_use", "false")
            orbit("config", "set", "total_cpus", "2")
            base = ["run", "--json", "--no-project", "--image", IMAGE, "--mem", "0.1"]
            long = "i=0; while [ $i -lt 60 ]; do i=$((i+1)); echo T-$i; sleep 0.5; done"
            ids = {
                "long": orbit(*base, "--cpus", "1", "-n", "long", "--", "sh", "-c", long),
                "short": orbit(*base, "--cpus", "1", "-n", "short", "--", "sh", "-c",
                               "echo S1; sleep 4; echo S2"),
                "big": orbit(*base, "--cpus", "1", "-n", "big", "--", "echo", "B"),
            }  # fmt: skip
            ids_ = {k: str(json.loads(v.stdout)["id"]) for k, v in ids.items()}
            time.sleep(2)
            waiting = subprocess.Popen(
                [sys.executable, "-m", "orbit", "wait", ids_["short"]],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            engine.kill()
            time.sleep(3)
            ps_down = orbit("ps").stdout
            time.sleep(max(0.0, args.down - 3))
            engine.start()
            out, err = waiting.communicate(timeout=120)
            orbit("wait", *ids_.values(), timeout=180)
            result = {"ps_while_down": ps_down, "wait_stderr": err, "wait_stdout": out}
            for name, run_id in ids_.items():
                shown = json.loads(orbit("show", "--json", run_id).stdout)
                status = Path(f"{tmp}/home/runs/{run_id}/status.yaml").read_text()
                log = Path(f"{tmp}/home/runs/{run_id}/log.txt").read_text().split()
                result[name] = {
                    "state": shown["state"],
                    "reason": shown["reason"],
                    "log_lines": len(log),
                    "docker_unreachable": "docker_unreachable" in status,
                    "wait": orbit("wait", run_id).stdout.strip(),
                }
            print(json.dumps(result, indent=1))
    finally:
        engine.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

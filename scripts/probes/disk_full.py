"""Probe P13 of the reliability audit (its disk-full part): a flood into a run whose
ORBIT_HOME is a small tmpfs; report what `ps`, `show`, `wait` and shepherd.log say while the
disk is full, then grow the tmpfs and count the lines log.txt lost.

    python scripts/probes/disk_full.py [--lines 200000] [--size-mb 8]

Needs root (`mount`). Runs on the Docker engine DOCKER_HOST names. Prints one JSON object.
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
IMAGE = "orbit-test/busybox:1"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--size-mb", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="probe-p13-") as tmp:
        disk = Path(tmp) / "disk"
        disk.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.size_mb}m", "tmpfs", disk],
                       check=True)  # fmt: skip
        try:
            env = {**os.environ, "ORBIT_HOME": str(disk / "home"), "PYTHONPATH": str(ROOT)}

            def orbit(*a: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
                argv = [sys.executable, "-m", "orbit", *a]
                return subprocess.run(argv, env=env, capture_output=True, text=True,
                                      timeout=timeout, check=False)  # fmt: skip

            orbit("config", "set", "count_outside_use", "false")
            awk = f"awk 'BEGIN{{for(i=1;i<={args.lines};i++) printf \"%09d-%090d\\n\", i, 0}}'"
            flood = ["--", "sh", "-c", f"{awk}; echo END"]
            res = orbit("run", "--json", "--no-project", "--image", IMAGE, "--cpus", "1",
                        "--mem", "0.25", "-n", "full", *flood)  # fmt: skip
            run_id = str(json.loads(res.stdout)["id"])
            run_dir = disk / "home" / "runs" / run_id
            deadline = time.monotonic() + 60
            reason = None
            while time.monotonic() < deadline and not reason:
                reason = json.loads(orbit("show", "--json", run_id).stdout).get("reason")
                reason = reason if reason and "disk" in reason else None
                time.sleep(0.3)
            waiting = subprocess.Popen(
                [sys.executable, "-m", "orbit", "wait", run_id],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            ps = orbit("ps").stdout
            time.sleep(3)
            shepherd_log = (run_dir / "shepherd.log").read_text()
            subprocess.run(["mount", "-o", "remount,size=256m", disk], check=True)
            out, err = waiting.communicate(timeout=120)
            lines = (run_dir / "log.txt").read_text().splitlines()
            numbers = {int(line[:9]) for line in lines if line[:9].isdigit()}
            shown = json.loads(orbit("show", "--json", run_id).stdout)
            print(json.dumps({
                "reason_while_full": reason,
                "ps_while_full": ps,
                "shepherd_log_while_full": shepherd_log,
                "wait_stderr": err,
                "wait_stdout": out,
                "state": shown["state"],
                "reason_after": shown["reason"],
                "lost": args.lines - len(numbers),
                "END": lines.count("END"),
            }, indent=1))  # fmt: skip
            container = shown.get("container") or "x"
            subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
        finally:
            subprocess.run(["umount", "-l", disk], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

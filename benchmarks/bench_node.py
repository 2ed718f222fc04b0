#!/usr/bin/env python3
"""Latency of a run on another node (`orbit run -w --node b`), against `ssh b docker run --rm`.

Node b is this machine reached through a real sshd on loopback (tests/node_setup.py: its own
key, config and port; nothing of /etc/ssh or ~/.ssh is touched), with a home of its own on the
shared Docker engine. Each measured pair runs, in alternation,

    orbit:  python orbit.py run -w --node b --no-project --image IMAGE --cpus 1 --mem 0.25 -- true
    ssh:    ssh [Orbit's options: BatchMode, one shared ControlMaster connection] b \\
                docker run --rm --cpus 1 --memory 256m IMAGE true

after one unmeasured warm-up of each. The baseline is what a person does by hand with the same
connection. It prints the median and p90 of both, the phases of an orbit run from the
primary's events.jsonl (placed, finished here) and the node's (submitted, admitted,
finished: one clock, as both homes are on this machine), and last `ratio: X.XX`, the ratio
of medians (issue 14 sets no target: the figure is for the record).

Standalone: `python benchmarks/bench_node.py [--pairs N]`; needs Docker, the test images and
Debian's openssh-server (scripts/build-test-images.sh; tests/node_setup.py installs sshd).
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

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # REPO: the checkout's orbit
sys.path.insert(2, str(Path(__file__).resolve().parents[1] / "tests"))  # node_setup.py

from common import (
    REPO,
    add_image_option,
    child_environ,
    machine,
    ms_header,
    ms_row,
    require_docker,
    stamp,
)
from node_setup import SshClient, SshServer, ensure_packages

PROG = "bench_node"


def _events(run_dir: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        when = stamp(event.get("time"))
        if when is not None:
            out.setdefault(str(event["event"]), when)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8, help="measured pairs (default 8)")
    add_image_option(parser)
    args = parser.parse_args()
    require_docker(args.image, PROG)
    ensure_packages()
    print(machine(docker=True))
    work = Path(tempfile.mkdtemp(prefix="bench-node-"))
    client = SshClient(work / "client")
    node_home = work / "node-b"
    node_home.mkdir()
    (node_home / "config.yaml").write_text("format: 1\ncount_outside_use: false\n")
    server = SshServer({"PYTHONPATH": str(REPO), "ORBIT_NODE": "b"}, client=client, base=work)
    server.start()
    try:
        home = work / "primary"
        pycache = work / "pycache"
        env = child_environ(home, pycache, drop=("ORBIT_FAKE_GPUS", "ORBIT_DATA"))
        env.update(ORBIT_SSH=client.orbit_ssh_env(), ORBIT_NODE="here")
        orbit = [sys.executable, str(REPO / "orbit.py")]
        add = [*orbit, "node", "add", "b", server.url(), "--home", str(node_home), "--orbit",
               f"{sys.executable} -m orbit"]  # fmt: skip
        subprocess.run(add, env=env, check=True, capture_output=True)
        ssh = [*client.ssh_command(), "-o", "ControlMaster=auto", "-o",
               f"ControlPath={work}/cm-%C", "-o", "ControlPersist=60", "-p", str(server.port),
               "root@127.0.0.1", "--"]  # fmt: skip
        commands = {
            "orbit": [
                *orbit,
                "run",
                "-w",
                "--node",
                "b",
                "--no-project",
                "--image",
                args.image,
                "--cpus",
                "1",
                "--mem",
                "0.25",
                "--",
                "true",
            ],
            "ssh": [*ssh, f"docker run --rm --cpus 1 --memory 256m {args.image} true"],
        }
        times: dict[str, list[float]] = {k: [] for k in commands}
        for i in range(args.pairs + 1):
            for name, cmd in commands.items():
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
                elapsed = time.perf_counter() - t0
                if proc.returncode != 0:
                    raise SystemExit(f"{PROG}: {name} failed:\n{proc.stderr}")
                if i:
                    times[name].append(elapsed)
                time.sleep(0.3)  # the mirror's final tick, the node's clean-up
        print(f"pairs: {args.pairs} (+1 warm-up each), alternated: orbit, ssh")
        print(ms_header(8))
        for name, values in times.items():
            print(ms_row(name, values, 8))
        phases: dict[str, list[float]] = {}
        for run_dir in sorted((home / "runs").iterdir(), key=lambda p: int(p.name))[1:]:
            ev = _events(run_dir)
            status = yaml.safe_load((run_dir / "status.yaml").read_text())
            there = node_home / "runs" / str(status["remote"]["id"])
            node_ev = _events(there)
            spans = {
                "submitted → placed": ev["placed"] - ev["submitted"],
                "placed → node wrote the run": node_ev["submitted"] - ev["placed"],
                "node wrote it → node admitted": node_ev["admitted"] - node_ev["submitted"],
                "node admitted → node finished": node_ev[status["state"]] - node_ev["admitted"],
                "node finished → finished here": ev[status["state"]] - node_ev[status["state"]],
            }
            for key, value in spans.items():
                phases.setdefault(key, []).append(value)
        print("phases of an orbit run (median):")
        for key, values in phases.items():
            print(f"  {key:32}{statistics.median(values) * 1000:8.1f}ms")
        ratio = statistics.median(times["orbit"]) / statistics.median(times["ssh"])
        print(f"ratio: {ratio:.2f} (no target; the overhead of a run on a node, for the record)")
    finally:
        server.stop()
        subprocess.run([*client.ssh_command(), "-O", "exit", "-o", f"ControlPath={work}/cm-%C",
                        "-p", str(server.port), "root@127.0.0.1"], capture_output=True)  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

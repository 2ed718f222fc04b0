#!/usr/bin/env python3
"""The review loop a fresh agent runs, through `orbit mcp` against through the shell: the calls
it makes, the bytes it reads and writes, and the wall time, against one real home and Docker.

The loop: what is free → submit a sweep of 3 runs (one fails) → wait → failures → best → note
on the group. A fresh agent knows Orbit's name and nothing else:

- shell: it discovers the commands (`orbit --help`) and the options of each one it uses
  (`orbit X --help`, six of them), then runs the six commands with `--json` (each a `python
  orbit.py …` process, what an agent's shell tool starts); it reads every byte each call
  prints, stdout and stderr, and writes each command line.
- MCP: its client starts `orbit mcp` once, passes the server's instructions on and lists the
  tools (the schemas the model reads in place of the help), then the model makes the six tool
  calls and reads each result's text block (the same JSON as `--json`, compact) and writes
  each call's name and arguments.

Calls count what the model issues (the instructions and tools/list are the client's, not the
model's, but their bytes are counted as read). Each round runs both ways, alternated, each in
its group of a fresh home; the medians are printed, then `ratio: X.XX (target ≤ 0.5)`: the
MCP loop's model calls over the shell's. The bytes' ratio is printed on the line before, and
above it the bytes of the six answers alone (what a second loop in the same session reads).

Standalone: `python benchmarks/bench_mcp.py [--rounds N] [--image IMAGE] [--keep]`; needs
Docker and the test images (scripts/build-test-images.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py

from common import ORBIT_PY, REPO, add_image_option, child_environ, machine, require_docker
from mcp import Client
from mcp.client.stdio import StdioServerParameters

PROG = "bench_mcp"
TARGET = 0.5  # MCP model calls over the shell's: the discovery calls are what MCP saves
COMMANDS = ("resources", "sweep", "wait", "failures", "best", "note")
# x=3 fails; every run takes about a second, so the wait waits ({{ }}: a sweep's literal braces).
SCRIPT = 'echo "{{\\"loss\\": 0.$0}}" >> "$ORBIT_METRICS"; sleep 1; [ "$0" != 3 ]'


@dataclass
class Loop:
    calls: int = 0  # issued by the model
    read: int = 0  # bytes the model reads
    written: int = 0  # bytes the model writes (command lines, tool calls)
    seconds: float = 0.0
    best: Any = None
    steps: list[tuple[str, int]] = field(default_factory=list)

    def add(self, what: str, wrote: str, got: str, model_call: bool = True) -> None:
        self.calls += model_call
        self.written += len(wrote.encode())
        self.read += len(got.encode())
        self.steps.append((what, len(got.encode())))


def sweep_args(image: str, group: str) -> dict[str, Any]:
    return {
        "command": ["sh", "-c", SCRIPT, "{x}"],
        "params": {"x": ["1", "2", "3"]},
        "group": group,
        "image": image,
        "cpus": 0.1,
        "mem_gb": 0.1,
        "no_project": True,
    }


def shell_loop(env: dict[str, str], image: str, group: str) -> Loop:
    loop = Loop()
    start = time.perf_counter()

    def sh(*argv: str, what: str) -> str:
        cmd = [sys.executable, str(ORBIT_PY), *argv]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        loop.add(what, shlex.join(["orbit", *argv]), proc.stdout + proc.stderr)
        if proc.returncode not in (0, 1 if what == "wait" else 0):
            raise SystemExit(f"{PROG}: {shlex.join(cmd)} failed:\n{proc.stderr}")
        return proc.stdout

    sh("--help", what="help")
    for command in COMMANDS:
        sh(command, "--help", what=f"{command} --help")
    a = sweep_args(image, group)
    sh("resources", "--json", what="resources")
    sh("sweep", "--json", "--image", image, "--cpus", "0.1", "--mem", "0.1", "--no-project",
       "-g", group, "-p", "x=1,2,3", "--", *a["command"], what="sweep")  # fmt: skip
    sh("wait", "-g", group, "--json", what="wait")
    sh("failures", "-g", group, "--json", what="failures")
    loop.best = json.loads(sh("best", "-g", group, "--json", what="best"))["best"]["id"]
    sh("note", "-g", group, "--text", f"x=1 is best (run {loop.best})", "--json", what="note")
    loop.seconds = time.perf_counter() - start
    return loop


async def mcp_loop(env: dict[str, str], image: str, group: str) -> Loop:
    loop = Loop()
    start = time.perf_counter()
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "orbit", "mcp"], env=env, cwd=str(REPO)
    )
    async with Client(params) as client:
        loop.add("instructions", "", client.instructions or "", model_call=False)
        tools = await client.list_tools()
        listed = json.dumps([t.model_dump(mode="json", exclude_none=True) for t in tools.tools])
        loop.add("tools/list", "", listed, model_call=False)

        async def call(name: str, **arguments: Any) -> Any:
            res = await client.call_tool(name, arguments)
            text = res.content[0].text  # type: ignore[union-attr]
            loop.add(name, json.dumps({"name": name, "arguments": arguments}), text)
            if res.is_error:
                raise SystemExit(f"{PROG}: {name} failed: {text}")
            return res.structured_content

        await call("resources")
        await call("sweep", **sweep_args(image, group))
        await call("wait", group=group)
        await call("failures", group=group)
        loop.best = (await call("best", group=group))["best"]["id"]
        await call("note", group=group, text=f"x=1 is best (run {loop.best})")
    loop.seconds = time.perf_counter() - start
    return loop


def median(loops: list[Loop], key: str) -> float:
    return statistics.median(getattr(loop, key) for loop in loops)


def main() -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each both ways")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home")
    add_image_option(parser)
    args = parser.parse_args()
    require_docker(args.image, PROG)
    home = Path(tempfile.mkdtemp(prefix="orbit-bench-mcp-"))
    pycache = home / "pycache"
    env = child_environ(home / "home", pycache, drop=("ORBIT_DATA", "ORBIT_FAKE_GPUS"))
    env["PYTHONPATH"] = str(REPO)
    print(machine(docker=True))
    print(f"loop: {' → '.join(COMMANDS)}; a sweep of 3 runs, one failing; {args.rounds} rounds")
    shell: list[Loop] = []
    tools: list[Loop] = []
    try:
        subprocess.run([sys.executable, str(ORBIT_PY), "ps"], env=env, capture_output=True)
        for i in range(args.rounds):
            shell.append(shell_loop(env, args.image, f"sh{i}"))
            tools.append(asyncio.run(mcp_loop(env, args.image, f"mcp{i}")))
            if shell[-1].best is None or tools[-1].best is None:
                raise SystemExit(f"{PROG}: no best run")
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    print("\nbytes read per step (round 1):")
    for name, loops in (("shell", shell), ("mcp", tools)):
        print(f"  {name:5}  " + ", ".join(f"{what} {n:,}" for what, n in loops[0].steps))
    print(f"\n{'':6}{'calls':>7}{'read B':>10}{'written B':>11}{'wall s':>9}")
    for name, loops in (("shell", shell), ("mcp", tools)):
        print(f"{name:6}{median(loops, 'calls'):>7.0f}{median(loops, 'read'):>10,.0f}"
              f"{median(loops, 'written'):>11,.0f}{median(loops, 'seconds'):>9.2f}")  # fmt: skip
    again = {
        name: statistics.median(
            sum(n for what, n in loop.steps if what in COMMANDS) for loop in loops
        )
        for name, loops in (("shell", shell), ("mcp", tools))
    }
    print(f"answers alone (a second loop, discovery done): shell {again['shell']:,.0f} B, "
          f"mcp {again['mcp']:,.0f} B")  # fmt: skip
    read = median(tools, "read") / median(shell, "read")
    wall = median(tools, "seconds") / median(shell, "seconds")
    print(f"bytes read mcp/shell: {read:.2f}; wall time mcp/shell: {wall:.2f}")
    ratio = median(tools, "calls") / median(shell, "calls")
    print(f"ratio: {ratio:.2f} (target ≤ {TARGET:g})")


if __name__ == "__main__":
    main()

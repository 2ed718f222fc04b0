"""Helpers the benchmark scripts share: the checkout's paths, the machine header, percentiles,
the environment of the timed commands, shepherd watching, a run's own records and admitting a
run as the tick does.

Not a benchmark itself. The scripts import it as `common` with this directory on sys.path, so
each still runs as `python benchmarks/bench_X.py` from anywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from orbit.store.runs import RunStore

REPO = Path(__file__).resolve().parents[1]
ORBIT_PY = REPO / "orbit.py"
DEFAULT_IMAGE = "orbit-test/busybox:1"
# Test-only settings of the environment that must not leak into a benchmark's Orbit.
TEST_ONLY_ENV = ("ORBIT_FAKE_GPUS", "ORBIT_DATA")


# --- figures ---------------------------------------------------------------------------------
def p90(values: list[float]) -> float:
    """The 90th percentile by nearest rank (an observed value, no interpolation)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def ms_header(width: int) -> str:
    """The head of a median/p90 table whose row names are `width` wide."""
    return f"{'':{width}}{'median':>10}{'p90':>10}"


def ms_row(name: str, values: list[float], width: int) -> str:
    """One row of that table: the median and p90 of `values` (seconds), in milliseconds."""
    median, high = statistics.median(values) * 1000, p90(values) * 1000
    return f"{name:{width}}{median:8.1f}ms{high:8.1f}ms"


def ratio_line(ratio: float, target: float, at_least: bool = False) -> str:
    """Every script's last line: `ratio: X.XX (target ≤ N)`, or `≥ N` for a throughput."""
    return f"ratio: {ratio:.2f} (target {'≥' if at_least else '≤'} {target:g})"


def stamp(text: str | None) -> float | None:
    """An ISO time from a run's records as a Unix timestamp; None when absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


# --- the machine -----------------------------------------------------------------------------
def machine(docker: bool = False, load: bool = False) -> str:
    """The header lines: usable CPUs, CPU model, kernel (and the load average), the Python
    running the script (and, with `docker`, the Docker server's version)."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    text = f"machine: nproc {usable}, {cpu or platform.machine()}, Linux {platform.release()}"
    if load:
        text += f", load {os.getloadavg()[0]:.1f}"
    text += f"\npython:  {platform.python_version()} ({sys.executable})"
    if docker:
        version = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        text += f"\ndocker:  {version or 'unknown'}"
    return text


def require_docker(image: str, prog: str) -> None:
    """Exit unless the docker CLI is on PATH and `image` is present locally."""
    if shutil.which("docker") is None:
        raise SystemExit(f"{prog}: the docker CLI is not on PATH")
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
        raise SystemExit(f"{prog}: no local image {image} (scripts/build-test-images.sh)")


# --- options and environment -----------------------------------------------------------------
def add_image_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"image (default {DEFAULT_IMAGE})")


def add_orbit_options(
    parser: argparse.ArgumentParser,
    orbit_help: str = "the orbit.py to time (default: this checkout's), e.g. a patched copy "
    "to compare",
) -> None:
    """--orbit (which orbit.py to time) and --env-as-is (no bytecode cache of our own)."""
    parser.add_argument("--orbit", type=Path, default=ORBIT_PY, help=orbit_help)
    parser.add_argument(
        "--env-as-is",
        action="store_true",
        help="run the commands with this environment unchanged (by default bytecode is cached "
        "in a temporary PYTHONPYCACHEPREFIX, even under PYTHONDONTWRITEBYTECODE)",
    )


def child_environ(
    home: Path | None, pycache: Path | None, drop: tuple[str, ...] = ()
) -> dict[str, str]:
    """The environment of the timed commands: ORBIT_HOME=`home` (when given), without the
    variables in `drop`; with `pycache`, bytecode is cached there (as for an installed package)
    even when PYTHONDONTWRITEBYTECODE is set, and the checkout stays clean."""
    env = {**os.environ}
    if home is not None:
        env["ORBIT_HOME"] = str(home)
    for name in drop:
        env.pop(name, None)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def setup_lines(orbit_py: Path, home: Path, pycache: Path | None) -> str:
    """What is timed, against which ORBIT_HOME, and where its bytecode goes."""
    bytecode = "as the environment says" if pycache is None else f"cached in {pycache}"
    return f"orbit:   {orbit_py}\nORBIT_HOME: {home}\nbytecode: {bytecode}"


# --- commands and homes ----------------------------------------------------------------------
def timed(cmd: list[str], env: dict[str, str], prog: str) -> float:
    """Wall time of `cmd` (stdout discarded); exits with its stderr if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{prog}: {' '.join(cmd)} failed:\n{proc.stderr.decode()}")
    return elapsed


def alternate(
    commands: dict[str, list[str]], env: dict[str, str], prog: str, repeats: int
) -> dict[str, list[float]]:
    """Each command once to warm up, then `repeats` rounds running them in turn (so a change
    of the machine's load hits all alike); the seconds of each run, by name."""
    for cmd in commands.values():
        timed(cmd, env, prog)
    times: dict[str, list[float]] = {k: [] for k in commands}
    print(f"repeats: {repeats} (+1 warm-up each), alternated: {', '.join(commands)}")
    for _ in range(repeats):
        for key, cmd in commands.items():
            times[key].append(timed(cmd, env, prog))
    return times


def index_lines(index: Path) -> int:
    """Lines in a home's index.jsonl (0 when there is none)."""
    try:
        return len(index.read_bytes().splitlines())
    except FileNotFoundError:
        return 0


def shepherd_pids(home: Path) -> list[int]:
    """Live shepherd processes of this ORBIT_HOME (comm `orbit-shepherd`, ORBIT_HOME in environ)."""
    pids = []
    needle = f"ORBIT_HOME={home}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if Path(f"/proc/{entry}/comm").read_text().strip() != "orbit-shepherd":
                continue
            if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def wait_for_shepherds(home: Path, timeout: float, poll: float, failure: str) -> float:
    """Block until no shepherd of `home` is alive, checking every `poll` seconds; the seconds
    it took. Exits with `failure` if one is still alive after `timeout` seconds."""
    start = time.perf_counter()
    while shepherd_pids(home):
        if time.perf_counter() - start > timeout:
            raise SystemExit(failure)
        time.sleep(poll)
    return time.perf_counter() - start


def run_records(run_dir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """A run's events (the first of each kind, by event name) and its status.yaml."""
    events: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        obj = json.loads(line)
        events.setdefault(obj["event"], obj)
    return events, yaml.safe_load((run_dir / "status.yaml").read_text())


def admit(store: RunStore, run_id: str, actor: str, lease: dict[str, Any]) -> None:
    """Admit a queued run with `lease` as sched/tick.py _admit does: status, then the markers.
    Needs the checkout on sys.path (bench_ps and bench_tick put it there)."""
    from orbit.store.files import touch_exclusive, unlink_quiet
    from orbit.store.model import RunState, now_iso

    store.transition(
        run_id,
        RunState.STARTING,
        actor=actor,
        event="admitted",
        expect=[RunState.QUEUED],
        reason="starting the container",
        lease=lease,
        admitted_at=now_iso(),
    )
    touch_exclusive(store.home.active_dir / run_id)
    unlink_quiet(store.home.queue_dir / run_id)


def copy_home(src: Path, dst: Path) -> None:
    """A private copy of a filled home that leaves `src` untouched: run directories as hard
    links (the web pages only read them, and Orbit replaces files rather than editing them; the
    links keep the inode numbers the index rows record, so the copy's index stays fresh), every
    file of the home itself (index.jsonl, runtime/, …) copied."""
    shutil.copytree(
        src,
        dst,
        symlinks=True,
        ignore=lambda d, names: ["runs"] if Path(d) == src else [],
    )
    shutil.copytree(src / "runs", dst / "runs", symlinks=True, copy_function=os.link)
    for leftover in ("web.lock", "web.json", "web.log"):
        (dst / "runtime" / leftover).unlink(missing_ok=True)
    (dst / "web-token").unlink(missing_ok=True)


def reused_copy(src: Path, copies: Path | None, scratch: Path, prog: str) -> Path:
    """A private copy of the filled home `src` (`copy_home`): `copies/<name of src>` when
    `copies` is given, made once and reused by later calls (a copy of 100,000 runs takes
    minutes); else one in `scratch`, deleted with it."""
    if not (src / "runs").is_dir() or not os.listdir(src / "runs"):
        raise SystemExit(f"{prog}: {src} holds no runs (fill it with bench_ps.py --home)")
    dst = (copies if copies is not None else scratch) / src.name
    if (dst / "runs").is_dir():
        print(f"copy of {src}: reusing {dst}")
        return dst
    t0 = time.perf_counter()
    dst.parent.mkdir(parents=True, exist_ok=True)
    copy_home(src, dst)
    print(f"copy of {src}: {dst} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return dst

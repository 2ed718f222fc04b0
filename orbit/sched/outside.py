"""Use of the machine outside Orbit: CPU and memory that Orbit's own containers do not explain.

CPU: the machine's busy time (/proc/stat) minus the CPU time of Orbit's containers (their
cgroups), both as deltas since the previous tick's sample (runtime/cpu_sample.json), in cores.
Memory: used memory (total − available) minus the resident memory of Orbit's containers.
Only the part above a noise floor and above what the configuration leaves outside Orbit counts:
with total_cpus: 6 on an 8-core machine, the first 2 busy cores outside Orbit cost nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from orbit.sched.cgroup import locate
from orbit.sched.resources import GIB, Amount
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.model import Run

MIN_INTERVAL_S = 0.3  # shorter deltas are too noisy to mean anything
MAX_INTERVAL_S = 600.0  # an older sample says nothing about now


@dataclass(frozen=True)
class Outside:
    counted: Amount  # what admission subtracts
    cpu_cores: float  # measured busy cores outside Orbit (before the floor)
    mem_gb: float  # measured memory used outside Orbit (before the floor)
    machine_cpus: float
    machine_mem_gb: float
    load: float  # the machine's busy cores, all users
    measured: bool = True  # False with count_outside_use: false (every figure is then 0)
    cpu_measured: bool = True  # False until two CPU samples are far enough apart (cpu, load)


NONE = Outside(Amount(0, 0), 0.0, 0.0, 0.0, 0.0, 0.0, measured=False, cpu_measured=False)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _container_usage(container_id: str) -> tuple[float | None, int]:
    """(CPU seconds, resident bytes) of one container from its cgroup."""
    dirs = locate(container_id, None)
    cpu = None
    if "cpuacct" in dirs:
        ns = _read_int(dirs["cpuacct"] / "cpuacct.usage")
        cpu = ns / 1e9 if ns is not None else None
    elif "cpu2" in dirs:
        for line in _lines(dirs["cpu2"] / "cpu.stat"):
            if line.startswith("usage_usec "):
                cpu = int(line.split()[1]) / 1e6
    rss = 0
    if "memory" in dirs:
        for line in _lines(dirs["memory"] / "memory.stat"):
            key, _, value = line.partition(" ")
            if key in ("total_rss", "anon"):
                rss = int(value)
                break
    return cpu, rss


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def measure(home: Home, leased: list[Run], totals: Amount) -> Outside:
    if not home.settings.count_outside_use:
        return NONE
    from orbit.sched import machine

    now = time.time()  # wall clock: a monotonic one restarts at boot
    busy = machine.busy_cpu_seconds()
    orbit_cpu: dict[str, float] = {}
    orbit_rss = 0
    for run in leased:
        cid = run.container_id
        if not cid:
            continue
        cpu, rss = _container_usage(str(cid))
        orbit_rss += rss
        if cpu is not None:
            orbit_cpu[str(cid)] = cpu
    home.runtime_dir.mkdir(parents=True, exist_ok=True)  # `orbit resources` on a fresh home
    sample_path = home.runtime_dir / "cpu_sample.json"
    try:
        prev = json.loads(sample_path.read_text())
    except (OSError, ValueError):
        prev = None
    outside_cpu = load = 0.0
    cpu_measured = True
    dt = now - float(prev.get("t", 0)) if isinstance(prev, dict) else None
    fresh = dt is not None and MIN_INTERVAL_S <= dt <= MAX_INTERVAL_S
    if fresh and isinstance(prev, dict) and dt:
        load = max(0.0, (busy - float(prev.get("busy", busy))) / dt)
        prev_orbit = prev.get("orbit") or {}
        ours = sum(
            max(0.0, cpu - float(prev_orbit[cid]))
            for cid, cpu in orbit_cpu.items()
            if cid in prev_orbit
        )
        outside_cpu = max(0.0, load - ours / dt)
        keep = json.dumps([outside_cpu, load]).encode()
        atomic_write(home.runtime_dir / "cpu_outside.json", keep, durable=False)
    else:
        # Ticks too close together (or the first one): reuse the last measurement, so
        # back-to-back ticks agree, and keep the older sample as the baseline.
        try:
            outside_cpu, load = json.loads((home.runtime_dir / "cpu_outside.json").read_text())
        except (OSError, ValueError, TypeError):
            outside_cpu, load, cpu_measured = 0.0, 0.0, False
    if dt is None or dt >= MIN_INTERVAL_S or dt < 0:  # < 0: the clock went back
        sample = {"t": now, "busy": busy, "orbit": orbit_cpu}
        atomic_write(sample_path, json.dumps(sample).encode(), durable=False)
    total, available = machine.memory()
    machine_cpus = float(machine.cpu_count())
    machine_mem = total / GIB
    outside_mem = max(0.0, (total - available - orbit_rss) / GIB)
    settings = home.settings
    cpu_floor = max(settings.outside_cpu_min, machine_cpus - totals.cpus)
    mem_floor = max(settings.outside_mem_min_gb, machine_mem - totals.mem_gb)
    counted = Amount(max(0.0, outside_cpu - cpu_floor), max(0.0, outside_mem - mem_floor))
    return Outside(
        counted, outside_cpu, outside_mem, machine_cpus, machine_mem, load, True, cpu_measured
    )

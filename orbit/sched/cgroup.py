"""Read a container's own kernel counters: peak memory, CPU time and OOM kills.

cgroup v1 (memory.max_usage_in_bytes, memory.oom_control `oom_kill`, cpuacct.usage) and v2
(memory.peak or memory.current, memory.events `oom_kill`, cpu.stat usage_usec) are both read.
The directory disappears when the container stops, so the shepherd samples while it runs.

A kill that ends the container usually happens between two samples, so on cgroup v1 the shepherd
also registers an eventfd on `memory.oom_control` (cgroup.event_control): the kernel signals it on
every OOM in the cgroup, and once more when the cgroup is removed. Docker's `State.OOMKilled` is
the second opinion; exit code 137 alone is never taken as an OOM.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from orbit.record import Record

ROOT = Path("/sys/fs/cgroup")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_keyed(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
    except (OSError, ValueError):
        return None
    return None


def _dirs_from_pid(pid: int) -> dict[str, Path]:
    """Controller → cgroup directory of `pid`, from /proc/<pid>/cgroup."""
    out: dict[str, Path] = {}
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if not controllers:  # cgroup v2 unified
            out.setdefault("unified", ROOT / rel)
            continue
        for ctl in controllers.split(","):
            out[ctl] = ROOT / ctl / rel
    return out


def locate(container_id: str, pid: int | None) -> dict[str, Path]:
    """The container's memory and cpu cgroup directories (empty when none can be found)."""
    found: dict[str, Path] = {}
    if pid:
        # Only the container's own cgroups: a short-lived container's pid may have been reused
        # by then, e.g. by a process of the root cgroup, whose counters are the whole machine's
        # (a `true` run measured at 4 GiB). Docker names the container in its cgroup's path.
        dirs = {k: v for k, v in _dirs_from_pid(pid).items() if container_id in str(v)}
        for ctl in ("memory", "cpuacct"):
            if ctl in dirs and dirs[ctl].is_dir():
                found[ctl] = dirs[ctl]
        if "unified" in dirs and (dirs["unified"] / "memory.current").exists():
            found.setdefault("memory", dirs["unified"])
            found.setdefault("cpu2", dirs["unified"])
    for sub in (f"docker/{container_id}", f"system.slice/docker-{container_id}.scope"):
        if "memory" not in found:
            for cand in (ROOT / "memory" / sub, ROOT / sub):
                if cand.is_dir():
                    found["memory"] = cand
                    break
        if "cpuacct" not in found and (ROOT / "cpuacct" / sub).is_dir():
            found["cpuacct"] = ROOT / "cpuacct" / sub
        if "cpuacct" not in found and "cpu2" not in found and (ROOT / sub / "cpu.stat").exists():
            found["cpu2"] = ROOT / sub
    return found


class Sampler(Record):
    """Accumulates peaks across samples; every reading is optional (the dir may be gone)."""

    __slots__ = ("_last", "cpu_peak", "cpu_seconds", "dirs", "mem_peak", "oom_kills")

    def __init__(
        self,
        dirs: dict[str, Path] | None = None,
        mem_peak: int = 0,
        cpu_seconds: float = 0.0,
        cpu_peak: float = 0.0,
        oom_kills: int = 0,
    ) -> None:
        self.dirs: dict[str, Path] = {} if dirs is None else dirs
        self.mem_peak = mem_peak
        self.cpu_seconds = cpu_seconds
        self.cpu_peak = cpu_peak
        self.oom_kills = oom_kills
        self._last: tuple[float, float] | None = None

    def sample(self) -> bool:
        """Read the counters once; False when the cgroup no longer exists."""
        mem = self.dirs.get("memory")
        alive = False
        if mem is not None:
            peak = _read_int(mem / "memory.max_usage_in_bytes")
            if peak is None:
                peak = _read_int(mem / "memory.peak") or _read_int(mem / "memory.current")
            if peak is not None:
                alive = True
                self.mem_peak = max(self.mem_peak, peak)
            kills = _read_keyed(mem / "memory.oom_control", "oom_kill")
            if kills is None:
                kills = _read_keyed(mem / "memory.events", "oom_kill")
            if kills is not None:
                self.oom_kills = max(self.oom_kills, kills)
        usage = None
        if "cpuacct" in self.dirs:
            ns = _read_int(self.dirs["cpuacct"] / "cpuacct.usage")
            usage = ns / 1e9 if ns is not None else None
        elif "cpu2" in self.dirs:
            us = _read_keyed(self.dirs["cpu2"] / "cpu.stat", "usage_usec")
            usage = us / 1e6 if us is not None else None
        if usage is not None:
            alive = True
            now = time.monotonic()
            if self._last is not None and now - self._last[0] >= 0.2:
                rate = (usage - self._last[1]) / (now - self._last[0])
                self.cpu_peak = max(self.cpu_peak, rate)
            if self._last is None or now - self._last[0] >= 0.2:
                self._last = (now, usage)
            self.cpu_seconds = max(self.cpu_seconds, usage)
        return alive

    def peaks(self) -> dict[str, float | int]:
        return {
            "mem_bytes": self.mem_peak,
            "cpu_cores": round(self.cpu_peak, 2),
            "cpu_seconds": round(self.cpu_seconds, 2),
        }


class OomEvents:
    """The kernel's OOM notifications for one cgroup v1 memory controller (an eventfd)."""

    def __init__(self, memory_dir: Path | None) -> None:
        self.fd: int | None = None
        self.count = 0
        self.memory_dir = memory_dir
        if memory_dir is None or not (memory_dir / "cgroup.event_control").exists():
            return
        efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            control = os.open(memory_dir / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
            try:
                with open(memory_dir / "cgroup.event_control", "w") as fh:
                    fh.write(f"{efd} {control}")
            finally:
                os.close(control)
        except OSError:
            os.close(efd)
            return
        self.fd = efd

    def poll(self) -> int:
        if self.fd is not None:
            try:
                self.count += os.eventfd_read(self.fd)
            except BlockingIOError:
                pass
        return self.count

    def settle(self, timeout: float = 2.0) -> int | None:
        """After the container exited: OOM events seen, excluding the removal signal.

        None when unknown (no eventfd, or the cgroup was not removed in time).
        """
        if self.fd is None or self.memory_dir is None:
            return None
        deadline = time.monotonic() + timeout
        while self.memory_dir.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        if self.memory_dir.exists():
            return None
        # The kernel signals an OOM when it happens, before the process it kills ends, so
        # every OOM signal is counted once the removal's signal (the last) is.
        while self.poll() < 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        total = self.poll()
        os.close(self.fd)
        self.fd = None
        return max(0, total - 1) if total >= 1 else None

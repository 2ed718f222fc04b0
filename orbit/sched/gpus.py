"""GPUs as Orbit sees them: NVML on a real machine, or the documented YAML stand-in.

Both readers return the same `Gpu` records (index, UUID, name, memory, utilization and the
compute processes with their memory), so everything above this module is the same with or
without hardware. The stand-in is a YAML file named by ORBIT_FAKE_GPUS (or the `fake_gpus`
setting), re-read at every call so it can be edited while Orbit runs (docs/gpus.md):

    gpus:
      - index: 0
        name: NVIDIA A100-SXM4-80GB (stand-in)
        memory_gb: 80
        utilization: 0            # percent, optional
        used_gb: 0                # memory used by no listed process, optional
        processes:                # compute processes, optional
          - {pid: 4242, memory_gb: 20.1, name: python, user: alice}
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orbit.errors import CorruptError
from orbit.store.home import Home

GIB = 1024**3


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    mem_bytes: int
    name: str = ""
    user: str = ""
    container_id: str | None = None  # the Docker container it runs in, when it runs in one


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    mem_total: int
    mem_used: int
    utilization: int | None = None
    processes: tuple[GpuProcess, ...] = field(default_factory=tuple)

    @property
    def mem_free(self) -> int:
        return max(0, self.mem_total - self.mem_used)


class GpuReader(Protocol):
    kind: str  # "nvml", "fake" or "none"

    def read(self) -> list[Gpu]: ...


def _describe_pid(pid: int) -> tuple[str, str, str | None]:
    """(process name, user, container id) of a host pid; blanks when it cannot be read."""
    name = user = ""
    container = None
    try:
        import psutil

        proc = psutil.Process(pid)
        name = proc.name()
        user = proc.username()
    except Exception:
        pass
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            for part in line.split("/"):
                part = part.removeprefix("docker-").removesuffix(".scope")
                if len(part) == 64 and all(c in "0123456789abcdef" for c in part):
                    container = part
    except OSError:
        pass
    return name, user, container


class NoGpus:
    kind = "none"

    def read(self) -> list[Gpu]:
        return []


class NvmlGpus:
    kind = "nvml"

    def __init__(self) -> None:
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()

    def read(self) -> list[Gpu]:
        nv = self.nvml
        out = []
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            try:  # v2 does not count the driver's reserve as used (LESSONS.md)
                mem = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
            except nv.NVMLError:
                mem = nv.nvmlDeviceGetMemoryInfo(handle)
            try:
                util: int | None = int(nv.nvmlDeviceGetUtilizationRates(handle).gpu)
            except nv.NVMLError:
                util = None
            procs = []
            try:
                running = nv.nvmlDeviceGetComputeRunningProcesses(handle)
            except nv.NVMLError:
                running = []
            for p in running:
                name, user, container = _describe_pid(int(p.pid))
                used = int(p.usedGpuMemory or 0)
                procs.append(GpuProcess(int(p.pid), used, name, user, container))
            uuid = nv.nvmlDeviceGetUUID(handle)
            gpu_name = nv.nvmlDeviceGetName(handle)
            out.append(
                Gpu(
                    index=index,
                    uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    name=gpu_name.decode() if isinstance(gpu_name, bytes) else str(gpu_name),
                    mem_total=int(mem.total),
                    mem_used=int(mem.used),
                    utilization=util,
                    processes=tuple(procs),
                )
            )
        return out


class FakeGpus:
    """The YAML stand-in for NVML (see the module docstring)."""

    kind = "fake"

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[Gpu]:
        from orbit.store.files import read_yaml

        data = read_yaml(self.path)
        items = data.get("gpus")
        if not isinstance(items, list):
            raise CorruptError(f"{self.path}: expected a `gpus:` list")
        out = []
        for pos, item in enumerate(items):
            if not isinstance(item, dict):
                raise CorruptError(f"{self.path}: gpus[{pos}] is not a mapping")
            try:
                out.append(self._gpu(pos, item))
            except (TypeError, ValueError) as exc:
                raise CorruptError(f"{self.path}: gpus[{pos}]: {exc}") from None
        return out

    def _gpu(self, pos: int, item: dict[str, Any]) -> Gpu:
        index = int(item.get("index", pos))
        procs = []
        for p in item.get("processes") or []:
            pid = int(p["pid"])
            name, user, container = _describe_pid(pid)
            procs.append(
                GpuProcess(
                    pid=pid,
                    mem_bytes=int(float(p.get("memory_gb", 0)) * GIB),
                    name=str(p.get("name") or name),
                    user=str(p.get("user") or user),
                    container_id=p.get("container") or container,
                )
            )
        used = int(float(item.get("used_gb", 0)) * GIB) + sum(p.mem_bytes for p in procs)
        util = item.get("utilization")
        return Gpu(
            index=index,
            uuid=str(item.get("uuid") or f"GPU-00000000-0000-4000-8000-{index:012d}"),
            name=str(item.get("name") or "Orbit stand-in GPU"),
            mem_total=int(float(item["memory_gb"]) * GIB),
            mem_used=used,
            utilization=int(util) if util is not None else None,
            processes=tuple(procs),
        )


def open_gpus(home: Home) -> GpuReader:
    """The stand-in when one is configured, else NVML when it works, else no GPUs."""
    fake = home.environ.get("ORBIT_FAKE_GPUS") or home.config.get("fake_gpus")
    if fake:
        return FakeGpus(Path(os.path.expanduser(str(fake))))
    try:
        return NvmlGpus()
    except Exception:  # no driver, no library: a CPU-only machine
        return NoGpus()


def allowed_indices(home: Home) -> set[int] | None:
    """GPUs Orbit may use (ORBIT_GPUS or the `allowed_gpus` setting); None means all."""
    raw = home.environ.get("ORBIT_GPUS")
    if raw is None:
        value = home.config.get("allowed_gpus")
        if value is None:
            return None
        raw = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
    raw = raw.strip()
    if raw in ("", "none"):
        return set()
    if raw == "all":
        return None
    try:
        return {int(part) for part in raw.split(",") if part.strip()}
    except ValueError:
        raise CorruptError(f"ORBIT_GPUS must be GPU indices like 0,1 (got {raw!r})") from None

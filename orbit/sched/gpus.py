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
          - {pid: 4343, memory_gb: 3, utilization: 55}   # per-process percent, optional

`GpuPeaks` is what a shepherd keeps of its run's GPUs: the highest memory of the run's own
processes and the highest utilisation on each leased GPU.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from orbit.errors import CorruptError
from orbit.record import Frozen
from orbit.store.home import Home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    # Only the type checker needs it: a shepherd following a GPU run never loads `typing`.
    class GpuReader(Protocol):
        kind: str  # "nvml", "fake" or "none"

        def read(self, indices: Collection[int] | None = None) -> list[Gpu]:
            """The GPUs with these host indices (all when None)."""
            ...


log = logging.getLogger(__name__)

GIB = 1024**3


class GpuProcess(Frozen):
    """A compute process on a GPU: a value (compared, hashed, never changed). `container_id`
    is the Docker container it runs in, when it runs in one; `util_pct` its own share of the
    GPU, where the reader can tell."""

    __slots__ = ("container_id", "mem_bytes", "name", "pid", "user", "util_pct")
    pid: int
    mem_bytes: int
    name: str
    user: str
    container_id: str | None
    util_pct: int | None

    def __init__(
        self,
        pid: int,
        mem_bytes: int,
        name: str = "",
        user: str = "",
        container_id: str | None = None,
        util_pct: int | None = None,
    ) -> None:
        self._init(
            pid=pid,
            mem_bytes=mem_bytes,
            name=name,
            user=user,
            container_id=container_id,
            util_pct=util_pct,
        )


class Gpu(Frozen):
    """One GPU as read: a value (compared, hashed, never changed)."""

    __slots__ = ("index", "mem_total", "mem_used", "name", "processes", "utilization", "uuid")
    index: int
    uuid: str
    name: str
    mem_total: int
    mem_used: int
    utilization: int | None
    processes: tuple[GpuProcess, ...]

    def __init__(
        self,
        index: int,
        uuid: str,
        name: str,
        mem_total: int,
        mem_used: int,
        utilization: int | None = None,
        processes: tuple[GpuProcess, ...] = (),
    ) -> None:
        self._init(
            index=index,
            uuid=uuid,
            name=name,
            mem_total=mem_total,
            mem_used=mem_used,
            utilization=utilization,
            processes=processes,
        )

    @property
    def mem_free(self) -> int:
        return max(0, self.mem_total - self.mem_used)


def container_of(pid: int) -> str | None:
    """The Docker container a host pid runs in (from its cgroup), or None."""
    container = None
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            for part in line.split("/"):
                part = part.removeprefix("docker-").removesuffix(".scope")
                if len(part) == 64 and all(c in "0123456789abcdef" for c in part):
                    container = part
    except OSError:
        pass
    return container


def _describe_pid(pid: int) -> tuple[str, str, str | None]:
    """(process name, user, container id) of a host pid; blanks when it cannot be read."""
    name = user = ""
    try:
        import psutil

        proc = psutil.Process(pid)
        name = proc.name()
        user = proc.username()
    except Exception:
        pass
    return name, user, container_of(pid)


class NoGpus:
    kind = "none"

    def read(self, indices: Collection[int] | None = None) -> list[Gpu]:
        return []


class NvmlGpus:
    kind = "nvml"

    def __init__(self) -> None:
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.seen_us: dict[int, int] = {}  # per GPU: the newest per-process sample read

    def read(self, indices: Collection[int] | None = None) -> list[Gpu]:
        count = self.nvml.nvmlDeviceGetCount()
        return [self._gpu(i) for i in range(count) if indices is None or i in indices]

    def _gpu(self, index: int) -> Gpu:
        nv = self.nvml
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        try:  # v2 does not count the driver's reserve as used
            mem = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
        except nv.NVMLError:
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
        try:
            util: int | None = int(nv.nvmlDeviceGetUtilizationRates(handle).gpu)
        except nv.NVMLError:
            util = None
        try:
            running = nv.nvmlDeviceGetComputeRunningProcesses(handle)
        except nv.NVMLError:
            running = []
        shares = self._process_util(index, handle) if running else {}
        procs = []
        for p in running:
            name, user, container = _describe_pid(int(p.pid))
            used = int(p.usedGpuMemory or 0)
            share = shares.get(int(p.pid), 0) if shares else None
            procs.append(GpuProcess(int(p.pid), used, name, user, container, share))
        uuid = nv.nvmlDeviceGetUUID(handle)
        gpu_name = nv.nvmlDeviceGetName(handle)
        return Gpu(
            index=index,
            uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
            name=gpu_name.decode() if isinstance(gpu_name, bytes) else str(gpu_name),
            mem_total=int(mem.total),
            mem_used=int(mem.used),
            utilization=util,
            processes=tuple(procs),
        )

    def _process_util(self, index: int, handle: Any) -> dict[int, int]:
        """pid → highest SM utilisation in the samples newer than the last read; empty when
        this GPU or driver keeps no per-process samples (the device's figure is used then)."""
        nv = self.nvml
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(handle, self.seen_us.get(index, 0))
        except nv.NVMLError:
            return {}
        shares: dict[int, int] = {}
        for sample in samples:
            pid = int(sample.pid)
            shares[pid] = max(shares.get(pid, 0), int(sample.smUtil))
            self.seen_us[index] = max(self.seen_us.get(index, 0), int(sample.timeStamp))
        return shares


class FakeGpus:
    """The YAML stand-in for NVML (see the module docstring)."""

    kind = "fake"

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self, indices: Collection[int] | None = None) -> list[Gpu]:
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
        return [g for g in out if indices is None or g.index in indices]

    def _gpu(self, pos: int, item: dict[str, Any]) -> Gpu:
        index = int(item.get("index", pos))
        procs = []
        for p in item.get("processes") or []:
            pid = int(p["pid"])
            name, user, container = _describe_pid(pid)
            share = p.get("utilization")
            procs.append(
                GpuProcess(
                    pid=pid,
                    mem_bytes=int(float(p.get("memory_gb", 0)) * GIB),
                    name=str(p.get("name") or name),
                    user=str(p.get("user") or user),
                    container_id=p.get("container") or container,
                    util_pct=int(share) if share is not None else None,
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
    fake = home.environ.get("ORBIT_FAKE_GPUS") or home.settings.fake_gpus
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
        allowed = home.settings.allowed_gpus
        return None if allowed is None else set(allowed)
    raw = raw.strip()
    if raw in ("", "none"):
        return set()
    if raw == "all":
        return None
    try:
        return {int(part) for part in raw.split(",") if part.strip()}
    except ValueError:
        raise CorruptError(f"ORBIT_GPUS must be GPU indices like 0,1 (got {raw!r})") from None


def run_share(gpu: Gpu, container_id: str) -> tuple[int, int | None]:
    """(memory in bytes, utilisation in percent or None) of one container on `gpu`.

    Memory counts only the processes in the container. Utilisation is the sum of their own
    shares when the reader gives per-process figures for this GPU, else the device's: a lease is
    a whole GPU, so what the device does while leased is the run's doing.
    """
    mine = [p for p in gpu.processes if p.container_id == container_id]
    mem = sum(p.mem_bytes for p in mine)
    if any(p.util_pct is not None for p in gpu.processes):
        return mem, min(100, sum(p.util_pct or 0 for p in mine))
    return mem, gpu.utilization


class GpuPeaks:
    """The peaks of one run on its leased GPUs, accumulated over samples.

    `peaks()` gives `{"gpus": [{index, uuid, mem_bytes, util_pct}, …], "gpu_mem_bytes": N}` in
    lease order; a figure never read (the GPUs could not be read at all) stays None. A failed
    read is logged once and never raised: the next sample reads again.
    """

    def __init__(
        self, reader: GpuReader, leased: Sequence[Mapping[str, Any]], container_id: str
    ) -> None:
        self.reader = reader
        self.container_id = container_id
        self.slots: dict[str, dict[str, Any]] = {
            str(g.get("uuid")): {
                "index": g.get("index"),
                "uuid": g.get("uuid"),
                "mem_bytes": None,
                "util_pct": None,
            }
            for g in leased
        }
        self.indices = {int(g["index"]) for g in leased if isinstance(g.get("index"), int)}
        self.failed = False

    def sample(self) -> None:
        try:
            gpus = self.reader.read(self.indices)
        except Exception as exc:  # a stand-in mid-edit, a driver hiccup
            if not self.failed:
                log.warning("GPU sample failed: %s", exc)
                self.failed = True
            return
        for gpu in gpus:
            slot = self.slots.get(gpu.uuid)
            if slot is None:  # another GPU now has this index (a stand-in edited)
                continue
            mem, util = run_share(gpu, self.container_id)
            slot["mem_bytes"] = max(slot["mem_bytes"] or 0, mem)
            if util is not None:
                slot["util_pct"] = max(slot["util_pct"] or 0, util)

    def peaks(self) -> dict[str, Any]:
        gpus = [dict(slot) for slot in self.slots.values()]
        read = [g["mem_bytes"] for g in gpus if g["mem_bytes"] is not None]
        return {"gpus": gpus, "gpu_mem_bytes": sum(read) if read else None}

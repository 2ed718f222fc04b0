"""Run states and the shape of a run record, as data."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from orbit.record import Frozen, Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1


class RunState(StrEnum):
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"
    # A run on another node that cannot be reached now (docs/nodes.md): neither finished nor
    # known to run; it becomes what the node says once it answers again.
    UNKNOWN = "unknown"

    @property
    def active(self) -> bool:
        return self in ACTIVE

    @property
    def finished(self) -> bool:
        return self not in ACTIVE


ACTIVE = frozenset({RunState.QUEUED, RunState.STARTING, RunState.RUNNING, RunState.UNKNOWN})
LEASED = frozenset({RunState.STARTING, RunState.RUNNING})

# Which transitions are legal; anything else is a bug or a race lost, and is refused.
TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.STARTING, RunState.CANCELLED, RunState.FAILED}),
    RunState.STARTING: frozenset(
        {
            RunState.RUNNING,
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.CANCELLED,
            RunState.LOST,
            RunState.UNKNOWN,
            RunState.QUEUED,  # only a run placed on a node that could not be reached to send it
        }
    ),
    RunState.RUNNING: frozenset(
        {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.LOST, RunState.UNKNOWN}
    ),
    RunState.UNKNOWN: frozenset(
        {
            RunState.STARTING,
            RunState.RUNNING,
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.CANCELLED,
            RunState.LOST,
        }
    ),
}


def now_iso(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).isoformat(timespec="milliseconds")


def parse_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None


# The files of a run directory (docs/run-directory.md describes each).
RUN_YAML = "run.yaml"
STATUS_YAML = "status.yaml"
EVENTS = "events.jsonl"
LOG = "log.txt"
LOG_POS = "log.pos"
METRICS = "metrics.jsonl"
NOTES = "notes.jsonl"
OUTPUT = "output"
CODE_DIFF = "code.diff"
BUILD_LOG = "build.log"
EXIT_JSON = "exit.json"
SHEPHERD_LOCK = "shepherd.lock"
DISK_RESERVE = ".disk-reserve"


def stamp_of(st: os.stat_result) -> list[int]:
    """What identifies one version of status.yaml (index rows' `st`): every atomic rewrite
    changes the inode."""
    return [st.st_mtime_ns, st.st_size, st.st_ino]


class Resources(Frozen):
    """What a run asked for (run.yaml `resources`): a value (compared, hashed, never changed)."""

    __slots__ = ("cpus", "gpu_ids", "gpu_mem_gb", "gpus", "mem_gb")
    cpus: float
    mem_gb: float
    gpus: int
    gpu_mem_gb: float | None
    gpu_ids: tuple[int, ...] | None

    def __init__(
        self,
        cpus: float = 0.0,
        mem_gb: float = 0.0,
        gpus: int = 0,
        gpu_mem_gb: float | None = None,
        gpu_ids: tuple[int, ...] | None = None,
    ) -> None:
        self._init(cpus=cpus, mem_gb=mem_gb, gpus=gpus, gpu_mem_gb=gpu_mem_gb, gpu_ids=gpu_ids)


class Lease(Frozen):
    """What a run holds while starting or running (status.yaml `lease`); `gpus` as recorded. A
    value (compared, never changed; not hashable, as its `gpus` are dicts)."""

    __slots__ = ("cpus", "gpus", "mem_gb")
    cpus: float
    mem_gb: float
    gpus: tuple[dict[str, Any], ...]

    def __init__(
        self, cpus: float = 0.0, mem_gb: float = 0.0, gpus: tuple[dict[str, Any], ...] = ()
    ) -> None:
        self._init(cpus=cpus, mem_gb=mem_gb, gpus=gpus)


class Peaks(Frozen):
    """What the shepherd measured of a run (status.yaml `peaks`); 0 when never sampled,
    `gpu_mem_bytes` None when no GPU was measured, `gpus_used` the GPUs that held memory. A
    value (compared, hashed, never changed)."""

    __slots__ = ("cpu_cores", "cpu_seconds", "gpu_mem_bytes", "gpus_used", "mem_bytes")
    mem_bytes: int
    cpu_cores: float
    cpu_seconds: float
    gpu_mem_bytes: int | None
    gpus_used: int

    def __init__(
        self,
        mem_bytes: int = 0,
        cpu_cores: float = 0.0,
        cpu_seconds: float = 0.0,
        gpu_mem_bytes: int | None = None,
        gpus_used: int = 0,
    ) -> None:
        self._init(
            mem_bytes=mem_bytes,
            cpu_cores=cpu_cores,
            cpu_seconds=cpu_seconds,
            gpu_mem_bytes=gpu_mem_bytes,
            gpus_used=gpus_used,
        )

    @property
    def sampled(self) -> bool:
        return bool(self.mem_bytes or self.cpu_cores or self.cpu_seconds)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def peaks_of(status: Mapping[str, Any]) -> Peaks:
    peaks = status.get("peaks")
    if not isinstance(peaks, dict):
        return Peaks()
    gpus = [g for g in peaks.get("gpus") or [] if isinstance(g, dict)]
    gpu_mem = peaks.get("gpu_mem_bytes")
    return Peaks(
        mem_bytes=int(_number(peaks.get("mem_bytes"))),
        cpu_cores=_number(peaks.get("cpu_cores")),
        cpu_seconds=_number(peaks.get("cpu_seconds")),
        gpu_mem_bytes=int(_number(gpu_mem)) if gpu_mem is not None else None,
        gpus_used=sum(_number(g.get("mem_bytes")) > 0 for g in gpus),
    )


def resources_of(spec: Mapping[str, Any]) -> Resources:
    res = spec.get("resources") or {}
    ids = res.get("gpu_ids")
    return Resources(
        cpus=float(res.get("cpus") or 0),
        mem_gb=float(res.get("mem_gb") or 0),
        gpus=int(res.get("gpus") or 0),
        gpu_mem_gb=float(res["gpu_mem_gb"]) if res.get("gpu_mem_gb") else None,
        gpu_ids=tuple(int(i) for i in ids) if ids else None,
    )


def lease_of(status: Mapping[str, Any]) -> Lease:
    lease = status.get("lease") or {}
    gpus = lease.get("gpus") or []
    return Lease(
        cpus=float(lease.get("cpus") or 0),
        mem_gb=float(lease.get("mem_gb") or 0),
        gpus=tuple(g for g in gpus if isinstance(g, dict)),
    )


def folder_of(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str | None:
    """The effective folder: `orbit mv` records it in status.yaml, over run.yaml's."""
    folder = status["folder"] if "folder" in status else spec.get("folder")
    return str(folder) if folder else None


class Run(Record):
    """One run directory as read from disk: `spec` is run.yaml, `status` is status.yaml.
    Equal to a run with the same id, directory, spec and status, whatever its `stamp`."""

    __slots__ = ("dir", "id", "spec", "stamp", "status")

    def __init__(
        self,
        id: str,
        dir: Path,
        spec: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None,
        stamp: list[int] | None = None,
    ) -> None:
        self.id = id
        self.dir = dir
        self.spec: dict[str, Any] = {} if spec is None else spec
        self.status: dict[str, Any] = {} if status is None else status
        # (mtime_ns, size, inode) of the status.yaml `status` was written as, when known: a
        # file with another stamp has changed since (every write replaces it: a new inode).
        self.stamp = stamp

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Run):
            return NotImplemented
        mine = (self.id, self.dir, self.spec, self.status)
        return mine == (other.id, other.dir, other.spec, other.status)

    @property
    def state(self) -> RunState:
        return RunState(self.status["state"])

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def label(self) -> str:
        """`12 (lr-1e-4)` or `12`: how messages name a run."""
        return f"{self.id} ({self.name})" if self.name else self.id

    def path(self, name: str) -> Path:
        return self.dir / name

    @property
    def resources(self) -> Resources:
        return resources_of(self.spec)

    @property
    def lease(self) -> Lease:
        return lease_of(self.status)

    @property
    def folder(self) -> str | None:
        return folder_of(self.spec, self.status)

    @property
    def peaks(self) -> Peaks:
        return peaks_of(self.status)

    @property
    def group(self) -> str | None:
        return self.spec.get("group") or None

    @property
    def timeout_min(self) -> float | None:
        value = self.spec.get("timeout_min")
        return float(value) if value else None

    @property
    def reason(self) -> str | None:
        return self.status.get("reason")

    @property
    def exit_code(self) -> int | None:
        code = self.status.get("exit_code")
        return code if isinstance(code, int) else None

    @property
    def container_id(self) -> str | None:
        return self.status.get("container_id") or None

    @property
    def project(self) -> dict[str, Any]:
        """How the code reaches the container (run.yaml `project`): a snapshot, a mount, none."""
        return dict(self.spec.get("project") or {})

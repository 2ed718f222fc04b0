"""What a shepherd keeps while its container runs, the clocks it keeps it on, and how it reads
Docker's account of the start and the end."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path

from orbit.execute.logfollow import LogCopier
from orbit.human import human_bytes
from orbit.record import Record
from orbit.sched.cgroup import OomEvents, Sampler
from orbit.store.model import now_iso

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from orbit.sched.gpus import GpuPeaks

SAMPLE_SECONDS = 0.5
# Docker's log is polled every POLL_MIN s after output, backing off to SAMPLE_SECONDS when idle;
# a poll that brought BUSY_FRAMES frames or more is followed by another after POLL_BUSY s, so
# that Docker cannot rotate away (docker_log_mb) what was not read yet.
POLL_MIN = 0.1
POLL_BUSY = 0.05
BUSY_FRAMES = 2000
DISK_RETRY_SECONDS = 3.0
# metrics.summary.json is brought up to date every METRICS_SECONDS, reading at most
# METRICS_BUDGET_BYTES of new metrics each time (about 0.1 s of parsing), and once at the end.
METRICS_SECONDS = 5.0
METRICS_BUDGET_BYTES = 4 << 20
# An update that took t seconds (many keys make a big sidecar) waits at least 50 t for the next,
# so the sidecar never costs the shepherd more than 2% of a core.
METRICS_COST_FACTOR = 50


def peaks_text(peaks: dict[str, Any], ran_s: float | None) -> str:
    """`memory 5.4 MiB, CPU 0.99 cores, 0.55 CPU-s` (status.yaml's `peaks`, as `orbit show` and
    the Feishu cards print them). The shepherd reads the container's counters every
    SAMPLE_SECONDS and a CPU rate needs two readings: a run that ended sooner has no CPU peak
    ("not sampled"), and one no reading saw (no memory) no peaks at all."""
    mem, cores, cpu_s = (peaks.get(k, 0) for k in ("mem_bytes", "cpu_cores", "cpu_seconds"))
    if not mem and not cores and not cpu_s:
        return "not sampled (the run ended before the first sample)"
    brief = ran_s is not None and ran_s < SAMPLE_SECONDS
    cpu = "CPU not sampled (ran too briefly)" if brief and not cores else f"CPU {cores} cores"
    return f"memory {human_bytes(mem)}, {cpu}, {cpu_s} CPU-s"


def gpu_peak_text(g: dict[str, Any]) -> str:
    """ "GPU 0: 5.0 GiB memory, 70% utilization"; a figure never read is "not measured"."""
    mem = g.get("mem_bytes")
    util = g.get("util_pct")
    mem_txt = "memory not measured" if mem is None else f"{human_bytes(mem, zero='0 B')} memory"
    util_txt = "utilization not measured" if util is None else f"{util}% utilization"
    return f"GPU {g.get('index')}: {mem_txt}, {util_txt}"


class Watching(Record):
    """What a shepherd keeps while its container runs."""

    __slots__ = (
        "cancelled",
        "copier",
        "deadline",
        "gpus",
        "oom_events",
        "sampler",
        "stop_sent",
        "timed_out",
        "waited",
        "waiter",
    )

    def __init__(
        self,
        sampler: Sampler,
        oom_events: OomEvents,
        gpus: GpuPeaks | None,
        copier: LogCopier,
        waiter: threading.Thread,
        waited: dict[str, Any],
        deadline: float | None,
        timed_out: bool = False,
        cancelled: bool = False,
    ) -> None:
        self.sampler = sampler
        self.oom_events = oom_events
        self.gpus = gpus
        self.copier = copier
        self.waiter = waiter
        self.waited = waited  # the waiter's result: "code", or "gone" when the container vanished
        self.deadline = deadline  # time.time() at which the timeout stops the container
        self.timed_out = timed_out
        self.cancelled = cancelled
        self.stop_sent: float | None = None  # time.time() when a cancel's stop was sent

    def sample(self) -> None:
        """One sample of the cgroup, the kernel's OOM events and the leased GPUs."""
        self.sampler.sample()
        self.oom_events.poll()
        if self.gpus is not None:
            self.gpus.sample()

    def peaks(self) -> dict[str, Any]:
        peaks: dict[str, Any] = dict(self.sampler.peaks())
        if self.gpus is not None:
            peaks.update(self.gpus.peaks())
        return peaks


def poll_delay(got: int, idle: float) -> tuple[float, float]:
    """(seconds to the next poll, the idle back-off) after a poll that read `got` frames
    (-1: the disk is full)."""
    if got < 0:
        return DISK_RETRY_SECONDS, idle
    if got >= BUSY_FRAMES:
        return POLL_BUSY, POLL_MIN
    if got > 0:
        return POLL_MIN, POLL_MIN
    idle = min(idle * 2, SAMPLE_SECONDS)
    return idle, idle


# What a shell or the container's init prints when it cannot run a command at all.
EXEC_FAILURES = (
    b"not found",
    b"No such file",
    b"Permission denied",
    b"cannot execute",
    b"[FATAL tini",
)


def exec_failed(log_path: Path) -> bool:
    """Whether the end of the log says a command could not be run (exit 126/127 then mean
    that; a program may also choose those codes itself)."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 2048))
            tail = fh.read().splitlines()[-3:]
    except OSError:
        return False
    return any(marker in line for line in tail for marker in EXEC_FAILURES)


def start_error(exc: Exception) -> str:
    text = str(getattr(exc, "explanation", None) or exc)
    if "executable file not found" in text or "no such file or directory" in text:
        return "cannot start: command not found in the image"
    return f"cannot start the container: {text.splitlines()[0][:200]}"


def normalize_time(stamp: str) -> str:
    """Docker's nanosecond RFC 3339 → our ISO form (milliseconds, UTC)."""
    if not stamp or stamp.startswith("0001-"):
        return now_iso()
    try:
        base = stamp.rstrip("Z")
        main, _, frac = base.partition(".")
        dt = datetime.fromisoformat(main).replace(tzinfo=UTC)
        micro = int((frac + "000000")[:6]) if frac else 0
        return now_iso(dt.replace(microsecond=micro))
    except ValueError:
        return now_iso()

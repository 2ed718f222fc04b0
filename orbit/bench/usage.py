"""Measured usage: per task, the peaks of its solve runs, and the resources they suggest.

The solve runs are those the jobs' trials name (every method's); only runs that started and
ended by themselves (not cancelled) count. A run that ended before the shepherd's first sample
counts with its time and no measured use (the minimums below). The suggestion for a task, from
the largest figures over its runs:

    mem_gb       peak memory × 1.25, rounded up to 0.5 GiB (at least 0.5). A run killed for
                 memory peaked at its limit, which was too small: that peak × 2 instead
    cpus         the peak CPU cores (or CPU seconds / seconds run, when larger, for runs of 2 s
                 and more), at most the run's CPU limit, rounded up (at least 1)
    gpus         the GPUs that held memory (the GPUs leased when GPU memory was not measured)
    timeout_min  the longest solve × 1.5, rounded up to a minute (at least 1); a solve that
                 timed out ran as long as its limit, so this is a lower bound (noted)

`*` holds the largest suggestion over all tasks, for tasks not measured. The file
`orbit bench usage -o FILE` writes is the `--resources` file of `orbit bench add`; each entry
also carries `measured` (the figures it comes from), which that reader ignores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orbit.bench.records import JobRecords
from orbit.store.describe import duration_s
from orbit.store.model import Run, RunState
from orbit.store.runs import RunStore

GIB = 2**30
MEM_MARGIN = 1.25
OOM_FACTOR = 2.0
MEM_STEP_GB = 0.5
TIME_MARGIN = 1.5
RATE_MIN_S = 2.0


@dataclass
class TaskUsage:
    task: str
    runs: list[str] = field(default_factory=list)  # the solve runs measured
    skipped: list[str] = field(default_factory=list)  # "12: not sampled", "13: unreadable (…)"
    mem_bytes: int = 0
    cpu_cores: float = 0.0
    cpu_seconds: float = 0.0
    gpu_mem_bytes: int | None = None
    gpus: int = 0
    longest_s: float = 0.0
    oom: list[str] = field(default_factory=list)  # runs killed for memory
    timed_out: list[str] = field(default_factory=list)
    unsampled: list[str] = field(default_factory=list)  # ended before the first sample

    def add(self, run: Run) -> None:
        peaks = run.peaks
        ran = duration_s(run.status) or 0.0
        self.runs.append(run.id)
        self.mem_bytes = max(self.mem_bytes, peaks.mem_bytes)
        # A run shorter than two samples has no peak rate, and its start-to-end time is mostly
        # Docker's: the average over it is only trusted from RATE_MIN_S on. No run uses more
        # than its CPU limit; a reading above it is sampling jitter.
        rate = peaks.cpu_seconds / ran if ran >= RATE_MIN_S else 0.0
        cores = max(peaks.cpu_cores, round(rate, 2))
        limit = run.resources.cpus
        self.cpu_cores = max(self.cpu_cores, min(cores, limit) if limit > 0 else cores)
        self.cpu_seconds = max(self.cpu_seconds, peaks.cpu_seconds)
        if peaks.gpu_mem_bytes is not None:
            self.gpu_mem_bytes = max(self.gpu_mem_bytes or 0, peaks.gpu_mem_bytes)
            self.gpus = max(self.gpus, peaks.gpus_used)
        else:
            self.gpus = max(self.gpus, run.resources.gpus)
        self.longest_s = max(self.longest_s, ran)
        if not peaks.sampled:
            self.unsampled.append(run.id)
        if run.status.get("oom_killed"):
            self.oom.append(run.id)
        if (run.reason or "").startswith("timed out"):
            self.timed_out.append(run.id)

    def suggestion(self) -> dict[str, Any] | None:
        """{cpus, mem_gb, gpus, timeout_min}, or None when no run was measured."""
        if not self.runs:
            return None
        factor = OOM_FACTOR if self.oom else MEM_MARGIN
        mem = math.ceil(self.mem_bytes * factor / GIB / MEM_STEP_GB) * MEM_STEP_GB
        return {
            "cpus": max(1, math.ceil(self.cpu_cores - 1e-9)),
            "mem_gb": max(MEM_STEP_GB, mem),
            "gpus": self.gpus,
            "timeout_min": max(1, math.ceil(self.longest_s * TIME_MARGIN / 60)),
        }

    def notes(self) -> list[str]:
        out = []
        if self.oom:
            out.append(f"killed for memory (runs {', '.join(self.oom)}): memory is the peak × 2")
        if self.timed_out:
            out.append(
                f"timed out (runs {', '.join(self.timed_out)}): the timeout is a lower bound"
            )
        if self.unsampled:
            runs = ", ".join(self.unsampled)
            out.append(f"ended before the first sample (runs {runs}): counted as using little")
        return out + self.skipped

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "runs": list(self.runs),
            "peak_mem_bytes": self.mem_bytes,
            "peak_cpu_cores": self.cpu_cores,
            "cpu_seconds": self.cpu_seconds,
            "peak_gpu_mem_bytes": self.gpu_mem_bytes,
            "gpus_used": self.gpus,
            "longest_s": round(self.longest_s, 3),
            "suggested": self.suggestion(),
            "notes": self.notes(),
        }


def measure(store: RunStore, jobs: Sequence[JobRecords]) -> list[TaskUsage]:
    """Per task (in the jobs' order), the peaks of the solve runs its trials name."""
    by_task: dict[str, TaskUsage] = {}
    wanted: list[tuple[str, str]] = []
    for rec in jobs:
        for task in rec.job.tasks:
            by_task.setdefault(task, TaskUsage(task))
        for t in rec.trials:
            by_task.setdefault(t.task, TaskUsage(t.task))
            if t.solve_run:
                wanted.append((t.task, t.solve_run))
    wanted = list(dict.fromkeys(wanted))
    loaded = store.load_many(run_id for _, run_id in wanted)
    for (task, run_id), run in zip(wanted, loaded, strict=True):
        usage = by_task[task]
        if not isinstance(run, Run):
            usage.skipped.append(f"run {run_id}: cannot be read ({run.problem})")
        elif run.state.active:
            usage.skipped.append(f"run {run_id}: still {run.state.value}")
        elif run.state is RunState.CANCELLED:
            usage.skipped.append(f"run {run_id}: cancelled (its peaks are partial)")
        elif not run.status.get("started_at"):
            usage.skipped.append(f"run {run_id}: never started ({run.reason or run.state.value})")
        else:
            usage.add(run)
    return list(by_task.values())


def resources_file(usage: Sequence[TaskUsage]) -> dict[str, dict[str, Any]]:
    """The `--resources` document: each measured task's suggestion with its `measured`
    figures, and `*` (the largest of each) for tasks not measured."""
    out: dict[str, dict[str, Any]] = {}
    for u in usage:
        suggested = u.suggestion()
        if suggested is None:
            continue
        measured = {k: v for k, v in u.to_json().items() if k not in ("task", "suggested")}
        out[u.task] = {**suggested, "measured": measured}
    if out:
        keys = ("cpus", "mem_gb", "gpus", "timeout_min")
        out["*"] = {k: max(entry[k] for entry in out.values()) for k in keys}
    return out

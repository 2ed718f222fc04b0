"""Comparing jobs: per task × method the score over seeds, validity, and paired means.

Pure functions over Job and Trial records (records.py reads them). Only valid trials count:

    cell         one task × one method: the mean of its valid trials' scores over seeds, their
                 sample standard deviation (None below 2), n; invalid trials are listed with
                 their reason and never counted, unfinished ones (evaluation unknown) neither
    paired mean  per method, the mean of its cell means over the tasks that have a valid trial
                 for EVERY method compared; the other tasks are left out, each with the reason
    methods      of several jobs: a method name found in more than one job is qualified by its
                 job (`j1:oracle`, `j2:oracle`); a name found in one job stays as it is
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orbit.bench.model import EVALUATIONS, Trial
from orbit.bench.records import JobRecords, counted, read_job, resolve_job, trial_json, why_invalid
from orbit.errors import UsageError
from orbit.human import fmt_metric
from orbit.store.home import Home

JOBS_MAX = 20  # at most this many jobs compared at once


# --- comparing --------------------------------------------------------------------------------
@dataclass
class Column:
    """One method of one job, as the comparison shows it."""

    label: str  # the method's name, or `<job>:<name>` when another job has the same name
    job: str
    method: str
    agent: str | None


@dataclass
class Cell:
    task: str
    column: str
    trials: list[Trial] = field(default_factory=list)

    @property
    def scores(self) -> list[float]:
        return [float(t.score or 0) for t in self.valid_trials]

    @property
    def valid_trials(self) -> list[Trial]:
        return [t for t in self.trials if counted(t)]

    @property
    def n(self) -> int:
        return len(self.valid_trials)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores) if self.scores else None

    @property
    def spread(self) -> float | None:
        return statistics.stdev(self.scores) if len(self.scores) >= 2 else None

    def count(self, evaluation: str) -> int:
        if evaluation == "valid":
            return self.n
        if evaluation == "invalid":  # a "valid" trial without a finite score is not one
            return sum(t.evaluation != "unknown" and not counted(t) for t in self.trials)
        return sum(t.evaluation == "unknown" for t in self.trials)

    def why_not(self) -> str:
        """Why this cell has no valid trial."""
        if not self.trials:
            return "not run"
        invalid = [t for t in self.trials if t.evaluation != "unknown" and not counted(t)]
        if invalid:
            reasons = sorted({why_invalid(t) for t in invalid})
            return f"{len(invalid)} invalid ({'; '.join(reasons)})"
        return "not graded yet"

    def to_json(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "spread": self.spread,
            "n": self.n,
            "valid": self.count("valid"),
            "invalid": self.count("invalid"),
            "unknown": self.count("unknown"),
            "trials": [trial_json(t) for t in self.trials],
        }


def cell_text(cell: Cell) -> str:
    """`0.67 ± 0.58 (n=3)`, `1 (n=1), 2 invalid`, `invalid ×3`, `pending`, `-` (not run)."""
    if not cell.trials:
        return "-"
    parts = []
    if cell.mean is not None:
        spread = f" ± {fmt_metric(cell.spread)}" if cell.spread is not None else ""
        parts.append(f"{fmt_metric(cell.mean)}{spread} (n={cell.n})")
    invalid, unknown = cell.count("invalid"), cell.count("unknown")
    if invalid:
        parts.append(f"{invalid} invalid" if parts else f"invalid ×{invalid}")
    if unknown:
        parts.append(f"{unknown} pending")
    return ", ".join(parts)


def paired_text(cmp: Comparison, label: str) -> str:
    mean, spread = cmp.paired(label)
    return fmt_metric(mean) + (f" ± {fmt_metric(spread)}" if spread is not None else "")


@dataclass
class Comparison:
    jobs: list[JobRecords]
    columns: list[Column]
    tasks: list[str]
    cells: dict[tuple[str, str], Cell]  # (task, column label)
    paired_tasks: list[str]
    left_out: list[tuple[str, str]]  # (task, why)

    def cell(self, task: str, label: str) -> Cell:
        return self.cells.get((task, label)) or Cell(task, label)

    def paired(self, label: str) -> tuple[float | None, float | None]:
        """The method's mean over the paired tasks (of its cell means), and their spread."""
        means = [m for t in self.paired_tasks if (m := self.cell(t, label).mean) is not None]
        if not means:
            return None, None
        return statistics.fmean(means), statistics.stdev(means) if len(means) >= 2 else None

    def totals(self, label: str) -> dict[str, int]:
        cells = [self.cell(t, label) for t in self.tasks]
        out = {e: sum(c.count(e) for c in cells) for e in EVALUATIONS}
        out["tasks_valid"] = sum(c.n > 0 for c in cells)
        return out

    def to_json(self) -> dict[str, Any]:
        methods = []
        for col in self.columns:
            mean, spread = self.paired(col.label)
            methods.append(
                {
                    "label": col.label,
                    "job": col.job,
                    "method": col.method,
                    "agent": col.agent,
                    "paired_mean": mean,
                    "paired_spread": spread,
                    **self.totals(col.label),
                }
            )
        return {
            "jobs": [j.summary() for j in self.jobs],
            "methods": methods,
            "tasks": [
                {
                    "task": t,
                    "cells": {c.label: self.cell(t, c.label).to_json() for c in self.columns},
                }
                for t in self.tasks
            ],
            "paired": {
                "tasks": list(self.paired_tasks),
                "n": len(self.paired_tasks),
                "left_out": [{"task": t, "reason": why} for t, why in self.left_out],
            },
        }


def columns_of(jobs: Sequence[JobRecords]) -> list[Column]:
    """Each job's methods (job.json's, then any a trial names that job.json lacks), qualified
    by job when another job compared has a method of the same name."""
    found: list[tuple[str, str, str | None]] = []
    for rec in jobs:
        names: list[tuple[str, str | None]] = [(m.name, m.agent) for m in rec.job.methods]
        names += [(t.method, None) for t in rec.trials]
        seen: dict[str, str | None] = {}
        for name, agent in names:
            seen.setdefault(name, agent)
        found.extend((rec.job.id, name, agent) for name, agent in seen.items())
    jobs_of: dict[str, set[str]] = {}
    for job_id, name, _ in found:
        jobs_of.setdefault(name, set()).add(job_id)
    return [
        Column(f"{job_id}:{name}" if len(jobs_of[name]) > 1 else name, job_id, name, agent)
        for job_id, name, agent in found
    ]


def compare(jobs: Sequence[JobRecords]) -> Comparison:
    if not jobs:
        raise UsageError("name at least one job to compare")
    columns = columns_of(jobs)
    label = {(c.job, c.method): c.label for c in columns}
    tasks = list(
        dict.fromkeys(t for rec in jobs for t in [*rec.job.tasks, *(t.task for t in rec.trials)])
    )
    cells: dict[tuple[str, str], Cell] = {}
    for rec in jobs:
        for t in sorted(rec.trials, key=lambda t: t.seed):
            key = (t.task, label[(rec.job.id, t.method)])
            cells.setdefault(key, Cell(*key)).trials.append(t)
    cmp = Comparison(list(jobs), columns, tasks, cells, [], [])
    for task in tasks:
        missing = [c.label for c in columns if cmp.cell(task, c.label).n == 0]
        if not missing:
            cmp.paired_tasks.append(task)
            continue
        why = "; ".join(f"{m}: {cmp.cell(task, m).why_not()}" for m in missing)
        cmp.left_out.append((task, why))
    return cmp


def compare_jobs(home: Home, refs: Sequence[str]) -> Comparison:
    """Read and compare the jobs named (ids or unique names; each once)."""
    if len(refs) > JOBS_MAX:
        raise UsageError(f"compare at most {JOBS_MAX} jobs at once")
    ids = list(dict.fromkeys(resolve_job(home, r).id for r in refs))
    return compare([read_job(home, i) for i in ids])

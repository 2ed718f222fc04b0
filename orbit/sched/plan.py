"""Admission decisions as a pure function of (queue, pool, now).

Order (docs/scheduling.md): runs are considered in submission order and each one that fits
what is left is admitted, so a small run may start ahead of a big one that does not fit yet
(backfill). To keep a big run from being starved by a stream of small ones, a run that has
waited longer than `reserve_after_s` reserves what it needs from what is free now: runs behind
it may only use the rest. A sweep's cap (`group_cap`) limits how many runs of its group hold a
lease at once. Nothing here touches a file or a process: the tick reads, calls `plan`, acts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from orbit.human import fmt_cpus, fmt_num, gpu_phrase
from orbit.sched.resources import GIB, Amount


@dataclass(frozen=True)
class GpuSlot:
    """One GPU as admission sees it this tick."""

    index: int
    uuid: str
    mem_total: int
    mem_free: int
    allowed: bool = True
    holder: str | None = None  # "leased to run 12 (lr)", "in use outside Orbit by pid …"


@dataclass(frozen=True)
class Pool:
    totals: Amount
    leased: Amount
    outside: Amount = field(default_factory=lambda: Amount(0, 0))  # counted outside use
    outside_cpu_note: str = ""  # "CPUs busy outside Orbit (load 7.5 of 8)"
    outside_mem_note: str = ""
    gpus: tuple[GpuSlot, ...] = ()
    group_running: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Demand:
    """What one queued run asks admission for."""

    run_id: str
    need: Amount
    gpus: int = 0
    gpu_mem_gb: float | None = None
    gpu_ids: tuple[int, ...] | None = None
    group: str | None = None
    group_cap: int | None = None
    submitted_at: datetime | None = None
    label: str = ""


@dataclass(frozen=True)
class Admit:
    run_id: str
    lease: Amount
    gpus: tuple[GpuSlot, ...] = ()


@dataclass(frozen=True)
class Wait:
    run_id: str
    reason: str


def _gpu_problem(slot: GpuSlot | None, index: int, req: Demand, taken: set[str]) -> str | None:
    """Why this GPU cannot go to `req` now, or None when it can."""
    if slot is None:
        return f"pinned GPU {index} does not exist"
    if not slot.allowed:
        return f"GPU {index} is not allowed (ORBIT_GPUS)"
    if slot.uuid in taken:
        return f"GPU {index} goes to an earlier run in the queue"
    if slot.holder:
        return f"GPU {index} {slot.holder}"
    if req.gpu_mem_gb and slot.mem_free < req.gpu_mem_gb * GIB:
        return f"GPU {index} has {fmt_num(round(slot.mem_free / GIB, 1))} GiB free"
    return None


def _choose_gpus(req: Demand, pool: Pool, taken: set[str]) -> tuple[tuple[GpuSlot, ...], list[str]]:
    """GPUs for `req` and, when there are not enough, why each candidate is not available."""
    if req.gpus <= 0:
        return (), []
    by_index = {g.index: g for g in pool.gpus}
    problems = []
    chosen = []
    if req.gpu_ids:
        for index in req.gpu_ids:
            slot = by_index.get(index)
            problem = _gpu_problem(slot, index, req, taken)
            if problem:
                problems.append(problem)
            elif slot is not None:
                chosen.append(slot)
        return (tuple(chosen), problems) if not problems else ((), problems)
    for slot in sorted(pool.gpus, key=lambda g: g.index):
        if not slot.allowed:
            continue
        problem = _gpu_problem(slot, slot.index, req, taken)
        if problem:
            problems.append(problem)
        elif len(chosen) < req.gpus:
            chosen.append(slot)
    if len(chosen) < req.gpus:
        return (), problems
    return tuple(chosen), []


def plan(
    queue: list[Demand], pool: Pool, now: datetime, reserve_after_s: float
) -> list[Admit | Wait]:
    decisions: list[Admit | Wait] = []
    leased = pool.leased  # grows with each run admitted in this pass
    taken: set[str] = set()  # GPUs admitted or reserved during this pass
    group_running = dict(pool.group_running)
    reserved = Amount(0, 0)
    for req in queue:
        if req.group and req.group_cap and group_running.get(req.group, 0) >= req.group_cap:
            running = group_running.get(req.group, 0)
            decisions.append(
                Wait(
                    req.run_id,
                    f"group {req.group}: {running} of {req.group_cap} running (sweep cap)",
                )
            )
            continue
        free = Amount(
            pool.totals.cpus - leased.cpus - pool.outside.cpus - reserved.cpus,
            pool.totals.mem_gb - leased.mem_gb - pool.outside.mem_gb - reserved.mem_gb,
        )
        short = []
        if req.need.cpus > free.cpus + 1e-9:
            n_leased, total = fmt_num(leased.cpus), fmt_num(pool.totals.cpus)
            text = f"{fmt_cpus(req.need.cpus)}: {n_leased} of {total} leased"
            if pool.outside.cpus > 0 and pool.outside_cpu_note:
                text += f", {pool.outside_cpu_note}"
            if reserved.cpus > 0:
                text += f", {fmt_num(reserved.cpus)} reserved for an earlier run"
            short.append(text)
        if req.need.mem_gb > free.mem_gb + 1e-9:
            text = (
                f"{fmt_num(req.need.mem_gb)} GiB memory: {fmt_num(leased.mem_gb)} of "
                f"{fmt_num(pool.totals.mem_gb)} GiB leased"
            )
            if pool.outside.mem_gb > 0 and pool.outside_mem_note:
                text += f", {pool.outside_mem_note}"
            if reserved.mem_gb > 0:
                text += f", {fmt_num(reserved.mem_gb)} GiB reserved for an earlier run"
            short.append(text)
        chosen, gpu_problems = _choose_gpus(req, pool, taken)
        if req.gpus > 0 and not chosen:
            short.append(
                gpu_phrase(req.gpus, req.gpu_ids, req.gpu_mem_gb)
                + (": " + ", ".join(gpu_problems) if gpu_problems else "")
            )
        if not short:
            decisions.append(Admit(req.run_id, req.need, chosen))
            leased = leased + req.need
            taken.update(g.uuid for g in chosen)
            if req.group:
                group_running[req.group] = group_running.get(req.group, 0) + 1
            continue
        decisions.append(Wait(req.run_id, "waiting for " + "; and for ".join(short)))
        waited = (now - req.submitted_at).total_seconds() if req.submitted_at else 0.0
        if waited >= reserve_after_s:
            # Starvation guard: hold back what this run needs from what is free now.
            reserved = reserved + Amount(
                max(0.0, min(req.need.cpus, free.cpus)), max(0.0, min(req.need.mem_gb, free.mem_gb))
            )
            free_gpus = [
                g
                for g in sorted(pool.gpus, key=lambda g: g.index)
                if g.allowed
                and not g.holder
                and g.uuid not in taken
                and (not req.gpu_ids or g.index in req.gpu_ids)
            ]
            taken.update(g.uuid for g in free_gpus[: req.gpus])
    return decisions


def never_fits(req: Demand, totals: Amount, gpus: tuple[GpuSlot, ...] | None = None) -> str | None:
    """Why a demand can never fit on this machine, or None."""
    if req.need.cpus > totals.cpus + 1e-9:
        return f"needs {fmt_cpus(req.need.cpus)} but this machine has {fmt_cpus(totals.cpus)}"
    if req.need.mem_gb > totals.mem_gb + 1e-9:
        return (
            f"needs {fmt_num(req.need.mem_gb)} GiB memory but this machine has "
            f"{fmt_num(totals.mem_gb)} GiB"
        )
    if req.gpus <= 0:
        return None
    slots = gpus or ()
    by_index = {g.index: g for g in slots}
    if req.gpu_ids:
        if len(set(req.gpu_ids)) != req.gpus:
            return f"--gpu-ids names {len(set(req.gpu_ids))} GPUs but --gpus asks for {req.gpus}"
        for index in req.gpu_ids:
            if index not in by_index:
                return f"pinned GPU {index} does not exist"
            if not by_index[index].allowed:
                return f"GPU {index} is not allowed (ORBIT_GPUS)"
    usable = [g for g in slots if g.allowed and (not req.gpu_ids or g.index in req.gpu_ids)]
    if req.gpu_mem_gb:
        usable = [g for g in usable if g.mem_total >= req.gpu_mem_gb * GIB]
    if len(usable) < req.gpus:
        have = f"{len(usable)} usable GPU" + ("" if len(usable) == 1 else "s")
        if req.gpu_mem_gb:
            have += f" with ≥ {fmt_num(req.gpu_mem_gb)} GiB"
        return (
            f"needs {req.gpus} GPU"
            + ("" if req.gpus == 1 else "s")
            + f" but this machine has {have}"
        )
    return None

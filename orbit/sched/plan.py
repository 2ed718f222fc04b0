"""Admission decisions as a pure function of (queue, leases, totals).

Order (docs/scheduling.md): runs are considered in submission order; each one that fits the
resources left is admitted, so a small run may start ahead of a big one that does not fit yet
(backfill). Nothing here touches a file or a process: the tick reads, calls `plan`, then acts.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbit.sched.resources import Amount, fmt_num


@dataclass(frozen=True)
class Request:
    run_id: str
    need: Amount


@dataclass(frozen=True)
class Admit:
    run_id: str
    lease: Amount


@dataclass(frozen=True)
class Wait:
    run_id: str
    reason: str


def plan(queue: list[Request], leased: Amount, totals: Amount) -> list[Admit | Wait]:
    decisions: list[Admit | Wait] = []
    used = leased
    for req in queue:
        free_cpus = totals.cpus - used.cpus
        free_mem = totals.mem_gb - used.mem_gb
        short = []
        if req.need.cpus > free_cpus + 1e-9:
            cpus = fmt_cpus(req.need.cpus)
            short.append(f"{cpus}: {fmt_num(used.cpus)} of {fmt_num(totals.cpus)} leased")
        if req.need.mem_gb > free_mem + 1e-9:
            short.append(
                f"{fmt_num(req.need.mem_gb)} GiB memory: {fmt_num(used.mem_gb)} of "
                f"{fmt_num(totals.mem_gb)} GiB leased"
            )
        if short:
            decisions.append(Wait(req.run_id, "waiting for " + "; and for ".join(short)))
        else:
            decisions.append(Admit(req.run_id, req.need))
            used = used + req.need
    return decisions


def fmt_cpus(n: float) -> str:
    return f"{fmt_num(n)} CPU" + ("" if n == 1 else "s")


def never_fits(need: Amount, totals: Amount) -> str | None:
    """Why a request can never fit on this machine, or None."""
    if need.cpus > totals.cpus + 1e-9:
        return f"needs {fmt_cpus(need.cpus)} but this machine has {fmt_cpus(totals.cpus)}"
    if need.mem_gb > totals.mem_gb + 1e-9:
        return (
            f"needs {fmt_num(need.mem_gb)} GiB memory but this machine has "
            f"{fmt_num(totals.mem_gb)} GiB"
        )
    return None

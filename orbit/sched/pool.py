"""What admission works with this tick: totals, leases, use outside Orbit, and GPUs.

Reads the machine (psutil, NVML or its stand-in, cgroups) and the leases of the active runs,
and turns them into the plain `Pool` that `plan` decides from. `orbit resources` shows the
same data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orbit.errors import OrbitError
from orbit.human import fmt_num
from orbit.sched.gpus import GIB, Gpu, allowed_indices, open_gpus
from orbit.sched.outside import NONE, Outside, measure
from orbit.sched.plan import GpuSlot, Pool
from orbit.sched.resources import Amount, machine_totals
from orbit.store.home import Home
from orbit.store.model import Run


@dataclass
class Reading:
    """The machine and its leases as read this tick (`build`)."""

    pool: Pool
    gpus: list[Gpu] = field(default_factory=list)
    gpu_kind: str = "none"
    outside: Outside = NONE
    problems: list[str] = field(default_factory=list)


def lease_of(run: Run) -> Amount:
    lease = run.lease
    return Amount(lease.cpus, lease.mem_gb)


def leased_gpus(run: Run) -> list[dict[str, object]]:
    return list(run.lease.gpus)


def gpu_slots(
    gpus: list[Gpu], allowed: set[int] | None, leased: list[Run], foreign_min_gb: float
) -> tuple[GpuSlot, ...]:
    holders: dict[str, str] = {}
    ours: set[str] = set()
    for run in leased:
        cid = run.container_id
        if cid:
            ours.add(str(cid))
        for g in leased_gpus(run):
            holders[str(g.get("uuid"))] = f"leased to run {run.label}"
    slots = []
    for gpu in gpus:
        holder = holders.get(gpu.uuid)
        if holder is None:
            foreign = [p for p in gpu.processes if not (p.container_id and p.container_id in ours)]
            attributed = sum(p.mem_bytes for p in gpu.processes)
            unattributed = max(0, gpu.mem_used - attributed)
            foreign_mem = sum(p.mem_bytes for p in foreign) + unattributed
            if foreign_mem > foreign_min_gb * GIB:
                if foreign:
                    top = max(foreign, key=lambda p: p.mem_bytes)
                    who = ", ".join(
                        x for x in (top.name, f"user {top.user}" if top.user else "") if x
                    )
                    mem = f"{top.mem_bytes / GIB:.1f} GiB"
                    detail = f"{who}, {mem}" if who else mem
                    holder = f"in use outside Orbit by pid {top.pid} ({detail})"
                else:
                    holder = f"in use outside Orbit ({foreign_mem / GIB:.1f} GiB used)"
        slots.append(
            GpuSlot(
                index=gpu.index,
                uuid=gpu.uuid,
                mem_total=gpu.mem_total,
                mem_free=gpu.mem_free,
                allowed=allowed is None or gpu.index in allowed,
                holder=holder,
            )
        )
    return tuple(slots)


def read_gpus(home: Home) -> tuple[list[Gpu], str]:
    reader = open_gpus(home)
    return reader.read(), reader.kind


def measure_outside(home: Home, leased: list[Run]) -> Outside:
    return measure(home, leased, machine_totals(home))


def build(home: Home, leased: list[Run], *, with_gpus: bool = True) -> Reading:
    totals = machine_totals(home)
    used = Amount(0, 0)
    groups: dict[str, int] = {}
    for run in leased:
        used = used + lease_of(run)
        group = run.group
        if group:
            groups[str(group)] = groups.get(str(group), 0) + 1
    problems: list[str] = []
    gpus: list[Gpu] = []
    kind = "none"
    slots: tuple[GpuSlot, ...] = ()
    if with_gpus:
        try:
            gpus, kind = read_gpus(home)
            allowed = allowed_indices(home)
            slots = gpu_slots(gpus, allowed, leased, home.settings.gpu_outside_min_gb)
        except OrbitError as exc:
            problems.append(f"GPUs unreadable: {exc}")
    outside = measure(home, leased, totals)
    cpu_note = mem_note = ""
    if outside.counted.cpus > 0:
        cpu_note = (
            # Rounded to a half core: a reason that changed with every tick would be rewritten
            # (and fsynced) for every queued run on every tick.
            f"CPUs busy outside Orbit (load {round(outside.load * 2) / 2:g} of "
            f"{fmt_num(outside.machine_cpus)})"
        )
    if outside.counted.mem_gb > 0:
        mem_note = f"{round(outside.mem_gb * 2) / 2:g} GiB in use outside Orbit"
    pool = Pool(
        totals=totals,
        leased=used,
        outside=outside.counted,
        outside_cpu_note=cpu_note,
        outside_mem_note=mem_note,
        gpus=slots,
        group_running=groups,
    )
    return Reading(pool, gpus, kind, outside, problems)

"""What the machine has: totals from /proc (machine.py), overridable in config.yaml."""

from __future__ import annotations

from orbit.record import Frozen
from orbit.store.home import Home

GIB = 1024**3


class Amount(Frozen):
    """CPUs and GiB of memory: a value (compared, hashed, never changed)."""

    __slots__ = ("cpus", "mem_gb")
    cpus: float
    mem_gb: float

    def __init__(self, cpus: float, mem_gb: float) -> None:
        self._init(cpus=cpus, mem_gb=mem_gb)

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.cpus + other.cpus, self.mem_gb + other.mem_gb)


def machine_totals(home: Home) -> Amount:
    cpus, mem = home.settings.total_cpus, home.settings.total_mem_gb
    if cpus is None or mem is None:
        from orbit.sched import machine

        if cpus is None:
            cpus = machine.cpu_count()
        if mem is None:
            mem = machine.memory()[0] / GIB
    return Amount(float(cpus), float(mem))


def one_run_most(totals: Amount) -> Amount:
    """The most one run here can have: the totals (config.yaml may set them above the
    machine, to lease more than it has), but no more CPUs than the machine has, which Docker
    refuses a container ("Range of CPUs is from 0.01 to 2.00")."""
    from orbit.sched import machine

    return Amount(min(totals.cpus, float(machine.cpu_count())), totals.mem_gb)


def fmt_num(value: float) -> str:
    """4.0 → "4", 0.25 → "0.25", 23.4567 → "23.46"."""
    return f"{value:.2f}".rstrip("0").rstrip(".") if value % 1 else str(int(value))

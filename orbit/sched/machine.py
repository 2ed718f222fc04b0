"""The machine's CPUs, memory and busy time, read from /proc as psutil would (psutil's import
costs more than the whole reading, and every `orbit run` and tick reads these)."""

from __future__ import annotations

import os


def cpu_count() -> int:
    """Logical CPUs (psutil.cpu_count(logical=True))."""
    return os.cpu_count() or 1


def memory() -> tuple[int, int]:
    """(total, available) bytes: MemTotal and MemAvailable of /proc/meminfo."""
    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                key, _, rest = line.partition(b":")
                if key in (b"MemTotal", b"MemAvailable", b"MemFree", b"Buffers", b"Cached"):
                    fields[key.decode()] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    total = fields.get("MemTotal") or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    available = fields.get("MemAvailable")
    if available is None:  # kernels before 3.14
        available = sum(fields.get(k, 0) for k in ("MemFree", "Buffers", "Cached"))
    return total, available


def busy_cpu_seconds() -> float:
    """CPU seconds the machine spent busy since boot: user, nice, system, irq, softirq and
    steal of /proc/stat's `cpu` line (psutil.cpu_times's fields of the same names)."""
    try:
        with open("/proc/stat", "rb") as fh:
            values = fh.readline().split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (float(v) for v in values[:8])
    except (OSError, ValueError):
        return 0.0
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")

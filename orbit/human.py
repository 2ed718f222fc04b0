"""How numbers are shown to people: durations, sizes, counts of CPUs and GPUs (no Orbit imports)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime


def fmt_num(value: float) -> str:
    """4.0 → "4", 0.25 → "0.25", 23.4567 → "23.46"."""
    return f"{value:.2f}".rstrip("0").rstrip(".") if value % 1 else str(int(value))


def fmt_minutes(minutes: float) -> str:
    """A duration given in minutes, as a timeout's reason says it: 5 → "5 min", 0.02 → "1.2 s"."""
    return f"{fmt_num(minutes)} min" if minutes >= 1 else f"{fmt_num(minutes * 60)} s"


def fmt_gib(n: float) -> str:
    """Bytes in GiB as memory limits are given: 268435456 → "0.25 GiB"; below 0.01 GiB as
    `human_bytes` says (a limit is never that small, a peak can be)."""
    return f"{fmt_num(n / 2**30)} GiB" if n >= 2**30 / 100 else human_bytes(n, "0 GiB")


def fmt_metric(value: float | None) -> str:
    """A metric's value to 4 significant digits: 0.012345 → "0.01235", 3.0 → "3"; a whole
    number as it is (161051, not "1.611e+05": steps and counts); None → "-". Total: NaN →
    "NaN", infinities → "inf" / "-inf", an integer too big for a float (10**400) → "1e+400"."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    try:
        f = float(value)
    except OverflowError:  # an int past the float range: its power of ten
        return f"{'-' if value < 0 else ''}1e+{int(math.log10(abs(value)))}"
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == int(f) and abs(f) < 1e15:
        return str(int(f))
    return f"{f:.4g}"


def fmt_cpus(n: float) -> str:
    return f"{fmt_num(n)} CPU" + ("" if n == 1 else "s")


def gpu_phrase(
    gpus: int, gpu_ids: Sequence[int] | None = None, gpu_mem_gb: float | None = None
) -> str:
    """`2 GPUs (pinned 0,1) with ≥ 20 GiB free`: a GPU request as messages name it."""
    what = f"{gpus} GPU" + ("" if gpus == 1 else "s")
    if gpu_ids:
        what += " (pinned " + ",".join(str(i) for i in gpu_ids) + ")"
    if gpu_mem_gb:
        what += f" with ≥ {fmt_num(gpu_mem_gb)} GiB free"
    return what


def human_seconds(seconds: float | None) -> str:
    """12.34 → "12s", 1.23 → "1.2s", 0.04 → "<0.1s" (never "0.0s" for a time that passed)."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 0.05:
        return "<0.1s"
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"
    return f"{seconds // 86400:.0f}d{seconds % 86400 // 3600:02.0f}h"


def human_bytes(n: float | None, zero: str = "-") -> str:
    """1536 → "1.5 KiB"; None → "-"; 0 → `zero` (a file listing passes "0 B")."""
    if n is None:
        return "-"
    if not n:
        return zero
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def human_count(n: float) -> str:
    """A count as people read it: 950, 12.3k, 4.5M."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}".rstrip("0").rstrip(".") + unit
    return f"{n:g}"


def clock_time(stamp: str | None) -> str:
    """An ISO time as the local clock shows it, `12:03:05`; "?" when missing or malformed."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(stamp)).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return "?"


def ago(stamp: str | None, now: datetime | None = None) -> str:
    """`5m02s ago` for an ISO time (`-` for none or one that is not a time)."""
    try:
        when = datetime.fromisoformat(stamp) if stamp else None
    except (TypeError, ValueError):
        when = None
    if when is None or when.tzinfo is None:
        return "-"
    return human_seconds(((now or datetime.now(UTC)) - when).total_seconds()) + " ago"

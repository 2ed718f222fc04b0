"""Metric series for the web view: metrics.jsonl read as a stream, each numeric key down-sampled.

A metrics file can hold millions of lines, so nothing here keeps more than one 1 MiB chunk of
text and one float array per key in memory, and what leaves the server is at most `max_points`
points per key. The down-sampling is LTTB (largest triangle three buckets) with the minimum and
maximum of every bucket kept as well, so a spike or a divergence never disappears from a chart.
"""

from __future__ import annotations

import json
import math
import os
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import chain, compress
from pathlib import Path
from typing import Any

CHUNK_BYTES = 1 << 20
MAX_PARSE_BYTES = 256 << 20  # beyond this only the file's last 256 MiB is charted
MAX_KEYS = 64  # keys beyond this are counted, not charted
X_KEYS = ("step", "time", "timestamp")  # the x axis: the first of these a file uses, else line


@dataclass
class Series:
    key: str
    x: list[float]
    y: list[float]
    count: int  # points before down-sampling
    min: float
    max: float
    last: float


@dataclass
class Metrics:
    x_label: str = "line"
    lines: int = 0
    series: dict[str, Series] = field(default_factory=dict)
    dropped_keys: int = 0  # numeric keys past MAX_KEYS
    skipped_bytes: int = 0  # bytes at the head of a huge file that were not read

    def to_json(self) -> dict[str, Any]:
        return {
            "x_label": self.x_label,
            "lines": self.lines,
            "dropped_keys": self.dropped_keys,
            "skipped_bytes": self.skipped_bytes,
            "series": {
                k: {
                    "x": s.x,
                    "y": s.y,
                    "count": s.count,
                    "min": s.min,
                    "max": s.max,
                    "last": s.last,
                }
                for k, s in self.series.items()
            },
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


_NUMBER_TYPES = {int, float}


def _is_number(v: Any) -> bool:
    return type(v) is int or (type(v) is float and v - v == 0.0)  # not bool, NaN or inf


def _all_numbers(col: list[Any]) -> bool:
    """True when every value is a finite int or float (C-level checks: the common case)."""
    if not set(map(type, col)) <= _NUMBER_TYPES:
        return False
    try:
        return math.isfinite(sum(col))  # a NaN or an infinity anywhere makes the sum one
    except OverflowError:
        return False


def _objects(raw: bytes) -> list[Any]:
    """The JSON values of a block of whole lines: one `json.loads` for the block (far cheaper
    than one per line), falling back to line by line when some line is malformed."""
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if not lines:
        return []
    try:
        return list(json.loads(b"[" + b",".join(lines) + b"]"))
    except ValueError:
        out: list[Any] = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append(None)  # keeps the line count right for a line-numbered x axis
        return out


def read_metrics(path: Path, *, max_points: int = 1000) -> Metrics:
    """Every numeric key of a metrics.jsonl against `step` (or `time`, or the line number),
    down-sampled to at most `max_points` points each. Results are cached by file identity and
    size, so a page reloaded while nothing was appended costs nothing."""
    try:
        st = os.stat(path)
    except OSError:
        return Metrics()
    cache_key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns, max_points)
    with _cache_lock:
        hit = _cache.get(cache_key)
        if hit is not None:
            _cache.move_to_end(cache_key)
            return hit
    result = _read(path, st.st_size, max_points)
    with _cache_lock:
        _cache[cache_key] = result
        while len(_cache) > 32:
            _cache.popitem(last=False)
    return result


_cache: OrderedDict[tuple[Any, ...], Metrics] = OrderedDict()
_cache_lock = threading.Lock()
_EMPTY: dict[str, Any] = {}


def _read(path: Path, size: int, max_points: int) -> Metrics:
    out = Metrics()
    xs: dict[str, array[float]] = {}
    ys: dict[str, array[float]] = {}
    dropped: set[str] = set()
    x_key: str | None = None
    x_now = 0.0
    line_no = 0
    start = max(0, size - MAX_PARSE_BYTES)
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; a with-block would nest everything
    except OSError:
        return out
    with fh:
        fh.seek(start)
        rest = b""
        if start:
            fh.readline()  # the first line is probably cut
            out.skipped_bytes = fh.tell()
        read = start
        while read < size:
            chunk = fh.read(min(CHUNK_BYTES, size - read))
            if not chunk:
                break
            read += len(chunk)
            block = rest + chunk
            cut = block.rfind(b"\n") + 1
            if read >= size:
                cut = len(block)  # a last line without a newline still counts
            rest = block[cut:]
            objs = [o if type(o) is dict else _EMPTY for o in _objects(block[:cut])]
            if not objs:
                continue
            if x_key is None:
                for o in objs:
                    if o:
                        x_key = next((k for k in X_KEYS if _number(o.get(k)) is not None), "")
                        out.x_label = x_key or "line"
                        break
            xcol: list[Any] | range
            if x_key:
                raw: list[Any] = [o.get(x_key) for o in objs]
                if _all_numbers(raw):
                    xcol = raw
                else:
                    xcol = []
                    for v in raw:
                        if type(v) is int or (type(v) is float and v - v == 0.0):
                            x_now = v  # a line without a step belongs to the last one seen
                        xcol.append(x_now)
                x_now = xcol[-1]
            else:
                xcol = range(line_no + 1, line_no + 1 + len(objs))
            line_no += len(objs)
            # Column by column: comprehensions and C-level extends, not a loop per value.
            for k in dict.fromkeys(chain.from_iterable(objs)):
                if k == x_key or k in dropped:
                    continue
                col: list[Any] = [o.get(k) for o in objs]
                every = _all_numbers(col)
                ok = [] if every else [_is_number(v) for v in col]
                ya = ys.get(k)
                if ya is None:
                    if not every and not any(ok):
                        continue
                    if len(ys) >= MAX_KEYS:
                        dropped.add(k)
                        continue
                    ya = ys[k] = array("d")
                    xs[k] = array("d")
                if every:
                    ya.extend(col)
                    xs[k].extend(xcol)
                else:
                    ya.extend(compress(col, ok))
                    xs[k].extend(compress(xcol, ok))
    out.lines = line_no
    out.dropped_keys = len(dropped)
    for k in ys:
        xa, ya = xs[k], ys[k]
        if not ya:
            continue  # a key that never held a number
        px, py = downsample(xa, ya, max_points)
        out.series[k] = Series(k, px, py, len(ya), min(ya), max(ya), ya[-1])
    return out


def downsample(
    xs: array[float] | list[float], ys: array[float] | list[float], max_points: int = 1000
) -> tuple[list[float], list[float]]:
    """At most `max_points` points of (xs, ys) in order: the first and last point, and in each
    bucket the LTTB point, the minimum and the maximum."""
    n = len(ys)
    if n <= max_points or n < 3:
        return list(xs), list(ys)
    if max_points < 5:
        raise ValueError("max_points must be at least 5")
    idx = list(range(n))
    if n > 8 * max_points:
        idx = _minmax_preselect(ys, 4 * max_points)
    buckets = (max_points - 2) // 3
    chosen = _lttb_minmax(xs, ys, idx, buckets)
    return [xs[i] for i in chosen], [ys[i] for i in chosen]


def _minmax_preselect(ys: array[float] | list[float], groups: int) -> list[int]:
    """The index of the minimum and the maximum of each of `groups` equal slices (C-speed
    min/max/index over slices), plus the first and last index."""
    n = len(ys)
    keep = {0, n - 1}
    for g in range(groups):
        lo, hi = g * n // groups, (g + 1) * n // groups
        if hi <= lo:
            continue
        part = ys[lo:hi]
        keep.add(lo + part.index(min(part)))
        keep.add(lo + part.index(max(part)))
    return sorted(keep)


def _lttb_minmax(
    xs: array[float] | list[float],
    ys: array[float] | list[float],
    idx: list[int],
    buckets: int,
) -> list[int]:
    m = len(idx)
    out = [idx[0]]
    inner = m - 2
    prev = idx[0]
    for b in range(buckets):
        lo = 1 + b * inner // buckets
        hi = 1 + (b + 1) * inner // buckets
        if hi <= lo:
            continue
        # The average of the next bucket (or the last point) is the triangle's third corner.
        nlo, nhi = hi, min(m - 1, 1 + (b + 2) * inner // buckets)
        if b == buckets - 1 or nhi <= nlo:
            cx, cy = xs[idx[m - 1]], ys[idx[m - 1]]
        else:
            cx = sum(xs[idx[j]] for j in range(nlo, nhi)) / (nhi - nlo)
            cy = sum(ys[idx[j]] for j in range(nlo, nhi)) / (nhi - nlo)
        ax, ay = xs[prev], ys[prev]
        best, best_area = idx[lo], -1.0
        lo_i = hi_i = idx[lo]
        for j in range(lo, hi):
            i = idx[j]
            x, y = xs[i], ys[i]
            area = abs((ax - cx) * (y - ay) - (ax - x) * (cy - ay))
            if area > best_area:
                best, best_area = i, area
            if y < ys[lo_i]:
                lo_i = i
            if y > ys[hi_i]:
                hi_i = i
        out.extend(sorted({best, lo_i, hi_i}))
        prev = best
    if out[-1] != idx[m - 1]:
        out.append(idx[m - 1])
    return out

"""Metric series: metrics.jsonl read as a stream, each numeric key summarised and down-sampled.

The one parser of metrics files: the web's charts and the review's summaries (`orbit show`,
`orbit compare`) both read through `read_metrics`.

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
    min: float  # min, max and their x: of every point parsed, never of the down-sampled ones
    max: float
    last: float
    min_at: float  # the x of the first point holding the minimum
    max_at: float


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
                    "min_at": s.min_at,
                    "max_at": s.max_at,
                }
                for k, s in self.series.items()
            },
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


_NUMBER_TYPES = {int, float}


_FLOAT_INT_MAX = 2**1023  # a JSON integer beyond this does not fit a float


def _is_number(v: Any) -> bool:
    """A finite int or float that fits a float (not bool, NaN, inf or a 400-digit integer)."""
    if type(v) is int:
        return -_FLOAT_INT_MAX < v < _FLOAT_INT_MAX
    return type(v) is float and v - v == 0.0


def _all_numbers(col: list[Any]) -> bool:
    """True when every value is a finite int or float (C-level checks: the common case)."""
    if not set(map(type, col)) <= _NUMBER_TYPES:
        return False
    try:
        return math.isfinite(sum(col))  # a NaN or an infinity anywhere makes the sum one
    except OverflowError:
        return False


def _floats(col: list[Any]) -> array[float] | None:
    """An all-number column as floats; None when some value is not a finite number or does
    not fit a float (a 400-digit integer)."""
    if not _all_numbers(col):
        return None
    try:
        return array("d", col)
    except OverflowError:
        return None


def _objects(raw: bytes) -> list[Any]:
    """The JSON values of a block of whole lines: one `json.loads` for the block (far cheaper
    than one per line), falling back to line by line when some line is malformed."""
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if not lines:
        return []
    try:
        return list(json.loads(b"[" + b",".join(lines) + b"]"))
    except (ValueError, RecursionError):  # RecursionError: a line nested too deeply
        out: list[Any] = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except (ValueError, RecursionError):
                out.append(None)  # keeps the line count right for a line-numbered x axis
        return out


MAX_CACHED_POINTS = 8_000_000  # parsed points (x and y: 16 bytes each) kept across requests
MAX_CACHED_FILES = 32
_TAIL_CHECK = 64  # bytes before the parsed offset compared on each call (a rewrite in place)


class _Parsed:
    """The parse of one file (path, device, inode) so far: the arrays of every key and the
    byte offset up to which whole lines have been read. Growing the file costs only the new
    lines; the down-sampled results are kept per (size, mtime, max_points)."""

    def __init__(self, start: int) -> None:
        self.lock = threading.Lock()
        self.start = start  # where parsing began (beyond 0: the head of a huge file skipped)
        self.offset = start  # whole lines before this byte are in the arrays
        self.tail = b""  # the last bytes parsed, to notice a file rewritten in place
        self.seen = (-1, -1)  # (size, mtime_ns) of the file when last read
        self.skipped_bytes = 0
        self.x_key: str | None = None
        self.x_now: float = 0.0
        self.line_no = 0
        self.xs: dict[str, array[float]] = {}
        self.ys: dict[str, array[float]] = {}
        self.dropped: set[str] = set()
        self.memos: dict[str, dict[int, Any]] = {}  # downsample's memo, per key
        self.results: OrderedDict[tuple[int, int, int], Metrics] = OrderedDict()

    @property
    def points(self) -> int:
        return sum(len(a) for a in self.ys.values())

    def consume(self, block: bytes) -> None:
        """Add the lines of `block` (whole lines, the last one may lack its newline)."""
        objs = [o if type(o) is dict else _EMPTY for o in _objects(block)]
        if not objs:
            return
        xs, ys, dropped = self.xs, self.ys, self.dropped
        if self.x_key is None:
            for o in objs:
                if o:
                    self.x_key = next((k for k in X_KEYS if _number(o.get(k)) is not None), "")
                    break
        x_key = self.x_key
        xcol: list[Any] | range
        if x_key:
            raw: list[Any] = [o.get(x_key) for o in objs]
            if _floats(raw) is not None:
                xcol = raw
            else:
                xcol = []
                x_now = self.x_now
                for v in raw:
                    if _is_number(v):
                        x_now = v  # a line without a step belongs to the last one seen
                    xcol.append(x_now)
            self.x_now = xcol[-1]
        else:
            xcol = range(self.line_no + 1, self.line_no + 1 + len(objs))
        self.line_no += len(objs)
        # Column by column: comprehensions and C-level extends, not a loop per value.
        for k in dict.fromkeys(chain.from_iterable(objs)):
            if k == x_key or k in dropped:
                continue
            col: list[Any] = [o.get(k) for o in objs]
            values = _floats(col)
            every = values is not None
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
            if values is not None:
                ya.extend(values)
                xs[k].extend(xcol)
            else:
                ya.extend(compress(col, ok))
                xs[k].extend(compress(xcol, ok))

    def metrics(self, max_points: int, *, memo: bool = True) -> Metrics:
        """Every key's summary and, when `max_points` > 0, its down-sampled points (0: the
        summary alone, for a caller that shows no chart)."""
        out = Metrics(x_label=self.x_key or "line", lines=self.line_no)
        out.dropped_keys = len(self.dropped)
        out.skipped_bytes = self.skipped_bytes
        for k, ya in self.ys.items():
            if not ya:
                continue  # a key that never held a number
            xa = self.xs[k]
            m = self.memos.setdefault(k, {}) if memo else None
            px, py = downsample(xa, ya, max_points, m) if max_points else ([], [])
            lo, hi, lo_i, hi_i = _extremes(ya, m.get(-1) if m is not None else None)
            if m is not None:
                m[-1] = (len(ya), lo, hi, lo_i, hi_i)
            out.series[k] = Series(
                k, px, py, len(ya), lo, hi, ya[-1], min_at=xa[lo_i], max_at=xa[hi_i]
            )
        return out

    def metrics_with(self, torn: bytes, max_points: int) -> Metrics:
        """The result as if `torn` (a last line without its newline) were parsed, leaving the
        state as it was: that line is read again once it is complete."""
        saved = (self.x_key, self.x_now, self.line_no, set(self.dropped))
        lengths = {k: len(a) for k, a in self.ys.items()}
        try:
            self.consume(torn)
            return self.metrics(max_points, memo=False)  # the arrays shrink back after this
        finally:
            self.x_key, self.x_now, self.line_no, self.dropped = saved
            for k in list(self.ys):
                n = lengths.get(k)
                if n is None:
                    del self.ys[k], self.xs[k]
                else:
                    del self.ys[k][n:], self.xs[k][n:]


def _extremes(
    ya: array[float], seen: tuple[int, float, float, int, int] | None
) -> tuple[float, float, int, int]:
    """(min, max, index of the first min, index of the first max) of `ya`; `seen` is the
    answer for its first seen[0] values (the array only grows), so only the rest is scanned."""
    n = len(ya)
    if seen is None or seen[0] > n:
        lo, hi = min(ya), max(ya)
        return lo, hi, ya.index(lo), ya.index(hi)
    done, lo, hi, lo_i, hi_i = seen
    if done == n:
        return lo, hi, lo_i, hi_i
    part = ya[done:]
    plo, phi = min(part), max(part)
    if plo < lo:  # strictly: a tie keeps the earlier point
        lo, lo_i = plo, done + part.index(plo)
    if phi > hi:
        hi, hi_i = phi, done + part.index(phi)
    return lo, hi, lo_i, hi_i


def read_tail(path: Path, max_bytes: int, *, max_points: int = 1000) -> Metrics:
    """Like read_metrics, but of the file's last `max_bytes` only (the first, probably cut,
    line of that part skipped and counted in `skipped_bytes`), parsed afresh and not cached:
    for a caller that needs a bounded cost more than the whole history (a notification)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            fh.seek(start)
            block = fh.read(max_bytes)
    except OSError:
        return Metrics()
    state = _Parsed(start)
    if start:
        first = block.find(b"\n") + 1
        state.skipped_bytes = start + first if first else size
        block = block[first:] if first else b""
    state.consume(block)
    return state.metrics(max_points, memo=False)


def read_metrics(path: Path, *, max_points: int = 1000) -> Metrics:
    """Every numeric key of a metrics.jsonl against `step` (or `time`, or the line number):
    its count, last, min and max (with their x) over every point, and its points
    down-sampled to at most `max_points` (0: no points). The parse is kept per file identity, so
    a page reloaded while nothing was appended costs nothing and one reloaded after an append
    parses only the new lines (then down-samples again)."""
    try:
        st = os.stat(path)
    except OSError:
        return Metrics()
    key = (str(path), st.st_dev, st.st_ino)
    with _cache_lock:
        state = _cache.get(key)
        if state is not None:
            _cache.move_to_end(key)
    if state is not None:
        with state.lock:
            hit = state.results.get((st.st_size, st.st_mtime_ns, max_points))
            if hit is not None:
                return hit
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed by the with-block below
    except OSError:
        return Metrics()
    with fh:
        fst = os.fstat(fh.fileno())
        if (fst.st_dev, fst.st_ino) != key[1:]:  # replaced since the stat
            key, state = (str(path), fst.st_dev, fst.st_ino), None
        stamp = (fst.st_size, fst.st_mtime_ns, max_points)
        result = None
        if state is not None:
            with state.lock:
                if _usable(state, fh, fst.st_size, fst.st_mtime_ns):
                    result = _update(state, fh, fst.st_size, stamp)
                else:
                    state = None
        if state is None:
            state = _Parsed(max(0, fst.st_size - MAX_PARSE_BYTES))
            with state.lock:
                result = _update(state, fh, fst.st_size, stamp)
    assert result is not None
    _keep(key, state)
    return result


def _update(state: _Parsed, fh: Any, size: int, stamp: tuple[int, int, int]) -> Metrics:
    """Parse what was appended, then down-sample (the result is kept for `stamp`)."""
    hit = state.results.get(stamp)
    if hit is not None:
        return hit
    torn = _advance(state, fh, size)
    state.seen = (size, stamp[1])
    result = state.metrics_with(torn, stamp[2]) if torn.strip() else state.metrics(stamp[2])
    state.results[stamp] = result
    while len(state.results) > 4:
        state.results.popitem(last=False)
    return result


def _usable(state: _Parsed, fh: Any, size: int, mtime_ns: int) -> bool:
    """Whether `state` is a parse of an earlier version of this file (appended to since)."""
    if size < state.seen[0] or (size == state.seen[0] and mtime_ns != state.seen[1]):
        return False  # truncated, or changed without growing: rewritten
    if size - state.start > MAX_PARSE_BYTES + MAX_PARSE_BYTES // 8:
        return False  # grown well past the window: start again from its last MAX_PARSE_BYTES
    if state.tail:
        fh.seek(state.offset - len(state.tail))
        if fh.read(len(state.tail)) != state.tail:
            return False
    return True


def _advance(state: _Parsed, fh: Any, size: int) -> bytes:
    """Parse the whole lines between state.offset and `size`; the torn rest is returned."""
    fh.seek(state.offset)
    if state.offset == state.start and state.start and not state.skipped_bytes:
        fh.readline()  # the first line is probably cut
        state.offset = state.skipped_bytes = fh.tell()
    rest = b""
    read = state.offset
    while read < size:
        chunk = fh.read(min(CHUNK_BYTES, size - read))
        if not chunk:
            break
        read += len(chunk)
        block = rest + chunk
        cut = block.rfind(b"\n") + 1
        rest = block[cut:]
        if cut:
            state.consume(block[:cut])
            state.offset += cut
            state.tail = (state.tail + block[:cut])[-_TAIL_CHECK:]
    return rest


def _keep(key: tuple[str, int, int], state: _Parsed) -> None:
    """Cache `state`, dropping the least recently used parses beyond the caps."""
    with _cache_lock:
        _cache[key] = state
        _cache.move_to_end(key)
        total = sum(s.points for s in _cache.values())
        while len(_cache) > 1 and (len(_cache) > MAX_CACHED_FILES or total > MAX_CACHED_POINTS):
            _, old = _cache.popitem(last=False)
            total -= old.points
        if total > MAX_CACHED_POINTS:  # this one file alone is too big to keep
            del _cache[key]


_cache: OrderedDict[tuple[str, int, int], _Parsed] = OrderedDict()
_cache_lock = threading.Lock()
_EMPTY: dict[str, Any] = {}


def downsample(
    xs: array[float] | list[float],
    ys: array[float] | list[float],
    max_points: int = 1000,
    memo: dict[int, Any] | None = None,
) -> tuple[list[float], list[float]]:
    """At most `max_points` points of (xs, ys) in order: the first and last point, and in each
    bucket the LTTB point, the minimum and the maximum. `memo` (one dict per series that only
    ever grows) keeps the pre-selection of the part already seen."""
    n = len(ys)
    if n <= max_points or n < 3:
        return list(xs), list(ys)
    if max_points < 5:
        raise ValueError("max_points must be at least 5")
    big = n > 8 * max_points
    idx = _minmax_preselect(ys, 4 * max_points, memo) if big else list(range(n))
    buckets = (max_points - 2) // 3
    chosen = _lttb_minmax(xs, ys, idx, buckets)
    return [xs[i] for i in chosen], [ys[i] for i in chosen]


def _minmax_preselect(
    ys: array[float] | list[float], groups: int, memo: dict[int, Any] | None = None
) -> list[int]:
    """The index of the minimum and the maximum of each slice of `g` points (C-speed
    min/max/index over slices; `g` a power of two, so that at most `groups` slices), plus the
    first and last index. With `memo` (for an array that only grows), the slices already
    complete last time are not scanned again."""
    n = len(ys)
    g = 1 << max(0, math.ceil(math.log2(n / groups)))
    while (n + g - 1) // g > groups:
        g <<= 1
    state = memo.get(groups) if memo is not None else None
    if state is None or state[0] != g or state[1] * g > n:
        state = [g, 0, []]
    done, kept = state[1], state[2]
    full = n // g

    def scan(lo: int, hi: int, out: list[int]) -> None:
        part = ys[lo:hi]
        a, b = lo + part.index(min(part)), lo + part.index(max(part))
        out.extend((a, b) if a <= b else (b, a))

    for grp in range(done, full):
        scan(grp * g, (grp + 1) * g, kept)
    state[1] = full
    if memo is not None:
        memo[groups] = state
    tail: list[int] = []
    if full * g < n:
        scan(full * g, n, tail)
    return sorted({0, n - 1, *kept, *tail})


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

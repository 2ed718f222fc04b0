"""Metric series: metrics.jsonl read as a stream, each numeric key summarised and down-sampled.

The one parser of metrics files: the web's charts and the review's summaries (`orbit show`,
`orbit compare`) both read through `read_metrics`.

A metrics file can hold millions of lines, so nothing here keeps more than one 1 MiB chunk of
text and, per key, a Pyramid (pyramid.py: the minimum and maximum of each of at most
GROUPS_MAX blocks, about 2,000 points) in memory, and what leaves the server is at most
`max_points` points per key: LTTB (largest triangle three buckets) over the pyramid's points,
with the minimum and maximum of every bucket kept as well, so a spike or a divergence never
disappears from a chart. The pyramid is what the shepherd saves in metrics.summary.json
(sidecar.py, `Follower`), so a reader parses only the lines appended after it.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import threading
from array import array
from collections import OrderedDict
from itertools import chain, compress
from pathlib import Path

from orbit.record import Record
from orbit.review import sidecar
from orbit.review.pyramid import GROUPS_MAX, Pyramid, downsample

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
MAX_PARSE_BYTES = 256 << 20  # without a sidecar, only the last 256 MiB of a file is read
MAX_KEYS = 64  # keys beyond this are counted, not charted
X_KEYS = ("step", "time", "timestamp")  # the x axis: the first of these a file uses, else line


class Series(Record):
    """One key's points, down-sampled, and its summary; compared by value."""

    __slots__ = ("count", "key", "last", "max", "max_at", "min", "min_at", "x", "y")

    def __init__(
        self,
        key: str,
        x: list[float],
        y: list[float],
        count: int,  # points before down-sampling
        min: float,  # min, max and their x: of every point parsed, never of the down-sampled ones
        max: float,
        last: float,
        min_at: float,  # the x of the first point holding the minimum
        max_at: float,
    ) -> None:
        self.key = key
        self.x = x
        self.y = y
        self.count = count
        self.min = min
        self.max = max
        self.last = last
        self.min_at = min_at
        self.max_at = max_at


class Metrics(Record):
    """What a metrics file holds, as series; compared by value."""

    __slots__ = ("dropped_keys", "lines", "series", "skipped_bytes", "x_label")

    def __init__(
        self,
        x_label: str = "line",
        lines: int = 0,
        series: dict[str, Series] | None = None,
        dropped_keys: int = 0,  # numeric keys past MAX_KEYS
        skipped_bytes: int = 0,  # bytes at the head of a huge file that were not read
    ) -> None:
        self.x_label = x_label
        self.lines = lines
        self.series: dict[str, Series] = {} if series is None else series
        self.dropped_keys = dropped_keys
        self.skipped_bytes = skipped_bytes

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


MAX_CACHED_POINTS = 1_000_000  # kept points (each key keeps at most ~2 * GROUPS_MAX)
MAX_CACHED_FILES = 32
_TAIL_CHECK = sidecar.CHECK_BYTES  # bytes before the parsed offset compared on each call
SIDECAR_GAIN = 4 << 20  # a cached parse this far behind the file looks for a newer sidecar


class _Parsed:
    """The parse of one file (path, device, inode) so far: each key's Pyramid and the byte
    offset up to which whole lines have been read. Growing the file costs only the new lines;
    the down-sampled results are kept per (size, mtime, max_points). Its `state()` is what
    metrics.summary.json holds; `from_state` takes it back."""

    def __init__(self, start: int) -> None:
        self.lock = threading.Lock()
        self.start = start  # where parsing began (beyond 0: the head of a huge file skipped)
        self.offset = start  # whole lines before this byte are in the pyramids
        self.head = b""  # the file's first bytes (up to _TAIL_CHECK), when start is 0
        self.tail = b""  # the last bytes parsed, to notice a file rewritten in place
        self.seen = (-1, -1)  # (size, mtime_ns) of the file when last read
        self.skipped_bytes = 0
        self.x_key: str | None = None
        self.x_now: float = 0.0
        self.line_no = 0
        self.keys: dict[str, Pyramid] = {}
        self.dropped: set[str] = set()
        self.from_sidecar = 0  # the offset of the sidecar this parse started from (0: none)
        self.results: OrderedDict[tuple[int, int, int], Metrics] = OrderedDict()

    @property
    def points(self) -> int:
        return sum(2 * len(p.groups) + 2 for p in self.keys.values())

    def state(self) -> dict[str, Any]:
        return {
            "groups_max": GROUPS_MAX,
            "max_keys": MAX_KEYS,
            "x_key": self.x_key,
            "x_now": self.x_now,
            "lines": self.line_no,
            "dropped": sorted(self.dropped),
            "keys": {k: p.to_json() for k, p in self.keys.items()},
            "summary": {k: _summary(p) for k, p in self.keys.items()},  # for people (cat, jq)
        }

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> _Parsed:
        """The parse a sidecar holds; ValueError when its state is damaged or was made with
        other limits."""
        out = cls(0)
        x_key, x_now, lines, dropped = (data.get(k) for k in ("x_key", "x_now", "lines", "dropped"))
        keys = data.get("keys")
        if (
            data.get("groups_max") != GROUPS_MAX
            or data.get("max_keys") != MAX_KEYS
            or not (x_key is None or x_key == "" or x_key in X_KEYS)
            or not _is_number(x_now)
            or type(lines) is not int
            or lines < 0
            or not isinstance(dropped, list)
            or not all(isinstance(k, str) for k in dropped)
            or not isinstance(keys, dict)
            or len(keys) > MAX_KEYS
        ):
            raise ValueError("sidecar state")
        out.x_key, out.line_no, out.dropped = x_key, lines, set(dropped)
        out.x_now = x_now  # type: ignore[assignment]  # checked by _is_number above
        out.keys = {k: Pyramid.from_json(v) for k, v in keys.items()}
        if any(p.n > lines for p in out.keys.values()) or (out.dropped & set(out.keys)):
            raise ValueError("sidecar state")
        offset = data["offset"]
        out.offset = out.from_sidecar = offset
        out.head = base64.b64decode(data["head"])
        out.tail = base64.b64decode(data["tail"])
        return out

    def copy(self) -> _Parsed:
        """A copy to parse a torn last line into (the pyramids copied, the rest shared)."""
        out = _Parsed(self.start)
        out.x_key, out.x_now, out.line_no = self.x_key, self.x_now, self.line_no
        out.dropped, out.skipped_bytes = set(self.dropped), self.skipped_bytes
        out.keys = {k: p.copy() for k, p in self.keys.items()}
        return out

    def consume(self, block: bytes) -> None:
        """Add the lines of `block` (whole lines, the last one may lack its newline)."""
        objs = [o if type(o) is dict else _EMPTY for o in _objects(block)]
        if not objs:
            return
        keys, dropped = self.keys, self.dropped
        xcol = self._x_column(objs)
        x_key = self.x_key
        self.line_no += len(objs)
        xall: array[float] | None = None
        # Column by column: comprehensions and C-level min/max, not a loop per value.
        for k in dict.fromkeys(chain.from_iterable(objs)):
            if k == x_key or k in dropped:
                continue
            col: list[Any] = [o.get(k) for o in objs]
            values = _floats(col)
            every = values is not None
            ok = [] if every else [_is_number(v) for v in col]
            pyr = keys.get(k)
            if pyr is None:
                if not every and not any(ok):
                    continue
                if len(keys) >= MAX_KEYS:
                    dropped.add(k)
                    continue
                pyr = keys[k] = Pyramid()
            if values is not None:
                if xall is None:
                    xall = array("d", xcol)
                pyr.add(xall, values)
            else:
                pyr.add(array("d", compress(xcol, ok)), array("d", compress(col, ok)))

    def _x_column(self, objs: list[dict[str, Any]]) -> list[Any] | range:
        """The x of each line: its `x_key` value, the last one seen for a line without one,
        or the line number when the file has no x key."""
        if self.x_key is None:
            for o in objs:
                if o:
                    self.x_key = next((k for k in X_KEYS if _number(o.get(k)) is not None), "")
                    break
        if not self.x_key:
            return range(self.line_no + 1, self.line_no + 1 + len(objs))
        raw: list[Any] = [o.get(self.x_key) for o in objs]
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
        return xcol

    def metrics(self, max_points: int) -> Metrics:
        """Every key's summary and, when `max_points` > 0, its down-sampled points (0: the
        summary alone, for a caller that shows no chart)."""
        out = Metrics(x_label=self.x_key or "line", lines=self.line_no)
        out.dropped_keys = len(self.dropped)
        out.skipped_bytes = self.skipped_bytes
        for k, pyr in self.keys.items():
            lo, hi = pyr.extremes()
            px: list[float] = []
            py: list[float] = []
            if max_points:
                px, py = downsample(*pyr.points(), max_points)
            out.series[k] = Series(
                k, px, py, pyr.n, lo[2], hi[2], pyr.last[2], min_at=lo[1], max_at=hi[1]
            )
        return out

    def metrics_with(self, torn: bytes, max_points: int) -> Metrics:
        """The result as if `torn` (a last line without its newline) were parsed, leaving the
        state as it was: that line is read again once it is complete."""
        other = self.copy()
        other.consume(torn)
        return other.metrics(max_points)


def _summary(p: Pyramid) -> dict[str, Any]:
    lo, hi = p.extremes()
    return {
        "count": p.n,
        "last": p.last[2],
        "min": lo[2],
        "min_at": lo[1],
        "max": hi[2],
        "max_at": hi[1],
    }


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
    return state.metrics(max_points)


def read_metrics(
    path: Path, *, max_points: int = 1000, save: bool = False, x_key: str | None = None
) -> Metrics:
    """Every numeric key of a metrics.jsonl against `step` (or `time`, or the line number):
    its count, last, min and max (with their x) over every point, and its points
    down-sampled to at most `max_points` (0: no points). `x_key` names another x axis: any
    logged key, or "" for the line number (a line without that key keeps the last x seen);
    that parse never reads or writes the sidecar, which is of the default axis.

    The parse starts from the sidecar metrics.summary.json when it still describes the file
    (only the lines appended since are read), else from the file's start (its last
    MAX_PARSE_BYTES when bigger); either way the result is the same. With `save` (a caller
    that may write the run directory), a parse that found no usable sidecar writes one
    (failures ignored). The parse is kept per file identity, so a page reloaded while nothing
    was appended costs nothing and one reloaded after an append parses only the new lines."""
    try:
        st = os.stat(path)
    except OSError:
        return Metrics()
    name = str(path) if x_key is None else f"{path}\0{x_key}"  # one parse per axis
    key = (name, st.st_dev, st.st_ino)
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
            key, state = (name, fst.st_dev, fst.st_ino), None
        stamp = (fst.st_size, fst.st_mtime_ns, max_points)
        result = None
        if state is not None:
            with state.lock:
                if not _usable(state, fh, fst.st_size, fst.st_mtime_ns):
                    state = None
                elif x_key is None and fst.st_size - state.offset > SIDECAR_GAIN:
                    newer = _from_sidecar(path, fh, fst.st_size)
                    if newer is not None and newer.offset > state.offset:
                        state = newer
                if state is not None:
                    result = _update(state, fh, fst.st_size, stamp)
        if state is None:
            state = _start(path, fh, fst.st_size, x_key)
            with state.lock:
                result = _update(state, fh, fst.st_size, stamp)
                if save and not state.from_sidecar and state.start == 0 and state.offset:
                    _save(path, state)
    assert result is not None
    _keep(key, state)
    return result


def _start(path: Path, fh: Any, size: int, x_key: str | None) -> _Parsed:
    """A new parse: the sidecar's when it describes the file, else from the start (the last
    MAX_PARSE_BYTES); against `x_key`, always from the start, never saved as the sidecar."""
    if x_key is None:
        return _from_sidecar(path, fh, size) or _Parsed(max(0, size - MAX_PARSE_BYTES))
    state = _Parsed(max(0, size - MAX_PARSE_BYTES))
    state.x_key = x_key
    state.from_sidecar = -1  # not a sidecar's, and never to be saved as one
    return state


def _from_sidecar(path: Path, fh: Any, size: int) -> _Parsed | None:
    data = sidecar.read(path, fh, size)
    if data is None:
        return None
    try:
        return _Parsed.from_state(data)
    except (ValueError, TypeError, KeyError) as exc:
        log.info("%s: sidecar ignored (%s)", path, exc)
        return None


def _save(path: Path, state: _Parsed) -> bool:
    """Write the sidecar of `state` (a parse from the file's start); False when it cannot."""
    try:
        sidecar.write(path, state.offset, state.head, state.tail, state.state())
    except OSError as exc:
        log.info("%s: sidecar not written: %s", path, exc)
        return False
    state.from_sidecar = state.offset
    return True


class Follower:
    """The shepherd's side: the metrics file of one run read as it grows, its sidecar
    rewritten after each update that read new lines. Each `update` reads at most `budget`
    bytes (the rest waits for the next one), so a run that writes metrics fast never holds
    the shepherd up for long; the last update reads to the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: _Parsed | None = None

    def update(self, budget: int | None = None) -> bool:
        """Read what was appended (up to `budget` bytes) and save the sidecar when something
        was; True when the sidecar now covers every whole line. Raises OSError only for a
        sidecar that cannot be written (a full disk)."""
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed by the with-block below
        except OSError:
            return False
        with fh:
            fst = os.fstat(fh.fileno())
            size = fst.st_size
            state = self.state
            if state is not None and not _usable(state, fh, size, fst.st_mtime_ns):
                state = None  # truncated or rewritten: start again
            if state is None:
                state = _from_sidecar(self.path, fh, size) or _Parsed(0)
            self.state = state
            limit = size if budget is None else min(size, state.offset + budget)
            _advance(state, fh, limit)
            state.seen = (size, fst.st_mtime_ns)
            done = state.offset == size or b"\n" not in _peek(fh, state.offset, size)
        if state.offset and state.offset != state.from_sidecar:
            sidecar.write(self.path, state.offset, state.head, state.tail, state.state())
            state.from_sidecar = state.offset
        return done


def _peek(fh: Any, offset: int, size: int) -> bytes:
    fh.seek(offset)
    return fh.read(min(size - offset, CHUNK_BYTES))


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
    if size < state.offset or size < state.seen[0]:
        return False  # truncated
    if size == state.seen[0] and mtime_ns != state.seen[1]:
        return False  # changed without growing: rewritten
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
            if state.start == 0 and len(state.head) < _TAIL_CHECK:
                state.head = (state.head + block[:cut])[:_TAIL_CHECK]
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

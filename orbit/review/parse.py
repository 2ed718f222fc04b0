"""The parse of one metrics file, in memory: each numeric key's Pyramid, the x axis, the line
count, and how far the file was read. series.py reads files through it; sample.py builds a
preview of a big file with it.

The cost is linear in the bytes read, whatever they hold: a column is built only for a key
that is charted (at most MAX_KEYS) or about to be (a few new keys of a block); a block that
brings many new keys is scanned once, item by item; a line longer than MAX_LINE_BYTES is
counted and not parsed; a key longer than MAX_KEY_CHARS is not charted; at most MAX_DROPPED
names of the keys not charted are remembered.
"""

from __future__ import annotations

import base64
import json
import math
import time
from array import array
from collections import OrderedDict
from itertools import chain, compress

from orbit.record import Record
from orbit.review.pyramid import GROUPS_MAX, Pyramid, downsample

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CHUNK_BYTES = 1 << 20
MAX_KEYS = 64  # keys beyond this are counted, not charted
X_KEYS = ("step", "time", "timestamp")  # the x axis: the first of these a file uses, else line
MAX_LINE_BYTES = 1 << 20  # a longer line is counted as a line and not parsed
MAX_KEY_CHARS = 256  # a longer key is not charted (counted among the dropped keys)
MAX_DROPPED = 4096  # names of keys not charted that are remembered (the count stops there)
COLUMN_KEYS = 8  # new keys of a block checked a column each; more are found in one scan
CHECK_BYTES = 64  # bytes before the parsed offset compared on each call (sidecar.CHECK_BYTES)
_LONG_LINE = b"null"  # stands for a line too long to parse: it still counts as a line


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
    """What a metrics file holds, as series; compared by value. Every number in it is finite.

    `complete` is False when the answer had to be given before the file was read to its end
    (a caller's deadline): the series are then of a part of the file, `note` says which, and
    the rest is being read, so a later call has it. `x_keys` are the keys that can serve as the
    x axis (`read_metrics(x_key=…)`): the default axis when it is a key, then every series."""

    __slots__ = (
        "complete",
        "dropped_keys",
        "lines",
        "note",
        "series",
        "skipped_bytes",
        "x_keys",
        "x_label",
    )

    def __init__(
        self,
        x_label: str = "line",
        lines: int = 0,
        series: dict[str, Series] | None = None,
        dropped_keys: int = 0,  # numeric keys past MAX_KEYS (or too long)
        skipped_bytes: int = 0,  # bytes at the head of a huge file that were not read
        note: str = "",
        complete: bool = True,
        x_keys: list[str] | None = None,
    ) -> None:
        self.x_label = x_label
        self.lines = lines
        self.series: dict[str, Series] = {} if series is None else series
        self.dropped_keys = dropped_keys
        self.skipped_bytes = skipped_bytes
        self.note = note
        self.complete = complete
        self.x_keys: list[str] = [] if x_keys is None else x_keys

    def with_note(self, note: str, complete: bool = False) -> Metrics:
        """This result (sharing its series) with another note."""
        return Metrics(
            self.x_label, self.lines, self.series, self.dropped_keys, self.skipped_bytes,
            note, complete, self.x_keys,
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """Valid JSON whatever the file held: no NaN or Infinity (a number that is not finite,
        which the parse never keeps, would be null)."""
        return {
            "x_label": self.x_label,
            "x_keys": self.x_keys,
            "lines": self.lines,
            "dropped_keys": self.dropped_keys,
            "skipped_bytes": self.skipped_bytes,
            "complete": self.complete,
            "note": self.note,
            "series": {
                k: {
                    "x": _finite_list(s.x),
                    "y": _finite_list(s.y),
                    "count": s.count,
                    "min": _finite(s.min),
                    "max": _finite(s.max),
                    "last": _finite(s.last),
                    "min_at": _finite(s.min_at),
                    "max_at": _finite(s.max_at),
                }
                for k, s in self.series.items()
            },
        }


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _finite_list(values: list[float]) -> list[float | None]:
    if all(map(math.isfinite, values)):  # the common case: one C-level pass
        return list(values)
    return [_finite(v) for v in values]


def number(value: Any) -> float | None:
    """`value` as a finite float, or None (bools, strings, NaN, infinities and integers past
    the float range are no number: no point, no score)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


_NUMBER_TYPES = {int, float}
_FLOAT_INT_MAX = 2**1023  # a JSON integer beyond this does not fit a float


def is_number(v: Any) -> bool:
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


class Parsed:
    """The parse of one file so far: each key's Pyramid and the byte offset up to which whole
    lines have been read. Growing the file costs only the new lines; the down-sampled results
    are kept per (size, mtime, max_points). Its `state()` is what metrics.summary.json holds;
    `from_state` takes it back. With `x_key` the axis is that key (never a sidecar's)."""

    def __init__(self, start: int, x_key: str | None = None) -> None:
        self.start = start  # where parsing began (beyond 0: the head of a huge file skipped)
        self.offset = start  # whole lines before this byte are in the pyramids
        self.head = b""  # the file's first bytes (up to CHECK_BYTES), when start is 0
        self.tail = b""  # the last bytes parsed, to notice a file rewritten in place
        self.seen = (-1, -1)  # (size, mtime_ns) of the file when last read
        self.skipped_bytes = 0
        self.x_key: str | None = x_key
        self.x_fixed = x_key is not None  # chosen by the caller, not found in the file
        self.x_now: float = 0.0
        self.line_no = 0
        self.keys: dict[str, Pyramid] = {}
        self.dropped: set[str] = set()
        self.work = 0  # values looked at, for the tests of linearity
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
    def from_state(cls, data: dict[str, Any]) -> Parsed:
        """The parse a sidecar holds; ValueError when its state is damaged or was made with
        other limits."""
        out = cls(0)
        x_key, x_now, lines, dropped = (data.get(k) for k in ("x_key", "x_now", "lines", "dropped"))
        keys = data.get("keys")
        if (
            data.get("groups_max") != GROUPS_MAX
            or data.get("max_keys") != MAX_KEYS
            or not (x_key is None or x_key == "" or x_key in X_KEYS)
            or not is_number(x_now)
            or type(lines) is not int
            or lines < 0
            or not isinstance(dropped, list)
            or len(dropped) > MAX_DROPPED
            or not all(isinstance(k, str) for k in dropped)
            or not isinstance(keys, dict)
            or len(keys) > MAX_KEYS
        ):
            raise ValueError("sidecar state")
        out.x_key, out.line_no, out.dropped = x_key, lines, set(dropped)
        out.x_now = x_now  # type: ignore[assignment]  # checked by is_number above
        out.keys = {k: Pyramid.from_json(v) for k, v in keys.items()}
        if any(p.n > lines for p in out.keys.values()) or (out.dropped & set(out.keys)):
            raise ValueError("sidecar state")
        offset = data["offset"]
        out.offset = out.from_sidecar = offset
        out.head = base64.b64decode(data["head"])
        out.tail = base64.b64decode(data["tail"])
        return out

    def copy(self) -> Parsed:
        """A copy to parse into, or to show while this one goes on (the pyramids copied)."""
        out = Parsed(self.start, self.x_key)
        out.x_fixed, out.offset = self.x_fixed, self.offset
        out.x_now, out.line_no = self.x_now, self.line_no
        out.dropped, out.skipped_bytes = set(self.dropped), self.skipped_bytes
        out.keys = {k: p.copy() for k, p in self.keys.items()}
        return out

    def consume(self, block: bytes) -> None:
        """Add the lines of `block` (whole lines, the last one may lack its newline)."""
        objs = [o if type(o) is dict else _EMPTY for o in _objects(block)]
        if not objs:
            return
        xcol = self._x_column(objs)
        self.line_no += len(objs)
        cols = _Columns(objs, xcol)
        new: list[str] = []
        # Column by column for the charted keys: comprehensions and C-level min/max, not a
        # loop per value. Keys not charted yet are looked at together (_admit).
        for k in dict.fromkeys(chain.from_iterable(objs)):
            if k == self.x_key:
                continue
            pyr = self.keys.get(k)
            if pyr is not None:
                cols.add(pyr, k)
            elif k not in self.dropped:
                new.append(k)
        if new:
            self._admit(new, cols)
        self.work += cols.work

    def _admit(self, new: list[str], cols: _Columns) -> None:
        """Chart the keys of `new` (in order) that have a number in this block, while there is
        room; count the others. No column is built for a key that is not charted."""
        for k in _with_numbers(new, cols):
            if len(self.keys) < MAX_KEYS and len(k) <= MAX_KEY_CHARS:
                pyr = self.keys[k] = Pyramid()
                cols.add(pyr, k)
            elif len(self.dropped) < MAX_DROPPED:
                self.dropped.add(k[:MAX_KEY_CHARS])  # a long key by its start: only counted

    def _x_column(self, objs: list[dict[str, Any]]) -> list[Any] | range:
        """The x of each line: its `x_key` value, the last one seen for a line without one,
        or the line number when the file has no x key."""
        if self.x_key is None:
            for o in objs:
                if o:
                    self.x_key = next((k for k in X_KEYS if number(o.get(k)) is not None), "")
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
                if is_number(v):
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
        out.x_keys = ([self.x_key] if self.x_key else []) + list(self.keys)
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


class _Columns:
    """The columns of one block: the values of a key on each line, and the x of each line as
    floats (built once, for the keys whose every value is a number)."""

    def __init__(self, objs: list[dict[str, Any]], xcol: list[Any] | range) -> None:
        self.objs, self.xcol = objs, xcol
        self.xall: array[float] | None = None
        self.work = 0

    def column(self, k: str) -> list[Any]:
        self.work += len(self.objs)
        return [o.get(k) for o in self.objs]

    def add(self, pyr: Pyramid, k: str) -> None:
        col = self.column(k)
        values = _floats(col)
        if values is not None:
            if self.xall is None:
                self.xall = array("d", self.xcol)
            pyr.add(self.xall, values)
            return
        ok = [is_number(v) for v in col]
        if any(ok):
            pyr.add(array("d", compress(self.xcol, ok)), array("d", compress(col, ok)))


def _with_numbers(new: list[str], cols: _Columns) -> list[str]:
    """The keys of `new` that hold a number on some line of the block, in `new`'s order: a
    column each when they are few, else one scan of every value of the block."""
    if len(new) <= COLUMN_KEYS:
        return [k for k in new if any(map(is_number, cols.column(k)))]
    wanted, found = set(new), set()
    for o in cols.objs:
        cols.work += len(o)
        for k, v in o.items():
            if k in wanted and is_number(v):
                found.add(k)
    return [k for k in new if k in found]


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


def usable(state: Parsed, fh: Any, size: int, mtime_ns: int) -> bool:
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


def advance(state: Parsed, fh: Any, size: int, deadline: float | None = None) -> bytes | None:
    """Parse the whole lines between state.offset and `size`; the torn rest is returned. With
    a `deadline` (time.monotonic()), stop at the first chunk boundary past it: None then, and
    state.offset is where to go on."""
    fh.seek(state.offset)
    if state.offset == state.start and state.start and not state.skipped_bytes:
        state.offset = state.skipped_bytes = _after_line(fh, size)  # the first line is cut
    line = _Pending()  # the start of a line that no chunk so far has ended
    read = state.offset
    while read < size:
        if deadline is not None and time.monotonic() > deadline:
            return None
        chunk = fh.read(min(CHUNK_BYTES, size - read))
        if not chunk:
            break
        read += len(chunk)
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            line.add(chunk)
            continue
        first = chunk.find(b"\n") + 1
        block = line.finish(chunk[:first]) + chunk[first:cut]
        state.consume(block)
        if state.start == 0 and len(state.head) < CHECK_BYTES:
            state.head = (state.head + line.head(chunk))[:CHECK_BYTES]
        state.offset += line.size + cut
        state.tail = (state.tail + line.last() + chunk[:cut])[-CHECK_BYTES:]
        line = _Pending()
        line.add(chunk[cut:])
    return line.text()


def _after_line(fh: Any, size: int) -> int:
    """The offset after the line `fh` is in (read a chunk at a time, whatever its length)."""
    while True:
        at = fh.tell()
        chunk = fh.read(CHUNK_BYTES)
        end = chunk.find(b"\n")
        if end >= 0:
            fh.seek(at + end + 1)
            return at + end + 1
        if not chunk:
            return size


class _Pending:
    """A line being read across chunks: its bytes while it is short enough to parse; past
    MAX_LINE_BYTES only its length and its first and last bytes (the sidecar's checks)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.first = b""
        self.long = False

    def add(self, data: bytes) -> None:
        if not data:
            return
        if not self.size:
            self.first = data[:CHECK_BYTES]
        self.size += len(data)
        self.parts.append(data)
        if self.size > MAX_LINE_BYTES:
            self.long = True
            self.parts = [self.last()]

    def finish(self, end: bytes) -> bytes:
        """The whole line once `end` (its last bytes, with the newline) is read: its text, or a
        stand-in that counts as a line when it is too long."""
        if self.long or self.size + len(end) > MAX_LINE_BYTES + 1:
            return _LONG_LINE + b"\n"
        return b"".join(self.parts) + end

    def head(self, rest: bytes) -> bytes:
        """The first bytes of this line followed by `rest`."""
        return (self.first + rest[:CHECK_BYTES])[:CHECK_BYTES]

    def last(self) -> bytes:
        """Its last bytes (every part but the first is a whole chunk, so two parts suffice)."""
        return b"".join(self.parts[-2:])[-CHECK_BYTES:]

    def text(self) -> bytes:
        """The torn last line (b"" when it is too long to parse)."""
        return b"" if self.long else b"".join(self.parts)


_EMPTY: dict[str, Any] = {}

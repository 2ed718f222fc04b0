"""Metric series: metrics.jsonl read as a stream, each numeric key summarised and down-sampled.

The one reader of metrics files: the web's charts and the review's summaries (`orbit show`,
`orbit compare`) both read through `read_metrics`; the shepherd keeps the sidecar with
`Follower`.

A metrics file can hold millions of lines, so nothing here keeps more than one 1 MiB chunk of
text and, per key, a Pyramid (pyramid.py: the minimum and maximum of each of at most
GROUPS_MAX blocks, about 2,000 points) in memory, and what leaves the server is at most
`max_points` points per key: LTTB (largest triangle three buckets) over the pyramid's points,
with the minimum and maximum of every bucket kept as well, so a spike or a divergence never
disappears from a chart. The pyramid is what the shepherd saves in metrics.summary.json
(sidecar.py, `Follower`), so a reader parses only the lines appended after it. The parse itself
(parse.py) costs time linear in the bytes read, whatever they hold.

One parse per file: readers of the same file (path, device, inode, x key) share it, and never
do two threads parse it at once (`_File.lock`; a waiter gets the parse's result). A reader
with a `deadline` (the web) waits at most until then: a file too big to read by then is
answered with a preview (sample.py: evenly spaced pieces of the file, or the lines read so far)
whose `note` says so, while one background thread per file reads the rest, so that a later
call has the whole file.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path

from orbit.review import sidecar
from orbit.review.parse import (
    CHUNK_BYTES,
    MAX_KEYS,
    X_KEYS,
    Metrics,
    Parsed,
    Series,
    advance,
    usable,
)
from orbit.review.sample import sample

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_KEYS", "X_KEYS", "Follower", "Metrics", "Series", "read_metrics", "read_tail"]

log = logging.getLogger(__name__)

MAX_PARSE_BYTES = 256 << 20  # without a sidecar, only the last 256 MiB of a file is read
MAX_CACHED_POINTS = 1_000_000  # kept points (each key keeps at most ~2 * GROUPS_MAX)
MAX_CACHED_FILES = 32
SIDECAR_GAIN = 4 << 20  # a cached parse this far behind the file looks for a newer sidecar
SAMPLE_ABOVE = 8 << 20  # a reader with a deadline previews a bigger file it starts from nothing
BACKGROUND = 2  # files read in the background at once (the others wait their turn)
STEP_S = 0.25  # the background holds a file's lock this long at most at a time

Key = tuple[str, int, int, str | None]  # path, device, inode, x key


class _File:
    """What every reader of one metrics file shares: its parse (`state`), the lock whoever
    parses holds, and while the background reads the rest, the preview shown meanwhile."""

    __slots__ = ("background", "key", "lock", "preview", "progress", "state", "what")

    def __init__(self, key: Key) -> None:
        self.key = key
        self.lock = threading.Lock()
        self.state: Parsed | None = None
        self.preview: Parsed | None = None
        self.what = ""  # what the preview is of, for its note
        self.progress = (0, 0)  # (bytes read, file size) of the background's parse
        self.background = False


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
    state = Parsed(start)
    if start:
        first = block.find(b"\n") + 1
        state.skipped_bytes = start + first if first else size
        block = block[first:] if first else b""
    state.consume(block)
    return state.metrics(max_points)


def read_metrics(
    path: Path,
    *,
    max_points: int = 1000,
    save: bool = False,
    x_key: str | None = None,
    deadline: float | None = None,
) -> Metrics:
    """Every numeric key of a metrics.jsonl against `step` (or `time`, or the line number; or
    `x_key` when given): its count, last, min and max (with their x) over every point, and its
    points down-sampled to at most `max_points` (0: no points).

    The parse starts from the sidecar metrics.summary.json when it still describes the file
    (only the lines appended since are read; never with `x_key`), else from the file's start
    (its last MAX_PARSE_BYTES when bigger); either way the result is the same. With `save` (a
    caller that may write the run directory), a parse that found no usable sidecar writes one
    (failures ignored). The parse is kept per file identity, so a page reloaded while nothing
    was appended costs nothing and one reloaded after an append parses only the new lines.

    With a `deadline` (a time.monotonic() value) the answer comes by then, give or take one
    chunk's parse: when the file is not read by then, a preview (`complete` False, its `note`
    saying what it is of) while the rest is read in the background."""
    try:
        st = os.stat(path)
    except OSError:
        return Metrics()
    entry = _entry((str(path), st.st_dev, st.st_ino, x_key))
    state = entry.state
    if state is not None:
        hit = state.results.get((st.st_size, st.st_mtime_ns, max_points))
        if hit is not None:
            return hit
    if deadline is None:
        entry.lock.acquire()
    elif entry.background or not _acquire(entry.lock, deadline):
        return _shown(entry, max_points)
    try:
        return _read(entry, path, max_points, save, deadline)
    finally:
        entry.lock.release()


def _acquire(lock: threading.Lock, deadline: float) -> bool:
    wait = deadline - time.monotonic()
    return lock.acquire(timeout=wait) if wait > 0 else lock.acquire(blocking=False)


def _read(entry: _File, path: Path, max_points: int, save: bool, deadline: float | None) -> Metrics:
    """read_metrics under the file's lock."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed by the with-block below
    except OSError:
        return Metrics()
    key = entry.key
    with fh:
        fst = os.fstat(fh.fileno())
        size, stamp = fst.st_size, (fst.st_size, fst.st_mtime_ns, max_points)
        if (fst.st_dev, fst.st_ino) != key[1:3]:  # replaced since the stat: not this entry's
            return _once(fh, size, key[3], max_points, deadline)
        state = entry.state = _current(entry.state, path, fh, fst, key[3])
        hit = state.results.get(stamp)
        if hit is not None:
            return hit
        if (
            deadline is not None
            and state.offset == state.start
            and size - state.start > (SAMPLE_ABOVE)
        ):
            preview, n = sample(fh, state.start, size, key[3])
            what = f"a sample of {_mb(n)} evenly spaced across the file's {_mb(size)}"
            return _hand_off(entry, path, preview, what, max_points, size)
        torn = advance(state, fh, size, deadline)
        if torn is None:  # the deadline passed: the lines read so far, the rest later
            what = f"the first {_mb(state.offset)} of {_mb(size)}"
            return _hand_off(entry, path, state.copy(), what, max_points, size)
        result = _result(state, torn, stamp)
        if save and not state.x_fixed and not state.from_sidecar and state.start == 0:
            _save(path, state)
    _keep(key, entry)
    return result


def _current(
    state: Parsed | None, path: Path, fh: Any, fst: os.stat_result, x_key: str | None
) -> Parsed:
    """The parse to go on from: the cached one while it describes the file (a newer sidecar
    when it is far behind), else the sidecar's, else a new one."""
    size = fst.st_size
    if state is not None and not usable(state, fh, size, fst.st_mtime_ns):
        state = None
    sidecar_ok = x_key is None
    if state is not None and sidecar_ok and size - state.offset > SIDECAR_GAIN:
        newer = _from_sidecar(path, fh, size)
        if newer is not None and newer.offset > state.offset:
            state = newer
    if state is None and sidecar_ok:
        state = _from_sidecar(path, fh, size)
    return state or Parsed(max(0, size - MAX_PARSE_BYTES), x_key)


def _result(state: Parsed, torn: bytes, stamp: tuple[int, int, int]) -> Metrics:
    """The down-sampled result of a parse that read to the file's end (kept for `stamp`)."""
    state.seen = stamp[:2]
    result = state.metrics_with(torn, stamp[2]) if torn.strip() else state.metrics(stamp[2])
    state.results[stamp] = result
    while len(state.results) > 4:
        state.results.popitem(last=False)
    return result


def _once(
    fh: Any, size: int, x_key: str | None, max_points: int, deadline: float | None
) -> Metrics:
    """A parse of a file replaced while it was opened: not cached, cut at the deadline."""
    state = Parsed(max(0, size - MAX_PARSE_BYTES), x_key)
    torn = advance(state, fh, size, deadline)
    out = state.metrics_with(torn or b"", max_points)
    if torn is None:
        return out.with_note(f"metrics from the first {_mb(state.offset)} of {_mb(size)}")
    return out


def _hand_off(
    entry: _File, path: Path, preview: Parsed, what: str, max_points: int, size: int
) -> Metrics:
    """Show `preview` (of `what`) until the background has read the whole file; start it."""
    entry.preview, entry.what = preview, what
    state = entry.state
    entry.progress = (state.offset - state.start, size - state.start) if state else (0, size)
    if not entry.background:
        entry.background = True
        _keep(entry.key, entry)
        thread = threading.Thread(
            target=_complete, args=(entry, path), name="orbit-metrics", daemon=True
        )
        thread.start()
    return _shown(entry, max_points)


def _shown(entry: _File, max_points: int) -> Metrics:
    """What a reader that cannot wait is shown: the preview, with a note that says of what."""
    preview = entry.preview
    if preview is None or not entry.background:
        note = "The metrics are being read: reload in a moment for their charts."
        return Metrics(note=note, complete=False)
    done, size = entry.progress
    so_far = f" ({_mb(done)} of {_mb(size)} so far)" if size else ""
    note = f"Charts from {entry.what}; the rest is being read{so_far}: reload for all of it."
    return preview.metrics(max_points).with_note(note)


def _complete(entry: _File, path: Path) -> None:
    """The background's part: read the rest of the file, STEP_S at a time under its lock (a
    reader may take it in between and finds the work done so far). Never raises."""
    try:
        with _slots:
            while not _step(entry, path):
                pass
    except Exception:  # a thread that died silently would leave `background` set
        log.exception("%s: reading metrics in the background failed", path)
    finally:
        entry.background = False
        entry.preview = None


def _step(entry: _File, path: Path) -> bool:
    """Read on for STEP_S; True when the file was read to its end (or cannot be read)."""
    with entry.lock:
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed by the with-block below
        except OSError:
            return True
        with fh:
            fst = os.fstat(fh.fileno())
            key = entry.key
            if (fst.st_dev, fst.st_ino) != key[1:3]:
                return True  # replaced: a reader starts again under the new identity
            state = entry.state = _current(entry.state, path, fh, fst, key[3])
            torn = advance(state, fh, fst.st_size, time.monotonic() + STEP_S)
            entry.progress = (state.offset - state.start, fst.st_size - state.start)
            if torn is None:
                return False
            _result(state, torn, (fst.st_size, fst.st_mtime_ns, 0))
            return True


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n / 1e3:,.0f} KB"


def _from_sidecar(path: Path, fh: Any, size: int) -> Parsed | None:
    data = sidecar.read(path, fh, size)
    if data is None:
        return None
    try:
        return Parsed.from_state(data)
    except (ValueError, TypeError, KeyError) as exc:
        log.info("%s: sidecar ignored (%s)", path, exc)
        return None


def _save(path: Path, state: Parsed) -> bool:
    """Write the sidecar of `state` (a parse from the file's start); False when it cannot."""
    if not state.offset:
        return False
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
    bytes (the rest waits for the next one; a single line longer than that is skipped over),
    so a run that writes metrics fast never holds the shepherd up for long; the last update
    reads to the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: Parsed | None = None

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
            if state is not None and not usable(state, fh, size, fst.st_mtime_ns):
                state = None  # truncated or rewritten: start again
            if state is None:
                state = _from_sidecar(self.path, fh, size) or Parsed(0)
            self.state = state
            before = state.offset
            limit = size if budget is None else min(size, state.offset + budget)
            advance(state, fh, limit)
            end = _line_end(fh, before, size) if state.offset == before < limit < size else None
            if end is not None:  # one line longer than the budget: past it
                advance(state, fh, end)
            state.seen = (size, fst.st_mtime_ns)
            done = state.offset == size or _line_end(fh, state.offset, size) is None
        if state.offset and state.offset != state.from_sidecar:
            sidecar.write(self.path, state.offset, state.head, state.tail, state.state())
            state.from_sidecar = state.offset
        return done


def _line_end(fh: Any, offset: int, size: int) -> int | None:
    """The offset after the newline that ends the line at `offset`; None when none does."""
    fh.seek(offset)
    at = offset
    while at < size:
        chunk = fh.read(min(CHUNK_BYTES, size - at))
        if not chunk:
            break
        end = chunk.find(b"\n")
        if end >= 0:
            return at + end + 1
        at += len(chunk)
    return None


def _entry(key: Key) -> _File:
    """The shared entry of a file identity (made, and cached, on first use)."""
    with _cache_lock:
        entry = _cache.get(key)
        if entry is None:
            entry = _cache[key] = _File(key)
        _cache.move_to_end(key)
        return entry


def _keep(key: Key, entry: _File) -> None:
    """Cache `entry`, dropping the least recently used parses beyond the caps (never one the
    background is reading: it would be parsed twice)."""
    with _cache_lock:
        _cache[key] = entry
        _cache.move_to_end(key)
        total = sum(_points(e) for e in _cache.values())
        for old in list(_cache):
            if len(_cache) <= MAX_CACHED_FILES and total <= MAX_CACHED_POINTS:
                break
            busy = _cache[old].background or _cache[old].lock.locked()
            if old != key and not busy:
                total -= _points(_cache.pop(old))
        if total > MAX_CACHED_POINTS and not entry.background:  # too big alone to keep
            entry.state = None


def _points(entry: _File) -> int:
    return entry.state.points if entry.state is not None else 0


_cache: OrderedDict[Key, _File] = OrderedDict()
_cache_lock = threading.Lock()
_slots = threading.BoundedSemaphore(BACKGROUND)

"""Copy a container's output into log.txt exactly once, across log rotation and restarts.

Docker's *follow* stream of a json-file log skips and repeats lines when the file rotates, so
the shepherd never follows: it polls Docker's retained log with plain (non-follow) reads of its
end, `tail=K`, which read rotated files correctly. A read returns frames in Docker's arrival
order, both streams together; each carries its stream and a timestamp.

The copier keeps an *anchor*: the last frame it took, named by (stream, timestamp, ordinal
among the frames of that stream with that timestamp — the pieces of a line Docker split at
16 KiB share one —, crc32 of its text). A read is usable when it holds the anchor and, to make
the ordinal unambiguous, a frame of the same stream before those pieces (or the start of the
log); everything after the anchor is new. Otherwise the read is repeated with a 4 × larger
`tail`, up to the whole log. If even the whole retained log lacks the anchor, Docker rotated
away lines nobody copied: the copier resumes after the anchor's time and records a *gap*.

After each append to log.txt the copier replaces `log.pos` with the size of log.txt, the
anchor, the first held frame per stream (below) and the gaps. A new shepherd cuts log.txt back
to that size and reads on from the anchor: no line is lost or written twice.

Docker hands its log back about half as fast as a container can write it, so the shepherd
also holds a flood back: see logvalve.py.

Secrets are redacted on whole lines: a stream's frames that do not end a line (Docker splits
lines at 16 KiB; a program may print half a line) are held in memory until the line ends, the
container ends, or `HOLD_BYTES` are held. Consecutive lines of one stream are joined before
redaction, so a multi-line value printed at once is replaced whole; each of its lines of 4
characters or more is replaced too.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from orbit.errors import DISK_FULL
from orbit.execute.engine import Engine
from orbit.execute.logvalve import FRAME_HEADER, READ_TIMEOUT, Valve, json_size
from orbit.record import Frozen, Record
from orbit.store.files import atomic_write
from orbit.store.model import LOG, LOG_POS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STREAMS = ("out", "err")
FIRST_TAIL = 1024
HOLD_BYTES = 1 << 20  # a line longer than this is written in pieces of this size
REDACTED = b"[redacted]"
# Docker drops its oldest file only on a rotation with 3 files kept: its retained log then holds
# two full rotated files (at least 2 × max-size of JSON). A retained log estimated smaller (the
# estimate errs high) has lost nothing: `LogCopier.dropped_min`.

_STREAM_NAME = {1: "out", 2: "err"}
_STREAM_NUM = {"out": 1, "err": 2}
_seconds: dict[bytes, int] = {}


_EPOCH_DAY = date(1970, 1, 1).toordinal()


def _epoch_seconds(head: bytes) -> int:
    """`YYYY-MM-DDTHH:MM:SS` in UTC as seconds since the epoch (calendar.timegm of
    time.strptime, without the imports those cost a shepherd); ValueError when malformed."""
    if len(head) != 19 or head[4:5] != b"-" or head[10:11] != b"T" or head[13:14] != b":":
        raise ValueError(f"not a Docker timestamp: {head!r}")
    day = date(int(head[0:4]), int(head[5:7]), int(head[8:10])).toordinal() - _EPOCH_DAY
    hours, minutes, seconds = int(head[11:13]), int(head[14:16]), int(head[17:19])
    if hours > 23 or minutes > 59 or seconds > 61:
        raise ValueError(f"not a Docker timestamp: {head!r}")
    return day * 86400 + hours * 3600 + minutes * 60 + seconds


def parse_ts_ns(stamp: bytes) -> int:
    """Nanoseconds since the epoch from Docker's RFC 3339 `2024-11-30T05:50:00.123456789Z`."""
    head = stamp[:19]
    base = _seconds.get(head)
    if base is None:
        base = _epoch_seconds(head)
        if len(_seconds) > 4096:
            _seconds.clear()
        _seconds[head] = base
    frac = b""
    if len(stamp) > 20 and stamp[19:20] == b".":
        end = 20
        while end < len(stamp) and 48 <= stamp[end] <= 57:
            end += 1
        frac = stamp[20:end]
    return base * 1_000_000_000 + int((frac + b"000000000")[:9])


def iso_of(stamp: bytes) -> str:
    """Docker's timestamp as our ISO form (milliseconds, UTC)."""
    text = stamp.decode("ascii", "replace")
    return f"{text[:19]}.{(text[20:23] + '000')[:3]}+00:00" if len(text) >= 20 else text


def parse_frames(data: bytes) -> tuple[list[int], list[bytes], list[bytes]]:
    """Docker's multiplexed log answer → parallel lists: stream (1, 2), timestamp, text."""
    streams: list[int] = []
    stamps: list[bytes] = []
    texts: list[bytes] = []
    add_stream, add_stamp, add_text = streams.append, stamps.append, texts.append
    unpack = FRAME_HEADER.unpack_from
    i, n = 0, len(data)
    while i + 8 <= n:
        kind, size = unpack(data, i)
        start, i = i + 8, i + 8 + size
        if i > n:
            break  # a frame cut short
        # Docker's stamps are fixed-width (30 bytes and a space); find the space otherwise.
        cut = start + 30
        if data[cut : cut + 1] != b" ":
            cut = data.find(b" ", start, i)
            if cut < 0:
                continue
        add_stream(kind)
        add_stamp(data[start:cut])
        add_text(data[cut + 1 : i])
    return streams, stamps, texts


class FrameId(Frozen):
    """One frame of Docker's log, recognisable in any later read of it: a value (compared,
    hashed, never changed)."""

    __slots__ = ("crc", "ordinal", "stamp", "stream")
    stream: int
    stamp: bytes
    ordinal: int
    crc: int

    def __init__(self, stream: int, stamp: bytes, ordinal: int, crc: int) -> None:
        self._init(stream=stream, stamp=stamp, ordinal=ordinal, crc=crc)

    def to_json(self) -> list[Any]:
        return [_STREAM_NAME[self.stream], self.stamp.decode(), self.ordinal, self.crc]

    @classmethod
    def from_json(cls, data: Any) -> FrameId:
        name, stamp, ordinal, crc = data
        return cls(_STREAM_NUM[name], str(stamp).encode(), int(ordinal), int(crc))


class Window:
    """The frames of one read, and where known frames sit in it."""

    def __init__(self, data: bytes, whole: bool) -> None:
        self.streams, self.stamps, self.texts = parse_frames(data)
        self.whole = whole  # the read reached the start of the retained log

    def __len__(self) -> int:
        return len(self.stamps)

    def frame_id(self, i: int) -> FrameId:
        """The id of frame `i`; its ordinal is -1 when the read does not reach back to the
        first frame with its stream and timestamp."""
        stream, stamp = self.streams[i], self.stamps[i]
        ordinal = 0
        j = i - 1
        while j >= 0:
            if self.streams[j] == stream:
                if self.stamps[j] != stamp:
                    break
                ordinal += 1
            j -= 1
        if j < 0 and not self.whole:
            ordinal = -1
        return FrameId(stream, stamp, ordinal, zlib.crc32(self.texts[i]))

    def locate(self, fid: FrameId) -> int | None:
        """The index of `fid`; -1 when it is certainly absent; None when this read is too
        short to tell (a longer one is needed)."""
        streams, stamps, texts = self.streams, self.stamps, self.texts
        start = 0
        first = -1
        while True:
            try:
                first = stamps.index(fid.stamp, start)
            except ValueError:
                return -1 if self.whole else None
            if streams[first] == fid.stream:
                break
            start = first + 1
        members = []
        for j in range(first, len(stamps)):
            if streams[j] == fid.stream:
                if stamps[j] != fid.stamp:
                    break
                members.append(j)
        matches = [j for j in members if zlib.crc32(texts[j]) == fid.crc]
        complete = self.whole or any(streams[j] == fid.stream for j in range(first - 1, -1, -1))
        if not complete:
            # Earlier pieces with this stamp may lie before the read (a line of many pieces,
            # such as a progress bar drawn with \r): a piece of unique text is enough.
            return matches[0] if len(matches) == 1 else None
        if 0 <= fid.ordinal < len(members) and members[fid.ordinal] in matches:
            return members[fid.ordinal]
        # Rotation cut into the pieces of that line, or the ordinal was unknown: the piece
        # with that text nearest to the ordinal.
        if not matches:
            return -1
        at = fid.ordinal if fid.ordinal >= 0 else len(members)
        return min(matches, key=lambda j: abs(members.index(j) - at))


class Position(Record):
    """What log.txt holds, as recorded in log.pos; compared by value."""

    __slots__ = ("anchor", "gaps", "held", "legacy", "size")

    def __init__(
        self,
        size: int = 0,
        anchor: FrameId | None = None,
        held: dict[int, FrameId] | None = None,
        gaps: list[dict[str, Any]] | None = None,
        legacy: dict[int, tuple[int, int]] | None = None,
    ) -> None:
        self.size = size
        self.anchor = anchor
        self.held: dict[int, FrameId] = {} if held is None else held  # stream → first held frame
        self.gaps: list[dict[str, Any]] = [] if gaps is None else gaps
        self.legacy = legacy  # log.pos of Orbit before this format

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"size": self.size}
        data["anchor"] = self.anchor.to_json() if self.anchor else None
        if self.held:
            data["held"] = {_STREAM_NAME[s]: f.to_json() for s, f in self.held.items()}
        if self.gaps:
            data["gaps"] = self.gaps
        return data

    @classmethod
    def read(cls, path: Path) -> Position:
        try:
            data = json.loads(path.read_text())
            size = int(data["size"])
        except (OSError, ValueError, KeyError, TypeError):
            return cls()
        try:
            if "anchor" in data:
                anchor = FrameId.from_json(data["anchor"]) if data["anchor"] else None
                held = {
                    _STREAM_NUM[name]: FrameId.from_json(fid)
                    for name, fid in (data.get("held") or {}).items()
                }
                gaps = [g for g in data.get("gaps") or [] if isinstance(g, dict)]
                return cls(size, anchor, held, gaps)
            # Before this format: per stream, the ns stamp of its last line and how many
            # lines carried that stamp.
            legacy = {_STREAM_NUM[s]: (int(data[s][0]), int(data[s][1])) for s in STREAMS}
            return cls(size, legacy=legacy)
        except (ValueError, KeyError, TypeError, IndexError):
            return cls()  # unreadable: copy Docker's whole retained log again


class Redactor:
    def __init__(self, secrets: list[str]) -> None:
        found: set[bytes] = set()
        for value in secrets:
            raw = value.encode()
            if len(raw) >= 4:
                found.add(raw)
            if "\n" in value:
                for line in raw.split(b"\n"):
                    line = line.rstrip(b"\r")
                    if len(line) >= 4:
                        found.add(line)
        self.patterns = sorted(found, key=len, reverse=True)  # a whole value before its lines

    def __call__(self, text: bytes) -> bytes:
        for pattern in self.patterns:
            if pattern in text:
                text = text.replace(pattern, REDACTED)
        return text


class LogCopier:
    """Polls one container's Docker log into run_dir/log.txt.

    `poll` never raises for a full disk: it keeps its state (nothing half-recorded) and says
    so; the caller polls again later. Docker's errors are raised.
    """

    def __init__(
        self,
        engine: Engine,
        container_id: str,
        run_dir: Path,
        secrets: list[str],
        valve: Valve | None,
        file_bytes: int,
    ) -> None:
        self.engine = engine
        self.valve = valve
        self.dropped_min = 2 * file_bytes  # Docker's max-size: see the top of this module
        self.container_id = container_id
        self.log_path = run_dir / LOG
        self.pos_path = run_dir / LOG_POS
        self.redact = Redactor(secrets)
        self.pos = Position.read(self.pos_path)
        self.held: dict[int, list[bytes]] = {}  # held pieces per stream (their ids in pos.held)
        self.rate = 0.0  # frames per second Docker received, as last seen
        self.last_read = 0.0  # monotonic start of the last read that found its place
        self._restored = not self.pos.held  # held frames must be re-read after a restart
        self.fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(self.fd, self.pos.size)

    def close(self) -> None:
        os.close(self.fd)

    # --- reading --------------------------------------------------------------------------
    def _read(self, tail: int | None) -> Window:
        params = {
            "stdout": 1,
            "stderr": 1,
            "timestamps": 1,
            "follow": 0,
            "tail": "all" if tail is None else tail,
        }
        path = f"/containers/{self.container_id}/logs"
        data = self.engine.get_whole(path, query=params, timeout=READ_TIMEOUT)
        window = Window(data, whole=True)
        if tail is not None and len(window) >= tail:
            window.whole = False
        return window

    def _window(self) -> tuple[Window, int, dict[int, int]]:
        """A read that holds what we need: (window, index of the first new frame, the index
        from which each held stream's frames are to be taken again)."""
        # Every frame read is decoded by Docker, so the read asks for about what came since
        # the last one (from the rate seen), not much more; a read too short is repeated 4 ×
        # longer.
        started = time.monotonic()
        expect = self.rate * (started - self.last_read) if self.last_read else 0.0
        tail: int | None = FIRST_TAIL + int(1.25 * expect)
        due = self.valve.lines_due() if self.valve is not None else None
        if due is not None:
            # The valve counted the lines: a closer guess than the rate when output comes in
            # bursts (the valve holding the container back).
            tail = FIRST_TAIL + due
        if self.pos.legacy is not None:
            tail = None
        while True:
            window = self._read(tail)
            found = self._place(window)
            if found is not None:
                start, rehold = found
                if self.last_read:
                    seen = len(window) - max(start, 0)
                    self.rate = seen / max(started - self.last_read, 1e-3)
                self.last_read = started
                return window, start, rehold
            tail = None if tail is None else self._longer(window, tail)

    def _longer(self, window: Window, tail: int) -> int | None:
        """The next `tail` after a read too short: from the frames per second of this read
        and the time back to the anchor, when known; else 4 × longer."""
        longer = tail * 4
        anchor = self.pos.anchor
        if anchor is not None and len(window) > 1:
            first, last = parse_ts_ns(window.stamps[0]), parse_ts_ns(window.stamps[-1])
            since = parse_ts_ns(anchor.stamp)
            if last > first > since:
                need = len(window) * (last - since) / (last - first)
                longer = max(2 * tail, int(1.25 * need) + FIRST_TAIL)
        return None if longer > 4_000_000 else longer

    def _place(self, window: Window) -> tuple[int, dict[int, int]] | None:
        pos = self.pos
        if pos.legacy is not None:
            return 0, {}  # filtered in _legacy_new
        rehold: dict[int, int] = {}
        if not self._restored:
            for stream, fid in pos.held.items():
                at = window.locate(fid)
                if at is None:
                    return None
                if at >= 0:
                    rehold[stream] = at
        if pos.anchor is None:
            return (0, rehold) if window.whole else None
        at = window.locate(pos.anchor)
        if at is None:
            return None
        if at >= 0:
            return at + 1, rehold
        return -1, rehold  # a gap: the anchor is gone from the whole retained log

    # --- polling --------------------------------------------------------------------------
    def poll(self, final: bool = False) -> int:
        """Copy what is new; the number of frames read (0 when nothing new). With `final`
        (the container has ended) held partial lines are written too. On a full disk, returns
        -1 and changes nothing."""
        valve = self.valve
        mark = valve.passed if valve is not None else 0
        window, start, rehold = self._window()
        pos = self.pos
        gaps = list(pos.gaps)
        new = self._new_frames(window, start, gaps)
        held, held_ids = self._held_after(window, start, rehold, gaps)
        texts = window.texts
        chunk = b"".join(texts[new.start :]) if isinstance(new, range) and len(new) else b""
        data = None if held else self._whole_lines(window, new, chunk)
        if data is None:
            hold = bool(self.redact.patterns)
            data = self._render(self._lines(window, new, held, held_ids, final, hold))
        # Every frame of the read is now copied, held or (before a gap, or already copied
        # under the old format) passed over: the last one is the anchor.
        anchor = pos.anchor
        if len(new) or start < 0 or pos.legacy is not None:
            anchor = window.frame_id(len(window) - 1) if len(window) else None
        updated = Position(pos.size + len(data), anchor, held_ids, gaps)
        if not self._commit(data, updated):
            return -1
        self.held = held
        self._restored = True
        if valve is not None:
            if not isinstance(new, range):
                chunk = b"".join(texts[i] for i in new)
            valve.advance(len(chunk), chunk.count(b"\n"), len(new), mark)
        return len(new)

    def _new_frames(self, window: Window, start: int, gaps: list[dict[str, Any]]) -> Sequence[int]:
        """The frames of `window` not yet copied; a gap is added to `gaps` when some are lost."""
        pos = self.pos
        stamps = window.stamps
        if pos.legacy is not None:
            return self._legacy_new(window)
        if start < 0:
            anchor_ns = parse_ts_ns(pos.anchor.stamp) if pos.anchor else 0
            new = [i for i in range(len(window)) if parse_ts_ns(stamps[i]) > anchor_ns]
            gaps.append(
                {
                    "after": iso_of(pos.anchor.stamp) if pos.anchor else None,
                    "before": iso_of(stamps[new[0]]) if new else None,
                    "at_byte": pos.size,
                }
            )
            return new
        if pos.anchor is None and len(window) and json_size(window.texts) >= self.dropped_min:
            # No anchor (the predecessor died before copying anything) and so much retained
            # that Docker may have rotated away the start, unread: said, never silent.
            gaps.append({"after": None, "before": iso_of(stamps[0]), "at_byte": pos.size})
        return range(start, len(window))

    def _held_after(
        self, window: Window, start: int, rehold: dict[int, int], gaps: list[dict[str, Any]]
    ) -> tuple[dict[int, list[bytes]], dict[int, FrameId]]:
        """The pieces of unfinished lines: this copier's own, or (first poll after a restart)
        those re-read from Docker from where `log.pos` says they start."""
        pos = self.pos
        if self._restored:
            return {s: list(pieces) for s, pieces in self.held.items()}, dict(pos.held)
        streams, texts = window.streams, window.texts
        held: dict[int, list[bytes]] = {}
        held_ids: dict[int, FrameId] = {}
        for stream, first in rehold.items():
            held_ids[stream] = pos.held[stream]
            held[stream] = [texts[j] for j in range(first, max(start, 0)) if streams[j] == stream]
        for stream in pos.held:
            if stream not in rehold:  # the held start is gone from Docker
                lost = {"after": iso_of(pos.held[stream].stamp), "before": None}
                gaps.append({**lost, "at_byte": pos.size})
        return held, held_ids

    def _whole_lines(self, window: Window, new: Sequence[int], chunk: bytes) -> bytes | None:
        """The common cases, without a Python step per frame; None when they do not apply.
        Docker ends a frame at each newline, so when the newlines are as many as the frames,
        every line is whole."""
        if not isinstance(new, range) or not chunk:
            return None
        if not self.redact.patterns:
            return chunk  # nothing to redact: pieces of long lines need not wait
        if chunk.count(b"\n") != len(new):
            return None
        streams = window.streams
        if streams[new.start :].count(streams[new.start]) != len(new):
            return None
        return self.redact(chunk)  # whole lines of one stream: all at once

    @staticmethod
    def _lines(
        window: Window,
        new: Sequence[int],
        held: dict[int, list[bytes]],
        held_ids: dict[int, FrameId],
        final: bool,
        hold: bool,
    ) -> list[tuple[int, bytes]]:
        """Whole lines, in arrival order; the pieces of a line go where the line ends. `held`
        and `held_ids` are updated: the pieces still waiting for the end of their line."""
        streams, texts = window.streams, window.texts
        lines: list[tuple[int, bytes]] = []
        add = lines.append
        for i in new:
            stream, text = streams[i], texts[i]
            if not hold or text[-1:] == b"\n":
                pieces = held.get(stream)
                if pieces:
                    pieces.append(text)
                    text = b"".join(pieces)
                    del held[stream]
                    held_ids.pop(stream, None)
                add((stream, text))
                continue
            pieces = held.setdefault(stream, [])
            if not pieces:
                held_ids[stream] = window.frame_id(i)
            pieces.append(text)
            if sum(map(len, pieces)) >= HOLD_BYTES:
                add((stream, b"".join(pieces)))
                del held[stream]
                held_ids.pop(stream, None)
        if final:
            for stream in list(held):
                add((stream, b"".join(held.pop(stream))))
            held_ids.clear()
        return lines

    def _legacy_new(self, window: Window) -> list[int]:
        """The frames a log.pos of the old format has not copied (read once, at upgrade)."""
        assert self.pos.legacy is not None
        left = {s: [ts, n] for s, (ts, n) in self.pos.legacy.items()}
        new = []
        for i in range(len(window)):
            stream = window.streams[i]
            ts, skip = left.get(stream, [0, 0])
            stamp = parse_ts_ns(window.stamps[i])
            if stamp < ts:
                continue
            if stamp == ts and skip > 0:
                left[stream][1] -= 1
                continue
            new.append(i)
        return new

    def _render(self, lines: list[tuple[int, bytes]]) -> bytes:
        if not self.redact.patterns:
            return b"".join(text for _, text in lines)
        out = []
        run: list[bytes] = []
        current = 0
        for stream, text in lines:
            if stream != current and run:
                out.append(self.redact(b"".join(run)))
                run = []
            current = stream
            run.append(text)
        if run:
            out.append(self.redact(b"".join(run)))
        return b"".join(out)

    def _commit(self, data: bytes, updated: Position) -> bool:
        """Append `data` and record `updated`; on a full disk, undo and return False."""
        try:
            if data:
                os.lseek(self.fd, self.pos.size, os.SEEK_SET)
                view = memoryview(data)
                while view:
                    view = view[os.write(self.fd, view) :]
            if data or updated.to_json() != self.pos.to_json() or self.pos.legacy is not None:
                atomic_write(self.pos_path, json.dumps(updated.to_json()).encode(), durable=False)
        except OSError as exc:
            try:
                os.ftruncate(self.fd, self.pos.size)  # never leave unrecorded bytes behind
            except OSError:
                pass
            if exc.errno not in DISK_FULL:
                raise
            return False
        self.pos = updated
        return True

    def incomplete(self) -> dict[str, Any] | None:
        """`log_incomplete` of exit.json and status.yaml: None when no gap was ever found."""
        if not self.pos.gaps:
            return None
        lines = 0
        with open(self.log_path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                lines += block.count(b"\n")
        return {"gaps": len(self.pos.gaps), "lines_written": lines, "ranges": self.pos.gaps}

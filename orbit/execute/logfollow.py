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
also holds a flood back (`Valve`): it attaches to the container's output stream and reads it
only to count what passed, never reading on while more than VALVE_BYTES of Docker's JSON
passed but is not copied yet. Docker's attach pipe then fills (about 1 MB) and blocks the
container's writes, as a shell pipe would. Guaranteed: while a shepherd lives, every line is
copied exactly once at any output rate (the container waits for the copy) — for lines of 6
bytes or more on average; of shorter ones, the 1 MB Docker buffers for the attach stream can
come to more JSON than Docker keeps, and a gap stays possible (recorded). After a shepherd
dies, the connection closes and the container runs free: a new shepherd copies from the anchor
losslessly unless more than Docker's retained log was written meanwhile, which is then
recorded as a gap. Over TCP or SSH to Docker there is no valve.

Secrets are redacted on whole lines: a stream's frames that do not end a line (Docker splits
lines at 16 KiB; a program may print half a line) are held in memory until the line ends, the
container ends, or `HOLD_BYTES` are held. Consecutive lines of one stream are joined before
redaction, so a multi-line value printed at once is replaced whole; each of its lines of 4
characters or more is replaced too.
"""

from __future__ import annotations

import calendar
import errno
import json
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from orbit.errors import DockerError
from orbit.store.files import atomic_write

STREAMS = ("out", "err")
FIRST_TAIL = 1024
READ_TIMEOUT = 120.0
HOLD_BYTES = 1 << 20  # a line longer than this is written in pieces of this size
REDACTED = b"[redacted]"
# Errors of a full disk or quota: the copier keeps its state and the caller retries later.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# The valve (see Valve): Docker's json-file log takes about the payload and JSON_LINE bytes
# per line; the valve keeps what passed the attach stream but is not copied yet, plus what
# Docker buffers for the attach stream (ATTACH_BUFFER payload bytes: its 1 MB pipe and the
# socket), under VALVE_BYTES: well under the 40 MB that max-size 20m × max-file 3 keep.
JSON_LINE = 80
# Bytes Docker's JSON writes as 6 (`\u003c`, `\ufffd` for each byte of invalid UTF-8; valid
# UTF-8 is kept, so counting all bytes ≥ 0x80 errs on the safe side) and as 2 (`\"`, `\\`);
# a newline's 2 are in JSON_LINE.
_JSON6 = bytes([*range(0x0A), *range(0x0B, 0x20), *b"<>&", *range(0x80, 0x100)])
_JSON2 = b'"\\'
ATTACH_BUFFER = 1_500_000
VALVE_BYTES = 24 << 20
# Docker drops its oldest file only on a rotation with 3 files kept: its retained log then holds
# two full rotated files (at least 2 × 20 MiB of JSON). A retained log estimated smaller (the
# estimate errs high) has lost nothing.
DROPPED_MIN = 2 * (20 << 20)
VALVE_READ = 1 << 18

_HEADER = struct.Struct(">BxxxI")
_STREAM_NAME = {1: "out", 2: "err"}
_STREAM_NUM = {"out": 1, "err": 2}
_seconds: dict[bytes, int] = {}


def parse_ts_ns(stamp: bytes) -> int:
    """Nanoseconds since the epoch from Docker's RFC 3339 `2024-11-30T05:50:00.123456789Z`."""
    head = stamp[:19]
    base = _seconds.get(head)
    if base is None:
        base = calendar.timegm(time.strptime(head.decode("ascii", "replace"), "%Y-%m-%dT%H:%M:%S"))
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
    unpack = _HEADER.unpack_from
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


@dataclass(frozen=True)
class FrameId:
    """One frame of Docker's log, recognisable in any later read of it."""

    stream: int
    stamp: bytes
    ordinal: int
    crc: int

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


@dataclass
class Position:
    """What log.txt holds, as recorded in log.pos."""

    size: int = 0
    anchor: FrameId | None = None
    held: dict[int, FrameId] = field(default_factory=dict)  # stream → its first held frame
    gaps: list[dict[str, Any]] = field(default_factory=list)
    legacy: dict[int, tuple[int, int]] | None = None  # log.pos of Orbit before this format

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


class Valve:
    """Holds a container back to the pace of the copy, through Docker's attach stream.

    Docker feeds each attached client through a pipe that blocks the container's writes once
    about 1 MB is unread, like a shell pipe. The valve's thread reads the attach stream only to
    count what passes (payload bytes and newlines), throws it away, and stops reading while
    more than VALVE_BYTES (Docker's JSON of it, estimated) passed but is not copied from the
    retained log yet: the container then waits in its write. Log data is taken from the
    retained log only. When the shepherd dies, the connection closes and the container runs
    free again.

    The counts of the two sides are compared from the moment the valve started: `synced`
    when it attached before the container started (both sides count the same output). A valve
    that attached to a running container waits for the copier to catch up (`settle`) before it
    reads; so does any valve whose count drifted (a gap): a poll that found nothing new while
    nothing passed the valve puts the two sides level again.
    """

    def __init__(self, sock: socket.socket, synced: bool) -> None:
        self.sock = sock
        self.synced = synced
        # Payload bytes and lines that passed the attach stream, and that the copier took
        # from the log (levelled with the first at each resynchronisation).
        self.payload = self.lines = 0
        self.escapes = 0  # JSON bytes beyond the payload's own for escaped characters
        self.copied_payload = self.copied_lines = 0
        self.paused = 0  # times the valve stopped reading
        self.closed = False
        self.drain = False  # the container has ended: read all there is
        self._pid = 0
        self._pid_start = b""
        self._cond = threading.Condition()
        self._head = b""  # a frame header cut by a read
        self._left = 0  # payload bytes of the current frame still to come
        self._thread = threading.Thread(target=self._run, name="log-valve", daemon=True)
        self._thread.start()

    @classmethod
    def attach(cls, api: Any, container_id: str, synced: bool) -> Valve | None:
        """Attach to the container's stdout and stderr (over Docker's Unix socket only); None
        when Docker's client talks TCP or SSH."""
        socket_path = getattr(getattr(api, "_custom_adapter", None), "socket_path", None)
        if not isinstance(socket_path, str):
            return None
        path = urlsplit(api._url("/containers/{0}/attach", container_id)).path
        target = path + "?stream=1&stdout=1&stderr=1&logs=0"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(READ_TIMEOUT)
            sock.connect(socket_path)
            sock.sendall(
                f"POST {target} HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\n"
                "Upgrade: tcp\r\nContent-Length: 0\r\n\r\n".encode()
            )
            head = b""
            while b"\r\n\r\n" not in head:
                part = sock.recv(1)  # byte by byte: nothing of the stream is taken with it
                if not part:
                    break
                head += part
            status = head.split(b"\r\n", 1)[0].split()
            if len(status) < 2 or status[1] not in (b"101", b"200"):
                raise DockerError(f"Docker's attach failed: {head[:60]!r}")
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        return cls(sock, synced)

    def watch(self, pid: int | None) -> None:
        """The container's main process (its host pid), once started. When it ends the valve
        reads on freely: Docker settles a container's exit holding the container's lock,
        which the log reads wait for, and cannot settle while a write to the attach stream
        blocks — the valve holding back the copy would wait for itself. Without a visible
        pid the valve stays open."""
        start = _process_start(pid) if pid else None
        with self._cond:
            if start is None:
                self.drain = True
            else:
                self._pid, self._pid_start = pid or 0, start
            self._cond.notify_all()

    def _ended(self) -> bool:
        return bool(self._pid) and _process_start(self._pid) != self._pid_start

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(5.0)
        self.sock.close()

    @property
    def passed(self) -> int:
        """JSON bytes (estimated) that passed the attach stream."""
        return self.payload + self.escapes + JSON_LINE * self.lines

    def advance(self, payload: int, lines: int, found: int, mark: int) -> None:
        """The copier took `payload` bytes and `lines` lines in a poll that found `found` new
        frames; `mark` is `passed` when that poll began."""
        with self._cond:
            self.copied_payload += payload
            self.copied_lines += lines
            if found == 0 and self.passed == mark:
                # Nothing new in the log and nothing passed meanwhile: all is copied.
                self.copied_payload, self.copied_lines = self.payload, self.lines
                self.synced = True
            self._cond.notify_all()

    def backlog(self) -> float:
        """JSON bytes (estimated) that passed the valve but are not copied yet: by bytes, or
        by lines at their mean size so far, whichever is more. (Docker stores each byte of
        invalid UTF-8 as 3, so the copy can count more bytes than passed; lines are exact.)"""
        due = self.lines - self.copied_lines
        per_byte = 1 + self.escapes / self.payload if self.payload else 1.0
        by_bytes = (self.payload - self.copied_payload) * per_byte + JSON_LINE * due
        return max(by_bytes, due * self.passed / self.lines if self.lines else 0)

    def lines_due(self) -> int | None:
        """About how many lines Docker's log holds beyond the copy (those that passed and
        those Docker may hold for the attach stream); None before the first levelling."""
        with self._cond:
            if not self.synced:
                return None
            held = ATTACH_BUFFER * self.lines // self.payload if self.payload else 0
            return max(self.lines - self.copied_lines, 0) + held

    def _allowance(self) -> int:
        """How many payload bytes the valve may read now (under its lock); 0: none."""
        if self.drain:
            return VALVE_READ
        if not self.synced:
            return 0
        # What Docker holds for the attach stream reaches the log too: counted at the size
        # of JSON its lines have had so far.
        per_byte = self.passed / self.payload if self.payload else 1.0
        room = VALVE_BYTES - ATTACH_BUFFER * per_byte - self.backlog()
        if room < 0 and self.backlog() > 0:
            return 0
        return min(VALVE_READ, max(int(room / per_byte), 4096))

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:  # never leave the container blocked: read on without counting
            with self._cond:
                self.drain = True
            try:
                while not self.closed and self.sock.recv(VALVE_READ):
                    pass
            except OSError:
                pass

    def _loop(self) -> None:
        recv = self.sock.recv
        while True:
            with self._cond:
                allowed = self._allowance()
                if not allowed:
                    self.paused += 1
                    while not self.closed and not allowed:
                        self._cond.wait(0.2)
                        if self._ended():
                            self.drain = True
                        allowed = self._allowance()
                if self.closed:
                    return
            try:
                data = recv(allowed)
            except OSError:
                return
            if not data:
                return  # the container ended, or Docker went away
            payload, lines = self._count(data)
            # Counted over the frame headers too (a few bytes more: on the safe side).
            size = len(data)
            escapes = 5 * (size - len(data.translate(None, _JSON6)))
            escapes += size - len(data.translate(None, _JSON2))
            with self._cond:
                self.payload += payload
                self.lines += lines
                self.escapes += escapes

    def _count(self, data: bytes) -> tuple[int, int]:
        """Payload bytes and newlines of a read of the multiplexed stream (8-byte headers)."""
        payload = lines = 0
        i, n = 0, len(data)
        while i < n:
            if self._left == 0:
                need = 8 - len(self._head)
                self._head += data[i : i + need]
                i += need
                if len(self._head) < 8:
                    break
                self._left = _HEADER.unpack(self._head)[1]
                self._head = b""
                continue
            take = min(self._left, n - i)
            lines += data.count(b"\n", i, i + take)
            payload += take
            i += take
            self._left -= take
        return payload, lines


class LogCopier:
    """Polls one container's Docker log into run_dir/log.txt.

    `poll` never raises for a full disk: it keeps its state (nothing half-recorded) and says
    so; the caller polls again later. Docker's errors are raised.
    """

    def __init__(
        self,
        api: Any,
        container_id: str,
        run_dir: Path,
        secrets: list[str],
        valve: Valve | None = None,
    ) -> None:
        self.api = api
        self.valve = valve
        self.container_id = container_id
        self.log_path = run_dir / "log.txt"
        self.pos_path = run_dir / "log.pos"
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
        url = self.api._url("/containers/{0}/logs", self.container_id)
        socket_path = getattr(getattr(self.api, "_custom_adapter", None), "socket_path", None)
        if isinstance(socket_path, str):
            data = _get_http10(socket_path, urlsplit(url).path + "?" + urlencode(params))
        else:  # TCP or SSH: docker-py's client (slower: it decodes one HTTP chunk per frame)
            res = self.api._get(url, params=params, stream=False)
            self.api._raise_for_status(res)
            data = res.content
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
        streams, stamps, texts = window.streams, window.stamps, window.texts
        new: Sequence[int]
        if pos.legacy is not None:
            new = self._legacy_new(window)
        elif start < 0:
            anchor_ns = parse_ts_ns(pos.anchor.stamp) if pos.anchor else 0
            new = [i for i in range(len(window)) if parse_ts_ns(stamps[i]) > anchor_ns]
            gaps.append(
                {
                    "after": iso_of(pos.anchor.stamp) if pos.anchor else None,
                    "before": iso_of(stamps[new[0]]) if new else None,
                    "at_byte": pos.size,
                }
            )
        else:
            new = range(start, len(window))
            if pos.anchor is None and len(window) and _json_size(texts) >= DROPPED_MIN:
                # No anchor (the predecessor died before copying anything) and so much retained
                # that Docker may have rotated away the start, unread: said, never silent.
                gaps.append({"after": None, "before": iso_of(stamps[0]), "at_byte": pos.size})
        held = {s: list(pieces) for s, pieces in self.held.items()}
        held_ids = dict(pos.held)
        if not self._restored:
            held, held_ids = {}, {}
            for stream, first in rehold.items():
                held_ids[stream] = pos.held[stream]
                held[stream] = [
                    texts[j] for j in range(first, max(start, 0)) if streams[j] == stream
                ]
            for stream in pos.held:
                if stream not in rehold:  # the held start is gone from Docker
                    lost = {"after": iso_of(pos.held[stream].stamp), "before": None}
                    gaps.append({**lost, "at_byte": pos.size})
        data = None
        chunk = b""
        if isinstance(new, range) and len(new):
            chunk = b"".join(texts[new.start :])
        if not held and isinstance(new, range) and chunk:
            # The common cases, without a Python step per frame. Docker ends a frame at each
            # newline, so when the newlines are as many as the frames, every line is whole.
            if not self.redact.patterns:
                data = chunk  # nothing to redact: pieces of long lines need not wait
            elif chunk.count(b"\n") == len(new) and streams[new.start :].count(
                streams[new.start]
            ) == len(new):
                data = self.redact(chunk)  # whole lines of one stream: all at once
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


def _json_size(texts: list[bytes]) -> int:
    """Docker's json-file bytes for these frames, estimated as the valve does (never less)."""
    data = b"".join(texts)
    escapes = 5 * (len(data) - len(data.translate(None, _JSON6)))
    escapes += len(data) - len(data.translate(None, _JSON2))
    return len(data) + escapes + JSON_LINE * len(texts)


def _process_start(pid: int) -> bytes | None:
    """The start time of a live process (to tell it from a later one with its pid); None
    when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        return None if fields[0] in (b"Z", b"X") else fields[19]
    except (OSError, IndexError):
        return None


def _get_http10(socket_path: str, target: str) -> bytes:
    """GET over Docker's Unix socket as HTTP/1.0: the answer comes unchunked until the
    connection closes, which spares a Python step per frame (Docker sends each as a chunk)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        # A kernel timeout keeps the socket blocking, so MSG_WAITALL gathers whole megabytes.
        timeval = struct.pack("ll", int(READ_TIMEOUT), 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        sock.connect(socket_path)
        sock.sendall(f"GET {target} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
        parts = []
        while True:
            part = sock.recv(1 << 22, socket.MSG_WAITALL)  # fewer, larger reads
            if not part:
                break
            parts.append(part)
    data = b"".join(parts)
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or status[1] != b"200":
        message = body.decode("utf-8", "replace").strip()[:200]
        raise DockerError(f"Docker's log read failed: {head[:40]!r} {message}")
    return body

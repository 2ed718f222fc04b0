"""The valve: a flooding container held to the pace of the log copy (logfollow.py).

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
recorded as a gap.
"""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

from orbit.errors import DockerError
from orbit.execute.engine import Engine

READ_TIMEOUT = 120.0
# Docker's multiplexed stream: an 8-byte header per frame (stream, length), then the payload.
FRAME_HEADER = struct.Struct(">BxxxI")
# The valve (see Valve): Docker's json-file log takes about the payload and JSON_LINE bytes
# per line; the valve keeps what passed the attach stream but is not copied yet, plus what
# Docker buffers for the attach stream (ATTACH_BUFFER payload bytes: its 1 MB pipe and the
# socket), under VALVE_BYTES, and under 1.2 × one of Docker's log files (`limit_for`): well
# under the two full files Docker keeps at least (docker_log_mb, execute/docker_ops.py).
JSON_LINE = 80
# Bytes Docker's JSON writes as 6 (`\u003c`, `\ufffd` for each byte of invalid UTF-8; valid
# UTF-8 is kept, so counting all bytes ≥ 0x80 errs on the safe side) and as 2 (`\"`, `\\`);
# a newline's 2 are in JSON_LINE.
_JSON6 = bytes([*range(0x0A), *range(0x0B, 0x20), *b"<>&", *range(0x80, 0x100)])
_JSON2 = b'"\\'
ATTACH_BUFFER = 1_500_000
VALVE_BYTES = 24 << 20
VALVE_READ = 1 << 18


def limit_for(log_file_bytes: int) -> int:
    """The valve's limit for a container whose Docker log files are this large."""
    return min(VALVE_BYTES, int(1.2 * log_file_bytes))


def json_size(texts: list[bytes]) -> int:
    """Docker's json-file bytes for these frames, estimated as the valve does (never less)."""
    data = b"".join(texts)
    escapes = 5 * (len(data) - len(data.translate(None, _JSON6)))
    escapes += len(data) - len(data.translate(None, _JSON2))
    return len(data) + escapes + JSON_LINE * len(texts)


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

    def __init__(self, sock: socket.socket, synced: bool, limit: int = VALVE_BYTES) -> None:
        self.sock = sock
        self.synced = synced
        self.limit = limit  # VALVE_BYTES, or less for a container with smaller log files
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
    def attach(
        cls, engine: Engine, container_id: str, synced: bool, limit: int = VALVE_BYTES
    ) -> Valve:
        """Attach to the container's stdout and stderr."""
        response = engine.request(
            "POST",
            f"/containers/{container_id}/attach",
            query={"stream": 1, "stdout": 1, "stderr": 1, "logs": 0},
            upgrade=True,
            timeout=READ_TIMEOUT,
        )
        if response.status not in (101, 200):
            response.close()
            raise DockerError(f"Docker's attach failed: HTTP {response.status}")
        response.sock.settimeout(None)
        return cls(response.sock, synced, limit)

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
        room = self.limit - ATTACH_BUFFER * per_byte - self.backlog()
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
                self._left = FRAME_HEADER.unpack(self._head)[1]
                self._head = b""
                continue
            take = min(self._left, n - i)
            lines += data.count(b"\n", i, i + take)
            payload += take
            i += take
            self._left -= take
        return payload, lines


def _process_start(pid: int) -> bytes | None:
    """The start time of a live process (to tell it from a later one with its pid); None
    when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        return None if fields[0] in (b"Z", b"X") else fields[19]
    except (OSError, IndexError):
        return None

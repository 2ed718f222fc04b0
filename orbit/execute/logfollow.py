"""Copy a container's output into log.txt exactly once, across shepherd restarts.

Docker's log (json-file, size-capped) is read with timestamps, stdout and stderr as two
streams: each stream's timestamps only grow, while the two interleave freely. After each
append to log.txt the writer checkpoints `log.pos`: the size of log.txt and, per stream, the
timestamp of its last line and how many lines carried that timestamp. A new shepherd cuts
log.txt back to the checkpoint — dropping what a killed predecessor appended but never
checkpointed — and asks Docker for each stream from that second on, skipping the lines already
written: no line is lost or written twice.
"""

from __future__ import annotations

import calendar
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from orbit.store.files import atomic_write

FLUSH_SECONDS = 0.1
FLUSH_BYTES = 64 * 1024
STREAMS = ("out", "err")


def parse_ts_ns(stamp: bytes) -> int:
    """Nanoseconds since the epoch from Docker's RFC 3339 `2024-11-30T05:50:00.123456789Z`."""
    text = stamp.decode("ascii", "replace")
    base = calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))
    frac = ""
    if len(text) > 19 and text[19] == ".":
        end = 20
        while end < len(text) and text[end].isdigit():
            end += 1
        frac = text[20:end]
    return base * 1_000_000_000 + int((frac + "000000000")[:9])


class _Cursor:
    """Where one stream stands: its last timestamp and how many lines carried it."""

    def __init__(self, ts: int = 0, n: int = 0) -> None:
        self.ts = ts
        self.n = n
        self.skip = n  # lines at `ts` that a re-read will deliver again

    def admit(self, ts: int) -> bool:
        if ts < self.ts:
            return False
        if ts == self.ts:
            if self.skip > 0:
                self.skip -= 1
                return False
            self.n += 1
        else:
            self.ts, self.n, self.skip = ts, 1, 0
        return True


class LogWriter:
    def __init__(self, run_dir: Path, redact: list[str] | None = None) -> None:
        self.log_path = run_dir / "log.txt"
        self.pos_path = run_dir / "log.pos"
        self.lock = threading.Lock()
        # Values of --pass-env secrets never reach log.txt (short ones would mangle the log).
        self.redact = [s.encode() for s in redact or [] if len(s) >= 4]
        self.buffer: list[tuple[int, int, bytes]] = []
        self.seq = 0
        self.buffered = 0
        self.last_flush = time.monotonic()
        self.size, self.cursors = self._read_pos()
        self.fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(self.fd, self.size)
        os.lseek(self.fd, self.size, os.SEEK_SET)

    def _read_pos(self) -> tuple[int, dict[str, _Cursor]]:
        try:
            data = json.loads(self.pos_path.read_text())
            cursors = {s: _Cursor(int(data[s][0]), int(data[s][1])) for s in STREAMS}
            return int(data["size"]), cursors
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return 0, {s: _Cursor() for s in STREAMS}

    def since(self, stream: str) -> int | None:
        """The `since` (whole seconds, rounded down) to ask Docker from, or None for all."""
        ts = self.cursors[stream].ts
        return ts // 1_000_000_000 if ts else None

    def accept(self, stream: str, frame: bytes) -> None:
        stamp, _, text = frame.partition(b" ")
        try:
            ts = parse_ts_ns(stamp)
        except ValueError:
            return
        with self.lock:
            if not self.cursors[stream].admit(ts):
                return
            for secret in self.redact:
                text = text.replace(secret, b"[redacted]")
            self.seq += 1
            self.buffer.append((ts, self.seq, text))
            self.buffered += len(text)
            if self.buffered >= FLUSH_BYTES or time.monotonic() - self.last_flush >= FLUSH_SECONDS:
                self._flush()

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        # Lines of the two streams that arrived in one flush interval go in time order.
        data = b"".join(text for _, _, text in sorted(self.buffer))
        self.buffer, self.buffered = [], 0
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(data)
        pos: dict[str, Any] = {"size": self.size}
        pos.update({s: [c.ts, c.n] for s, c in self.cursors.items()})
        atomic_write(self.pos_path, json.dumps(pos).encode(), durable=False)

    def rewind_for_reread(self, stream: str) -> None:
        """Before reading a stream again from `since()`: skip what is already written."""
        with self.lock:
            self._flush()
            self.cursors[stream].skip = self.cursors[stream].n

    def close(self) -> None:
        self.flush()
        os.close(self.fd)


def follow(api: Any, container_id: str, writer: LogWriter, stream: str, *, live: bool) -> None:
    """Feed one stream of the container's Docker log into `writer`; returns at its end."""
    writer.rewind_for_reread(stream)
    kwargs: dict[str, Any] = {
        "stdout": stream == "out",
        "stderr": stream == "err",
        "stream": True,
        "follow": live,
        "timestamps": True,
    }
    since = writer.since(stream)
    if since:
        kwargs["since"] = since
    for frame in api.logs(container_id, **kwargs):
        writer.accept(stream, frame)
    writer.flush()

"""Copy a container's output into log.txt exactly once, across shepherd restarts.

Docker's log (json-file, size-capped) is read with timestamps. After each append to log.txt the
writer checkpoints `log.pos` (size of log.txt, timestamp of the last line and how many lines
carried that timestamp). A new shepherd cuts log.txt back to the checkpoint — dropping what a
killed predecessor appended but never checkpointed — and asks Docker for the lines from that
second on, skipping those already written: no line is lost or written twice.
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


class LogWriter:
    def __init__(self, run_dir: Path) -> None:
        self.log_path = run_dir / "log.txt"
        self.pos_path = run_dir / "log.pos"
        self.lock = threading.Lock()
        self.buffer: list[bytes] = []
        self.buffered = 0
        self.last_flush = time.monotonic()
        pos = self._read_pos()
        self.size: int = pos["size"]
        self.ts: int = pos["ts"]
        self.at_ts: int = pos["n"]  # lines written that carry timestamp self.ts
        self._to_skip = self.at_ts  # lines at self.ts that a re-read will deliver again
        self.fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(self.fd, self.size)
        os.lseek(self.fd, self.size, os.SEEK_SET)

    def _read_pos(self) -> dict[str, int]:
        try:
            data = json.loads(self.pos_path.read_text())
            return {"size": int(data["size"]), "ts": int(data["ts"]), "n": int(data["n"])}
        except (OSError, ValueError, KeyError, TypeError):
            return {"size": 0, "ts": 0, "n": 0}

    def since(self) -> int | None:
        """The `since` (whole seconds, rounded down) to ask Docker from, or None for all."""
        return self.ts // 1_000_000_000 if self.ts else None

    def accept(self, frame: bytes) -> None:
        stamp, _, text = frame.partition(b" ")
        try:
            ts = parse_ts_ns(stamp)
        except ValueError:
            return
        with self.lock:
            if ts < self.ts:
                return
            if ts == self.ts:
                if self._to_skip > 0:
                    self._to_skip -= 1
                    return
                self.at_ts += 1
            else:
                self.ts, self.at_ts, self._to_skip = ts, 1, 0
            self.buffer.append(text)
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
        data = b"".join(self.buffer)
        self.buffer, self.buffered = [], 0
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(data)
        pos = {"size": self.size, "ts": self.ts, "n": self.at_ts}
        atomic_write(self.pos_path, json.dumps(pos).encode(), durable=False)

    def rewind_for_reread(self) -> None:
        """Before reading the log again from `since()`: skip what is already written."""
        with self.lock:
            self._flush()
            self._to_skip = self.at_ts

    def close(self) -> None:
        self.flush()
        os.close(self.fd)


def follow(api: Any, container_id: str, writer: LogWriter, *, follow: bool) -> None:
    """Feed Docker's log of the container into `writer`; returns when the stream ends."""
    writer.rewind_for_reread()
    since = writer.since()
    kwargs: dict[str, Any] = {"stream": True, "follow": follow, "timestamps": True}
    if since:
        kwargs["since"] = since
    for frame in api.logs(container_id, **kwargs):
        writer.accept(frame)
    writer.flush()

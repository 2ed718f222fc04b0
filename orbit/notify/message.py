"""What a notification says, independent of where it goes (platforms.py renders it).

A Message is plain data: the outbox stores it as JSON (to_json / from_json), so a message
written by one process is sent, merged or retried by another.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Message:
    key: str  # idempotency key: the same event always gets the same key (e.g. "run-12-failed")
    event: str  # "succeeded" | "failed" | "group" | "digest" (a merged burst)
    title: str  # one line, e.g. "run 12 (lr-0.1) failed: exit code 1"
    state: str  # the run's state, or for a group/digest its worst: decides the colour
    fields: list[tuple[str, str]] = field(default_factory=list)  # (label, value), in order
    lines: list[str] = field(default_factory=list)  # plain text lines: sparkline, reasons, ...
    code: str | None = None  # preformatted text (a failure's last log lines), may be long
    link: str | None = None  # the run or group page when web_url is configured

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        data = dict(data)
        data["fields"] = [tuple(f) for f in data.get("fields", [])]
        return cls(**data)

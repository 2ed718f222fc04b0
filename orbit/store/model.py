"""Run states and the shape of a run record, as data."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

FORMAT = 1


class RunState(StrEnum):
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"

    @property
    def active(self) -> bool:
        return self in ACTIVE

    @property
    def finished(self) -> bool:
        return self not in ACTIVE


ACTIVE = frozenset({RunState.QUEUED, RunState.STARTING, RunState.RUNNING})
LEASED = frozenset({RunState.STARTING, RunState.RUNNING})

# Which transitions are legal; anything else is a bug or a race lost, and is refused.
TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.STARTING, RunState.CANCELLED, RunState.FAILED}),
    RunState.STARTING: frozenset(
        {RunState.RUNNING, RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.LOST}
    ),
    RunState.RUNNING: frozenset(
        {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.LOST}
    ),
}


def now_iso(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).isoformat(timespec="milliseconds")


def parse_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None


@dataclass
class Run:
    """One run directory as read from disk: `spec` is run.yaml, `status` is status.yaml."""

    id: str
    dir: Path
    spec: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> RunState:
        return RunState(self.status["state"])

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def label(self) -> str:
        """`12 (lr-1e-4)` or `12`: how messages name a run."""
        return f"{self.id} ({self.name})" if self.name else self.id

    def path(self, name: str) -> Path:
        return self.dir / name

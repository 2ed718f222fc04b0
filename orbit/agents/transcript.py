"""A run's agent sessions: the transcripts in its `session/` folder, read through
orbit.review.conversation (Claude Code JSONL and Codex rollouts alike).

`session/` holds `<session_id>.jsonl`, the copy Orbit's Stop hook makes of a host Claude Code
session; a Claude Code agent that ran inside the container writes `<session-id>.jsonl` (and
`<session-id>/subagents/*.jsonl`) there itself, and Codex `YYYY/MM/DD/rollout-….jsonl`.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from orbit.review import conversation
from orbit.review.conversation import Conversation
from orbit.store.dirlist import find_files
from orbit.store.model import Run

DEPTH = 4  # folder levels under session/ searched (Codex: YYYY/MM/DD/)
MAX_TRANSCRIPTS = 500


@dataclass
class Transcript:
    rel: str  # path under session/
    path: Path
    size: int

    @property
    def subagent(self) -> bool:
        return "/subagents/" in f"/{self.rel}"


def transcripts(run: Run) -> list[Transcript]:
    """Every `*.jsonl` under the run's `session/` (down to DEPTH folders), by path; the copy of
    the session that launched the run (run.yaml `agent.session_id`) first."""
    folder = run.path("session")
    found = [
        Transcript(rel, folder / rel, size)
        for rel, size in find_files(folder, ".jsonl", DEPTH, MAX_TRANSCRIPTS)
    ]
    agent = run.spec.get("agent") if isinstance(run.spec.get("agent"), dict) else None
    named = f"{agent.get('session_id')}.jsonl" if agent else None
    return sorted(found, key=lambda t: (t.rel != named, t.subagent, t.rel))


def transcript_file(run: Run) -> Path | None:
    """The run's main transcript: the launching session's copy, else the first one found that
    is not a subagent's; None when `session/` holds none."""
    found = transcripts(run)
    return found[0].path if found else None


def _open(path: Path) -> BinaryIO:
    """The regular file at `path`, never through a final symbolic link nor a FIFO (a run's
    container can write its session/ folder)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def read_session(path: Path, limit: int | None = None) -> Conversation:
    """The whole transcript at `path` (texts in full unless `limit`)."""
    with _open(path) as f:
        return conversation.parse(f, limit=limit)


def count_messages(path: Path) -> int:
    """The user and assistant lines of the transcript (what `orbit show` reports)."""
    with _open(path) as f:
        return conversation.count_messages(f)

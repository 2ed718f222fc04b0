"""A run's agent sessions as ATIF trajectories (orbit/review/atif.py), each with the run's
outcome in `extra.orbit`: what `orbit session ID --atif` prints and `orbit export --atif` writes.

The sessions are the transcripts of the run's `session/` folder (orbit/agents/transcript.py);
a Claude Code subagent's transcript (`<session>/subagents/agent-<id>.jsonl`) is embedded in
its parent's trajectory, or stands alone when its parent is not there.
"""

from __future__ import annotations

from typing import Any

from orbit.agents.transcript import Transcript, read_session, transcripts
from orbit.errors import NotFoundError
from orbit.review import atif
from orbit.review.metrics import summarize_with_x
from orbit.store.describe import duration_s
from orbit.store.model import Run

SUBAGENT_PREFIX = "agent-"  # Claude Code's subagents/agent-<id>.jsonl


def outcome(run: Run) -> dict[str, Any]:
    """The run as `extra.orbit` gives it: id, name, group, tags, params, state, exit code and
    its metrics' summaries (as `orbit show --json`). A bench trial's score is added by the
    caller (orbit.bench.records.trial_outcome: bench is a layer above this one)."""
    spec, status = run.spec, run.status
    _, summaries = summarize_with_x(run)
    return {
        "run": run.id,
        "name": spec.get("name"),
        "group": spec.get("group"),
        "tags": spec.get("tags") or {},
        "params": spec.get("params") or {},
        "state": status.get("state"),
        "reason": status.get("reason"),
        "exit_code": status.get("exit_code"),
        "started_at": status.get("started_at"),
        "finished_at": status.get("finished_at"),
        "duration_s": duration_s(status),
        "metrics": {k: s.to_json() for k, s in summaries.items()},
    }


def run_trajectories(
    run: Run, *, include_subagents: bool = True, extra: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every session of the run as one ATIF trajectory (the launching session first), subagents
    embedded in their parents (`include_subagents`); [] when `session/` holds no transcript.
    `extra` is added to each `extra.orbit` (a bench trial's `bench`). Raises NotFoundError
    when a transcript cannot be read."""
    found = transcripts(run)
    return [
        trajectory_of(run, t, found if include_subagents else [], extra=extra)
        for t in found
        if not t.subagent or (include_subagents and parent(t, found) is None)
    ]


def trajectory_of(
    run: Run, t: Transcript, others: list[Transcript], *, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The trajectory of transcript `t`, with the subagents among `others` that are its own."""
    extra = {"file": t.rel, **outcome(run), **(extra or {})}
    subs = [(_agent_id(s), _read(run, s)) for s in others if s.subagent and parent(s, [t])]
    return atif.trajectory(_read(run, t), extra=extra, subagents=subs or None)


def _read(run: Run, t: Transcript) -> Any:
    try:
        return read_session(t.path)
    except OSError as exc:
        raise NotFoundError(
            f"run {run.label}: cannot read session/{t.rel}: {exc.strerror}"
        ) from None


def parent(sub: Transcript, found: list[Transcript]) -> Transcript | None:
    """The transcript a subagent's belongs to: `<x>/subagents/….jsonl` is `<x>.jsonl`'s."""
    folder = sub.rel.rsplit("/subagents/", 1)[0]
    return next((t for t in found if not t.subagent and t.rel == f"{folder}.jsonl"), None)


def _agent_id(sub: Transcript) -> str:
    name = sub.rel.rsplit("/", 1)[-1].removesuffix(".jsonl")
    return name.removeprefix(SUBAGENT_PREFIX)

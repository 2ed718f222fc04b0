"""A trajectory dataset: the agent sessions of chosen runs as ATIF files, with an index.

    DIR/<run>.json        the run's first session, an ATIF Trajectory (agents/trajectories.py); the
                          run's outcome in `extra.orbit`
    DIR/<run>.<n>.json    its further sessions (n = 1, 2, …), when it has several
    DIR/index.jsonl       one line per file: {"file", "run", "session_id", "steps", "orbit":
                          the outcome as the file's `extra.orbit` has it}, so a trainer reads
                          the dataset without opening every file
    DIR/dataset.json      {"format", "selection", "files", "runs", "skipped", "exported_at"}

One JSON document per trajectory, as Harbor's own runner writes `agent/trajectory.json` and its
readers (`Trajectory.model_validate_json`, the viewer, `harbor traces export`) read one file per
trajectory; the index is the one line-per-item file. The dataset is written in a temporary
directory beside DIR and renamed onto it (DIR absent or empty), so it is whole or absent; a DIR
that holds anything is refused, so a second export never overwrites the first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbit.errors import ConflictError, NotFoundError, OrbitError
from orbit.store.files import atomic_write
from orbit.store.folders import export_dest, occupied, staged_dir
from orbit.store.model import Run, now_iso

FORMAT = 1
INDEX = "index.jsonl"
MANIFEST = "dataset.json"


@dataclass
class Dataset:
    """What an export wrote: one index line per file, and the runs left out."""

    dest: Path
    selection: dict[str, str]
    files: list[dict[str, Any]] = field(default_factory=list)  # the index's lines
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"id", "state", "why"}

    def to_json(self) -> dict[str, Any]:
        runs = len({f["run"] for f in self.files})
        return {
            "format": FORMAT,
            "dir": str(self.dest),
            "selection": self.selection,
            "files": self.files,
            "runs": runs,
            "skipped": self.skipped,
        }


def check_dest(dest: Path, runs_dir: Path) -> Path:
    """The resolved DIR, refused (one-line errors) when it is a file, holds anything, or lies
    inside Orbit's run directory."""
    dest = export_dest(dest, runs_dir)
    if occupied(dest):
        raise ConflictError(f"not overwriting {dest}: it is not empty; export to another directory")
    return dest


def export(
    runs: Iterable[Run],
    dest: Path,
    selection: dict[str, str],
    what: str,
    outcomes: Mapping[str, dict[str, Any]] | None = None,
) -> Dataset:
    """Write the sessions of `runs` onto `dest` (check_dest's), each file as it is converted
    (one session in memory at a time), whole or not at all. `outcomes`: more of a run's
    outcome by run id (a bench trial's `bench`), added to its `extra.orbit`. Active runs and runs
    without a readable session are skipped, each with why; NotFoundError (nothing written)
    when no run of `what` has a session."""
    out = Dataset(dest, selection)
    try:
        with staged_dir(dest, f".{dest.name}.") as tmp:
            for run in runs:
                _add_run(run, tmp, out, (outcomes or {}).get(run.id))
            if not out.files:
                skipped = f" ({len(out.skipped)} run(s) skipped: {_why(out.skipped)})"
                raise NotFoundError(f"no agent session to export in {what}{skipped}")
            atomic_write(tmp / INDEX, b"".join(json_bytes(line) for line in out.files))
            manifest = {**out.to_json(), "exported_at": now_iso()}
            del manifest["dir"]  # the dataset can be moved: nothing in it names where it is
            atomic_write(tmp / MANIFEST, json_bytes(manifest, indent=2))
    except OSError as exc:
        raise OrbitError(f"could not write the dataset to {dest}: {exc}") from exc
    return out


def _add_run(run: Run, tmp: Path, out: Dataset, more: dict[str, Any] | None) -> None:
    if run.state.active:
        out.skipped.append(_skip(run, f"it is {run.state.value}: its session is not over"))
        return
    try:
        found = trajectories_of(run, more)
    except (OrbitError, OSError) as exc:
        out.skipped.append(_skip(run, f"its session cannot be read: {exc}"))
        return
    if not found:
        out.skipped.append(_skip(run, "no agent session recorded"))
    for n, traj in enumerate(found):
        name = f"{run.id}.json" if n == 0 else f"{run.id}.{n}.json"
        atomic_write(tmp / name, json_bytes(traj, indent=2))
        out.files.append(index_line(name, run.id, traj))


def trajectories_of(run: Run, more: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every session of the run as an ATIF dict (subagents inside their parents), its outcome
    and `more` in `extra.orbit`: the one place the dataset and the bench trials call the
    converter."""
    from orbit.agents.trajectories import run_trajectories

    return run_trajectories(run, extra=more)


def index_line(name: str, run_id: str, traj: dict[str, Any]) -> dict[str, Any]:
    return {
        "file": name,
        "run": run_id,
        "session_id": traj.get("session_id"),
        "steps": len(traj.get("steps") or []),
        "orbit": (traj.get("extra") or {}).get("orbit") or {},
    }


def json_bytes(value: Any, indent: int | None = None) -> bytes:
    return (json.dumps(value, indent=indent, ensure_ascii=False, default=str) + "\n").encode()


def _skip(run: Run, why: str) -> dict[str, str]:
    return {"id": run.id, "state": run.state.value, "why": why}


def _why(skipped: list[dict[str, str]]) -> str:
    reasons = sorted({s["why"] for s in skipped})
    return "; ".join(reasons[:2]) + (" …" if len(reasons) > 2 else "") if reasons else "none"

"""A trial's trajectory: the agent session of its solve run as ATIF, kept where Harbor's own
runner keeps a trial's (`agent/trajectory.json` in the trial folder):

    trials/<trial>/agent/trajectory.json      the solve's session (agents/trajectories.py),
                                              the run's outcome and the trial's (`bench`)
                                              in `extra.orbit`
    trials/<trial>/agent/trajectory.<n>.json  its further sessions, when it has several

Written by the driver when the trial is done (so the score is in it), again after a regrade.
"""

from __future__ import annotations

from pathlib import Path

from orbit.agents.dataset import json_bytes, trajectories_of
from orbit.bench.model import Trial, job_dir
from orbit.bench.records import trial_outcome
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.home import Home
from orbit.store.model import Run

AGENT_DIR = "agent"


def names(count: int) -> list[str]:
    """The files of `count` sessions, relative to the trial folder."""
    return [f"{AGENT_DIR}/trajectory{'' if n == 0 else f'.{n}'}.json" for n in range(count)]


def record(home: Home, job_id: str, trial: Trial, solve: Run) -> list[str]:
    """Write the solve's sessions as the trial's trajectory files (replacing earlier ones), with
    the trial's outcome as its file on disk has it (records.trial_outcome: save the trial
    first); the files, relative to the trial folder (none when the solve recorded no session)."""
    folder = job_dir(home, job_id) / "trials" / trial.id
    found = trajectories_of(solve, trial_outcome(home, solve.spec.get("tags") or {}))
    written = names(len(found))
    (folder / AGENT_DIR).mkdir(parents=True, exist_ok=True)
    for rel, traj in zip(written, found, strict=True):
        atomic_write(folder / rel, json_bytes(traj, indent=2))
    for old in sorted((folder / AGENT_DIR).glob("trajectory*.json")):
        if f"{AGENT_DIR}/{old.name}" not in written:
            unlink_quiet(old)
    return written


def paths(home: Home, job_id: str, trial: Trial) -> list[Path]:
    """The trial's trajectory files, as absolute paths."""
    folder = job_dir(home, job_id) / "trials" / trial.id
    known = names(len(trial.trajectories))  # a damaged trial file names nothing outside
    return [folder / rel for rel in trial.trajectories if rel in known]

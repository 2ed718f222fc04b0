"""A trial file the driver cannot read is rebuilt from the runs, as a run's status.yaml is from
its events.jsonl: every run of a trial carries the tags `bench` (the job), `trial` and `phase`
(`solve`, `verify-N`), and the job's tasks × methods × seeds give the trial's task, method and
seed. The rebuilt trial takes up where those runs leave it (no run, a solve, verify runs): the
driver then moves it on as before and submits no run twice. The damaged file is kept beside it as
`<trial>.json.damaged`. A damaged file that is no trial of the job cannot be rebuilt: the job
does not finish while it is there.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from orbit.bench.model import Job, Trial, job_dir, save_trial, trial_id, trial_path
from orbit.bench.records import DAMAGED, Unreadable, read_trials
from orbit.bench.runs import execution_of
from orbit.errors import OrbitError
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.model import now_iso
from orbit.store.runs import Broken, RunStore

log = logging.getLogger(__name__)
VERIFY = re.compile(r"^verify-[0-9]+$")

Rows = Callable[[], Sequence[dict[str, Any] | Broken]]


def expected_trials(job: Job) -> dict[str, tuple[str, str, int]]:
    """The job's trial ids, each with its (task, method, seed)."""
    return {
        trial_id(task, method.name, seed): (task, method.name, seed)
        for task in job.tasks
        for method in job.methods
        for seed in range(1, job.seeds + 1)
    }


def runs_of(rows: Sequence[dict[str, Any] | Broken], job_id: str, trial: str) -> dict[str, str]:
    """The trial's runs by phase label (`solve`, `verify-1`, …), from their tags."""
    out = {}
    for row in rows:
        if not isinstance(row, dict):
            continue
        tags = row.get("tags")
        if isinstance(tags, dict) and tags.get("bench") == job_id and tags.get("trial") == trial:
            out[str(tags.get("phase"))] = str(row["id"])
    return out


def rebuilt_trial(store: RunStore, job: Job, tid: str, runs: dict[str, str]) -> Trial:
    """The trial as its runs leave it: pending, solving (its solve run named) or verifying."""
    task, method, seed = expected_trials(job)[tid]
    trial = Trial(tid, task, method, seed, updated_at=now_iso())
    verifies = sorted((int(k[7:]), v) for k, v in runs.items() if VERIFY.match(k))
    trial.solve_run = runs.get("solve")
    if trial.solve_run is not None:
        trial.phase = "solving"
    if trial.solve_run is not None and verifies:
        solve = store.load(trial.solve_run)
        trial.execution, _, _, trial.solved_image = execution_of(solve)
        trial.verify_runs = [run for _, run in verifies]
        trial.verifies = len(trial.verify_runs)
        trial.phase = "verifying"
    return trial


def readable_trials(home: Home, job: Job, rows: Rows) -> tuple[list[Trial], list[str]]:
    """The job's trials, those whose file is damaged or gone rebuilt (and logged); and the
    problems left, each a line saying why the job cannot finish."""
    trials, unreadable = read_trials(home, job.id)
    expected = expected_trials(job)
    have = {t.id for t in trials}
    problems = {u.file: u for u in unreadable}
    store = RunStore(home)
    for tid in [t for t in expected if t not in have]:
        damage = problems.pop(f"{tid}.json", None)
        try:
            trial = rebuilt_trial(store, job, tid, runs_of(rows(), job.id, tid))
            _replace(home, job, trial, damage)
        except (OSError, OrbitError) as exc:
            problems[f"{tid}.json"] = Unreadable(f"{tid}.json", f"cannot be rebuilt ({exc})")
            continue
        what = f"its file is damaged: {damage.problem}" if damage else "its file was gone"
        runs = ", ".join(r for r in [trial.solve_run, *trial.verify_runs] if r) or "none yet"
        log.warning("job %s: trial %s: %s; rebuilt from its runs (%s)", job.id, tid, what, runs)
        trials.append(trial)
    left = [
        f"job {job.id}: trial file {u.file}: {u.problem}; the job cannot finish while it is "
        f"there ({_why(u, expected)})"
        for u in problems.values()
    ]
    return trials, left


def _replace(home: Home, job: Job, trial: Trial, damage: Unreadable | None) -> None:
    """Keep the damaged file's bytes beside it, then write the rebuilt trial over it."""
    path = trial_path(home, job.id, trial.id)
    if damage is not None:
        kept = job_dir(home, job.id) / "trials" / f"{path.name}{DAMAGED}"
        atomic_write(kept, path.read_bytes())
    save_trial(home, job.id, trial)


def _why(damage: Unreadable, expected: dict[str, tuple[str, str, int]]) -> str:
    if damage.file.removesuffix(".json") in expected:
        return "mend or remove it: a removed trial file is rebuilt from its runs"
    return "it names no trial of the job: remove it"

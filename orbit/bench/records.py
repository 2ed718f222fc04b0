"""A job's records read for showing them: job.json checked field by field, every trial file
read on its own (one that cannot be read is listed as unreadable, never fatal), and the one JSON
view of a job and of a trial that `bench show`, `bench compare` and the web pages share."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from orbit.bench import jobs
from orbit.bench.jobs import JOB_ID
from orbit.bench.model import EVALUATIONS, Job, Trial, job_dir, load_job, trial_path
from orbit.errors import CorruptError, NotFoundError
from orbit.store.home import Home

DAMAGED = ".damaged"  # a rebuilt trial's damaged file is kept as <trial>.json.damaged


@dataclass
class Unreadable:
    """A trial file that cannot be read: listed with its problem, never fatal."""

    file: str
    problem: str


@dataclass
class JobRecords:
    job: Job
    trials: list[Trial]
    unreadable: list[Unreadable] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)  # trial files rebuilt from their runs

    def summary(self) -> dict[str, Any]:
        """The job as `bench jobs/show --json` and the web view give it: job.json's fields,
        then the trials counted by evaluation (a valid trial without a finite score counts as
        invalid, as in comparisons) and the trial files that could not be read."""
        views = [trial_json(t) for t in self.trials]
        counts = {e: sum(v["evaluation"] == e for v in views) for e in EVALUATIONS}
        return {
            **asdict(self.job),
            "trials": len(self.trials) + len(self.unreadable),
            "done": sum(t.phase == "done" for t in self.trials),
            **counts,
            "unreadable": [{"file": u.file, "problem": u.problem} for u in self.unreadable],
            "rebuilt": list(self.rebuilt),
        }


def resolve_job(home: Home, ref: str) -> Job:
    """A job by id (`j3`) or by its unique name (jobs.resolve_job), read with load_checked: a
    damaged job.json is a CorruptError that names no host path, never a TypeError."""
    if JOB_ID.match(ref) and (job_dir(home, ref) / "job.json").exists():
        return load_checked(home, ref)
    return load_checked(home, jobs.resolve_job(home, ref).id)


_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "task": (str,),
    "method": (str,),
    "seed": (int,),
    "phase": (str,),
    "solve_run": (str, type(None)),
    "solved_image": (str, type(None)),
    "execution": (str, type(None)),
    "evaluation": (str,),
    "reason": (str, type(None)),
    "score": (int, float, type(None)),
    "cleanup": (str,),
    "updated_at": (str,),
}


def trial_from(data: Any) -> Trial:
    """A Trial from a trial file's JSON; CorruptError naming the first field that is wrong."""
    if not isinstance(data, dict):
        raise CorruptError("not a JSON object")
    for key in ("id", "task", "method", "seed"):
        if key not in data:
            raise CorruptError(f"no {key!r}")
    for key, kinds in _TYPES.items():
        value = data.get(key)
        if key in data and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise CorruptError(f"{key!r} is {json.dumps(value)[:40]}")
    if data.get("evaluation", "unknown") not in EVALUATIONS:
        raise CorruptError(f"'evaluation' is {json.dumps(data['evaluation'])[:40]}")
    for key in ("verify_runs", "cancelled_verifies", "trajectories"):
        runs = data.get(key, [])
        if not isinstance(runs, list) or not all(isinstance(r, str) for r in runs):
            what = "file names" if key == "trajectories" else "run ids"
            raise CorruptError(f"{key!r} is not a list of {what}")
    if not isinstance(data.get("earlier"), dict | None):
        raise CorruptError("'earlier' is not an object")
    scores = data.get("scores", {})
    if not isinstance(scores, dict):
        raise CorruptError("'scores' is not an object")
    if isinstance(data.get("score"), int) and abs(data["score"]) > 2**1000:
        raise CorruptError("'score' is too large")
    known = {k: v for k, v in data.items() if k in Trial.__dataclass_fields__}
    return Trial(**known)


def load_checked(home: Home, job_id: str) -> Job:
    """The job, or CorruptError when its job.json does not hold a job."""
    try:
        job = load_job(home, job_id)
    except CorruptError as exc:  # its message names the host path: the web view shows it
        where = str(job_dir(home, job_id) / "job.json")
        raise CorruptError(str(exc).replace(where, f"job {job_id}: job.json")) from None
    except (TypeError, AttributeError, RecursionError):  # e.g. "methods": "x" or [1]
        raise CorruptError(f"job {job_id}: job.json does not hold a job") from None
    problem = None
    if not isinstance(job.tasks, list) or not all(isinstance(t, str) for t in job.tasks):
        problem = "'tasks' is not a list of names"
    elif not all(isinstance(m.name, str) for m in job.methods):
        problem = "a method has no name"
    elif job.name is not None and not isinstance(job.name, str):
        problem = "'name' is not text"
    elif isinstance(job.seeds, bool) or not isinstance(job.seeds, int):
        problem = "'seeds' is not a number"
    elif not all(isinstance(v, str) for v in (job.state, job.benchmark, job.created_at)):
        problem = "'state', 'benchmark' or 'created_at' is not text"
    elif job.folder is not None and not isinstance(job.folder, str):
        problem = "'folder' is not text"
    if problem:
        raise CorruptError(f"job {job_id}: job.json: {problem}")
    return job


def read_job(home: Home, job_id: str) -> JobRecords:
    """The job and its trials; a trial file that cannot be read is listed as unreadable."""
    job = load_checked(home, job_id)
    trials, unreadable = read_trials(home, job_id)
    folder = job_dir(home, job_id) / "trials"
    kept = sorted(p.name.removesuffix(DAMAGED) for p in folder.glob(f"*.json{DAMAGED}"))
    return JobRecords(job, trials, unreadable, rebuilt=kept)


def read_jobs(home: Home) -> tuple[list[JobRecords], list[dict[str, str]]]:
    """Every job, and those whose job.json cannot be read ({"id", "problem"}); a job still being
    created (no job.json yet) is neither."""
    found, unreadable = [], []
    for job_id in jobs.job_ids(home):
        try:
            found.append(read_job(home, job_id))
        except NotFoundError:
            continue
        except CorruptError as exc:
            unreadable.append({"id": job_id, "problem": str(exc)})
    return found, unreadable


def read_trials(home: Home, job_id: str) -> tuple[list[Trial], list[Unreadable]]:
    """The job's trial files: the trials, and the files that cannot be read, with why."""
    folder = job_dir(home, job_id) / "trials"
    trials, unreadable = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            trials.append(trial_from(json.loads(path.read_text())))
        except OSError as exc:
            unreadable.append(Unreadable(path.name, f"cannot be read ({exc.strerror or exc})"))
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested too deep
            unreadable.append(Unreadable(path.name, f"not JSON ({str(exc)[:200]})"))
        except CorruptError as exc:
            unreadable.append(Unreadable(path.name, str(exc)))
    return trials, unreadable


def counted(t: Trial) -> bool:
    """Whether the trial's score counts: valid, with a finite number as its score."""
    score = t.score
    return (
        t.evaluation == "valid"
        and isinstance(score, int | float)
        and not isinstance(score, bool)
        and math.isfinite(score)
    )


def why_invalid(t: Trial) -> str:
    if t.evaluation == "valid":
        return "valid, but no score"
    return t.reason or "no reason given"


TRIAL_KEYS = ("id", "task", "method", "seed", "phase", "execution", "evaluation", "reason",
              "score", "scores", "cleanup", "solved_image", "updated_at",
              "trajectories")  # fmt: skip


def trial_json(t: Trial) -> dict[str, Any]:
    """One trial as every view gives it (`bench show --json`, comparisons, the web): `score`
    is null unless the trial counts; a valid trial without a finite score is shown invalid."""
    out = {k: getattr(t, k) for k in TRIAL_KEYS}
    out["trajectories"] = list(t.trajectories)  # relative to the trial folder
    if counted(t):
        out["score"] = float(out["score"])
    else:
        out["score"] = None
        if t.evaluation == "valid":
            out["evaluation"], out["reason"] = "invalid", why_invalid(t)
    out["runs"] = {
        "solve": t.solve_run,
        "verify": list(t.verify_runs),
        "cancelled": list(t.cancelled_verifies),
    }
    return out


def trial_outcome(home: Home, tags: dict[str, Any]) -> dict[str, Any] | None:
    """What a trial's run adds to its ATIF trajectory's `extra.orbit` (orbit/agents/
    trajectories.py): `bench` = job, trial, phase, and the trial's evaluation and score as
    `bench show --json` gives them; None for a run that is no trial's (its tags, from
    engine.submit, name none). Records that cannot be read leave the score out."""
    job, trial = tags.get("bench"), tags.get("trial")
    if not isinstance(job, str) or not isinstance(trial, str):
        return None
    out: dict[str, Any] = {"job": job, "trial": trial, "phase": tags.get("phase")}
    if not JOB_ID.match(job) or "/" in trial or trial.startswith("."):  # a hand-made tag
        return {"bench": out}
    try:
        found = trial_from(json.loads(trial_path(home, job, trial).read_text()))
    except (OSError, ValueError, RecursionError, CorruptError):
        return {"bench": out}
    view = trial_json(found)
    out.update(evaluation=view.get("evaluation"), score=view.get("score"))
    return {"bench": out}

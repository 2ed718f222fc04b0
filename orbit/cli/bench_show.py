"""Rendering jobs for `orbit bench jobs / show / run --json`: one JSON shape (pinned by the
tests), and the tables people read."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from orbit.bench.model import Job, Trial, load_job, load_trials
from orbit.cli.common import ago, print_json, table
from orbit.env import Env
from orbit.human import fmt_num
from orbit.store.home import Home

TRIAL_KEYS = (
    "id",
    "task",
    "method",
    "seed",
    "phase",
    "execution",
    "evaluation",
    "reason",
    "score",
    "scores",
    "cleanup",
    "solved_image",
    "updated_at",
)


def trial_json(trial: Trial) -> dict[str, Any]:
    out = {k: getattr(trial, k) for k in TRIAL_KEYS}
    if trial.evaluation != "valid":
        out["score"] = None
    out["runs"] = {"solve": trial.solve_run, "verify": list(trial.verify_runs)}
    return out


def summary(job: Job, trials: list[Trial]) -> dict[str, Any]:
    counts = Counter(t.evaluation for t in trials)
    done = sum(t.phase == "done" for t in trials)
    data = asdict(job)
    data.update(
        trials=len(trials),
        done=done,
        valid=counts["valid"],
        invalid=counts["invalid"],
    )
    return data


def job_json(home: Home, job_id: str) -> dict[str, Any]:
    job = load_job(home, job_id)
    trials = load_trials(home, job_id)
    return {"job": summary(job, trials), "trials": [trial_json(t) for t in trials]}


def print_jobs(env: Env, as_json: bool) -> None:
    from orbit.bench.jobs import list_jobs

    jobs = [(j, load_trials(env.home, j.id)) for j in list_jobs(env.home)]
    if as_json:
        print_json(env, {"jobs": [summary(j, t) for j, t in jobs]})
        return
    rows = []
    for job, trials in jobs:
        s = summary(job, trials)
        methods = " ".join(m.name for m in job.methods)
        rows.append(
            [
                job.id,
                job.name or "-",
                job.benchmark,
                job.state,
                f"{s['done']}/{s['trials']}",
                str(s["valid"]),
                ago(job.created_at),
                methods,
            ]
        )
    table(
        env.stdout,
        ["JOB", "NAME", "BENCHMARK", "STATE", "DONE", "VALID", "CREATED", "METHODS"],
        rows,
    )


def print_job(env: Env, job_id: str) -> None:
    job = load_job(env.home, job_id)
    trials = load_trials(env.home, job_id)
    s = summary(job, trials)
    name = f" ({job.name})" if job.name else ""
    env.stdout.write(
        f"job {job.id}{name}: {job.benchmark}, {job.state}; {s['done']}/{s['trials']} done, "
        f"{s['valid']} valid, {s['invalid']} invalid\n"
    )
    rows = []
    for t in trials:
        score = fmt_num(t.score) if t.evaluation == "valid" and t.score is not None else "-"
        runs = " ".join(r for r in [t.solve_run, *t.verify_runs] if r) or "-"
        state = t.evaluation if t.phase == "done" else t.phase
        rows.append(
            [t.task, t.method, str(t.seed), t.execution or "-", state, score, runs, t.reason or ""]
        )
    table(
        env.stdout,
        ["TASK", "METHOD", "SEED", "EXECUTION", "EVALUATION", "SCORE", "RUNS", "REASON"],
        rows,
    )

"""Rendering jobs for `orbit bench jobs / show / run --json`: one JSON shape (pinned by the
tests), and the tables people read."""

from __future__ import annotations

from typing import Any

from orbit.bench.records import JobRecords, read_job, trial_json
from orbit.cli.common import ago, print_json, table
from orbit.env import Env
from orbit.errors import CorruptError
from orbit.human import fmt_num
from orbit.store.home import Home


def job_json(home: Home, job_id: str) -> dict[str, Any]:
    rec = read_job(home, job_id)
    return {"job": rec.summary(), "trials": [trial_json(t) for t in rec.trials]}


def print_jobs(env: Env, as_json: bool) -> None:
    from orbit.bench.jobs import list_jobs

    records = [_records(env.home, j.id) for j in list_jobs(env.home)]
    if as_json:
        print_json(env, {"jobs": [r.summary() for r in records]})
        return
    rows = []
    for rec in records:
        job, s = rec.job, rec.summary()
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
    rec = read_job(env.home, job_id)
    job, s = rec.job, rec.summary()
    name = f" ({job.name})" if job.name else ""
    env.stdout.write(
        f"job {job.id}{name}: {job.benchmark}, {job.state}; {s['done']}/{s['trials']} done, "
        f"{s['valid']} valid, {s['invalid']} invalid\n"
    )
    rows = []
    for t in map(trial_json, rec.trials):
        score = fmt_num(t["score"]) if t["score"] is not None else "-"
        runs = " ".join(_runs(t["runs"])) or "-"
        state = t["evaluation"] if t["phase"] == "done" else t["phase"]
        rows.append(
            [t["task"], t["method"], str(t["seed"]), t["execution"] or "-", state, score, runs,
             t["reason"] or ""]
        )  # fmt: skip
    table(
        env.stdout,
        ["TASK", "METHOD", "SEED", "EXECUTION", "EVALUATION", "SCORE", "RUNS", "REASON"],
        rows,
    )
    for u in rec.unreadable:
        env.stderr.write(f"orbit: job {job.id}: trial file {u.file}: {u.problem}\n")


def _runs(runs: dict[str, Any]) -> list[str]:
    """The trial's run ids, a regrade's cancelled verify run marked `(cancelled)`."""
    cancelled = set(runs["cancelled"])
    verify = [f"{r}(cancelled)" if r in cancelled else r for r in runs["verify"]]
    return [r for r in [runs["solve"], *verify] if r]


def _records(home: Home, job_id: str) -> JobRecords:
    """The job's records; a job.json that cannot be read lists the job with no trials."""
    from orbit.bench.model import load_job

    try:
        return read_job(home, job_id)
    except CorruptError:
        return JobRecords(load_job(home, job_id), [])

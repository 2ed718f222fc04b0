"""Rendering jobs for `orbit bench jobs / show / run --json`: one JSON shape (pinned by the
tests), and the tables people read."""

from __future__ import annotations

from typing import Any

from orbit.bench.model import Trial
from orbit.bench.records import DAMAGED, JobRecords, read_job, trial_json
from orbit.cli.common import print_json, table
from orbit.env import Env
from orbit.human import ago, fmt_num
from orbit.store.home import Home


def job_json(home: Home, job_id: str) -> dict[str, Any]:
    rec = read_job(home, job_id)
    return {"job": rec.summary(), "trials": [_with_paths(home, rec, t) for t in rec.trials]}


def _with_paths(home: Home, rec: JobRecords, trial: Trial) -> dict[str, Any]:
    """The trial's view with its trajectory files as absolute paths, for an agent to open."""
    from orbit.bench.trajectory import paths

    view = trial_json(trial)
    view["trajectories"] = [str(p) for p in paths(home, rec.job.id, trial)]
    return view


def print_jobs(env: Env, as_json: bool) -> None:
    from orbit.bench.records import read_jobs

    records, unreadable = read_jobs(env.home)
    if as_json:
        print_json(env, {"jobs": [r.summary() for r in records], "unreadable": unreadable})
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
    rows += [[u["id"], "-", "-", "unreadable", "-", "-", "-", "-"] for u in unreadable]
    rows.sort(key=lambda row: int(row[0][1:]))
    table(
        env.stdout,
        ["JOB", "NAME", "BENCHMARK", "STATE", "DONE", "VALID", "CREATED", "METHODS"],
        rows,
    )
    for rec in records:
        _warn(env, rec)
    for u in unreadable:
        env.stderr.write(f"orbit: {u['problem']}\n")


def print_job(env: Env, job_id: str) -> None:
    from orbit.bench.repair import expected_trials

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
    expected = expected_trials(job)
    for u in rec.unreadable:
        task, method, seed = expected.get(u.file.removesuffix(".json"), (u.file, "-", "-"))
        rows.append([task, method, str(seed), "-", "unreadable", "-", "-", u.problem])
    table(
        env.stdout,
        ["TASK", "METHOD", "SEED", "EXECUTION", "EVALUATION", "SCORE", "RUNS", "REASON"],
        rows,
    )
    _trajectories(env, rec)
    _warn(env, rec)


def _trajectories(env: Env, rec: JobRecords) -> None:
    """One line per trial of an agent method that kept its session as ATIF."""
    from orbit.bench.trajectory import paths

    kept = [(t, paths(env.home, rec.job.id, t)) for t in rec.trials]
    kept = [(t, found) for t, found in kept if found]
    if kept:
        env.stdout.write("trajectories (ATIF):\n")
    for trial, found in kept:
        env.stdout.write(f"  {trial.id}: {' '.join(map(str, found))}\n")


def _warn(env: Env, rec: JobRecords) -> None:
    """Name on stderr the job's trial files that cannot be read, and those rebuilt."""
    job_id = rec.job.id
    for u in rec.unreadable:
        env.stderr.write(f"orbit: job {job_id}: trial file {u.file}: {u.problem}\n")
    for name in rec.rebuilt:
        trial = name.removesuffix(".json")
        env.stderr.write(
            f"orbit: job {job_id}: trial {trial} was rebuilt from its runs (its damaged file "
            f"is kept as trials/{name}{DAMAGED})\n"
        )


def _runs(runs: dict[str, Any]) -> list[str]:
    """The trial's run ids, a regrade's cancelled verify run marked `(cancelled)`."""
    cancelled = set(runs["cancelled"])
    verify = [f"{r}(cancelled)" if r in cancelled else r for r in runs["verify"]]
    return [r for r in [runs["solve"], *verify] if r]

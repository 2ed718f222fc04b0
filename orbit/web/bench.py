"""The bench pages: jobs, a job's task × method matrix, jobs compared (orbit/bench/compare.py).

GET /bench                        the jobs: benchmark, state, trials, validity, methods
GET /bench/jobs/<job>             the matrix: score, validity (reason on hover and expand),
                                  each trial's solve and verify runs
GET /bench/compare?jobs=j1,j2     jobs side by side, with the paired means
GET /api/bench/jobs               {"jobs": [SUMMARY…], "unreadable": [{"id", "problem"}…]}
GET /api/bench/jobs/<job>         `orbit bench compare JOB --json`
GET /api/bench/compare?jobs=…     `orbit bench compare J1 J2 --json`

A trial file that cannot be read is shown as such (file and problem), never a 500; a job whose
job.json cannot be read is listed with its problem, and its page is a 404 saying so.
"""

from __future__ import annotations

from typing import Any

import bottle

from orbit.bench.compare import (
    JOBS_MAX,
    Comparison,
    cell_text,
    compare,
    compare_jobs,
    paired_text,
)
from orbit.bench.jobs import JOB_ID
from orbit.bench.model import NAME
from orbit.bench.records import read_job, read_jobs, resolve_job, trial_json
from orbit.errors import CorruptError, NotFoundError, UsageError
from orbit.human import fmt_metric
from orbit.web.context import RUN_ID, Route, current


def _job_id(ref: str) -> str:
    """The id of the job `ref` names, or a 404."""
    if not (JOB_ID.match(ref) or NAME.match(ref)):
        bottle.abort(404, f"no job {ref!r}")
    try:
        return resolve_job(current().home, ref).id
    except (NotFoundError, CorruptError) as exc:
        bottle.abort(404, str(exc))
    raise AssertionError("unreachable")


def _jobs() -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    records, unreadable = read_jobs(current().home)
    return [r.summary() for r in records], unreadable


def jobs_page() -> str:
    found, unreadable = _jobs()
    return current().render(
        "bench_jobs", title="Bench", jobs=found[::-1], unreadable=unreadable, jobs_max=JOBS_MAX
    )


def jobs_api() -> dict[str, Any]:
    found, unreadable = _jobs()
    return {"jobs": found, "unreadable": unreadable}


def _one(ref: str) -> Comparison:
    return compare([read_job(current().home, _job_id(ref))])


def job_page(job: str) -> str:
    cmp = _one(job)
    rec = cmp.jobs[0]
    title = f"job {rec.job.id}" + (f" ({rec.job.name})" if rec.job.name else "")
    return current().render("bench_matrix", title=title, heading=title, **_view(cmp))


def job_api(job: str) -> dict[str, Any]:
    return _one(job).to_json()


def _refs() -> list[str]:
    query = bottle.request.query
    raw = [v for value in query.getall("jobs") for v in value.split(",")]
    refs = list(dict.fromkeys(r.strip() for r in raw if r.strip()))
    if not refs:
        bottle.abort(400, "choose jobs to compare: /bench/compare?jobs=j1,j2")
    if len(refs) > JOBS_MAX:
        bottle.abort(400, f"compare at most {JOBS_MAX} jobs at once")
    for ref in refs:
        _job_id(ref)
    return refs


def _compared() -> Comparison:
    try:
        return compare_jobs(current().home, _refs())
    except UsageError as exc:
        bottle.abort(400, str(exc))
    except (NotFoundError, CorruptError) as exc:
        bottle.abort(404, str(exc))
    raise AssertionError("unreachable")


def compare_page() -> str:
    cmp = _compared()
    ids = ", ".join(r.job.id for r in cmp.jobs)
    return current().render(
        "bench_matrix", title=f"compare {ids}", heading=f"Compare jobs {ids}", **_view(cmp)
    )


def compare_api() -> dict[str, Any]:
    return _compared().to_json()


def _view(cmp: Comparison) -> dict[str, Any]:
    return {
        "cmp": cmp,
        "cell_text": cell_text,
        "paired_text": paired_text,
        "trial_json": trial_json,
        "fmt_metric": fmt_metric,
        "run_link": lambda run_id: bool(run_id) and bool(RUN_ID.match(run_id)),
    }


ROUTES: list[Route] = [
    ("GET", "/bench", jobs_page),
    ("GET", "/bench/jobs/<job>", job_page),
    ("GET", "/bench/compare", compare_page),
    ("GET", "/api/bench/jobs", jobs_api),
    ("GET", "/api/bench/jobs/<job>", job_api),
    ("GET", "/api/bench/compare", compare_api),
]

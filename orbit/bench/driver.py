"""A bench job's driver process: `python -m orbit.bench.driver JOB` (and `orbit bench _drive
JOB`, the same in the foreground).

A worker of store/worker.py: started detached by bench/jobs.py:start_driver (by `bench run`,
`bench regrade`, and any `orbit bench` command that finds an unfinished job's driver dead), it
holds jobs/<job>/driver.lock for its life and drives the job (bench/engine.py) until every
trial is done or the job is cancelled. Its log is jobs/<job>/driver.log.
"""

from __future__ import annotations

import threading
from typing import IO

from orbit.bench.engine import drive
from orbit.bench.jobs import driver_worker
from orbit.detach import exit_from
from orbit.store.home import Home
from orbit.store.worker import worker_main


def drive_job(job_id: str, home: Home | None = None) -> int:
    """Drive job `job_id` of `home` (default: ORBIT_HOME's) unless another process does."""

    def body(home: Home, handle: IO[str], stop: threading.Event) -> str:
        return f"job {job_id}: {drive(home, job_id, handle)}"

    return worker_main(lambda h: driver_worker(h, job_id), body, home, stoppable=False)


def main(argv: list[str]) -> int:
    return drive_job(argv[0]) if len(argv) == 1 else 2


if __name__ == "__main__":
    exit_from(main)

"""`python -S -m orbit.execute.slurm_job HOME ID`: a run's Slurm job, on the compute node.

The batch script of a Slurm home's run (sched/slurm.py) execs this. Holding the run's shepherd
lock, it admits the run (queued → starting) with what Slurm granted: the CPUs and memory of
the allocation (SLURM_CPUS_ON_NODE, SLURM_MEM_PER_NODE) and its GPUs (SLURM_JOB_GPUS, else
CUDA_VISIBLE_DEVICES: the node's GPU indices) read as the node's GPUs through NVML or the
stand-in; it records the node. Then it is the run's shepherd, in the foreground, so the record
is that of any run, and the job ends when the run does.

`scancel` (and a job reaching its time limit) sends SIGTERM: it is taken as a cancel request,
so the shepherd stops the container (which belongs to dockerd, not to the job, and would
outlive it) and records the run `cancelled`, within Slurm's KillWait.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from orbit.detach import exit_from, logged
from orbit.errors import OrbitError
from orbit.execute.shepherd import CANCEL_FILE, run_shepherd
from orbit.execute.spawn import set_process_name, spawn
from orbit.store.files import atomic_write, touch_exclusive, unlink_quiet
from orbit.store.home import Home
from orbit.store.model import LEASED, RunState, now_iso
from orbit.store.runs import RunStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

log = logging.getLogger(__name__)


def slurm_gpus(home: Home, environ: dict[str, str] | os._Environ[str]) -> list[dict[str, Any]]:
    """The job's GPUs as lease entries ({index, uuid}) of this node's GPUs."""
    raw = environ.get("SLURM_JOB_GPUS") or environ.get("CUDA_VISIBLE_DEVICES") or ""
    indices = [int(part) for part in raw.split(",") if part.strip().isdigit()]
    if not indices:
        return []
    from orbit.sched.gpus import open_gpus

    by_index = {g.index: g for g in open_gpus(home).read(indices)}
    missing = [i for i in indices if i not in by_index]
    if missing:
        raise OrbitError(f"Slurm gave GPU {missing[0]}, which this node's GPUs do not include")
    return [{"index": i, "uuid": by_index[i].uuid} for i in indices]


def admit(home: Home, run_id: str, environ: dict[str, str] | os._Environ[str]) -> bool:
    """Make the run this job's: queued → starting with the allocation as its lease, the
    active/ marker made. True also for a run this job had started already; False when the run
    is not this job's to run (cancelled meanwhile, finished, or taken by another job)."""
    store = RunStore(home)
    run = store.load(run_id)
    job_id = environ.get("SLURM_JOB_ID", "")
    found = run.status.get("slurm")
    slurm: dict[str, Any] = found if isinstance(found, dict) else {}
    recorded = str(slurm.get("job_id") or "")
    if recorded and recorded != job_id:
        log.info("run %s belongs to Slurm job %s, not %s", run_id, recorded, job_id)
        return False
    if run.state in LEASED:
        return True  # this job's own run (a job started again): resume it
    if run.state is not RunState.QUEUED:
        log.info("run %s is %s: nothing to run", run_id, run.state.value)
        return False
    node = environ.get("SLURMD_NODENAME", "")
    cpus = float(environ.get("SLURM_CPUS_ON_NODE") or run.resources.cpus)
    mem_mb = environ.get("SLURM_MEM_PER_NODE")
    mem_gb = round(int(mem_mb) / 1024, 3) if mem_mb and mem_mb.isdigit() else run.resources.mem_gb
    store.transition(
        run_id,
        RunState.STARTING,
        actor=f"slurm:{job_id}",
        event="admitted",
        expect=[RunState.QUEUED],
        reason=f"starting the container on {node} (Slurm job {job_id})",
        lease={"cpus": cpus, "mem_gb": mem_gb, "gpus": slurm_gpus(home, environ)},
        admitted_at=now_iso(),
        slurm={**slurm, "job_id": job_id, "node": node},
    )
    touch_exclusive(home.active_dir / run_id)
    unlink_quiet(home.queue_dir / run_id)
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        return 2
    set_process_name()
    home, run_id = Home(Path(argv[0]), os.environ), argv[1]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s slurm-job %(process)d %(message)s")
    run_dir = home.runs_dir / run_id

    def cancel(signum: int, frame: object) -> None:
        # The shepherd checks for this file twice a second and stops the container.
        log.info("run %s: SIGTERM from Slurm: cancelling", run_id)
        if (run_dir / CANCEL_FILE).exists():
            return  # `orbit cancel` asked first (and scancel'ed the job)
        try:
            atomic_write(run_dir / CANCEL_FILE, b"slurm")
            RunStore(home).append_event(run_id, "cancel-requested", actor="slurm")
        except OSError as exc:
            log.warning("run %s: cannot write %s: %s", run_id, CANCEL_FILE, exc)

    signal.signal(signal.SIGTERM, cancel)
    return logged(
        f"Slurm job for run {run_id}",
        lambda: run_shepherd(
            home, run_id, spawner=spawn, admit=lambda: admit(home, run_id, os.environ)
        ),
    )


if __name__ == "__main__":
    exit_from(main)

"""A Slurm home against a real cluster: Debian's slurmctld, two slurmd and munge on this host.

The cluster (tests/slurm_setup.py) is started once for the session: node HOST with 2 stand-in
GPUs as GRES and node HOST2, 2 CPUs and 8000 MB each, partition `main`. Both slurmd run here, so
the compute nodes share this file system and Docker engine, as a cluster's nodes share $HOME.
The GPUs are the YAML stand-in for NVML (ORBIT_FAKE_GPUS); everything else is real: sbatch,
squeue, scancel, the jobs, the shepherds inside them, the containers.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import slurm_setup
from conftest import STAND_IN_UUID, Orbit, stand_in

from orbit.sched import slurm
from orbit.store.home import Home
from orbit.store.locks import locked
from orbit.store.model import Run
from orbit.store.runs import RunStore

SMALL = ("--no-project", "--cpus", "1", "--mem", "0.25")
FINISHED = ("succeeded", "failed", "cancelled", "lost")


@pytest.fixture(scope="session")
def slurm_cluster(docker_engine: None) -> Iterator[dict[str, str]]:
    env = slurm_setup.up()
    yield env
    slurm_setup.down()


@pytest.fixture
def sl(orbit: Orbit, slurm_cluster: dict[str, str], busybox: str) -> Iterator[Orbit]:
    """A Slurm home (partition main) whose commands reach the test cluster."""
    orbit.environ.update(slurm_cluster)
    orbit.configure(executor="slurm", slurm_partition=slurm_setup.PARTITION, default_image=busybox)
    yield orbit
    # Jobs this home left (a failed test) must not hold the nodes for the next one.
    for job in _squeue(orbit, "--name", ",".join(_names(orbit))):
        subprocess.run(["scancel", job["id"]], env=_env(orbit), capture_output=True)


def _env(orbit: Orbit) -> dict[str, str]:
    return {**os.environ, **orbit.environ}


def _names(orbit: Orbit) -> list[str]:
    home = Home(orbit.home)
    return [slurm.job_name(home, p.name) for p in (orbit.home / "runs").iterdir()] or ["none"]


def _squeue(orbit: Orbit, *args: str) -> list[dict[str, str]]:
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", *args, "-o", "%i|%j|%T|%r"],
        env=_env(orbit),
        capture_output=True,
        text=True,
    ).stdout
    rows = [line.split("|") for line in out.splitlines()]
    return [{"id": r[0], "name": r[1], "state": r[2], "reason": r[3]} for r in rows if len(r) == 4]


def _job(orbit: Orbit, run_id: str) -> dict[str, str]:
    (job,) = _squeue(orbit, "-j", str(orbit.status(run_id)["slurm"]["job_id"]))
    return job


def _ticking_until(orbit: Orbit, run_id: str, pred: Any, timeout: float = 30) -> dict[str, Any]:
    """Tick (as the supervisor would) until the run's status satisfies `pred`."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = orbit.status(run_id)
        if pred(status):
            return status
        assert orbit("scheduler", "tick").code == 0
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} never reached the condition; last status {status}")


def _finished(orbit: Orbit, run_id: str, timeout: float = 40) -> dict[str, Any]:
    return _ticking_until(orbit, run_id, lambda s: s["state"] in FINISHED, timeout)


def _cleaned_up(orbit: Orbit, run_id: str, timeout: float = 20) -> None:
    """Wait until the shepherd has removed the run's container and then its active/ marker."""
    deadline = time.monotonic() + timeout
    while (orbit.home / "active" / run_id).exists():
        assert time.monotonic() < deadline, f"run {run_id} kept its active/ marker"
        time.sleep(0.1)


def _containers(orbit: Orbit, run_id: str) -> list[str]:
    name = f"orbit-{Home(orbit.home).tag}-{run_id}"
    out = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name=^{name}$", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
    ).stdout
    return out.split()


# --- tests ------------------------------------------------------------------------------------
def test_a_run_goes_through_slurm_and_its_record_is_complete(sl: Orbit) -> None:
    run_id = sl.submit(*SMALL, "--", "sh", "-c", "echo hello from slurm; exit 3")
    status = _finished(sl, run_id)
    assert status["state"] == "failed" and status["exit_code"] == 3
    assert "hello from slurm" in (sl.run_dir(run_id) / "log.txt").read_text()
    job = status["slurm"]
    assert job["job_id"].isdigit() and job["node"] in slurm_setup.nodes()
    assert job["partition"] == "main"
    assert status["lease"] == {"cpus": 1.0, "mem_gb": 0.25, "gpus": []}  # Slurm's allocation
    events = [e["event"] for e in sl.events(run_id)]
    assert events == ["submitted", "slurm-submitted", "admitted", "started", "failed"]
    assert sl.events(run_id)[2]["actor"] == f"slurm:{job['job_id']}"
    assert (sl.run_dir(run_id) / "exit.json").exists()
    assert (sl.run_dir(run_id) / "slurm.log").exists()
    _cleaned_up(sl, run_id)
    assert _containers(sl, run_id) == []
    assert _job(sl, run_id)["state"] in ("COMPLETING", "COMPLETED")
    assert not (sl.home / "queue" / run_id).exists()
    resources = sl("resources", "--json").json()
    assert resources["executor"] == "slurm" and resources["slurm_partition"] == "main"
    assert "Executor: Slurm (partition main)" in sl("resources").out


def test_gpu_runs_get_gres_wait_for_resources_and_start_when_one_ends(
    sl: Orbit, tmp_path: Path
) -> None:
    stand_in(sl, tmp_path, 2)
    show = ("sh", "-c", "echo gpus=$CUDA_VISIBLE_DEVICES host=$ORBIT_GPU_HOST_INDICES; sleep 4")
    first = sl.submit(*SMALL, "--gpus", "1", "--", *show)
    second = sl.submit(*SMALL, "--gpus", "1", "--", *show)
    for run_id in (first, second):
        sl.wait_for(run_id, lambda s: s["state"] == "running", timeout=30)
    third = sl.submit(*SMALL, "--gpus", "1", "--", "sh", "-c", "echo third=$CUDA_VISIBLE_DEVICES")
    waiting = _ticking_until(sl, third, lambda s: "Resources" in (s.get("reason") or ""))
    assert waiting["state"] == "queued"
    assert waiting["reason"] == "waiting in Slurm (partition main): Resources"
    listing = sl("ps").out
    assert "Resources" in listing and "executor: Slurm (partition main)" in listing
    indices = set()
    for run_id in (first, second):
        status = _finished(sl, run_id)
        assert status["state"] == "succeeded"
        (lease_gpu,) = status["lease"]["gpus"]
        assert status["slurm"]["node"] == slurm_setup.nodes()[0]  # the node with the GRES
        assert lease_gpu["uuid"] == STAND_IN_UUID.format(lease_gpu["index"])
        log = (sl.run_dir(run_id) / "log.txt").read_text()
        assert f"gpus={lease_gpu['uuid']} host={lease_gpu['index']}" in log
        indices.add(lease_gpu["index"])
    assert indices == {0, 1}
    status = _finished(sl, third)
    assert status["state"] == "succeeded"
    assert (
        f"third={status['lease']['gpus'][0]['uuid']}" in (sl.run_dir(third) / "log.txt").read_text()
    )


def test_cancel_while_pending_and_while_running(sl: Orbit, tmp_path: Path) -> None:
    stand_in(sl, tmp_path, 2)
    holder = sl.submit(*SMALL, "--gpus", "2", "--", "sleep", "300")
    sl.wait_for(holder, lambda s: s["state"] == "running", timeout=30)
    pending = sl.submit(*SMALL, "--gpus", "1", "--", "echo", "never")
    _ticking_until(sl, pending, lambda s: "Resources" in (s.get("reason") or ""))
    assert sl("cancel", pending).code == 0
    assert sl.status(pending)["state"] == "cancelled"
    assert _job(sl, pending)["state"] == "CANCELLED"
    assert sl("cancel", holder).code == 0
    status = sl.wait_for(holder, lambda s: s["state"] in FINISHED, timeout=30)
    assert status["state"] == "cancelled"
    _cleaned_up(sl, holder)
    assert _containers(sl, holder) == []
    assert (sl.run_dir(holder) / "log.txt").read_text() == ""
    deadline = time.monotonic() + 20
    while _job(sl, holder)["state"] not in slurm.ENDED:
        assert time.monotonic() < deadline, _job(sl, holder)
        time.sleep(0.2)
    assert [e["event"] for e in sl.events(pending)][-1] == "cancelled"


def test_sbatch_refusing_the_request_fails_the_run_with_slurms_message(sl: Orbit) -> None:
    res = sl("run", "--json", "--no-project", "--cpus", "1", "--mem", "20", "--", "true")
    assert res.code == 0, res.err
    run_id = str(res.json()["id"])
    status = sl.status(run_id)
    assert status["state"] == "failed"
    assert status["reason"] == (
        "Slurm refused the job: Requested node configuration is not available"
    )
    assert "slurm" not in status
    assert not (sl.home / "queue" / run_id).exists()
    assert sl("scheduler", "tick").code == 0  # never retried
    # Slurm keeps a record of the job it refused for a while; there is only that one.
    jobs = _squeue(sl, "--name", slurm.job_name(Home(sl.home), run_id))
    assert [j["state"] for j in jobs] in ([], ["FAILED"])


def test_jobs_scancelled_behind_orbits_back(sl: Orbit, tmp_path: Path) -> None:
    stand_in(sl, tmp_path, 2)
    running = sl.submit(*SMALL, "--gpus", "2", "--", "sleep", "300")
    sl.wait_for(running, lambda s: s["state"] == "running", timeout=30)
    pending = sl.submit(*SMALL, "--gpus", "1", "--", "echo", "never")
    job = sl.status(pending)["slurm"]["job_id"]
    subprocess.run(["scancel", job], env=_env(sl), check=True)
    status = _ticking_until(sl, pending, lambda s: s["state"] != "queued")
    assert status["state"] == "failed"
    assert status["reason"] == f"Slurm job {job} ended (CANCELLED) before it started the run"
    # The running one: Slurm's SIGTERM reaches its shepherd, which stops the container.
    subprocess.run(["scancel", sl.status(running)["slurm"]["job_id"]], env=_env(sl), check=True)
    status = sl.wait_for(running, lambda s: s["state"] in FINISHED, timeout=30)
    assert status["state"] == "cancelled"
    _cleaned_up(sl, running)
    assert _containers(sl, running) == []
    assert {"event": "cancel-requested", "actor": "slurm"}.items() <= sl.events(running)[-2].items()


def test_a_job_a_killed_tick_submitted_is_adopted_not_submitted_again(sl: Orbit) -> None:
    home = Home(sl.home, sl.environ)
    # The scheduler lock held: `orbit run` writes the run, and its tick leaves it to the holder.
    with locked(home.locks_dir / "scheduler.lock"):
        run_id = sl.submit(*SMALL, "--", "echo", "once")
        run = RunStore(home).load(run_id)
        assert "slurm" not in run.status
        # What a tick killed right after sbatch leaves: a job, and no record of it.
        job_id = slurm.submit(home, run)
    status = _finished(sl, run_id)
    assert status["state"] == "succeeded"
    assert status["slurm"]["job_id"] == job_id
    assert "slurm-adopted" in [e["event"] for e in sl.events(run_id)]
    assert "slurm-submitted" not in [e["event"] for e in sl.events(run_id)]
    assert [j["id"] for j in _squeue(sl, "--name", slurm.job_name(home, run_id))] == [job_id]


def test_sbatch_options_and_settings(orbit: Orbit) -> None:
    home = Home(orbit.home)
    assert orbit("config", "set", "executor", "pbs").code == 2
    assert orbit("config", "set", "slurm_extra_args", "--qos=x").code == 2
    for key, value in (
        ("executor", "slurm"),
        ("slurm_partition", "gpu"),
        ("slurm_account", "lab"),
        ("slurm_extra_args", "[--qos=short, --time=60]"),
    ):
        assert orbit("config", "set", key, value).code == 0
    shown = orbit("config", "--json").json()
    assert shown["executor"] == "slurm" and shown["slurm_extra_args"] == [
        "--qos=short",
        "--time=60",
    ]
    spec = {"id": "7", "resources": {"cpus": 1.5, "mem_gb": 0.3, "gpus": 2}}
    argv = slurm.sbatch_argv(Home(orbit.home), Run("7", orbit.home / "runs" / "7", spec, {}))
    assert argv[:3] == ["sbatch", "--parsable", f"--job-name=orbit-{home.tag}-7"]
    assert "--cpus-per-task=2" in argv and "--mem=308" in argv and "--gres=gpu:2" in argv
    assert argv[-4:] == ["--partition=gpu", "--account=lab", "--qos=short", "--time=60"]
    assert not any(a.startswith("--time=") for a in argv[:-1])  # no --timeout: no limit of ours
    timed = {**spec, "timeout_min": 2.5}
    argv = slurm.sbatch_argv(Home(orbit.home), Run("7", orbit.home / "runs" / "7", timed, {}))
    assert "--time=5" in argv  # the run's 2.5 min, rounded up, and 2 to stop and settle
    refused = orbit("run", "--no-project", "--gpus", "1", "--gpu-ids", "0", "--", "true")
    assert refused.code == 2 and "Slurm picks the GPUs" in refused.err


def test_a_slurm_node_reached_over_ssh(
    orbit: Orbit, slurm_cluster: dict[str, str], node_sshd: Any, busybox: str, tmp_path: Path
) -> None:
    """`orbit node add hpc slurm://…`: the login host's home hands the runs to Slurm; the
    primary mirrors them, with Slurm's reason while they wait."""
    import sys

    import yaml
    from docker_setup import REPO_ROOT

    hpc = tmp_path / "hpc"
    hpc.mkdir()
    (hpc / "config.yaml").write_text(yaml.safe_dump({"format": 1, "count_outside_use": False}))
    sshd = node_sshd({**slurm_cluster, "PYTHONPATH": str(REPO_ROOT), "ORBIT_NODE": "hpc"})
    orbit.environ.update(ORBIT_SSH=sshd.orbit_ssh_env(), ORBIT_NODE="here")
    url = sshd.url().replace("ssh://", "slurm://")
    res = orbit("node", "add", "hpc", url, "--home", str(hpc), "--partition",
                slurm_setup.PARTITION, "--orbit", f"{sys.executable} -m orbit")  # fmt: skip
    assert res.code == 0, res.err
    config = yaml.safe_load((hpc / "config.yaml").read_text())
    assert (config["executor"], config["slurm_partition"]) == ("slurm", slurm_setup.PARTITION)
    (row,) = orbit("node", "ls", "--json").json()["nodes"]
    assert row["url"] == url and row["executor"] == "slurm"

    # A run that names no node stays here: a Slurm node takes only the runs sent to it.
    here = orbit.submit(*SMALL, "--image", busybox, "--", "true")
    assert "node" not in _finished(orbit, here)
    # Three runs of 2 CPUs on two nodes of 2 CPUs: one waits, with Slurm's reason. Which one
    # is Slurm's choice: their mirrors send them at once, in no set order.
    hog = ("--node", "hpc", "--no-project", "--cpus", "2", "--mem", "0.25", "--image", busybox)
    ids = [orbit.submit(*hog, "--", "sh", "-c", f"echo run {i}; sleep 8") for i in range(3)]
    # (Slurm's reason once its scheduler has looked at the job: Resources or Priority.)
    deadline = time.monotonic() + 60
    pending: dict[str, Any] = {}
    while not pending:
        assert time.monotonic() < deadline, "no run was seen waiting with Slurm's reason"
        for run_id in ids:
            status = orbit.status(run_id)
            if "in Slurm (partition main): " in (status.get("reason") or ""):
                pending = status
        time.sleep(0.05)
    assert pending["state"] == "starting" and pending["node"] == "hpc"
    assert pending["reason"].startswith("on node hpc: waiting in Slurm (partition main): ")
    for i, run_id in enumerate(ids):
        status = orbit.wait_for(run_id, lambda s: s["state"] in FINISHED, timeout=90)
        assert status["state"] == "succeeded", status
        there = yaml.safe_load((hpc / "runs" / status["remote"]["id"] / "status.yaml").read_text())
        assert there["slurm"]["job_id"].isdigit() and there["slurm"]["node"] in slurm_setup.nodes()
        assert (orbit.run_dir(run_id) / "log.txt").read_text() == f"run {i}\n"
        assert status["remote"]["lease"]["cpus"] == 2.0

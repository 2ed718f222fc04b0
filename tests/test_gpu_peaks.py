"""Per-run GPU peaks: the memory and utilisation of a run's own processes on its leased GPUs.

The GPUs are the documented YAML stand-in for NVML (ORBIT_FAKE_GPUS), edited while a real
container runs: the stand-in lists the container's main process (its host pid, from `docker
inspect`), which Orbit maps to the run's container through the pid's cgroup, as with NVML.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import STAND_IN_UUID, Orbit, gpu, stand_in, write_gpus
from test_web_runs import TOKEN, Client

from orbit.execute.watching import gpu_peak_text as _gpu_peak
from orbit.sched.gpus import FakeGpus, GpuPeaks
from orbit.store.home import Home
from orbit.web.app import make_app

GIB = 2**30
SMALL = ("--no-project", "--cpus", "0.01", "--mem", "0.05")
# A sample is taken every 0.5 s (shepherd.SAMPLE_SECONDS): a stage held this long is seen by
# several, even on a busy machine.
HOLD_S = 2.5
THEIRS = "f" * 64  # a process of some other container


def lease(*indices: int) -> list[dict[str, Any]]:
    return [{"index": i, "uuid": STAND_IN_UUID.format(i)} for i in indices]


def proc(pid: int, gb: float, **extra: Any) -> dict[str, Any]:
    return {"pid": pid, "memory_gb": gb, **extra}


# --- the sampler, on the stand-in ----------------------------------------------------------
def test_peaks_count_only_the_runs_processes_on_its_leased_gpus(tmp_path: Path) -> None:
    mine = "a" * 64
    path = tmp_path / "gpus.yaml"
    peaks = GpuPeaks(FakeGpus(path), lease(0, 2), mine)
    stages = [
        # GPU 0: the run's 3 GiB next to 10 GiB of another container; the device at 70 %.
        [
            gpu(0, utilization=70, processes=[proc(1, 3, container=mine), proc(2, 10)]),
            gpu(1, utilization=100, processes=[proc(3, 40, container=mine)]),  # not leased
            gpu(2, utilization=5),
        ],
        [
            gpu(0, utilization=40, processes=[proc(1, 5, container=mine)]),
            gpu(2, utilization=0, processes=[proc(4, 1, container=mine)]),
        ],
        # Per-process figures win over the device's: the run's process has 20 % of it.
        [
            gpu(
                0,
                utilization=99,
                processes=[
                    proc(1, 1, container=mine, utilization=20),
                    proc(2, 10, container=THEIRS, utilization=79),
                ],
            ),
            gpu(2, utilization=0),
        ],
    ]
    for stage in stages:
        write_gpus(path, stage)
        peaks.sample()
    assert peaks.peaks() == {
        "gpus": [
            {"index": 0, "uuid": STAND_IN_UUID.format(0), "mem_bytes": 5 * GIB, "util_pct": 70},
            {"index": 2, "uuid": STAND_IN_UUID.format(2), "mem_bytes": 1 * GIB, "util_pct": 5},
        ],
        "gpu_mem_bytes": 6 * GIB,
    }


def test_per_process_utilisation_counts_only_the_runs_share(tmp_path: Path) -> None:
    mine = "a" * 64
    path = write_gpus(
        tmp_path / "gpus.yaml",
        [
            gpu(
                0,
                utilization=95,
                processes=[
                    proc(1, 2, container=mine, utilization=30),
                    proc(5, 2, container=mine, utilization=25),
                    proc(2, 2, container=THEIRS, utilization=40),
                ],
            )
        ],
    )
    peaks = GpuPeaks(FakeGpus(path), lease(0), mine)
    peaks.sample()
    assert peaks.peaks()["gpus"][0]["util_pct"] == 55
    assert peaks.peaks()["gpu_mem_bytes"] == 4 * GIB


def test_an_unreadable_stand_in_is_skipped_and_never_read_stays_unknown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text("gpus: [oops\n")
    peaks = GpuPeaks(FakeGpus(path), lease(0), "a" * 64)
    peaks.sample()
    peaks.sample()
    assert peaks.peaks() == {
        "gpus": [
            {"index": 0, "uuid": STAND_IN_UUID.format(0), "mem_bytes": None, "util_pct": None}
        ],
        "gpu_mem_bytes": None,
    }
    assert len([r for r in caplog.records if "GPU sample failed" in r.message]) == 1
    write_gpus(path, [gpu(0)])  # no utilization given, no processes: 0 bytes, still unknown %
    peaks.sample()
    assert peaks.peaks()["gpus"][0] == {
        "index": 0,
        "uuid": STAND_IN_UUID.format(0),
        "mem_bytes": 0,
        "util_pct": None,
    }
    assert peaks.peaks()["gpu_mem_bytes"] == 0


def test_show_phrases_a_gpu_peak() -> None:
    g = {"index": 1, "uuid": "u", "mem_bytes": 5 * GIB, "util_pct": 70}
    assert _gpu_peak(g) == "GPU 1: 5.0 GiB memory, 70% utilization"
    g = {"index": 1, "uuid": "u", "mem_bytes": 0, "util_pct": None}
    assert _gpu_peak(g) == "GPU 1: 0 B memory, utilization not measured"


# --- a real run -----------------------------------------------------------------------------
def test_a_runs_gpu_peaks_reach_status_show_json_and_web(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    path = stand_in(orbit, tmp_path, 2)
    run_id = orbit.submit(
        "--image",
        busybox,
        *SMALL,
        "--gpus",
        "1",
        "--gpu-ids",
        "0",
        "--",
        "sh",
        "-c",
        "while [ ! -e /tmp/stop ]; do sleep 0.1; done",
    )
    status = orbit.wait_for(run_id, lambda s: s["state"] == "running")
    name = status["container"]
    pid = int(
        subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Pid}}", name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert pid > 0
    here = os.getpid()  # a host process outside any of this run's containers
    stages = [
        [
            gpu(0, utilization=70, processes=[proc(pid, 3), proc(here, 10)]),
            gpu(1, utilization=100, processes=[proc(pid, 40)]),  # not leased to the run
        ],
        [gpu(0, utilization=40, processes=[proc(pid, 5), proc(here, 10)]), gpu(1)],
        [
            gpu(
                0,
                utilization=99,
                processes=[proc(pid, 1, utilization=20), proc(here, 10, utilization=79)],
            ),
            gpu(1),
        ],
    ]
    for stage in stages:
        write_gpus(path, stage)
        time.sleep(HOLD_S)
    write_gpus(path, [gpu(0), gpu(1)])
    subprocess.run(["docker", "exec", name, "touch", "/tmp/stop"], check=True, timeout=30)
    status = orbit.wait_for(run_id, lambda s: s["state"] == "succeeded")

    expected = [{"index": 0, "uuid": STAND_IN_UUID.format(0), "mem_bytes": 5 * GIB, "util_pct": 70}]
    assert status["peaks"]["gpus"] == expected
    assert status["peaks"]["gpu_mem_bytes"] == 5 * GIB
    assert status["peaks"]["mem_bytes"] > 0  # the cgroup's peaks are still there

    res = orbit("show", run_id)
    assert res.code == 0, res.err
    assert "  gpu peaks  GPU 0: 5.0 GiB memory, 70% utilization\n" in res.out
    res = orbit("show", "--json", run_id)
    assert res.code == 0, res.err
    assert res.json()["peaks"]["gpus"] == expected
    assert res.json()["peaks"]["gpu_mem_bytes"] == 5 * GIB

    home = Home(orbit.home, orbit.environ)
    client = Client(make_app(home, token=TOKEN))
    client.login(home)
    page = client.get(f"/runs/{run_id}")
    assert page.status == 200, page.text
    assert "<tr><th>GPU 0</th><td>5.0 GiB memory, 70% utilization</td></tr>" in page.text

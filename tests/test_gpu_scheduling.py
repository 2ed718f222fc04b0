"""GPU leases, use outside Orbit and crash repair, against a real Docker engine.

The GPUs are the documented YAML stand-in for NVML (ORBIT_FAKE_GPUS, orbit/sched/gpus.py),
written into tmp_path and edited while Orbit runs; everything else is real: `python orbit.py`
processes, the tick, the shepherds, the containers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import STAND_IN_UUID, Orbit, gpu, stand_in, write_gpus

from orbit.errors import ExitCode

FINAL_EVENTS = ("succeeded", "failed", "cancelled", "lost")
SMALL = ("--no-project", "--cpus", "0.01", "--mem", "0.01")
LEASE_SLACK = 0.02  # seconds; see test_fifty_simultaneous_runs_never_share_a_gpu


# --- helpers ----------------------------------------------------------------------------------
ALICE = {"pid": 4242, "memory_gb": 20.1, "name": "python", "user": "alice"}
ALICE_HOLDS_0 = "GPU 0 in use outside Orbit by pid 4242 (python, user alice, 20.1 GiB)"


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def states(orbit: Orbit, ids: list[str]) -> dict[str, str]:
    out = {}
    for run_id in ids:
        try:
            out[run_id] = str(orbit.status(run_id)["state"])
        except Exception:  # being replaced this instant: read it again next time
            out[run_id] = "?"
    return out


def drain(orbit: Orbit, ids: list[str], timeout: float, stall_s: float = 3.0) -> int:
    """Wait, without ticking, until every run has finished; the number of rescue ticks needed.

    The queue is meant to drain through the ticks that submits and shepherds run inline. When
    it stalls (queued runs, none leased, nothing changed for `stall_s`), this ticks as a
    supervisor would and counts it, so a test can report that the inline ticks were not enough.
    """
    deadline = time.monotonic() + timeout
    last: dict[str, str] = {}
    changed = time.monotonic()
    rescues = 0
    while True:
        now = states(orbit, ids)
        if all(s in FINAL_EVENTS for s in now.values()):
            return rescues
        assert time.monotonic() < deadline, f"runs not finished after {timeout} s: {now}"
        if now != last:
            last, changed = now, time.monotonic()
        leased = any(s in ("starting", "running", "?") for s in now.values())
        if not leased and time.monotonic() - changed > stall_s:
            rescues += 1
            res = orbit("scheduler", "tick")
            assert res.code == 0, res.err
            changed = time.monotonic()
        time.sleep(0.05)


def lease_intervals(orbit: Orbit, ids: list[str]) -> list[dict[str, Any]]:
    """Each run's lease from its history: the `admitted` event (which carries lease.gpus) to its
    final event, plus the container's own [started_at, finished_at] (Docker's clock)."""
    out = []
    for run_id in ids:
        events = orbit.events(run_id)
        admitted = [e for e in events if e["event"] == "admitted"]
        final = [e for e in events if e["event"] in FINAL_EVENTS]
        assert len(admitted) == 1 and len(final) == 1, events
        status = orbit.status(run_id)
        out.append(
            {
                "id": run_id,
                "gpus": [g["uuid"] for g in admitted[0]["lease"]["gpus"]],
                "start": stamp(admitted[0]["time"]),
                "end": stamp(final[0]["time"]),
                "c_start": stamp(status["started_at"]),
                "c_end": stamp(status["finished_at"]),
            }
        )
    return out


def removed_from_outside(orbit: Orbit, run_id: str) -> bool:
    """The run's container was removed by someone else while it ran (exit 137, not for memory,
    and Docker said so to its shepherd)."""
    status = orbit.status(run_id)
    log = (orbit.run_dir(run_id) / "shepherd.log").read_text(errors="replace")
    said = "No such container" in log or "marked for removal" in log
    return status.get("exit_code") == 137 and not status.get("oom_killed") and said


def max_overlap(
    intervals: list[tuple[float, float, str]], slack: float = 0.0
) -> tuple[int, list[str]]:
    """The largest number of intervals open at one instant, and which ones (an interval that
    ends at the instant another starts does not overlap it; nor does one that ends less than
    `slack` seconds after it)."""
    points = []
    for start, end, label in intervals:
        points.append((start, 1, label))
        points.append((end - slack, 0, label))  # ends sort before starts at the same instant
    open_now: set[str] = set()
    best: tuple[int, list[str]] = (0, [])
    for _, kind, label in sorted(points):
        if kind:
            open_now.add(label)
            if len(open_now) > best[0]:
                best = (len(open_now), sorted(open_now))
        else:
            open_now.discard(label)
    return best


# --- 1. many simultaneous submits, few GPUs -------------------------------------------------
def test_fifty_simultaneous_runs_never_share_a_gpu(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    n_runs, n_gpus = 50, 4
    stand_in(orbit, tmp_path, n_gpus)
    orbit.configure(count_outside_use=False)
    started = time.monotonic()
    procs = [
        orbit.proc(
            "run",
            "--json",
            "--image",
            busybox,
            *SMALL,
            "--gpus",
            "1",
            "--",
            "sh",
            "-c",
            "sleep 0.3",
        )
        for _ in range(n_runs)
    ]
    ids = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        ids.append(str(json.loads(out)["id"]))
    assert sorted(ids, key=int) == [str(i) for i in range(1, n_runs + 1)]
    rescues = drain(orbit, ids, timeout=150)
    res = orbit("wait", "--json", *ids)
    failed = [r["id"] for r in res.json()["runs"] if r["state"] != "succeeded"]
    # On an engine shared with other work, something else may force-remove a container (the
    # newcomer audit saw it once): such a run is not what this test is about, so it may fail,
    # but only with Docker's own words for it in its shepherd.log, and its lease is still
    # checked below. Any other failure fails the test.
    removed = [i for i in failed if removed_from_outside(orbit, i)]
    assert failed == removed and len(removed) <= 2, res.out + res.err
    elapsed = time.monotonic() - started

    runs = lease_intervals(orbit, ids)
    uuids = {STAND_IN_UUID.format(i) for i in range(n_gpus)}
    for run in runs:
        assert len(run["gpus"]) == 1 and run["gpus"][0] in uuids, run
        assert run["start"] <= run["c_start"] <= run["c_end"] <= run["end"], run
    # No GPU leased twice at any instant: per GPU, at most one lease open at a time.
    # An event's time is taken just after its status.yaml was replaced, so a shepherd that is
    # preempted between the two stamps its release a little late, and the next admission on
    # that GPU (which had already read the release) can carry an earlier time: LEASE_SLACK
    # forgives that much. A real double lease overlaps by a whole container run (≥ 0.3 s
    # here). The containers' own times need no slack: Docker stamps FinishedAt before the
    # shepherd releases the lease, and StartedAt after the next run's admission.
    for uuid in sorted(uuids):
        on_it = [(r["start"], r["end"], r["id"]) for r in runs if r["gpus"][0] == uuid]
        n, which = max_overlap(on_it, slack=LEASE_SLACK)
        assert n <= 1, f"{uuid} leased to runs {which} at once"
        containers = [(r["c_start"], r["c_end"], r["id"]) for r in runs if r["gpus"][0] == uuid]
        n, which = max_overlap(containers)
        assert n <= 1, f"{uuid}: the containers of runs {which} ran at once"
    n, which = max_overlap([(r["start"], r["end"], r["id"]) for r in runs], slack=LEASE_SLACK)
    assert n <= n_gpus, f"{n} runs held leases at once: {which}"
    n, which = max_overlap([(r["c_start"], r["c_end"], r["id"]) for r in runs])
    assert n <= n_gpus, f"{n} containers ran at once: {which}"
    assert max_overlap([(r["start"], r["end"], r["id"]) for r in runs])[0] == n_gpus  # full
    # Every GPU was used, and every lease was given back.
    assert {r["gpus"][0] for r in runs} == uuids
    assert not list((orbit.home / "queue").iterdir())
    gaps = sorted(
        b["start"] - a["end"]
        for uuid in uuids
        for a, b in zip(
            sorted((r for r in runs if r["gpus"][0] == uuid), key=lambda r: r["start"]),
            sorted((r for r in runs if r["gpus"][0] == uuid), key=lambda r: r["start"])[1:],
            strict=False,
        )
    )
    print(
        f"\n50 runs on 4 GPUs: {elapsed:.1f} s, rescue ticks {rescues}, "
        f"smallest gap between leases of one GPU {gaps[0] * 1000:.1f} ms"
    )
    if rescues:
        warnings.warn(
            f"the queue stalled {rescues} time(s): the inline ticks of submits and shepherds "
            "did not drain it without a supervisor tick",
            stacklevel=1,
        )


# --- 2. what the container sees -------------------------------------------------------------
def env_lines(orbit: Orbit, run_id: str) -> dict[str, str]:
    text = (orbit.run_dir(run_id) / "log.txt").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_the_container_sees_only_its_leased_gpu(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    uuids = ["GPU-0b6c3a2e-aaaa-4bbb-8ccc-000000000000", "GPU-1f2e3d4c-aaaa-4bbb-8ccc-111111111111"]
    write_gpus(tmp_path / "gpus.yaml", [gpu(i, uuid=u) for i, u in enumerate(uuids)])
    orbit.environ["ORBIT_FAKE_GPUS"] = str(tmp_path / "gpus.yaml")
    orbit.configure(count_outside_use=False)
    holder = orbit.submit("--image", busybox, *SMALL, "--gpus", "1", "--", "sleep", "60")
    status = orbit.wait_for(holder, lambda s: s["state"] == "running")
    assert status["lease"]["gpus"] == [{"index": 0, "uuid": uuids[0]}]
    # The stand-in passes no device request to Docker (there is no GPU to pass).
    inspect = subprocess.run(
        [
            "docker",
            "inspect",
            "--format",
            "{{json .HostConfig.DeviceRequests}}",
            status["container"],
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(inspect.stdout) in (None, [])

    res = orbit("run", "--image", busybox, *SMALL, "--gpus", "1", "-w", "--json", "--", "env")
    assert res.code == 0, res.err
    second = str(res.json()["id"])
    assert orbit.status(second)["lease"]["gpus"] == [{"index": 1, "uuid": uuids[1]}]
    env = env_lines(orbit, second)
    assert env["NVIDIA_VISIBLE_DEVICES"] == uuids[1]
    assert env["CUDA_VISIBLE_DEVICES"] == uuids[1]
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["ORBIT_GPU_HOST_INDICES"] == "1"
    assert uuids[0] not in (orbit.run_dir(second) / "log.txt").read_text()

    res = orbit("run", "--image", busybox, *SMALL, "-w", "--json", "--", "env")
    assert res.code == 0, res.err
    env = env_lines(orbit, str(res.json()["id"]))
    assert env["NVIDIA_VISIBLE_DEVICES"] == "none"  # images like nvidia/cuda default to all
    assert "CUDA_VISIBLE_DEVICES" not in env and "ORBIT_GPU_HOST_INDICES" not in env
    assert orbit("cancel", holder).code == 0


def test_device_requests_name_the_leased_gpus_by_uuid(tmp_path: Path) -> None:
    from orbit.execute.docker_ops import gpu_access, gpu_mode
    from orbit.store.home import Home

    leased = [
        {"index": 2, "uuid": "GPU-aaaaaaaa-1111-4222-8333-444444444444"},
        {"index": 0, "uuid": "GPU-bbbbbbbb-1111-4222-8333-444444444444"},
    ]
    uuids = [g["uuid"] for g in leased]
    expected_env = {
        "NVIDIA_VISIBLE_DEVICES": ",".join(uuids),
        "CUDA_VISIBLE_DEVICES": ",".join(uuids),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "ORBIT_GPU_HOST_INDICES": "2,0",
    }
    # The NVIDIA runtime: `--gpus device=UUID,UUID`.
    requests, env = gpu_access("nvidia", leased)
    assert len(requests) == 1
    assert dict(requests[0]) == {
        "Driver": "nvidia",
        "Count": 0,  # device_ids, not a count (Count -1 would be every GPU)
        "DeviceIDs": uuids,
        "Capabilities": [["gpu"]],
        "Options": {},
    }
    assert env == expected_env
    # CDI: the names `nvidia-ctk cdi generate` defines; dockerd's CDI driver ignores
    # capabilities (moby/moby daemon/devices.go, handleDevice), so none are needed.
    requests, env = gpu_access("cdi", leased)
    assert len(requests) == 1
    assert requests[0]["Driver"] == "cdi"
    assert requests[0]["DeviceIDs"] == [f"nvidia.com/gpu={u}" for u in uuids]
    assert requests[0]["Count"] == 0
    assert env == expected_env
    # The stand-in: the same environment, no device request.
    assert gpu_access("fake", leased) == ([], expected_env)
    # No GPU leased: no request, and the NVIDIA runtime is told to show none.
    for mode in ("nvidia", "cdi", "fake"):
        assert gpu_access(mode, []) == ([], {"NVIDIA_VISIBLE_DEVICES": "none"})
    fake = tmp_path / "gpus.yaml"
    assert gpu_mode(Home(tmp_path / "home", {"ORBIT_FAKE_GPUS": str(fake)})) == "fake"
    assert gpu_mode(Home(tmp_path / "home", {})) in ("nvidia", "cdi")


def test_a_shepherd_started_as_a_fresh_process_keeps_the_stand_in(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    # Every shepherd is a fresh `python -S -m orbit.execute.shepherd_main` process;
    # ORBIT_FAKE_GPUS is in this Orbit's environment only, not in the test process's. Without
    # it the shepherd would ask Docker for NVIDIA devices this machine does not have.
    path = stand_in(orbit, tmp_path, 1, processes=[ALICE])
    assert "ORBIT_FAKE_GPUS" not in os.environ
    orbit.configure(count_outside_use=False)
    # Ticked as the timer would (so no ticker starts): the exec-mode tick below admits the run.
    assert orbit("scheduler", "tick", "--clock", "3600").code == 0
    run_id = orbit.submit("--image", busybox, *SMALL, "--gpus", "1", "--", "env")
    assert orbit.status(run_id)["state"] == "queued"
    write_gpus(path, [gpu(0)])
    res = orbit("scheduler", "tick", "--json")
    assert res.code == 0 and res.json()["admitted"] == [run_id], res.out + res.err
    res = orbit("wait", run_id)
    assert res.code == 0, res.out + res.err + str(orbit.status(run_id))
    assert env_lines(orbit, run_id)["CUDA_VISIBLE_DEVICES"] == STAND_IN_UUID.format(0)


# --- 3. a process outside Orbit on a GPU -----------------------------------------------------
def test_gpu_used_outside_orbit_holds_the_queue_until_it_is_free(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    path = stand_in(orbit, tmp_path, 1, processes=[ALICE])
    orbit.configure(count_outside_use=False)
    run_id = orbit.submit("--image", busybox, *SMALL, "--gpus", "1", "--", "true")
    status = orbit.status(run_id)
    assert status["state"] == "queued"
    assert status["reason"] == f"waiting for 1 GPU: {ALICE_HOLDS_0}"
    res = orbit("resources", "--json")
    assert res.code == 0, res.err
    data = res.json()
    assert data["gpu_source"] == "fake"
    (shown,) = data["gpus"]
    assert shown["holder"] == ALICE_HOLDS_0.removeprefix("GPU 0 ")
    assert shown["memory_used_gb"] == 20.1
    assert [(p["pid"], p["name"], p["user"], p["memory_gb"]) for p in shown["processes"]] == [
        (4242, "python", "alice", 20.1)
    ]
    assert data["queue"] == [{"id": run_id, "name": None, "reason": status["reason"]}]
    assert data["leases"] == []

    # A supervisor ticking every second; the queue must move within one period of the edit.
    assert orbit("scheduler", "run", "--help").code == 0
    last_tick = orbit.home / "runtime" / "last_tick"
    before = last_tick.read_text() if last_tick.exists() else ""
    supervisor = orbit.proc("scheduler", "run", "--interval", "1")
    try:
        deadline = time.monotonic() + 30
        while not last_tick.exists() or last_tick.read_text() == before:
            assert supervisor.poll() is None, supervisor.communicate()
            assert time.monotonic() < deadline, "`orbit scheduler run` never ticked"
            time.sleep(0.05)
        assert orbit.status(run_id)["state"] == "queued"  # ticking alone changes nothing
        edited = time.time()
        write_gpus(path, [gpu(0)])
        status = orbit.wait_for(run_id, lambda s: s["state"] != "queued", timeout=10)
        admitted = stamp(status["admitted_at"])
        assert admitted - edited < 3.0, f"admitted {admitted - edited:.2f} s after the edit"
        print(f"\nadmitted {admitted - edited:.2f} s after the GPU was freed (interval 1 s)")
        assert status["lease"]["gpus"] == [{"index": 0, "uuid": STAND_IN_UUID.format(0)}]
        assert orbit.wait_for(run_id, lambda s: s["state"] == "succeeded")["exit_code"] == 0
        (event,) = [e for e in orbit.events(run_id) if e["event"] == "admitted"]
        assert event["actor"].startswith("scheduler:")
    finally:
        supervisor.send_signal(signal.SIGTERM)
        _, err = supervisor.communicate(timeout=30)
    assert supervisor.returncode == 0, err
    assert "orbit scheduler: stopped" in err


# --- 4. ORBIT_GPUS and pinned GPUs ------------------------------------------------------------
def test_allowed_and_pinned_gpus_are_checked_at_submit(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    stand_in(orbit, tmp_path, 2)
    orbit.environ["ORBIT_GPUS"] = "1"
    orbit.configure(count_outside_use=False)
    cases = [
        (["--gpu-ids", "0"], "can never start: GPU 0 is not allowed (ORBIT_GPUS)"),
        (["--gpus", "1", "--gpu-ids", "7"], "can never start: pinned GPU 7 does not exist"),
        (["--gpus", "3"], "can never start: it needs 3 GPUs but this machine has 1 usable GPU"),
        # Two GPUs exist, but only one is allowed.
        (["--gpus", "2"], "can never start: it needs 2 GPUs but this machine has 1 usable GPU"),
    ]
    for args, message in cases:
        res = orbit("run", "--image", busybox, *SMALL, *args, "--", "true")
        assert res.code == ExitCode.USAGE, (args, res.err)
        assert message in res.err, (args, res.err)
        assert "can never start" in res.err, (args, res.err)
    assert not (orbit.home / "runs").exists() or not any((orbit.home / "runs").iterdir())

    res = orbit("run", "--image", busybox, *SMALL, "--gpus", "1", "-w", "--json", "--", "env")
    assert res.code == 0, res.err
    run_id = str(res.json()["id"])
    assert orbit.status(run_id)["lease"]["gpus"] == [{"index": 1, "uuid": STAND_IN_UUID.format(1)}]
    assert env_lines(orbit, run_id)["CUDA_VISIBLE_DEVICES"] == STAND_IN_UUID.format(1)
    shown = orbit("resources", "--json").json()["gpus"]
    assert [(g["index"], g["allowed"], g["holder"]) for g in shown] == [
        (0, False, None),
        (1, True, None),
    ]


# --- 5. a tick killed in the middle of admitting ----------------------------------------------
def first_admission(orbit: Orbit, ids: list[str], trigger: str) -> bool:
    """True once the tick has admitted a run: its status says so ("status"), or also its
    history ("event", written just after the status), or its active/ marker exists ("marker",
    made after both)."""
    for run_id in ids:
        if trigger == "marker":
            if (orbit.home / "active" / run_id).exists():
                return True
        elif trigger == "status":
            try:
                if "state: starting" in (orbit.run_dir(run_id) / "status.yaml").read_text():
                    return True
            except OSError:
                pass
        else:
            try:
                if '"event":"admitted"' in (orbit.run_dir(run_id) / "events.jsonl").read_text():
                    return True
            except OSError:
                pass
    return False


def crash_state(orbit: Orbit, ids: list[str]) -> list[str]:
    """What each run looks like (state, markers, events, shepherd), for the report."""
    from orbit.store.locks import is_locked

    out = []
    for run_id in ids:
        status = orbit.status(run_id)
        marks = [d for d in ("queue", "active") if (orbit.home / d / run_id).exists()]
        events = [e["event"] for e in orbit.events(run_id)]
        shepherd = is_locked(orbit.run_dir(run_id) / "shepherd.lock")
        out.append(f"run {run_id}: {status['state']} {marks} {events} shepherd={shepherd}")
    return out


def check_consistent(orbit: Orbit, ids: list[str], cpus: float, gpus: int) -> None:
    """Every run is queued (queue/ marker only) or leased (active/ marker only) or finished
    (no queue/ marker), and the leases together fit the machine."""
    leased_cpus = 0.0
    leased_gpus: list[str] = []
    for run_id in ids:
        status = orbit.status(run_id)
        state = status["state"]
        queued = (orbit.home / "queue" / run_id).exists()
        active = (orbit.home / "active" / run_id).exists()
        if state == "queued":
            assert queued and not active, (run_id, state, queued, active)
            assert not status.get("lease"), status
        elif state in ("starting", "running"):
            assert active and not queued, (run_id, state, queued, active)
            lease = status["lease"]
            leased_cpus += lease["cpus"]
            leased_gpus += [g["uuid"] for g in lease["gpus"]]
        else:
            assert not queued, (run_id, state)
    assert leased_cpus <= cpus + 1e-9
    assert len(leased_gpus) == len(set(leased_gpus)) <= gpus, leased_gpus


@pytest.mark.parametrize("trigger", ["status", "event", "marker"])
def test_tick_killed_while_admitting_leaves_nothing_half_done(
    orbit: Orbit, busybox: str, tmp_path: Path, trigger: str
) -> None:
    # Deterministic in its verdict, not in where the kill lands. The three runs are queued
    # behind GPUs that are busy outside Orbit, so nothing can admit them until the test frees
    # the GPUs; then one `scheduler tick` process admits all three, and the test SIGKILLs it
    # the moment the first admission is visible on disk (its status.yaml, its `admitted`
    # event, or its active/ marker: the three steps of an admission, in that order). Polling
    # is not instantaneous, so the kill lands somewhere between that step and the end of the
    # tick: before or after the first run's event, markers and shepherd, or while admitting
    # the second or third run. Every one of those points must be repaired by the next tick to
    # the same verdict, which is what is asserted; the point actually hit is printed
    # (pytest -s). In practice the "status" trigger mostly lands before the markers moved
    # (a run `starting` with only its queue/ marker and no `admitted` event), the others
    # later, so together they cover the interesting points, but no single run is
    # guaranteed to hit a given one.
    cpus, n = 3.0, 3
    path = write_gpus(
        tmp_path / "gpus.yaml", [gpu(i, processes=[{**ALICE, "pid": 4242 + i}]) for i in range(n)]
    )
    orbit.environ["ORBIT_FAKE_GPUS"] = str(path)
    orbit.configure(count_outside_use=False, total_cpus=cpus)
    # Ticked as the timer would (so no ticker starts): the killed tick is the one that admits.
    assert orbit("scheduler", "tick", "--clock", "3600").code == 0
    ids = [
        orbit.submit(
            "--image",
            busybox,
            "--no-project",
            "--cpus",
            "1",
            "--mem",
            "0.1",
            "--gpus",
            "1",
            "--",
            "sleep",
            "1",
        )
        for _ in range(n)
    ]
    assert [orbit.status(i)["state"] for i in ids] == ["queued"] * n
    write_gpus(path, [gpu(i) for i in range(n)])

    tick = orbit.proc("scheduler", "tick")
    deadline = time.monotonic() + 60
    while not first_admission(orbit, ids, trigger):
        assert tick.poll() is None, f"the tick ended before it was killed: {tick.communicate()}"
        assert time.monotonic() < deadline, "the tick admitted nothing"
        time.sleep(0.0005)
    tick.send_signal(signal.SIGKILL)
    tick.communicate()
    print(f"\nkilled the tick ({trigger}):", *crash_state(orbit, ids), sep="\n  ")

    res = orbit("scheduler", "tick", "--json")
    assert res.code == 0, res.err
    check_consistent(orbit, ids, cpus, n)
    # Every leased run has (or gets, within the shepherd's lock timeout) a live shepherd.
    from orbit.store.locks import is_locked

    for run_id in ids:
        state = orbit.status(run_id)["state"]
        if state in ("starting", "running"):
            lock = orbit.run_dir(run_id) / "shepherd.lock"
            shepherd_deadline = time.monotonic() + 10
            while not is_locked(lock) and orbit.status(run_id)["state"] in ("starting", "running"):
                assert time.monotonic() < shepherd_deadline, f"run {run_id} has no shepherd"
                time.sleep(0.02)
    res = orbit("wait", "--json", *ids)
    assert res.code == 0, res.out + res.err
    for run_id in ids:
        events = [e["event"] for e in orbit.events(run_id)]
        assert events.count("admitted") <= 1 and events.count("started") == 1, events
        assert events[-1] == "succeeded", events
        check_consistent(orbit, ids, cpus, n)
    # Shepherds remove the containers, then the markers: no lease is left behind.
    marker_deadline = time.monotonic() + 30
    while any((orbit.home / "active").iterdir()):
        assert time.monotonic() < marker_deadline, list((orbit.home / "active").iterdir())
        time.sleep(0.05)
    assert not any((orbit.home / "queue").iterdir())
    data = orbit("resources", "--json").json()
    assert data["leases"] == [] and data["queue"] == []
    assert [g["holder"] for g in data["gpus"]] == [None] * n


# --- 6. CPUs busy outside Orbit ---------------------------------------------------------------
@pytest.mark.parametrize(
    "first_sample",
    ["tick", "resources"],
)
def test_cpus_busy_outside_orbit_hold_a_run_back(
    orbit: Orbit, busybox: str, first_sample: str
) -> None:
    # The first CPU sample comes from a tick (as a supervisor's would, before anything is
    # queued) or from `orbit resources`, which measures the same way.
    import psutil

    cores = psutil.cpu_count(logical=True) or 1
    orbit.configure(count_outside_use=True, total_cpus=float(cores))
    burn = [sys.executable, "-c", "while True: pass"]
    burners = [subprocess.Popen(burn) for _ in range(cores)]
    try:
        time.sleep(0.5)  # every burner spinning
        assert (
            orbit(*(["scheduler", "tick"] if first_sample == "tick" else ["resources"])).code == 0
        )
        time.sleep(1.0)
        # Measured over that second: `cores` busy cores outside Orbit, on a machine Orbit
        # may fill entirely; a run asking for one CPU cannot start.
        run_id = orbit.submit(
            "--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.25", "--", "true"
        )
        status = orbit.status(run_id)
        assert status["state"] == "queued", status
        assert "CPUs busy outside Orbit" in status["reason"], status["reason"]
        assert status["reason"].startswith(f"waiting for 1 CPU: 0 of {cores} leased, "), status
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()
    # Burners gone: the next measurement lets the run start, unless other work (a parallel
    # test run) keeps the machine busy: then the run rightly waits on. So the test measures the
    # machine itself over each tick's interval: the run held over intervals the machine had a
    # core free is the failure. While the machine stays busy (30 s), outside use is then
    # forgiven up to every core (outside_cpu_min): the run must start at the next tick, since
    # only that use held it.
    from orbit.sched.machine import busy_cpu_seconds

    def busy_since(last: tuple[float, float]) -> tuple[float, tuple[float, float]]:
        now = (busy_cpu_seconds(), time.monotonic())
        return (now[0] - last[0]) / max(1e-3, now[1] - last[1]), now

    mark = (busy_cpu_seconds(), time.monotonic())
    held_while_free = []
    busy_until = time.monotonic() + 30
    forgiven = False
    while True:
        time.sleep(1.5)  # Orbit measures over at least MIN_INTERVAL_S between ticks
        busy, mark = busy_since(mark)
        assert orbit("scheduler", "tick").code == 0
        status = orbit.status(run_id)
        if status["state"] != "queued":
            break
        assert "CPUs busy outside Orbit" in status["reason"], status["reason"]
        if busy < cores - 1:  # a core and more was idle: what Orbit ignores (0.5) and one CPU
            held_while_free.append(round(busy, 2))
        assert len(held_while_free) < 3, f"held while {held_while_free} of {cores} busy: {status}"
        assert not forgiven, f"outside use forgiven, still waiting: {status}"
        if time.monotonic() > busy_until:
            orbit.configure(outside_cpu_min=float(cores))
            forgiven = True
    assert orbit.wait_for(run_id, lambda s: s["state"] == "succeeded")["exit_code"] == 0

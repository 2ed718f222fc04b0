"""Admission decisions: a pure function of (queue, pool, now), tested with literal values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orbit.sched.plan import Admit, Demand, GpuSlot, Pool, Wait, never_fits, plan
from orbit.sched.resources import GIB, Amount

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RESERVE = 300.0


def req(run_id: str, cpus: float, mem_gb: float = 1, **kw: object) -> Demand:
    kw.setdefault("submitted_at", NOW - timedelta(seconds=10))
    return Demand(run_id, Amount(cpus, mem_gb), **kw)  # type: ignore[arg-type]


def pool(cpus: float = 8, mem: float = 64, leased: Amount | None = None, **kw: object) -> Pool:
    return Pool(totals=Amount(cpus, mem), leased=leased or Amount(0, 0), **kw)  # type: ignore[arg-type]


def gpu(index: int, mem_gb: float = 80, free_gb: float | None = None, **kw: object) -> GpuSlot:
    free = mem_gb if free_gb is None else free_gb
    return GpuSlot(index, f"GPU-{index}", int(mem_gb * GIB), int(free * GIB), **kw)  # type: ignore[arg-type]


def test_submission_order_then_reasons() -> None:
    decisions = plan([req("1", 2), req("2", 2), req("3", 2)], pool(4), NOW, RESERVE)
    assert decisions == [
        Admit("1", Amount(2, 1)),
        Admit("2", Amount(2, 1)),
        Wait("3", "waiting for 2 CPUs: 4 of 4 leased"),
    ]


def test_backfill_lets_small_runs_pass_a_big_one() -> None:
    queue = [req("1", 8), req("2", 2), req("3", 2)]
    decisions = plan(queue, pool(8, leased=Amount(6, 10)), NOW, RESERVE)
    assert decisions == [
        Wait("1", "waiting for 8 CPUs: 6 of 8 leased"),
        Admit("2", Amount(2, 1)),
        Wait("3", "waiting for 2 CPUs: 8 of 8 leased"),
    ]


def test_a_starving_head_reserves_what_is_free() -> None:
    old = NOW - timedelta(seconds=RESERVE + 1)
    queue = [req("1", 8, submitted_at=old), req("2", 2), req("3", 1, 0.5)]
    decisions = plan(queue, pool(8, leased=Amount(6, 10)), NOW, RESERVE)
    assert decisions[0] == Wait("1", "waiting for 8 CPUs: 6 of 8 leased")
    assert decisions[1] == Wait(
        "2", "waiting for 2 CPUs: 6 of 8 leased, 2 reserved for an earlier run"
    )
    assert isinstance(decisions[2], Wait)
    # Once the lease ends, the big run starts ahead of the small ones.
    decisions = plan(queue, pool(8), NOW, RESERVE)
    assert decisions[0] == Admit("1", Amount(8, 1))


def test_every_missing_resource_is_named() -> None:
    decisions = plan(
        [req("5", 1.5, 40), req("6", 0.5, 4)], pool(8, 64, Amount(7, 30)), NOW, RESERVE
    )
    assert decisions == [
        Wait(
            "5", "waiting for 1.5 CPUs: 7 of 8 leased; and for 40 GiB memory: 30 of 64 GiB leased"
        ),
        Admit("6", Amount(0.5, 4)),
    ]


def test_outside_use_is_subtracted_and_named() -> None:
    p = pool(8, outside=Amount(7.5, 0), outside_cpu_note="CPUs busy outside Orbit (load 7.5 of 8)")
    assert plan([req("1", 1)], p, NOW, RESERVE) == [
        Wait("1", "waiting for 1 CPU: 0 of 8 leased, CPUs busy outside Orbit (load 7.5 of 8)")
    ]
    assert plan([req("1", 0.5)], p, NOW, RESERVE) == [Admit("1", Amount(0.5, 1))]


def test_float_sums_fit_exactly() -> None:
    queue = [req(str(i), 0.1, 0.1) for i in range(10)]
    decisions = plan(queue, pool(1, 1), NOW, RESERVE)
    assert all(isinstance(d, Admit) for d in decisions)
    assert plan(queue, pool(1, 1), NOW, RESERVE) == decisions  # no hidden state


def test_gpus_are_never_given_twice_and_holders_are_named() -> None:
    gpus = (
        gpu(0, holder="leased to run 3 (lr-1e-4)"),
        gpu(1, holder="in use outside Orbit by pid 4242 (python, user alice, 20.1 GiB)"),
        gpu(2),
        gpu(3, allowed=False),
    )
    decisions = plan(
        [req("7", 1, gpus=1), req("8", 1, gpus=1, gpu_mem_gb=40)], pool(gpus=gpus), NOW, RESERVE
    )
    assert isinstance(decisions[0], Admit) and [g.index for g in decisions[0].gpus] == [2]
    assert decisions[1] == Wait(
        "8",
        "waiting for 1 GPU with ≥ 40 GiB free: GPU 0 leased to run 3 (lr-1e-4), GPU 1 in use "
        "outside Orbit by pid 4242 (python, user alice, 20.1 GiB), GPU 2 goes to an earlier run "
        "in the queue",
    )


def test_gpu_memory_minimum_and_pins() -> None:
    gpus = (gpu(0, free_gb=10), gpu(1), gpu(2, allowed=False))
    decisions = plan([req("1", 1, gpus=1, gpu_mem_gb=40)], pool(gpus=gpus), NOW, RESERVE)
    assert isinstance(decisions[0], Admit) and decisions[0].gpus[0].index == 1
    pinned = plan([req("2", 1, gpus=1, gpu_ids=(0,), gpu_mem_gb=40)], pool(gpus=gpus), NOW, 300)
    assert pinned == [
        Wait("2", "waiting for 1 GPU (pinned 0) with ≥ 40 GiB free: GPU 0 has 10 GiB free")
    ]
    gone = plan([req("3", 1, gpus=1, gpu_ids=(5,))], pool(gpus=gpus), NOW, RESERVE)
    assert gone == [Wait("3", "waiting for 1 GPU (pinned 5): pinned GPU 5 does not exist")]
    barred = plan([req("4", 1, gpus=1, gpu_ids=(2,))], pool(gpus=gpus), NOW, RESERVE)
    assert barred == [Wait("4", "waiting for 1 GPU (pinned 2): GPU 2 is not allowed (ORBIT_GPUS)")]


def test_group_cap_limits_a_sweep() -> None:
    queue = [req(str(i), 0.1, 0.1, group="lr", group_cap=3) for i in range(5)]
    decisions = plan(queue, pool(group_running={"lr": 1}), NOW, RESERVE)
    assert [type(d).__name__ for d in decisions] == ["Admit", "Admit", "Wait", "Wait", "Wait"]
    assert decisions[2] == Wait("2", "group lr: 3 of 3 running (sweep cap)")


def test_never_fits() -> None:
    totals = Amount(2, 23.4)
    assert never_fits(req("", 999), totals) == "needs 999 CPUs but this machine has 2 CPUs"
    assert never_fits(req("", 1, 64), totals) == "needs 64 GiB memory but this machine has 23.4 GiB"
    assert never_fits(req("", 2, 23.4), totals) is None
    gpus = (gpu(0, 40), gpu(1, 80), gpu(2, 80, allowed=False))
    assert never_fits(req("", 1, gpus=3), totals, gpus) == (
        "needs 3 GPUs but this machine has 2 usable GPUs"
    )
    assert never_fits(req("", 1, gpus=2, gpu_mem_gb=60), totals, gpus) == (
        "needs 2 GPUs but this machine has 1 usable GPU with ≥ 60 GiB"
    )
    assert (
        never_fits(req("", 1, gpus=1, gpu_ids=(7,)), totals, gpus) == "pinned GPU 7 does not exist"
    )
    assert never_fits(req("", 1, gpus=1, gpu_ids=(2,)), totals, gpus) == (
        "GPU 2 is not allowed (ORBIT_GPUS)"
    )
    assert (
        never_fits(req("", 1, gpus=1), totals, ())
        == "needs 1 GPU but this machine has 0 usable GPUs"
    )

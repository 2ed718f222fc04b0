"""Placing runs that wait here on other nodes: a pure function of (waiting runs, targets), tested
with literal values (sched/nodeplace.py; docs/nodes.md "Where a run goes")."""

from __future__ import annotations

from test_plan import NOW, RESERVE, gpu, pool, req

from orbit.sched.nodeplace import Place, Target, place, pool_from_dict, pool_to_dict
from orbit.sched.plan import GpuSlot, Wait
from orbit.sched.resources import Amount

HERE_WAIT = "waiting for 4 CPUs: 8 of 8 leased"


def waiting(run_id: str, cpus: float, pin: str | None = None, **kw: object) -> tuple:
    return (req(run_id, cpus, **kw), Wait(run_id, HERE_WAIT), pin)


def decide(runs: list[tuple], targets: list[Target], **kw: object) -> list[Place | Wait]:
    return place(runs, "vm", targets, {}, NOW, RESERVE, **kw)  # type: ignore[arg-type]


def test_the_first_node_that_fits_gets_the_run_and_the_others_say_why() -> None:
    targets = [
        Target("a", pool(2)),
        Target("b", pool(8)),
        Target("c", None, "unreachable since 12:03"),
    ]
    out = decide([waiting("1", 4), waiting("2", 4), waiting("3", 4)], targets)
    assert out[:2] == [Place("1", "b"), Place("2", "b")]
    assert out[2] == Wait(
        "3",
        "waiting for a node: vm: 4 CPUs: 8 of 8 leased; a: 4 CPUs: 0 of 2 leased; "
        "b: 4 CPUs: 8 of 8 leased; c: unreachable since 12:03",
    )


def test_runs_on_their_way_count_against_a_node_and_take_its_gpus() -> None:
    sending = (req("9", 2, gpus=1, label="9"),)
    b = Target("b", pool(8, gpus=(gpu(0), gpu(1))), sending=sending)
    out = decide([waiting("1", 2, gpus=1), waiting("2", 2, gpus=1)], [b])
    assert out[0] == Place("1", "b")
    assert isinstance(out[1], Wait)
    assert (
        "b: 1 GPU: GPU 0 going to run 9, GPU 1 goes to an earlier run in the queue" in out[1].reason
    )


def test_a_run_naming_a_node_goes_there_only() -> None:
    out = decide([waiting("1", 1, pin="b")], [Target("a", pool(8)), Target("b", pool(8))])
    assert out == [Place("1", "b")]
    out = decide([waiting("1", 9, pin="b")], [Target("b", pool(8))])
    assert out == [Wait("1", "waiting for node b: 9 CPUs: 0 of 8 leased")]
    out = decide([waiting("1", 1, pin="x")], [Target("b", pool(8))])
    assert out == [Wait("1", "waiting for node x: not a node of this home")]


def test_a_slurm_node_takes_only_runs_that_name_it_whatever_their_size() -> None:
    hpc = Target("hpc", pool(2), pinned_only=True)
    out = decide([waiting("1", 64, pin="hpc"), waiting("2", 1)], [hpc])
    assert out == [Place("1", "hpc"), Wait("2", HERE_WAIT)]


def test_datasets_and_refusals_keep_a_run_from_a_node() -> None:
    a, b = Target("a", pool(8)), Target("b", pool(8))
    out = decide(
        [waiting("1", 1), waiting("2", 1)],
        [a, b],
        needs={"1": {"imagenet"}},
        datasets={"b": {"imagenet"}},
        avoid={"2": {"a"}},
    )
    assert out == [Place("1", "b"), Place("2", "b")]
    out = decide([waiting("1", 1)], [a], needs={"1": {"imagenet"}})
    assert out == [
        Wait("1", f"waiting for a node: vm: {HERE_WAIT[12:]}; a: has no dataset imagenet")
    ]
    out = decide([waiting("1", 1)], [a], avoid={"1": {"a"}})
    assert out == [Wait("1", f"waiting for a node: vm: {HERE_WAIT[12:]}; a: did not take it")]


def test_a_pool_survives_its_trip_as_json() -> None:
    original = pool(
        4,
        32,
        leased=Amount(1, 2),
        outside=Amount(0.5, 1),
        outside_cpu_note="CPUs busy outside Orbit (load 1 of 4)",
        gpus=(gpu(0), GpuSlot(1, "GPU-1", 10, 5, allowed=False, holder="leased to run 3")),
    )
    assert pool_from_dict(pool_to_dict(original)) == original

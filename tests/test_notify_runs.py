"""Notifications from real runs in real Docker: a sweep's one group summary, and a dead
endpoint that costs a run nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from conftest import SMALL, Orbit
from notify_server import HOLD, OK, Endpoint, endpoints, stop_sender, wait_sender


@pytest.fixture
def two() -> Iterator[list[Endpoint]]:
    yield from endpoints([OK], [OK])


def covered(received: list) -> int:
    """How many run messages the deliveries stand for (a digest counts its runs)."""
    total = 0
    for r in received:
        body = r.json()
        if body["event"] == "digest":
            total += sum(int(n) for _, n in body["fields"])
        else:
            total += 1
    return total


def test_a_sweep_of_20_runs_sends_one_group_summary(
    orbit: Orbit, busybox: str, two: list[Endpoint]
) -> None:
    groups, runs = two
    orbit.environ["G"], orbit.environ["R"] = groups.url, runs.url
    assert (
        orbit("notify", "add", "g", "--kind", "webhook", "--url-env", "G", "--on", "group").code
        == 0
    )
    assert (
        orbit("notify", "add", "r", "--kind", "webhook", "--url-env", "R", "--on", "succeeded").code
        == 0
    )
    try:
        values = ",".join(str(i) for i in range(20))
        res = orbit(
            "sweep", *SMALL, "--image", busybox, "-g", "nf", "-p", f"n={values}", "--", "true"
        )
        assert res.code == 0, res.err
        waited = orbit("wait", "-g", "nf")
        assert waited.code == 0, waited.err
        groups.wait_for(lambda got: len(got) >= 1, timeout=60)
        runs.wait_for(lambda got: covered(got) >= 20, timeout=60)
        wait_sender(orbit.home)
        notify = orbit.home / "notify"
        assert not [p for p in (notify / "outbox").iterdir()]
        assert not [p for p in (notify / "queue").rglob("*") if p.is_file()]
        (summary,) = groups.received
        body = summary.json()
        assert body["event"] == "group" and body["state"] == "succeeded"
        assert "group nf finished: 20 runs, 20 succeeded" in body["title"]
        # Every run's message arrived, none twice (bursts merged into digests).
        assert covered(runs.received) == 20
        keys = [r.key for r in runs.received]
        assert len(keys) == len(set(keys))
    finally:
        stop_sender(orbit.home)


def test_a_dead_endpoint_does_not_delay_the_run(orbit: Orbit, busybox: str) -> None:
    def one_run() -> float:
        started = time.monotonic()
        res = orbit("run", *SMALL, "--image", busybox, "-w", "--", "true")
        assert res.code == 0, res.err
        return time.monotonic() - started

    one_run()  # warm: the first run of a home pays for its setup
    baseline = max(one_run(), one_run())
    for made in endpoints([HOLD]):
        (hanging,) = made
        orbit.environ["H"] = hanging.url
        orbit.environ["DEAD"] = "http://127.0.0.1:9/hook/x"
        for name, var in (("hang", "H"), ("dead", "DEAD")):
            add = orbit(
                "notify", "add", name, "--kind", "webhook", "--url-env", var, "--on", "succeeded"
            )
            assert add.code == 0, add.err
        try:
            took = max(one_run(), one_run())
            hanging.wait_for(lambda got: len(got) >= 1)
            # A POST to the hanging endpoint waits 10 s for its answer: a run that waited for
            # its notification would take that much longer.
            assert took < baseline + 2.0, (baseline, took)
            log = orbit("notify", "log", "dead", "--json").json()
            assert log and log[0]["outcome"] == "retrying"
        finally:
            stop_sender(orbit.home)

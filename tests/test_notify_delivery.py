"""Delivery: the outbox, the sender process and real local HTTP endpoints. Runs are written and
settled through the real store (no container needed: a queued run settled as failed or
cancelled takes the same path a shepherd's settle does); the sender is the real detached
process the settle starts."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Orbit
from notify_server import (
    DINGTALK_OK,
    HOLD,
    OK,
    Endpoint,
    sender_pid,
    stop_sender,
    wait_sender,
)

from orbit.notify import fanout, profiles, queue
from orbit.store import outbox
from orbit.store.home import Home
from orbit.store.locks import is_locked, release, try_lock
from orbit.store.model import RunState, now_iso
from orbit.store.runs import RunStore

pytestmark = pytest.mark.slow  # real senders, retries and rate limits at real speed


@dataclass
class World:
    orbit: Orbit
    home: Home
    store: RunStore
    made: list[Endpoint]

    def endpoint(self, *script: object) -> Endpoint:
        e = Endpoint(list(script))
        self.made.append(e)
        return e

    def profile(self, name: str, e: Endpoint | str, *args: str, kind: str = "webhook") -> None:
        self.orbit.environ["HOOK"] = e.url if isinstance(e, Endpoint) else e
        res = self.orbit("notify", "add", name, "--kind", kind, "--url-env", "HOOK", *args)
        assert res.code == 0, res.err

    def new_run(self, group: str | None = "g") -> str:
        spec = {"name": None, "group": group, "command": ["true"]}
        spec["resources"] = {"cpus": 1, "mem_gb": 0.25}
        return self.store.create(spec, reason="waiting for the scheduler", actor="test").id

    def settle(self, run_id: str, state: RunState = RunState.FAILED) -> None:
        reason = {RunState.FAILED: "exit code 3", RunState.CANCELLED: "cancelled by test"}
        self.store.transition(
            run_id, state, actor="test", reason=reason.get(state), finished_at=now_iso()
        )

    def outcomes(self) -> list[str]:
        return [r["outcome"] for r in self.orbit("notify", "log", "--json").json()]

    def leftovers(self) -> list[str]:
        notify = self.orbit.home / "notify"
        return [
            str(p.relative_to(notify))
            for sub in ("outbox", "queue")
            for p in (notify / sub).rglob("*")
            if p.is_file()
        ]


@pytest.fixture
def world(orbit: Orbit) -> Iterator[World]:
    home = Home.from_environ(orbit.environ)
    w = World(orbit, home, RunStore(home), [])
    yield w
    stop_sender(orbit.home)
    for e in w.made:
        e.close()


def test_retries_on_429_and_500_then_delivered(world: World) -> None:
    e = world.endpoint((429, b"slow down"), (500, b"oops"), OK)
    world.profile("team", e, "--on", "failed")
    run = world.new_run()
    world.settle(run)
    e.wait_for(lambda got: len(got) == 3, timeout=40)
    wait_sender(world.orbit.home)
    assert {r.key for r in e.received} == {f"run-{run}-failed"}
    gaps = [b.at - a.at for a, b in zip(e.received, e.received[1:], strict=False)]
    assert gaps[0] >= 1.9 and gaps[1] >= 4.9, gaps  # the backoff: 2 s, then 5 s
    assert world.outcomes() == ["retrying", "retrying", "sent"]
    log = world.orbit("notify", "log").out
    assert "HTTP 429: slow down" in log and "HTTP 500: oops" in log
    assert len(e.received) == 3 and world.leftovers() == []


def test_a_burst_to_a_20_per_minute_endpoint_is_merged(world: World) -> None:
    e = world.endpoint(DINGTALK_OK)
    world.profile("ding", e, "--on", "failed", kind="dingtalk")
    runs = [world.new_run() for _ in range(12)]
    # A burst while the sender is busy (its lock held): nothing may be lost or sent one by one.
    handle = try_lock(outbox.sender_lock(world.home))
    assert handle is not None
    for run in runs:
        world.settle(run)
    assert len(list((world.orbit.home / "notify" / "outbox").iterdir())) == 12
    release(handle)
    assert outbox.wake_sender(world.home)
    e.wait_for(lambda got: len(got) == 1)
    first = e.received[0]
    assert "12 runs finished" in first.body.decode() and first.key.startswith("digest-")
    # Two more within the endpoint's 3 s spacing: held, then merged into one.
    for run in [world.new_run(), world.new_run()]:
        world.settle(run)
    e.wait_for(lambda got: len(got) == 2)
    wait_sender(world.orbit.home)
    second = e.received[1]
    assert "2 runs finished" in second.body.decode()
    assert second.at - first.at >= 2.9  # 20 a minute: one request every 3 s at most
    assert len(e.received) == 2 and world.outcomes() == ["sent", "sent"]
    assert world.leftovers() == []


def test_a_group_summary_is_never_merged_and_a_webhook_gets_one_request_per_message(
    world: World,
) -> None:
    ding, hook = world.endpoint(DINGTALK_OK), world.endpoint(OK)
    world.profile("ding", ding, "--on", "failed,group", kind="dingtalk")
    world.profile("hook", hook, "--on", "failed,group")
    runs = [world.new_run() for _ in range(3)]
    handle = try_lock(outbox.sender_lock(world.home))  # the whole group ends in one burst
    assert handle is not None
    for run in runs:
        world.settle(run)
    release(handle)
    assert outbox.wake_sender(world.home)
    ding.wait_for(lambda got: len(got) == 2, timeout=30)
    hook.wait_for(lambda got: len(got) == 4, timeout=30)
    wait_sender(world.orbit.home)
    digest, summary = (r.body.decode() for r in ding.received)
    assert "3 runs finished: 3 failed" in digest and "group g" not in digest
    assert "group g finished" in summary and "exit code 3" in summary  # whole: its failures
    assert ding.received[1].at - ding.received[0].at >= 2.9
    events = [r.json()["event"] for r in hook.received]
    assert events == ["failed", "failed", "failed", "group"]
    assert sorted(r.json()["key"] for r in hook.received[:3]) == sorted(
        f"run-{run}-failed" for run in runs
    )
    assert len(ding.received) == 2 and len(hook.received) == 4


def test_kill_9_of_the_sender_mid_delivery_loses_nothing(world: World) -> None:
    e = world.endpoint(HOLD, OK)  # the first request is held open: the sender is mid-POST
    world.profile("team", e, "--on", "failed")
    run = world.new_run()
    world.settle(run)
    e.wait_for(lambda got: len(got) == 1)
    pid = sender_pid(world.orbit.home)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while is_locked(outbox.sender_lock(world.home)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    e.release()  # the held request is answered to nobody
    in_flight = f"queue/team/.batch-{queue.slug(f'run-{run}-failed')}.json"
    assert world.leftovers() == [in_flight]
    notify = world.orbit.home / "notify"  # named as an older version names its one batch:
    (notify / in_flight).rename(notify / "queue" / "team" / ".batch.json")  # read the same
    # A tick sees the work and no sender: it starts one, which sends the same batch again.
    tick = world.orbit("scheduler", "tick")
    assert tick.code == 0, tick.err
    e.wait_for(lambda got: len(got) == 2)
    wait_sender(world.orbit.home)
    keys = [r.key for r in e.received]
    assert keys == [f"run-{run}-failed"] * 2  # a receiver that dedupes by key shows it once
    assert [r.json()["key"] for r in e.received] == keys
    assert world.outcomes() == ["sent"] and world.leftovers() == []


def test_a_dead_endpoint_does_not_hold_another_profile(world: World) -> None:
    hanging = world.endpoint(HOLD)
    live = world.endpoint(OK)
    world.profile("hang", hanging, "--on", "failed")
    world.profile("refused", "http://127.0.0.1:9/hook/x", "--on", "failed")
    world.profile("live", live, "--on", "failed")
    run = world.new_run()
    started = time.monotonic()
    world.settle(run)
    settle_s = time.monotonic() - started
    live.wait_for(lambda got: len(got) == 1, timeout=20)
    took = live.received[0].at - started
    hanging.wait_for(lambda got: len(got) == 1)
    # The hanging endpoint holds its request for the 10 s timeout; the live one is not behind it.
    assert settle_s < 1.0 and took < 5.0, (settle_s, took)
    deadline = time.monotonic() + 20  # the refused profile's thread logs in its own time
    while not (rows := world.orbit("notify", "log", "refused", "--json").json()):
        assert time.monotonic() < deadline, "the refused endpoint was never tried"
        time.sleep(0.2)
    assert rows[0]["outcome"] == "retrying" and "not reached" in rows[0]["detail"]
    assert world.orbit("notify", "log", "live", "--json").json()[0]["outcome"] == "sent"


def test_a_pending_event_waits_for_its_run_and_a_stale_one_is_dropped(world: World) -> None:
    e = world.endpoint(OK)
    world.profile("team", e, "--on", "succeeded,failed")
    a, b = world.new_run(), world.new_run()
    # As if the settling process died between the event and status.yaml:
    outbox.record_settled(world.home, a, "failed", now_iso())
    outbox.record_settled(world.home, b, "succeeded", now_iso())
    assert not outbox.work_waiting(world.home)
    assert not outbox.wake_sender(world.home)  # nothing to send: no sender is started
    world.settle(a)  # settled later (by the tick's repair, say): the same event again
    world.settle(b, RunState.CANCELLED)  # settled otherwise: the stale event goes
    e.wait_for(lambda got: len(got) >= 1)
    wait_sender(world.orbit.home)
    assert [r.key for r in e.received] == [f"run-{a}-failed"]
    assert world.leftovers() == []


def test_a_group_is_announced_once_when_it_finishes_and_again_when_it_grows(
    world: World,
) -> None:
    e = world.endpoint(OK)
    world.profile("g", e, "--on", "group")
    runs = [world.new_run() for _ in range(3)]
    world.new_run(group="other")  # still queued: another group does not hold this one
    world.settle(runs[0])
    world.settle(runs[1], RunState.CANCELLED)
    wait_sender(world.orbit.home)
    assert e.received == []
    world.settle(runs[2])
    e.wait_for(lambda got: len(got) == 1)
    wait_sender(world.orbit.home)
    first = e.received[0].json()
    assert first["event"] == "group" and "3 runs" in first["title"]
    late = world.new_run()
    world.settle(late)
    e.wait_for(lambda got: len(got) == 2)
    wait_sender(world.orbit.home)
    second = e.received[1].json()
    assert "4 runs" in second["title"] and second["key"] != first["key"]
    assert len(e.received) == 2


def test_fanning_out_twice_queues_once_and_a_sent_key_never_again(world: World) -> None:
    world.profile("team", "http://127.0.0.1:9/x", "--on", "failed")
    run = world.new_run()
    handle = try_lock(outbox.sender_lock(world.home))  # keep the real sender out
    assert handle is not None
    try:
        world.settle(run)
        event = next((world.orbit.home / "notify" / "outbox").iterdir())
        saved = event.read_bytes()
        loaded = profiles.load(world.home)
        assert fanout.fan_out(world.home, loaded, None) == 1
        event.write_bytes(saved)  # as if killed before the event's removal
        assert fanout.fan_out(world.home, loaded, None) == 0
        ((_, message),) = queue.pending(world.home, "team")
        queue.remember(world.home, "team", [message.key])  # once sent …
        for path, _ in queue.pending(world.home, "team"):
            path.unlink()
        event.write_bytes(saved)
        assert fanout.fan_out(world.home, loaded, None) == 0  # … never queued again
    finally:
        release(handle)


def test_profile_filters_by_event_and_group(world: World) -> None:
    e = world.endpoint(OK)
    world.profile("only-lr", e, "--on", "succeeded,failed", "-g", "lr")
    a, b = world.new_run(group="lr"), world.new_run(group="other")
    c = world.new_run(group=None)
    for run in (a, b, c):
        world.settle(run)
    e.wait_for(lambda got: len(got) >= 1)
    wait_sender(world.orbit.home)
    assert [r.key for r in e.received] == [f"run-{a}-failed"]
    body = json.loads(e.received[0].body)
    assert body["state"] == "failed" and "exit code 3" in body["title"]


def test_the_web_url_setting_links_each_message_to_its_page(world: World) -> None:
    e = world.endpoint(OK, OK)
    world.profile("team", e, "--on", "failed")
    world.orbit.configure(web_url="http://gpu1:7777/")
    run = world.new_run(group=None)
    world.settle(run)
    e.wait_for(lambda got: len(got) >= 1)
    wait_sender(world.orbit.home)
    assert json.loads(e.received[0].body)["link"] == f"http://gpu1:7777/runs/{run}"
    assert world.orbit("config", "set", "web_url", "null").code == 0  # read again: no link
    second = world.new_run(group=None)
    world.settle(second)
    e.wait_for(lambda got: len(got) >= 2)
    wait_sender(world.orbit.home)
    assert json.loads(e.received[1].body)["link"] is None


def test_no_profiles_no_outbox(world: World, tmp_path: Path) -> None:
    run = world.new_run()
    world.settle(run)
    assert not (world.orbit.home / "notify").exists()


def test_a_settle_imports_no_http_and_no_notify_code(world: World) -> None:
    """The settle is on the run's path: it writes a file and starts a process, nothing more."""
    world.profile("team", "http://127.0.0.1:9/x", "--on", "failed")
    run = world.new_run()
    code = (
        "import sys\n"
        "from orbit.store.home import Home\n"
        "from orbit.store.model import RunState, now_iso\n"
        "from orbit.store.runs import RunStore\n"
        f"RunStore(Home.from_environ({{'ORBIT_HOME': {str(world.orbit.home)!r}}})).transition(\n"
        f"    {run!r}, RunState.FAILED, actor='t', reason='x', finished_at=now_iso())\n"
        "bad = [m for m in sys.modules if m.startswith(('orbit.notify', 'urllib.request', "
        "'http.client'))]\n"
        "print(','.join(bad))\n"
    )
    env = {**world.orbit.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
    deadline = time.monotonic() + 10  # the sender it started: seen once it holds its lock
    while sender_pid(world.orbit.home) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (world.orbit.home / "notify" / "outbox").exists()


def test_doctor_reports_the_profiles_and_the_backlog(world: World) -> None:
    def notify_check() -> dict[str, str]:
        res = world.orbit("doctor", "--json")  # its exit code says what failed: JSON always
        (check,) = [c for c in res.json()["checks"] if c["name"] == "notify"]
        return check

    world.profile("team", "http://127.0.0.1:9/x", "--on", "failed")
    assert notify_check() == {
        "name": "notify",
        "status": "OK",
        "detail": "team (webhook); nothing waiting",
        "fix": "",
    }
    handle = try_lock(outbox.sender_lock(world.home))  # a sender that is busy elsewhere
    assert handle is not None
    try:
        world.settle(world.new_run())
        busy = notify_check()
        assert busy["status"] == "OK" and "1 run(s) not yet turned into messages" in busy["detail"]
    finally:
        release(handle)
    stop_sender(world.orbit.home)  # none may start: the doctor only reads
    (world.orbit.home / "notify.yaml").chmod(0o644)
    assert notify_check()["status"] == "FAIL"


def _notify_check(world: World) -> dict[str, str]:
    res = world.orbit("doctor", "--json")  # its exit code says what failed: JSON always
    (check,) = [c for c in res.json()["checks"] if c["name"] == "notify"]
    return check


def test_damaged_queue_files_are_kept_aside_and_named_never_deleted(world: World) -> None:
    e = world.endpoint(OK)
    world.profile("wh", e, "--on", "failed")
    runs = [world.new_run(group=None) for _ in range(5)]
    handle = try_lock(outbox.sender_lock(world.home))  # the receiver is down: nothing sent yet
    assert handle is not None
    try:
        for run in runs:
            world.settle(run)
        assert fanout.fan_out(world.home, profiles.load(world.home), None) == 5
        queued = queue.pending(world.home, "wh")
        (first_path, first), garbled = queued[0], queued[2][0]
        queue.take(world.home, "wh", queue.Batch(first, [first.key]), [first_path])  # in flight
        (batch_file,) = queue.profile_dir(world.home, "wh").glob(".batch*.json")
        garbled.write_bytes(b"\x00\xff{ not json")
        batch_file.write_bytes(b"")
    finally:
        release(handle)
    assert outbox.wake_sender(world.home)  # the receiver is up again
    e.wait_for(lambda got: len(got) == 3)
    wait_sender(world.orbit.home)
    assert sorted(r.key for r in e.received) == sorted(
        f"run-{run}-failed" for run in (runs[1], runs[3], runs[4])
    )
    damaged = world.orbit.home / "notify" / "damaged"
    kept = sorted((damaged / "wh").iterdir())
    assert len(kept) == 2 and garbled.name in [p.name for p in kept]
    assert (damaged / "wh" / garbled.name).read_bytes() == b"\x00\xff{ not json"
    rows = world.orbit("notify", "log", "--json").json()
    aside = [r for r in rows if r["outcome"] == "given up (damaged)"]
    assert len(aside) == 2 and {r["profile"] for r in aside} == {"wh"}
    assert any(r["title"] == garbled.name and "not JSON" in r["detail"] for r in aside)
    assert any(batch_file.name in r["title"] and "empty" in r["detail"] for r in aside)
    assert sorted(r["key"] for r in aside) == sorted(f"run-{runs[i]}-failed" for i in (0, 2))
    assert all("kept as notify/damaged/wh/" in r["detail"] for r in aside)
    assert "given up (damaged)" in world.orbit("notify", "log").out
    check = _notify_check(world)
    assert check["status"] == "WARN", check
    assert f"2 damaged file(s) kept aside in {damaged}" in check["detail"]
    assert "orbit notify log" in check["fix"] and str(damaged) in check["fix"]
    assert world.leftovers() == []


def test_an_unreadable_queue_file_stays_in_place_and_holds_back_nothing(world: World) -> None:
    e = world.endpoint(OK)
    world.profile("wh", e, "--on", "failed")
    # A directory in a delivery's place: reading it fails (EISDIR), as an I/O error would.
    blocker = queue.profile_dir(world.home, "wh") / f"{1:020d}-run-0-failed-0123456789.json"
    blocker.mkdir(parents=True)
    run = world.new_run(group=None)
    world.settle(run)
    e.wait_for(lambda got: len(got) == 1, timeout=15)
    assert [r.key for r in e.received] == [f"run-{run}-failed"]
    assert blocker.is_dir()  # never deleted, never set aside: tried again while the sender lives
    assert not (world.orbit.home / "notify" / "damaged").exists()
    assert "1 message(s) queued" in _notify_check(world)["detail"]
    blocker.rmdir()
    wait_sender(world.orbit.home)  # the sender stopped once nothing was left to read


def test_a_read_error_other_than_enoent_never_drops_a_message(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit test of the errno path: EIO is raised once, by a patched reader."""
    world.profile("wh", "http://127.0.0.1:9/x", "--on", "failed")
    handle = try_lock(outbox.sender_lock(world.home))
    assert handle is not None
    try:
        world.settle(world.new_run(group=None))
        fanout.fan_out(world.home, profiles.load(world.home), None)
        (path,) = queue.delivery_files(world.home, "wh")
        failed: list[Path] = []

        def eio(self: Path, *args: object, **kwargs: object) -> bytes:
            if self == path and not failed:
                failed.append(self)
                raise OSError(errno.EIO, "Input/output error")
            return real_read_bytes(self)

        real_read_bytes = Path.read_bytes
        with monkeypatch.context() as patch:
            patch.setattr(Path, "read_bytes", eio)
            patch.setattr(Path, "read_text", lambda self, *a, **k: eio(self).decode())
            assert queue.pending(world.home, "wh") == []  # not readable this time …
        assert failed and path.exists()  # … but kept
        ((again, message),) = queue.pending(world.home, "wh")  # and read on the next look
        assert again == path and message.event == "failed"
        assert not (world.orbit.home / "notify" / "damaged").exists()
    finally:
        release(handle)


def test_a_damaged_outbox_event_is_rebuilt_from_its_name_or_kept_aside_never_deleted(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.profile("wh", "http://127.0.0.1:9/x", "--on", "failed")
    a, b, c = (world.new_run(group=None) for _ in range(3))
    folder = outbox.outbox_dir(world.home)
    handle = try_lock(outbox.sender_lock(world.home))  # keep the real sender out
    assert handle is not None
    try:
        for run in (a, b, c):
            world.settle(run)
        (folder / f"{a}-failed.json").write_bytes(b"\x00{ cut sh")  # the run agrees: rebuilt
        stale = folder / f"{b}-succeeded.json"  # run b failed: this one cannot be rebuilt
        stale.write_bytes(b"")
        stray = folder / "notes.json"  # not an event's name at all
        stray.write_bytes(b"not json")
        unreadable = folder / f"{c}-failed.json"
        failed: list[Path] = []
        real_read_bytes = Path.read_bytes

        def eio(self: Path, *args: object, **kwargs: object) -> bytes:
            if self == unreadable:
                failed.append(self)
                raise OSError(errno.EIO, "Input/output error")
            return real_read_bytes(self)

        loaded = profiles.load(world.home)
        with monkeypatch.context() as patch:
            patch.setattr(Path, "read_bytes", eio)
            patch.setattr(Path, "read_text", lambda self, *a, **k: eio(self).decode())
            assert outbox.work_waiting(world.home)  # the sender keeps looking at it
            assert fanout.fan_out(world.home, loaded, None) == 2
        assert failed and unreadable.exists()  # unreadable for now: left for a later look
        assert sorted(m.key for _, m in queue.pending(world.home, "wh")) == sorted(
            [f"run-{a}-failed", f"run-{b}-failed"]
        )
        assert sorted(p.name for p in folder.iterdir()) == [unreadable.name]
        assert fanout.fan_out(world.home, loaded, None) == 1  # read on the next look
        assert not list(folder.iterdir())
    finally:
        release(handle)
    kept = world.orbit.home / "notify" / "damaged" / "outbox"
    assert (kept / stale.name).read_bytes() == b""
    assert (kept / stray.name).read_bytes() == b"not json"
    rows = world.orbit("notify", "log", "--json").json()
    aside = {r["title"]: r for r in rows if r["outcome"] == "given up (damaged)"}
    assert sorted(aside) == sorted([stale.name, stray.name])
    assert aside[stale.name]["key"] == f"run-{b}-succeeded"
    assert f"run {b} is failed" in aside[stale.name]["detail"]
    assert all(r["profile"] == "outbox" for r in aside.values())
    assert "kept as notify/damaged/outbox/" in aside[stray.name]["detail"]
    check = _notify_check(world)
    assert check["status"] == "WARN" and "2 damaged file(s) kept aside" in check["detail"]


def test_a_message_in_backoff_does_not_hold_back_the_next_one(world: World) -> None:
    r1, r2 = world.new_run(group=None), world.new_run(group=None)
    k1, k2 = f"run-{r1}-failed", f"run-{r2}-failed"
    e = world.endpoint(OK)
    e.by_key = {k1: [(500, b"this one breaks the receiver")]}  # run 1 always gets a 500
    world.profile("wh", e, "--on", "failed")
    world.settle(r1)
    e.wait_for(lambda got: any(r.key == k1 for r in got))
    settled = time.monotonic()
    world.settle(r2)
    e.wait_for(lambda got: any(r.key == k2 for r in got), timeout=10)
    took = next(r for r in e.received if r.key == k2).at - settled
    assert took < 1.5, took  # before: behind run 1's 2, 5, 15 … s of backoff, for minutes
    deadline = time.monotonic() + 5  # the answer is logged just after the endpoint sent it
    while not any(r["key"] == k2 for r in world.orbit("notify", "log", "--json").json()):
        assert time.monotonic() < deadline, "run 2's answer was never logged"
        time.sleep(0.05)
    rows = world.orbit("notify", "log", "--json").json()
    assert [r["outcome"] for r in rows if r["key"] == k2] == ["sent"]
    assert {r["outcome"] for r in rows if r["key"] == k1} == {"retrying"}  # still retrying
    assert k1 not in queue.sent_keys(world.home, "wh")
    e.wait_for(lambda got: sum(r.key == k1 for r in got) >= 2)  # its own backoff goes on
    assert sum(r.key == k2 for r in e.received) == 1


def test_a_rate_limit_answer_holds_the_whole_profile_back(world: World) -> None:
    r1, r2 = world.new_run(group=None), world.new_run(group=None)
    k1, k2 = f"run-{r1}-failed", f"run-{r2}-failed"
    e = world.endpoint(OK)
    e.by_key = {k1: [(429, b"slow down"), OK]}
    world.profile("wh", e, "--on", "failed")
    world.settle(r1)
    e.wait_for(lambda got: any(r.key == k1 for r in got))
    limited_at = e.received[0].at
    world.settle(r2)
    e.wait_for(lambda got: len(got) == 3, timeout=20)
    wait_sender(world.orbit.home)
    # Run 2 had no failure of its own, but the endpoint said "too fast": it waited out the 2 s.
    first_of_2 = next(r for r in e.received if r.key == k2)
    assert first_of_2.at - limited_at >= 1.9, e.summary()
    assert sorted(r.key for r in e.received) == sorted([k1, k1, k2])
    assert sorted(world.outcomes()) == ["retrying", "sent", "sent"]

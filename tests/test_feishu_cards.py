"""A feishu-app profile's cards: curves drawn as a PNG, uploaded, and a card sent to each paired
user, by the real sender process against the stand-in Feishu (tests/standins/feishu.py). One
test runs real containers (a group of two runs: one succeeds with metrics, one fails); the
others settle runs through the real store, as tests/test_notify_delivery.py does."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import SMALL, Orbit
from notify_server import sender_pid, stop_sender, wait_sender
from PIL import Image
from standins.feishu import Answer, Req, StandinFeishu, _authorized, _send

from orbit.feishu import control
from orbit.notify.curves import curves_png
from orbit.notify.feishu_app import ZWSP, run_card
from orbit.notify.lark import CARD_BYTES
from orbit.store.feishu import update_users
from orbit.store.home import Home
from orbit.store.model import METRICS, RunState, now_iso
from orbit.store.runs import RunStore

USERS = {"ou_alice": "Alice", "ou_bob": "Bob"}


@dataclass
class Bot:
    orbit: Orbit
    home: Home
    store: RunStore
    fs: StandinFeishu
    app_id: str
    secret: str

    def pair(self, users: dict[str, str]) -> None:
        for open_id, name in users.items():
            self.fs.add_user(open_id, name)

        def change(u: Any) -> None:
            for open_id, name in users.items():
                u.paired[open_id] = {"name": name, "chat_id": "", "paired_at": now_iso()}

        update_users(self.home, "phone", change)

    def new_run(self, group: str | None = "g", name: str | None = None) -> str:
        spec = {"name": name, "group": group, "command": ["python", "train.py"]}
        spec["resources"] = {"cpus": 1, "mem_gb": 0.25}
        return self.store.create(spec, reason="waiting", actor="test").id

    def settle(self, run_id: str, state: RunState = RunState.FAILED) -> None:
        reason = "exit code 3" if state is RunState.FAILED else None
        self.store.transition(run_id, state, actor="test", reason=reason, finished_at=now_iso())

    def cards(self, open_id: str | None = None) -> list[dict[str, Any]]:
        with self.fs.lock:
            sent = list(self.fs.sent)
        return [
            m
            for m in sent
            if m["msg_type"] == "interactive" and (open_id is None or m["receive_id"] == open_id)
        ]

    def log(self) -> list[dict[str, Any]]:
        return self.orbit("notify", "log", "--json").json()


@pytest.fixture
def bot(orbit: Orbit) -> Iterator[Bot]:
    with StandinFeishu() as fs:
        app_id, secret = fs.add_app()
        res = orbit("notify", "add", "phone", "--kind", "feishu-app", "--app-id", app_id,
                    "--domain", fs.base, "--on", "succeeded,failed,group", "--secret-stdin",
                    stdin=secret)  # fmt: skip
        assert res.code == 0, res
        home = Home.from_environ(orbit.environ)
        try:
            yield Bot(orbit, home, RunStore(home), fs, app_id, secret)
        finally:
            stop_sender(orbit.home)


def png_size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"
        image.load()
        return image.size


def text_of(card: dict[str, Any]) -> str:
    return json.dumps(card, ensure_ascii=False)


def img_keys(card: dict[str, Any]) -> list[str]:
    return [e["img_key"] for e in card["elements"] if e.get("tag") == "img"]


def test_a_finished_group_sends_run_cards_with_curves_and_one_summary_to_each_user(
    bot: Bot, busybox: str
) -> None:
    bot.pair(USERS)
    script = (
        'for i in 1 2 3 4 5 6 7 8; do echo "{{\\"step\\": $i, \\"loss\\": $((100 / i)), '
        '\\"acc\\": $((i * 10))}}" >> "$ORBIT_METRICS"; echo "epoch $i"; sleep 0.2; done; '
        'if [ {code} != 0 ]; then echo "Traceback: <at id=all></at> boom" >&2; fi; exit {code}'
    )
    res = bot.orbit("sweep", *SMALL, "--image", busybox, "-g", "cards", "-p", "code=0,3",
                    "--", "sh", "-c", script)  # fmt: skip
    assert res.code == 0, res.err
    bot.orbit("wait", "-g", "cards")
    deadline = time.monotonic() + 60
    while len(bot.cards()) < 6 and time.monotonic() < deadline:
        time.sleep(0.1)
    wait_sender(bot.orbit.home)
    for open_id in USERS:
        cards = [m["content"] for m in bot.cards(open_id)]
        assert len(cards) == 3, [c["header"]["title"]["content"] for c in cards]
        by_colour = {c["header"]["template"]: c for c in cards if "run " in text_of(c)[:200]}
        ok, failed = by_colour["green"], by_colour["red"]
        summary = next(c for c in cards if c["header"]["title"]["content"].startswith("group"))
        assert "succeeded" in ok["header"]["title"]["content"]
        assert "failed: exit code 3" in failed["header"]["title"]["content"]
        for card in (ok, failed):
            body = text_of(card)
            assert "peaks: memory" in body and "resources: 1 CPU, 0.25 GiB" in body, body
            assert "loss: 12" in body  # the final value (100 / 8, as the shell divides)
            (key,) = img_keys(card)
            assert png_size(bot.fs.images[key]) == (900, 500)
        fail_body = text_of(failed)
        assert "reason: exit code 3" in fail_body and "epoch 8" in fail_body
        (log,) = [e["content"] for e in failed["elements"] if e["tag"] == "markdown"]
        assert "epoch 8" in log and f"<{ZWSP}at id=all>" in log and "<at id=all>" not in log
        assert "group cards finished: 2 runs, 1 succeeded, 1 failed" in text_of(summary)
        assert "best" in text_of(summary) and "exit code 3" in text_of(summary)
        (key,) = img_keys(summary)
        assert png_size(bot.fs.images[key]) == (900, 500)
    uuids = [m["uuid"] for m in bot.cards()]
    assert all(uuids) and len(set(uuids)) == 6
    outcomes = [r["outcome"] for r in bot.log()]
    assert outcomes == ["sent"] * 3, bot.log()
    assert all("sent to Alice, Bob" in r["detail"] for r in bot.log())


@pytest.mark.slow  # the real sender process, retries at real speed
def test_a_wrong_secret_is_one_journal_line_and_no_retry_storm(bot: Bot) -> None:
    bot.pair(USERS)
    tokens = r"/open-apis/auth/v3/tenant_access_token/internal"
    # `notify add` checked the secret and started the bot, which fails here (this stand-in has
    # no long connection) and is not started again for minutes: its requests are all made.
    failed = control.wait_state(bot.home, "phone", 30)
    assert failed is not None and failed["state"] == "failed", failed
    before = len(bot.fs.requests_to(tokens))
    bot.fs.apps[bot.app_id].secret = "rotated-in-the-console"
    bot.settle(bot.new_run(group=None))
    deadline = time.monotonic() + 20
    while not bot.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    wait_sender(bot.orbit.home)
    (line,) = bot.log()
    assert line["outcome"] == "given up", line
    assert "the app secret is wrong" in line["detail"] and "10014" in line["detail"]
    assert "Credentials & Basic Info" in line["detail"]
    # Given up at once: the sender is gone, it asked for a token once and nothing else.
    assert len(bot.fs.requests_to(tokens)) == before + 1
    assert not bot.cards() and not bot.fs.images


@pytest.mark.slow  # the real sender process, retries at real speed
def test_a_retry_after_a_transient_error_reaches_nobody_twice(bot: Bot) -> None:
    bot.pair(USERS)
    failed_once = threading.Event()
    send = _authorized(_send)

    def flaky(fs: StandinFeishu, req: Req) -> Answer:
        body = req.json if isinstance(req.json, dict) else {}
        if body.get("receive_id") == "ou_bob" and not failed_once.is_set():
            failed_once.set()
            return 500, {"code": 1000, "msg": "internal error"}
        return send(fs, req)

    bot.fs.route("POST", r"/open-apis/im/v1/messages", flaky)
    run = bot.new_run(group=None)
    bot.settle(run)
    deadline = time.monotonic() + 30
    while len(bot.cards("ou_bob")) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    wait_sender(bot.orbit.home)
    assert [r["outcome"] for r in bot.log()] == ["retrying", "sent"], bot.log()
    assert "Bob: sending a message: internal error" in bot.log()[0]["detail"]
    # Alice got it on the first attempt; the retry sent her the same uuid, a no-op.
    assert len(bot.cards("ou_alice")) == 1 and len(bot.cards("ou_bob")) == 1
    sends = [r for r in bot.fs.requests_to(r"/open-apis/im/v1/messages") if r.method == "POST"]
    to_alice = [r.json["uuid"] for r in sends if r.json["receive_id"] == "ou_alice"]
    assert len(to_alice) == 2 and len(set(to_alice)) == 1
    assert f"run {run} failed" in bot.cards("ou_bob")[0]["content"]["header"]["title"]["content"]


@pytest.mark.slow  # the real sender process, retries at real speed
def test_a_sender_killed_mid_delivery_is_replaced_and_nobody_gets_the_card_twice(
    bot: Bot,
) -> None:
    bot.pair(USERS)
    held, release = threading.Event(), threading.Event()
    send = _authorized(_send)

    def holding(fs: StandinFeishu, req: Req) -> Answer:
        answer = send(fs, req)  # delivered; its answer is held until the sender is dead
        body = req.json if isinstance(req.json, dict) else {}
        if body.get("receive_id") == "ou_bob" and not held.is_set():
            held.set()
            release.wait(15)
        return answer

    bot.fs.route("POST", r"/open-apis/im/v1/messages", holding)
    bot.settle(bot.new_run(group=None))
    assert held.wait(20)
    pid = sender_pid(bot.orbit.home)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while sender_pid(bot.orbit.home) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    release.set()
    # A tick sees the batch left in flight and no sender: it starts one, which sends the
    # same card again to both users, with the same uuids: Feishu keeps the first of each.
    tick = bot.orbit("scheduler", "tick")
    assert tick.code == 0, tick.err
    deadline = time.monotonic() + 20
    while len(bot.fs.requests_to(r"/open-apis/im/v1/messages")) < 4:
        assert time.monotonic() < deadline, bot.fs.requests_to(r"/open-apis/im/v1/messages")
        time.sleep(0.05)
    wait_sender(bot.orbit.home)
    assert len(bot.cards("ou_alice")) == 1 and len(bot.cards("ou_bob")) == 1
    assert [r["outcome"] for r in bot.log()] == ["sent"], bot.log()


@pytest.mark.slow  # the real sender process, retries at real speed
def test_no_paired_user_drops_the_card_with_a_line_saying_how_to_pair(bot: Bot) -> None:
    bot.settle(bot.new_run(group=None))
    deadline = time.monotonic() + 20
    while not bot.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    wait_sender(bot.orbit.home)
    (line,) = bot.log()
    assert line["outcome"] == "given up" and "no paired users yet" in line["detail"]
    assert "orbit notify pair phone CODE" in line["detail"]
    assert not bot.fs.requests_to(r"/open-apis/im/v1/messages")


@pytest.mark.slow  # the real sender process, retries at real speed
def test_notify_test_sends_the_sample_card_with_curves_one_line_per_user(bot: Bot) -> None:
    alone = bot.orbit("notify", "test", "phone")
    assert alone.code != 0 and "no paired users yet" in alone.err, alone
    assert alone.err.count("\n") == 1
    bot.pair(USERS)
    res = bot.orbit("notify", "test", "phone")
    assert res.code == 0, res
    lines = res.out.strip().split("\n")
    assert lines == ["notify phone: sent to Alice (ou_alice)", "notify phone: sent to Bob (ou_bob)"]
    (image,) = bot.fs.images.values()
    assert png_size(image) == (900, 500)
    for open_id in USERS:
        (card,) = [m["content"] for m in bot.cards(open_id)]
        assert img_keys(card) == list(bot.fs.images)
    as_json = bot.orbit("notify", "test", "phone", "--json").json()
    assert as_json["ok"] and [u["name"] for u in as_json["users"]] == ["Alice", "Bob"]
    bot.fs.apps[bot.app_id].secret = "rotated"
    wrong = bot.orbit("notify", "test", "phone")
    assert wrong.code == 2 and wrong.err.count("\n") == 1, wrong
    assert "Credentials & Basic Info" in wrong.err


def test_a_card_stays_under_feishus_limit_and_says_run_text_plainly(bot: Bot) -> None:
    run_id = bot.new_run(group=None, name="<at id=all></at>*bold*")
    run_dir = bot.store.run_dir(run_id)
    long_line = "x" * 3000
    (run_dir / "log.txt").write_text("\n".join(f"{i} {long_line} ```" for i in range(200)))
    metrics = [json.dumps({"step": i, **{f"m{k}": i * k for k in range(40)}}) for i in range(50)]
    (run_dir / METRICS).write_text("\n".join(metrics) + "\n")
    bot.settle(run_id)
    stop_sender(bot.orbit.home)
    card = run_card(bot.home, run_id, image_key="img_v2_x")
    size = len(json.dumps(card, ensure_ascii=False).encode())
    assert size <= CARD_BYTES, size
    assert card["header"]["template"] == "red" and img_keys(card) == ["img_v2_x"]
    body = text_of(card)
    assert "more metrics" in body and "the log's last" in body
    for element in card["elements"]:
        if element.get("tag") == "markdown":  # the log only, its backticks broken up
            assert "```" not in element["content"].strip("`\n")
        else:
            assert "lark_md" not in json.dumps(element)
    with pytest.raises(Exception, match="no run"):
        run_card(bot.home, "nope")


def test_the_curves_of_a_huge_metrics_file_come_within_the_budget(tmp_path: Path) -> None:
    home = Home.from_environ({"ORBIT_HOME": str(tmp_path / "home")})
    store = RunStore(home)
    run_id = store.create(
        {"name": None, "group": None, "command": ["true"], "resources": {"cpus": 1, "mem_gb": 1}},
        reason="waiting",
        actor="test",
    ).id
    line = b'{"step": %d, "loss": %f, "acc": %f}\n'
    chunk = b"".join(line % (i, 1 / (i + 1), i / 1e6) for i in range(200_000))
    with open(store.run_dir(run_id) / METRICS, "wb") as fh:
        for _ in range(4):  # about 40 MB
            fh.write(chunk)
    run = store.load(run_id)
    started = time.monotonic()
    png = curves_png([run], budget_s=1.0)
    took = time.monotonic() - started
    assert png is not None and png_size(png) == (900, 500)
    assert took < 3.0, took
    empty = store.load(store.create({"name": None, "group": None, "command": ["true"],
                                     "resources": {"cpus": 1, "mem_gb": 1}},
                                    reason="waiting", actor="test").id)  # fmt: skip
    assert curves_png([empty]) is None

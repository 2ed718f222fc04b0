"""The Feishu bot's process (orbit/feishu/bot.py) with the real lark-oapi SDK against the
stand-in Feishu and its long connection (standins/feishu_ws.py), over loopback: pairing,
answers, the SDK's reconnect, one binding per app, and `orbit notify pair/list/rm`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Orbit
from standins.feishu import StandinFeishu
from standins.feishu_ws import StandinFeishuWS

from orbit.feishu import control
from orbit.notify.lark import binding_of
from orbit.store.feishu import bot_dir, update_users
from orbit.store.home import Home

WAIT_S = 25.0


@pytest.fixture
def fs() -> Iterator[StandinFeishu]:
    with StandinFeishu() as server:
        yield server


@pytest.fixture
def ws(fs: StandinFeishu) -> Iterator[StandinFeishuWS]:
    with StandinFeishuWS(fs) as server:
        yield server


def home_of(orbit: Orbit) -> Home:
    return Home(orbit.home, orbit.environ)


def add_app(orbit: Orbit, fs: StandinFeishu, name: str = "phone",
            app: tuple[str, str] | None = None) -> tuple[str, str]:  # fmt: skip
    app_id, secret = app or fs.add_app()
    res = orbit("notify", "add", name, "--kind", "feishu-app", "--app-id", app_id,
                "--domain", fs.base, "--secret-stdin", stdin=secret)  # fmt: skip
    assert res.code == 0, res
    return app_id, secret


def wait_for(orbit: Orbit, state: str, name: str = "phone", since: float = 0.0) -> dict[str, Any]:
    record = control.wait_state(home_of(orbit), name, WAIT_S, since, states=(state,))
    assert record is not None and record["state"] == state, (record, log_of(orbit, name))
    return record


def log_of(orbit: Orbit, name: str = "phone") -> str:
    path = bot_dir(home_of(orbit), name) / "bot.log"
    return path.read_text() if path.exists() else "(no log)"


@pytest.fixture
def stopper(orbit: Orbit) -> Iterator[list[tuple[Home, str]]]:
    bots: list[tuple[Home, str]] = []
    yield bots
    for home, name in [(home_of(orbit), "phone"), *bots]:
        try:
            control.stop(home, name)
        except Exception:
            pass


def pair_user(orbit: Orbit, open_id: str, name: str = "phone", chat_id: str = "") -> None:
    def change(users: Any) -> None:
        users.paired[open_id] = {"name": "Alice", "chat_id": chat_id, "paired_at": "", "by": "t"}

    update_users(home_of(orbit), name, change)


def test_a_paired_user_is_answered_over_the_long_connection(
    orbit: Orbit, fs: StandinFeishu, ws: StandinFeishuWS, stopper: list[Any]
) -> None:
    fs.add_user("ou_alice", "Alice")
    app_id, _ = add_app(orbit, fs)
    pair_user(orbit, "ou_alice")
    control.start(home_of(orbit), "phone")
    record = wait_for(orbit, "connected")
    assert record["app_id"] == app_id and ws.connections(app_id) == 1

    message_id = ws.send_message(app_id, "ou_alice", "/gpu")
    assert ws.wait_ack(message_id)["code"] == 200
    reply = fs.wait_sent(lambda m: m["reply_to"] == message_id)
    assert reply["msg_type"] == "interactive", reply
    text = json.dumps(reply["content"])
    assert "/gpu" in text and binding_of(str(orbit.home)) in text

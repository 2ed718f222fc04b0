"""The Feishu bot's process (orbit/feishu/bot.py) with the real lark-oapi SDK against the
stand-in Feishu and its long connection (standins/feishu_ws.py), over loopback: pairing,
answers, the SDK's reconnect, one binding per app, and `orbit notify pair/list/rm`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit
from standins.feishu import StandinFeishu
from standins.feishu_ws import StandinFeishuWS, record_foreign

from orbit.feishu import control
from orbit.feishu.machine import LOCK_DIR
from orbit.notify.lark import binding_of
from orbit.store.feishu import bot_dir, bot_worker, read_connection, update_users
from orbit.store.home import Home

WAIT_S = 25.0


@pytest.fixture
def fs() -> Iterator[StandinFeishu]:
    with StandinFeishu() as server:
        yield server
    for app_id in server.apps:  # the machine locks of this test's apps (their bots are gone)
        (LOCK_DIR / f"{app_id}.lock").unlink(missing_ok=True)


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


def replies_to(fs: StandinFeishu, message_id: str) -> list[dict[str, Any]]:
    with fs.lock:
        return [m for m in fs.sent if m["reply_to"] == message_id]


def text_of(message: dict[str, Any]) -> str:
    return json.dumps(message["content"], ensure_ascii=False)


def test_the_bot_pairs_answers_resumes_and_is_removed(
    orbit: Orbit, fs: StandinFeishu, ws: StandinFeishuWS, stopper: list[Any]
) -> None:
    """One bot's life: connected; a stranger gets a code (the same one when asking again) and
    no data; `notify pair` pairs them and tells them; their message is answered by a card,
    once even when Feishu redelivers it, and in a group only when the bot is mentioned; the
    connection cut and resumed; `notify list`; `notify rm` stops the bot and its files."""
    fs.add_user("ou_bob", "Bob")
    app_id, _ = add_app(orbit, fs)  # starts its bot
    home = home_of(orbit)
    record = wait_for(orbit, "connected")
    assert record["app_id"] == app_id and ws.connections(app_id) == 1
    pid = record["pid"]
    assert ws.pings >= 1  # the SDK pings at once, and reads the pong's ClientConfig

    # A stranger: a code, as text, and nothing else.
    first = ws.send_message(app_id, "ou_bob", "/runs")
    assert ws.wait_ack(first)["code"] == 200
    hint = fs.wait_sent(lambda m: m["reply_to"] == first)
    assert hint["msg_type"] == "text", hint
    said = hint["content"]["text"]
    assert said.startswith("Ask Orbit's owner to run: orbit notify pair phone "), said
    code = said.rsplit(" ", 1)[1]
    assert len(code) == 6 and str(orbit.home) not in said and "binding" not in said
    again = ws.send_message(app_id, "ou_bob", "hello?")
    assert code in fs.wait_sent(lambda m: m["reply_to"] == again)["content"]["text"]

    wrong = orbit("notify", "pair", "phone", "ZZZZZZ")
    assert wrong.code != 0 and wrong.err.count("\n") == 1 and "not known" in wrong.err, wrong
    res = orbit("notify", "pair", "phone", code.lower())
    assert res.code == 0 and res.out == "paired ou_bob with the bot phone\n", res
    told = fs.wait_sent(lambda m: m["receive_id"] == "ou_bob" and m["reply_to"] is None)
    assert "Paired" in told["content"]["text"]
    used = orbit("notify", "pair", "phone", code)
    assert used.code != 0 and "not known" in used.err, used

    # Paired: a card; a redelivered event is not answered twice.
    asked = ws.send_message(app_id, "ou_bob", "/gpu")
    card = fs.wait_sent(lambda m: m["reply_to"] == asked)
    assert card["msg_type"] == "interactive" and "GPUs and the queue" in text_of(card), card
    assert binding_of(str(orbit.home)) in text_of(card)
    ws.redeliver(asked)
    assert ws.wait_ack(asked)["code"] == 200
    time.sleep(0.5)
    assert len(replies_to(fs, asked)) == 1

    # A group: answered only when the bot is mentioned, the mention taken out.
    quiet = ws.send_message(app_id, "ou_bob", "just chatting", chat_type="group")
    ws.wait_ack(quiet)
    called = ws.send_message(app_id, "ou_bob", "@_user_1 /show 3", chat_type="group",
                             mentions=[ws.mention(app_id)])  # fmt: skip
    card = fs.wait_sent(lambda m: m["reply_to"] == called)
    assert "no run '3'" in text_of(card), card  # /show 3, the mention gone: answered
    assert replies_to(fs, quiet) == []

    # The connection cut: the SDK reconnects (the endpoint busy once: reconnecting is seen).
    cut = time.time()
    fs.fail(r"/callback/ws/endpoint", 500, {"code": 1, "msg": "system busy"}, times=1)
    ws.drop(app_id)
    wait_for(orbit, "reconnecting", since=cut)
    wait_for(orbit, "connected", since=cut)
    later = ws.send_message(app_id, "ou_bob", "/gpu")
    assert "GPUs and the queue" in text_of(fs.wait_sent(lambda m: m["reply_to"] == later))

    listed = orbit("notify", "list")
    assert listed.code == 0, listed
    line = listed.out.splitlines()[-1]
    assert line.startswith("bot phone: connected since 20") and "paired: ou_bob" in line, line
    (shown,) = json.loads(orbit("notify", "list", "--json").out)
    bot = shown["bot"]
    assert bot["state"] == "connected" and bot["running"] and bot["pid"] == pid
    assert bot["binding"] == binding_of(str(orbit.home))
    assert [u["open_id"] for u in bot["paired"]] == ["ou_bob"]

    removed = orbit("notify", "rm", "phone")
    assert removed.code == 0 and "its bot stopped" in removed.out, removed
    assert not bot_dir(home, "phone").exists() and not bot_worker(home, "phone").alive()
    ws.wait_connections(app_id, 0)
    gone = orbit("notify", "pair", "phone", code)
    assert gone.code != 0 and gone.err.count("\n") == 1, gone


def test_a_code_expires_and_unpair(orbit: Orbit, fs: StandinFeishu) -> None:
    """Pairing without a bot process: an expired code is refused, unpair by name."""
    from orbit.feishu import pairing

    add_app(orbit, fs)
    home = home_of(orbit)
    control.stop(home, "phone")  # no long connection here
    old = pairing.code_for(home, "phone", "ou_carol", who="Carol")
    assert pairing.code_for(home, "phone", "ou_carol") == old

    def age(users: Any) -> None:
        users.codes[old]["issued_at"] -= pairing.CODE_TTL_S + 1

    update_users(home, "phone", age)
    res = orbit("notify", "pair", "phone", old)
    assert res.code != 0 and "has expired" in res.err and res.err.count("\n") == 1, res
    new = pairing.code_for(home, "phone", "ou_carol", who="Carol")
    assert new != old
    res = orbit("notify", "pair", "phone", new)  # the bot cannot tell Carol: a warning only
    assert res.code == 0 and "paired Carol (ou_carol)" in res.out, res
    assert "could not tell them" in res.err
    res = orbit("notify", "unpair", "phone", "Carol")
    assert res.code == 0 and res.out == "unpaired Carol (ou_carol) from the bot phone\n", res
    res = orbit("notify", "unpair", "phone", "Carol")
    assert res.code != 0 and "no paired user" in res.err, res
    (shown,) = json.loads(orbit("notify", "list", "--json").out)
    assert shown["bot"]["state"] == "not running" and shown["bot"]["paired"] == []


def test_the_tick_starts_a_dead_bot_and_a_second_binding_is_refused(
    orbit: Orbit, fs: StandinFeishu, ws: StandinFeishuWS, tmp_path: Path, stopper: list[Any]
) -> None:
    """A tick starts the bot that is not running (also after it was killed); a bot of the
    same app from another home of this machine is refused, naming the one that holds it."""
    app = add_app(orbit, fs)
    home = home_of(orbit)
    first = wait_for(orbit, "connected")
    os.kill(first["pid"], signal.SIGKILL)
    deadline = time.monotonic() + WAIT_S
    while bot_worker(home, "phone").alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert orbit("scheduler", "tick").code == 0
    second = wait_for(orbit, "connected", since=first["at"] + 0.001)
    assert second["pid"] != first["pid"]

    other = Orbit(tmp_path / "other-home", tmp_path)
    other.environ = {**orbit.environ, "ORBIT_HOME": str(other.home)}
    add_app(other, fs, "laptop", app=app)
    stopper.append((home_of(other), "laptop"))
    record = wait_for(other, "refused", name="laptop")
    assert f"ORBIT_HOME={orbit.home}" in record["detail"] and "phone" in record["detail"]
    line = orbit_list_line(other)
    assert line.startswith("bot laptop: refused: app ") and "one bot per app" in line, line
    assert ws.connections(app[0]) == 1

    # SIGTERM (control.stop): the SDK's loop stopped, the websocket closed, "stopped".
    assert control.stop(home, "phone")
    record = read_connection(home, "phone")
    assert record is not None and record["state"] == "stopped", record
    ws.wait_connections(app[0], 0)
    assert orbit_list_line(orbit).startswith("bot phone: not running; paired: nobody yet")


def orbit_list_line(orbit: Orbit) -> str:
    return orbit("notify", "list").out.splitlines()[-1]


def test_another_machines_binding_is_refused(orbit: Orbit, fs: StandinFeishu) -> None:
    """A paired chat holds a recent message of the same app tagged by another machine."""
    fs.add_user("ou_dan", "Dan")
    app_id, secret = fs.add_app()
    chat = fs.chat_of(app_id, "ou_dan")
    pair_user(orbit, "ou_dan", chat_id=chat)
    record_foreign(fs, fs.apps[app_id], chat, "orbit binding: gpu-box-2:/srv/orbit")
    add_app(orbit, fs, app=(app_id, secret))  # starts its bot
    record = wait_for(orbit, "refused")
    assert "gpu-box-2:/srv/orbit" in record["detail"] and chat in record["detail"], record


def test_a_wrong_secret_and_a_refused_connection_fail_with_a_line(
    orbit: Orbit, fs: StandinFeishu, ws: StandinFeishuWS, stopper: list[Any]
) -> None:
    app_id, _ = add_app(orbit, fs)
    home = home_of(orbit)
    control.stop(home, "phone")
    fs.apps[app_id].secret = "rotated"  # the secret in notify.yaml is no longer the app's
    assert control.start(home, "phone")
    record = wait_for(orbit, "failed")
    assert "the app secret is wrong" in record["detail"] and "\n" not in record["detail"]
    line = orbit_list_line(orbit)
    assert line.startswith("bot phone: failed: token: the app secret is wrong"), line

    # The endpoint refuses the app (as for an app not in long-connection mode): the SDK's
    # ClientException, with Feishu's code and message.
    app2 = fs.add_app()
    ws.refuse(app2[0], 1000040351, "the app has not enabled the long connection")
    add_app(orbit, fs, "tablet", app=app2)  # starts its bot
    record = wait_for(orbit, "failed", name="tablet")
    detail = record["detail"]
    assert "the app has not enabled the long connection (code 1000040351)" in detail, detail
    assert "long connection (persistent connection) mode" in detail
    deadline = time.monotonic() + WAIT_S
    while bot_worker(home, "tablet").alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not bot_worker(home, "tablet").alive()


def test_the_unit_verifies_and_is_installed_and_removed(
    orbit: Orbit, fs: StandinFeishu, tmp_path: Path
) -> None:
    from orbit.service.feishu_unit import render_unit, unit_name

    user = tmp_path / "user"
    (user / "run").mkdir(parents=True, mode=0o700)
    orbit.environ.update(HOME=str(user), XDG_CONFIG_HOME=str(user / ".config"),
                         XDG_RUNTIME_DIR=str(user / "run"))  # fmt: skip
    orbit.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd"
    unit = tmp_path / unit_name("phone")
    unit.write_text(render_unit(home_of(orbit), "phone"))
    done = subprocess.run([analyze, "--user", "verify", str(unit)], capture_output=True,
                          text=True, env=orbit.environ, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done
    text = unit.read_text()
    assert f"# orbit-home: {orbit.home}\n" in text and " -m orbit.feishu.bot phone\n" in text

    add_app(orbit, fs)
    control.stop(home_of(orbit), "phone")
    res = orbit("notify", "install", "phone", "--json")
    assert res.code == 0, res
    installed = user / ".config" / "systemd" / "user" / unit_name("phone")
    assert res.json()["files"] == [str(installed)] and installed.read_text() == text
    removed = orbit("notify", "rm", "phone", "--json")
    assert removed.code == 0 and removed.json()["unit_removed"], removed
    assert not installed.exists()
    webhook = orbit("notify", "add", "hook", "--kind", "webhook", "--url", "https://x.test/h")
    assert webhook.code == 0, webhook
    res = orbit("notify", "install", "hook")
    assert res.code == 2 and "not a feishu-app bot" in res.err and res.err.count("\n") == 1


def test_a_tag_is_history_once_this_binding_answered_since(fs: StandinFeishu) -> None:
    """foreign_binding: another binding's tag counts only when newer than this one's last
    message in that chat and recent; a card's note carries the tag as a text's last line does."""
    from orbit.feishu.binding import foreign_binding
    from orbit.notify.lark import Lark, bindings_in, card
    from orbit.store.feishu import Users

    fs.add_user("ou_erin", "Erin")
    app_id, secret = fs.add_app()
    mine = Lark(fs.base, app_id, secret, binding="here:/h")
    chat = str(mine.send("ou_erin", "text", {"text": "hi"})["chat_id"])
    users = Users({"ou_erin": {"chat_id": chat}})
    assert foreign_binding(mine, users, "here:/h") is None
    record_foreign(fs, fs.apps[app_id], chat, "orbit binding: there:/x y")
    found = foreign_binding(mine, users, "here:/h")
    assert found is not None and found.binding == "there:/x y" and found.chat_id == chat
    assert foreign_binding(mine, users, "here:/h", now=time.time() + 2 * 86400) is None  # old
    sent = mine.send("ou_erin", "interactive", card("t", "", []))  # answered since: history
    assert bindings_in(str(sent["body"]["content"])) == ["here:/h"]
    assert foreign_binding(mine, users, "here:/h") is None

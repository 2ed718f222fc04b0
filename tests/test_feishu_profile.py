"""A Feishu app as a notify profile (`notify add --kind feishu-app`), and Orbit's Open API
client (orbit/notify/lark.py) against the stand-in Feishu: every call over real HTTP."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator

import pytest
from conftest import Orbit
from standins.feishu import StandinFeishu

from orbit.notify.lark import Lark, LarkError, card, plain
from orbit.store.feishu import load_users, update_users
from orbit.store.home import Home

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


@pytest.fixture
def fs() -> Iterator[StandinFeishu]:
    with StandinFeishu() as server:
        yield server


def test_an_app_is_added_with_its_secret_checked_and_kept_private(
    orbit: Orbit, fs: StandinFeishu
) -> None:
    app_id, secret = fs.add_app()
    add = ("notify", "add", "phone", "--kind", "feishu-app", "--app-id", app_id)
    wrong = orbit(*add, "--domain", fs.base, "--secret-stdin", stdin="not-the-secret\n")
    assert wrong.code == 2 and wrong.err.count("\n") == 1, wrong
    assert "the app secret is wrong" in wrong.err and "10014" in wrong.err, wrong
    assert "not-the-secret" not in wrong.err and not (orbit.home / "notify.yaml").exists()

    res = orbit(*add, "--domain", fs.base, "--secret-stdin", stdin=secret + "\n")
    assert res.code == 0, res
    assert secret not in res.out + res.err and app_id in res.out
    saved = orbit.home / "notify.yaml"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and secret in saved.read_text()
    listed = orbit("notify", "list", "--json")
    (shown,) = json.loads(listed.out)
    assert shown["kind"] == "feishu-app" and shown["app_id"] == app_id
    assert secret not in listed.out and shown["url"].startswith(fs.base.split(":")[0])

    # One app, one bot: a second profile of this home on the same app is refused.
    again = orbit("notify", "add", "tablet", "--kind", "feishu-app", "--app-id", app_id,
                  "--domain", fs.base, "--secret-stdin", stdin=secret)  # fmt: skip
    assert again.code == 5 and "already the bot phone" in again.err, again


@pytest.mark.parametrize(
    ("extra", "stdin", "words"),
    [
        ((), "s", "needs --app-id"),
        (("--app-id", "nope"), "s", "a Feishu app id (cli_"),
        (("--app-id", "cli_a1"), "", "nothing on stdin"),
        (("--app-id", "cli_a1", "--url-env", "X"), "s", "not a URL"),
        (("--app-id", "cli_a1", "--domain", "ftp://x"), "s", "--domain takes feishu, lark"),
    ],
)
def test_bad_app_options_are_one_line(
    orbit: Orbit, extra: tuple[str, ...], stdin: str, words: str
) -> None:
    res = orbit("notify", "add", "phone", "--kind", "feishu-app", "--secret-stdin", *extra,
                stdin=stdin)  # fmt: skip
    assert res.code == 2 and res.err.count("\n") == 1 and words in res.err, res
    assert not (orbit.home / "notify.yaml").exists()


def test_an_unknown_app_and_an_unreachable_feishu(orbit: Orbit, fs: StandinFeishu) -> None:
    add = ("notify", "add", "phone", "--kind", "feishu-app", "--app-id", "cli_unknown0")
    res = orbit(*add, "--domain", fs.base, "--secret-stdin", stdin="x")
    assert res.code == 2 and "the app id is unknown" in res.err, res
    res = orbit(*add, "--domain", "http://127.0.0.1:9", "--secret-stdin", stdin="x")
    assert res.code == 2 and "not reached" in res.err and res.err.count("\n") == 1, res


def test_webhook_kinds_still_need_a_url(orbit: Orbit) -> None:
    res = orbit("notify", "add", "team", "--kind", "slack")
    assert res.code == 2 and "needs its URL" in res.err, res
    res = orbit(
        "notify", "add", "team", "--kind", "slack", "--app-id", "cli_x", "--url", "http://h/x"
    )
    assert res.code == 2 and "go with --kind feishu-app" in res.err, res


def test_the_client_sends_replies_updates_lists_and_uploads(fs: StandinFeishu) -> None:
    app_id, secret = fs.add_app()
    fs.add_user("ou_alice", "Alice")
    lark = Lark(fs.base, app_id, secret)
    first = card("run 1 succeeded", "succeeded", [{"tag": "div", "text": plain("<at id=all>")}])
    sent = lark.send("ou_alice", "interactive", first, uuid="run-1-succeeded")
    again = lark.send("ou_alice", "interactive", first, uuid="run-1-succeeded")
    assert again["message_id"] == sent["message_id"] and len(fs.sent) == 1  # deduplicated
    assert fs.sent[0]["content"]["header"]["template"] == "green"
    key = lark.upload_image(PNG)
    assert fs.images[key] == PNG
    pictured = card("x", "failed", [{"tag": "img", "img_key": key, "alt": plain("loss")}])
    lark.reply(sent["message_id"], "interactive", pictured)
    assert fs.sent[-1]["reply_to"] == sent["message_id"]
    lark.patch(sent["message_id"], card("updated", "failed", []))
    newest = lark.messages(sent["chat_id"])
    assert [m["message_id"] for m in newest][-1] == sent["message_id"]
    assert json.loads(newest[-1]["body"]["content"])["header"]["template"] == "red"
    assert lark.bot_info()["open_id"] == fs.apps[app_id].bot_open_id
    assert len(fs.requests_to(r".*/tenant_access_token/internal")) == 1  # the token is cached

    with pytest.raises(LarkError, match="not found") as missing:
        lark.send(
            "ou_alice", "interactive", card("x", "", [{"tag": "img", "img_key": "img_v2_no"}])
        )
    assert not missing.value.retry
    with pytest.raises(LarkError, match="230013"):
        lark.send("ou_nobody", "text", {"text": "hi"})
    with pytest.raises(LarkError, match="recognise image"):
        lark.upload_image(b"GIF89a")


def test_an_expired_token_is_fetched_again_and_errors_say_whether_to_retry(
    fs: StandinFeishu,
) -> None:
    app_id, secret = fs.add_app()
    fs.add_user("ou_alice", "Alice")
    lark = Lark(fs.base, app_id, secret)
    lark.token()
    fs.apps[app_id].tokens.clear()  # Feishu no longer takes it
    lark.send("ou_alice", "text", {"text": "hi"})
    assert len(fs.requests_to(r".*/tenant_access_token/internal")) == 2
    fs.fail(r"/open-apis/im/v1/messages", 503, b"busy")
    with pytest.raises(LarkError) as busy:
        lark.send("ou_alice", "text", {"text": "hi"})
    assert busy.value.retry and "HTTP 503" in str(busy.value)
    fs.fail(
        r"/open-apis/im/v1/messages",
        400,
        {"code": 99991400, "msg": "request trigger frequency limit"},
    )
    with pytest.raises(LarkError) as limited:
        lark.send("ou_alice", "text", {"text": "hi"})
    assert limited.value.retry and limited.value.code == 99991400


def test_users_are_changed_under_a_lock_and_kept_private(tmp_path: object) -> None:
    from pathlib import Path

    home = Home(Path(str(tmp_path)) / "home", {})
    assert load_users(home, "phone").paired == {}
    update_users(home, "phone", lambda u: u.paired.update({"ou_a": {"name": "A", "by": "scan"}}))
    path = home.root / "feishu" / "phone" / "users.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_users(home, "phone").paired["ou_a"]["by"] == "scan"
    path.write_text("{broken")
    from orbit.errors import CorruptError

    with pytest.raises(CorruptError, match=r"users\.json cannot be read"):
        load_users(home, "phone")
    with pytest.raises(CorruptError):
        update_users(home, "phone", lambda u: u.paired.clear())
    assert path.read_text() == "{broken"  # never overwritten

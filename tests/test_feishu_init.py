"""`orbit feishu init NAME` (an app created by QR code: the accounts host's device flow) and
`orbit feishu check NAME`, against the stand-in Feishu and its registration host on loopback.

Most tests see the path where the long connection does not come up (no stand-in long
connection: the bot fails to connect), where the console pages are printed and the exit is
non-zero; one goes end to end with the real bot connected to the stand-in's long connection.
"""

from __future__ import annotations

import json
import re
import signal
import stat
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import Orbit
from standins.feishu import StandinFeishu
from standins.feishu_registration import ENDPOINT, StandinRegistration
from standins.feishu_ws import StandinFeishuWS

from orbit.feishu import control
from orbit.feishu.machine import LOCK_DIR
from orbit.feishu.registration import Flow, addons, encode_addons, qr_url
from orbit.store.feishu import load_users
from orbit.store.home import Home

QR_BLOCKS = set("▀▄█")
# The --json contract (docs/notify.md): the exact keys agents may rely on.
QR_EVENT = {"event", "url", "expires_in"}
INIT_RESULT = {"event", "ok", "outcome", "profile", "app_id", "url", "open_id", "paired",
               "checks", "fix"}  # fmt: skip
INIT_FAILED = {"event", "ok", "outcome", "error"}
CHECK = {"profile", "ok", "app_id", "paired", "checks", "fix"}
CHECK_ITEM = {"check", "ok", "detail", "fix"}
FIX = {"page", "url", "why"}


@pytest.fixture
def fs() -> Iterator[StandinFeishu]:
    with StandinFeishu() as server:
        yield server


@pytest.fixture
def reg(fs: StandinFeishu) -> StandinRegistration:
    return StandinRegistration(fs)


@pytest.fixture
def home(orbit: Orbit) -> Iterator[Home]:
    """The home's Home; every bot a test started is stopped after it."""
    home = Home(orbit.home, {})
    yield home
    bots = home.root / "feishu"
    for where in bots.iterdir() if bots.is_dir() else []:
        control.stop(home, where.name)


def profiles(orbit: Orbit) -> list[dict[str, object]]:
    return json.loads(orbit("notify", "list", "--json").out)


def test_init_creates_the_app_keeps_it_pairs_the_scanner_and_names_the_pages_to_fix(
    orbit: Orbit, fs: StandinFeishu, reg: StandinRegistration, home: Home
) -> None:
    reg.when_begun(reg.approve, open_id="ou_alice", name="Alice")
    res = orbit("feishu", "init", "phone", "--domain", fs.base, "--wait", "0.5")
    assert res.code == 1, res  # no long connection in this stand-in: the bot cannot connect
    # The QR code in half blocks, its link under it.
    assert sum(line.count("█") for line in res.out.splitlines()) > 100, res.out
    link = next(line for line in res.out.splitlines() if line.startswith("or open: "))
    query = parse_qs(urlsplit(link.removeprefix("or open: ")).query)
    assert query["from"] == ["sdk"] and query["createOnly"] == ["true"]
    assert query["addons"] == [encode_addons(addons())]

    (shown,) = profiles(orbit)
    app_id = str(shown["app_id"])
    secret = fs.apps[app_id].secret
    assert shown["kind"] == "feishu-app"
    assert shown["source"] == "init" and app_id in res.out
    assert secret not in res.out + res.err
    saved = orbit.home / "notify.yaml"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and secret in saved.read_text()

    paired = load_users(home, "phone").paired
    assert list(paired) == ["ou_alice"] and paired["ou_alice"]["by"] == "init"
    card = fs.wait_sent(lambda m: m["receive_id"] == "ou_alice", timeout=1)
    assert card["app_id"] == app_id and card["msg_type"] == "interactive"
    assert paired["ou_alice"]["chat_id"] == card["chat_id"]  # known once the card went
    assert "card ok" in res.out

    # The long connection did not come up: one line each, the pages to fix.
    assert "connection FAILED" in res.err and "bot.log" in res.err
    assert f"https://open.feishu.cn/app/{app_id}/event?tab=event" in res.err
    assert f"https://open.feishu.cn/app/{app_id}/version" in res.err
    assert "persistent connection" in res.err and "Traceback" not in res.err

    # The name is taken now: refused before any QR code.
    again = orbit("feishu", "init", "phone", "--domain", fs.base)
    assert again.code == 5 and again.err.count("\n") == 1 and not again.out, again
    assert len(reg.codes) == 1


def test_init_json_is_lines_a_qr_event_then_the_result(
    orbit: Orbit, fs: StandinFeishu, reg: StandinRegistration, home: Home
) -> None:
    reg.when_begun(reg.approve, open_id="ou_bob", name="Bob")
    res = orbit("feishu", "init", "phone", "--domain", fs.base, "--wait", "0.5", "--json")
    assert res.code == 1, res
    lines = [json.loads(line) for line in res.out.splitlines()]
    assert [e["event"] for e in lines] == ["qr", "result"]
    qr, result = lines
    assert set(qr) == QR_EVENT and set(result) == INIT_RESULT
    assert all(set(c) == CHECK_ITEM for c in result["checks"])
    assert all(set(f) == FIX for f in result["fix"])
    assert qr["url"].startswith(fs.base + "/page/launcher?user_code=") and qr["expires_in"] == 60
    assert not QR_BLOCKS & set(res.out)
    assert result["ok"] is False and result["outcome"] == "created"
    assert result["open_id"] == "ou_bob" and result["paired"] is True
    assert {c["check"]: c["ok"] for c in result["checks"]} == {"connection": False, "card": True}
    assert [f["page"] for f in result["fix"]] == ["events", "version"]
    assert fs.apps[result["app_id"]].secret not in res.out


@pytest.mark.parametrize(
    ("scan", "words"),
    [
        ("deny", r"the scan was declined in Feishu: nothing was created"),
        ("expire", r"the QR code expired after \d+ s: run `orbit feishu init phone` again"),
    ],
)
def test_a_declined_or_expired_code_stores_nothing(
    orbit: Orbit, fs: StandinFeishu, reg: StandinRegistration, scan: str, words: str
) -> None:
    reg.when_begun(getattr(reg, scan))
    res = orbit("feishu", "init", "phone", "--domain", fs.base)
    assert res.code == 1 and re.fullmatch(f"orbit: {words}\n", res.err), res
    assert not (orbit.home / "notify.yaml").exists() and not (orbit.home / "feishu").exists()
    assert not fs.apps


def test_a_hung_poll_cannot_hang_init(
    orbit: Orbit, fs: StandinFeishu, reg: StandinRegistration
) -> None:
    reg.expires_in, reg.hang = 1, 30.0  # every poll held far past the code's lifetime
    started = time.monotonic()
    res = orbit("feishu", "init", "phone", "--domain", fs.base, "--json")
    took = time.monotonic() - started
    assert res.code == 1 and "the QR code expired after" in res.err, res
    assert took < 8, took  # the code's 1 s and the watchdog's grace, not the poll's 30 s
    failed = json.loads(res.out.splitlines()[-1])
    assert failed["outcome"] == "expired" and set(failed) == INIT_FAILED
    assert not (orbit.home / "notify.yaml").exists()


def test_ctrl_c_while_waiting_is_130_and_stores_nothing(
    orbit: Orbit, fs: StandinFeishu, reg: StandinRegistration
) -> None:
    proc = orbit.proc("feishu", "init", "phone", "--domain", fs.base)
    try:
        code = reg.wait_begun()
        assert proc.stdout is not None
        shown = []
        for line in proc.stdout:  # up to the line that says it waits for the scan
            shown.append(line)
            if line.startswith("waiting for the scan"):
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 130, (shown, out, err)
    assert any(line.startswith("or open: ") for line in shown)
    assert err == "orbit: interrupted\n", err
    reg.approve(code)  # scanned too late: nothing is kept of it
    assert not (orbit.home / "notify.yaml").exists() and not (orbit.home / "feishu").exists()


def test_a_second_init_of_an_app_already_kept_is_refused(
    orbit: Orbit, fs: StandinFeishu, reg: StandinRegistration
) -> None:
    app_id, secret = fs.add_app()
    add = ("notify", "add", "phone", "--kind", "feishu-app", "--app-id", app_id)
    assert orbit(*add, "--domain", fs.base, "--secret-stdin", stdin=secret).code == 0
    reg.when_begun(reg.approve, app_id=app_id)  # the scanner picks the same app again
    res = orbit("feishu", "init", "tablet", "--domain", fs.base, "--json")
    assert res.code == 5 and "already the bot phone" in res.err, res
    result = json.loads(res.out.splitlines()[-1])
    assert set(result) == INIT_FAILED and result["outcome"] == "failed"
    assert [p["name"] for p in profiles(orbit)] == ["phone"]
    assert not (orbit.home / "feishu" / "tablet").exists() and not fs.sent


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("bad name!",), "bad notify profile name"),
        (("phone", "--domain", "ftp://x"), "--domain takes feishu, lark"),
        (("phone", "--domain", "http://127.0.0.1:9"), "not reached"),
        (("phone", "--wait", "0"), "expected a positive number"),
    ],
)
def test_bad_init_input_is_one_line(orbit: Orbit, args: tuple[str, ...], words: str) -> None:
    res = orbit("feishu", "init", *args)
    assert res.code in (1, 2) and res.err.count("\n") == 1 and words in res.err, res
    assert not (orbit.home / "notify.yaml").exists()


def test_a_host_without_client_secret_registration_is_one_line(
    orbit: Orbit, fs: StandinFeishu
) -> None:
    StandinRegistration(fs, methods=("private_key_jwt",))
    res = orbit("feishu", "init", "phone", "--domain", fs.base)
    assert res.code == 1 and res.err.count("\n") == 1, res
    assert "does not offer app registration with a client secret" in res.err


def test_the_flow_slows_down_and_follows_a_lark_tenant_to_larks_host(fs: StandinFeishu) -> None:
    reg = StandinRegistration(fs)
    with StandinFeishu() as lark_host:
        lark_host.route("POST", ENDPOINT, reg._serve)  # the same registrations, Lark's host
        slept: list[float] = []
        statuses: list[str] = []
        flow = Flow(fs.base, lark_host.base, sleep=slept.append)
        begun = flow.begin()
        reg.slow_down = 2
        app_id, secret = reg.approve(open_id="ou_lark", brand="lark")
        done = flow.wait(begun, statuses.append)
        assert (done.app_id, done.secret, done.open_id, done.brand) == (
            app_id, secret, "ou_lark", "lark",
        )  # fmt: skip
        assert slept == [5.2, 10.2]  # each slow_down adds 5 s to the interval
        assert statuses == ["slow_down", "slow_down", "domain_switched"]
        assert len(lark_host.requests_to(ENDPOINT)) == 1  # the last poll, at Lark's host


def test_the_sdk_registers_against_the_stand_in_in_the_same_shapes(fs: StandinFeishu) -> None:
    """The official SDK's register_app against the stand-in: the stand-in speaks what the SDK
    expects, and Orbit's requests and link carry what the SDK's do."""
    from lark_oapi.scene import registration as sdk

    reg = StandinRegistration(fs)
    reg.when_begun(reg.approve, open_id="ou_sdk")
    shown: dict[str, object] = {}
    result = sdk.register_app(
        on_qr_code=shown.update,
        source="orbit",
        domain=fs.base,
        lark_domain=fs.base,
        app_preset={"name": "Orbit"},
        addons=addons(),
        create_only=True,
    )
    assert result["user_info"]["open_id"] == "ou_sdk"
    assert fs.apps[result["client_id"]].secret == result["client_secret"]
    sdk_forms = [r.form for r in fs.requests_to(ENDPOINT)]

    reg2 = StandinRegistration(fs)
    reg2.when_begun(reg2.approve, open_id="ou_orbit")
    flow = Flow(fs.base, fs.base)
    begun = flow.begin()
    flow.wait(begun)
    orbit_forms = [r.form for r in fs.requests_to(ENDPOINT)][len(sdk_forms) :]

    def shape(forms: list[dict[str, str] | None]) -> list[dict[str, str]]:
        return [{k: ("…" if k == "device_code" else v) for k, v in (f or {}).items()}
                for f in forms[:3]]  # fmt: skip

    assert shape(orbit_forms) == shape(sdk_forms)  # init, begin, the first poll
    assert encode_addons(addons()) == sdk._encode_addons(addons())

    def query(url: str) -> dict[str, list[str]]:
        found = parse_qs(urlsplit(url).query)
        found.pop("user_code")
        return found

    uri = f"{fs.base}/page/launcher?user_code=X"
    assert query(qr_url(uri)) == query(str(shown["url"]))


# --- check ------------------------------------------------------------------------------------
@pytest.fixture
def phone(orbit: Orbit, fs: StandinFeishu, home: Home) -> str:
    """A feishu-app profile `phone` with Alice and Bob paired; its app id."""
    from orbit.store.feishu import update_users

    app_id, secret = fs.add_app()
    add = ("notify", "add", "phone", "--kind", "feishu-app", "--app-id", app_id)
    assert orbit(*add, "--domain", fs.base, "--secret-stdin", stdin=secret).code == 0
    fs.add_user("ou_alice", "Alice")
    fs.add_user("ou_bob", "Bob")

    def pair(users: object) -> None:
        for open_id, name in (("ou_alice", "Alice"), ("ou_bob", "Bob")):
            users.paired[open_id] = {"name": name, "chat_id": None,  # type: ignore[attr-defined]
                                     "paired_at": "", "by": "code"}  # fmt: skip

    update_users(home, "phone", pair)
    return app_id


def test_check_with_a_wrong_secret_is_one_line(orbit: Orbit, fs: StandinFeishu, phone: str) -> None:
    fs.apps[phone].secret = "changed-in-the-console"
    res = orbit("feishu", "check", "phone")
    assert res.code == 1 and res.err.count("\n") == 1 and not res.out, res
    assert "the app secret is wrong" in res.err
    assert f"https://open.feishu.cn/app/{phone}/baseinfo" in res.err
    assert not fs.sent  # nothing tried after the secret (the bot was started by notify add)


def test_check_reconnects_tries_the_bot_and_a_card_to_each_paired_user(
    orbit: Orbit, fs: StandinFeishu, phone: str, home: Home
) -> None:
    # Bob's card is refused for a missing scope: the permissions page, with the scopes asked.
    fs.fail(r"/open-apis/im/v1/messages", 400,
            {"code": 99991672, "msg": "Access denied. One of the following scopes is required"},
            times=1)  # fmt: skip
    res = orbit("feishu", "check", "phone", "--wait", "0.5")
    assert res.code == 1, res
    assert "secret ok" in res.out and "bot ok: Orbit" in res.out
    assert "connection FAILED" in res.err
    assert res.out.count("card ok") + res.err.count("card FAILED") == 2
    assert "99991672" in res.err
    assert f"https://open.feishu.cn/app/{phone}/auth?q=im%3Amessage%3Asend_as_bot" in res.err
    assert f"/app/{phone}/event?tab=event" in res.err and f"/app/{phone}/version" in res.err
    paired = load_users(home, "phone").paired
    assert sum(1 for u in paired.values() if u["chat_id"]) == 1  # the one whose card went

    res = orbit("feishu", "check", "phone", "--wait", "0.5", "--json")
    body = json.loads(res.out)
    assert res.code == 1 and body["ok"] is False and body["paired"] == 2, res
    assert set(body) == CHECK and all(set(c) == CHECK_ITEM for c in body["checks"])
    checks = [(c["check"], c["ok"]) for c in body["checks"]]
    assert checks == [("secret", True), ("connection", False), ("bot", True),
                      ("card", True), ("card", True)]  # fmt: skip
    assert [f["page"] for f in body["fix"]] == ["events", "version"]


def test_check_refuses_what_is_not_a_bot(orbit: Orbit) -> None:
    orbit("notify", "add", "team", "--kind", "slack", "--url-stdin", stdin="https://h/x\n")
    res = orbit("feishu", "check", "team")
    assert res.code == 2 and res.err.count("\n") == 1 and "not a Feishu app's bot" in res.err
    res = orbit("feishu", "check", "nobody")
    assert res.code == 3 and res.err.count("\n") == 1, res
    res = orbit("feishu")
    assert res.code == 2 and "choose an action" in res.err, res


def test_init_and_check_are_ready_when_the_bot_connects(
    orbit: Orbit, fs: StandinFeishu, reg: StandinRegistration, home: Home
) -> None:
    """End to end: the stand-in plays the scan, init keeps the app, pairs the scanner, starts
    the real bot, whose SDK client connects to the stand-in's long connection, and sends the
    test card; the scanner's /runs is then answered with a card; check reconnects and tests."""
    reg.when_begun(reg.approve, open_id="ou_alice", name="Alice")
    # --wait 60: the bot's SDK import and connection took over 20 s on a loaded machine
    # (CI with other work beside it); the commands return as soon as the bot is connected.
    with StandinFeishuWS(fs) as ws:
        res = orbit("feishu", "init", "phone", "--domain", fs.base, "--wait", "60")
        assert res.code == 0 and not res.err, res
        assert "connection ok" in res.out and "card ok" in res.out and "ready" in res.out
        app_id = next(iter(fs.apps))
        assert ws.connections(app_id) == 1
        asked = ws.send_message(app_id, "ou_alice", "/runs")
        answered = fs.wait_sent(lambda m: m["reply_to"] == asked)
        assert answered["msg_type"] == "interactive", answered
        assert "no runs" in json.dumps(answered["content"]).lower(), answered
        res = orbit("feishu", "check", "phone", "--wait", "60")
        assert res.code == 0 and not res.err, res
        assert "all is well" in res.out and res.out.count("card ok") == 1
        ws.wait_connections(app_id, 1)  # the bot, restarted by check, connected again
    assert len([m for m in fs.sent if m["receive_id"] == "ou_alice"]) == 2
    (LOCK_DIR / f"{app_id}.lock").unlink(missing_ok=True)


def test_a_lark_apps_pages_are_on_larks_console() -> None:
    from orbit.feishu import console
    from orbit.notify.lark import DOMAINS

    pages = console.for_connection(DOMAINS["lark"], "cli_a1") + console.for_send(
        DOMAINS["feishu"], "cli_a1", 99991672
    )
    assert [f.url.split("/app/")[0] for f in pages] == [
        "https://open.larksuite.com", "https://open.larksuite.com",
        "https://open.feishu.cn", "https://open.feishu.cn",
    ]  # fmt: skip
    assert [f.page for f in pages] == ["events", "version", "permissions", "version"]

"""Each platform's rendering, sent to a real local HTTP server standing in for the endpoint.

The server checks what the platform checks, with verifiers written here from each platform's
documented algorithm (not from orbit's code): Feishu's sign (HMAC-SHA256 keyed with
f"{timestamp}\\n{secret}" over nothing, base64, in the body), DingTalk's (HMAC-SHA256 keyed
with the secret over f"{timestamp_ms}\\n{secret}", base64, URL-encoded in the query), the
byte limit of WeCom markdown, Slack's block limits, and the webhook recipe of docs/notify.md,
executed as written there. Replies come back through the same server to `judge`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from orbit.errors import UsageError
from orbit.notify.message import Message
from orbit.notify.platforms import KINDS, RATES, Rate, Request, judge, render

DOCS = Path(__file__).resolve().parents[1] / "docs" / "notify.md"
SECRET = "SECa1b2c3d4e5f6"
HUGE_LOG = "\n".join(f"第{i}行 训练失败 🚀🔥 loss=nan Ωμ" * 3 for i in range(3000))


@dataclass
class Received:
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Endpoint:
    """A local HTTP server: records each POST and answers with `reply` (status, body)."""

    url: str
    received: list[Received] = field(default_factory=list)
    reply: tuple[int, bytes] = (200, b"ok")

    def send(self, request: Request) -> tuple[int, bytes]:
        """POST `request` as a sender would, returning the endpoint's status and body."""
        req = urllib.request.Request(
            request.url, data=request.body, headers=request.headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state: dict[str, Endpoint] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = urlsplit(self.path)
            headers = {k: v for k, v in self.headers.items()}
            state["ep"].received.append(Received(parts.path, parts.query, headers, body))
            status, data = state["ep"].reply
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["ep"] = Endpoint(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state["ep"]
    server.shutdown()
    server.server_close()


def failure(code: str | None = HUGE_LOG, **changes: Any) -> Message:
    base = Message(
        key="run-12-failed",
        event="failed",
        title="run 12 (lr-0.1) failed: exit code 1",
        state="failed",
        fields=[("state", "failed (exit code 1)"), ("duration", "1h02m"), ("loss", "0.01")],
        lines=["loss █▆▄▂▁ 1 → 0.01 (min 0.01, max 1, 100 points)"],
        code=code,
        link="http://orbit.test:7777/runs/12",
    )
    for k, v in changes.items():
        setattr(base, k, v)
    return base


# --- Feishu -------------------------------------------------------------------------------
def feishu_verifies(body: dict[str, Any], secret: str) -> bool:
    """Feishu's check: HMAC-SHA256 with key = timestamp + "\\n" + secret, message empty."""
    key = f"{body['timestamp']}\n{secret}".encode()
    expected = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
    fresh = abs(time.time() - int(body["timestamp"])) < 3600  # seconds, within an hour
    return fresh and hmac.compare_digest(expected, body["sign"])


def test_feishu_card_is_signed_as_feishu_verifies_and_fits_20_kb(endpoint: Endpoint) -> None:
    endpoint.reply = (200, b'{"code":0,"msg":"success","data":{}}')
    req = render(
        "feishu", endpoint.url + "/open-apis/bot/v2/hook/t", SECRET, failure(), time.time()
    )
    status, reply = endpoint.send(req)
    got = endpoint.received[0]
    body = json.loads(got.body)
    assert got.path == "/open-apis/bot/v2/hook/t"
    assert isinstance(body["timestamp"], str) and len(body["timestamp"]) == 10  # seconds
    assert feishu_verifies(body, SECRET)
    assert not feishu_verifies(body, SECRET + "x")  # the verifier can say no
    assert body["msg_type"] == "interactive"
    card = body["card"]
    assert card["header"]["template"] == "red"
    assert card["header"]["title"] == {"tag": "plain_text", "content": failure().title}
    assert len(got.body) <= 20_000 and len(got.body) > 15_000  # cut to fit, not emptied
    text = json.dumps(card, ensure_ascii=False)
    assert HUGE_LOG.split("\n")[-1] in text  # the log's last line survives the cut
    assert HUGE_LOG.split("\n")[0] not in text
    assert "http://orbit.test:7777/runs/12" in text
    assert judge("feishu", status, reply).ok


def test_feishu_without_secret_has_no_signature_and_colours_by_state(endpoint: Endpoint) -> None:
    done = failure(None, state="succeeded", event="succeeded", title="run 12 succeeded")
    req = render("feishu", endpoint.url, None, done, time.time())
    body = json.loads(req.body)
    assert "sign" not in body and "timestamp" not in body
    assert body["card"]["header"]["template"] == "green"
    assert "hr" not in json.dumps(body)  # no log section for a success


# --- DingTalk -----------------------------------------------------------------------------
def test_dingtalk_markdown_signed_in_the_query_as_dingtalk_verifies(endpoint: Endpoint) -> None:
    endpoint.reply = (200, b'{"errcode":0,"errmsg":"ok"}')
    url = endpoint.url + "/robot/send?access_token=tok123"
    status, reply = endpoint.send(render("dingtalk", url, SECRET, failure(), time.time()))
    got = endpoint.received[0]
    query = parse_qs(got.query)
    assert query["access_token"] == ["tok123"]
    ts = query["timestamp"][0]
    assert len(ts) == 13 and abs(time.time() * 1000 - int(ts)) < 3600_000  # milliseconds
    string_to_sign = f"{ts}\n{SECRET}".encode()
    digest = hmac.new(SECRET.encode(), string_to_sign, hashlib.sha256).digest()
    assert query["sign"][0] == base64.b64encode(digest).decode()
    assert "%3D" in got.query  # the base64 padding arrives URL-encoded
    body = json.loads(got.body)
    assert body["msgtype"] == "markdown"
    assert body["markdown"]["title"] == failure().title
    text = body["markdown"]["text"]
    assert text.startswith("#### ❌ run 12 (lr-0.1) failed: exit code 1")
    assert "- **duration**: 1h02m" in text
    assert "> " + HUGE_LOG.split("\n")[-1] in text
    assert "[Open in Orbit](http://orbit.test:7777/runs/12)" in text
    assert len(got.body) <= 20_000
    assert judge("dingtalk", status, reply).ok


# --- WeCom --------------------------------------------------------------------------------
@pytest.mark.parametrize("shift", range(4))
def test_wecom_huge_multibyte_log_stays_within_4096_bytes(endpoint: Endpoint, shift: int) -> None:
    """CJK (3 bytes) and emoji (4 bytes) with the cut falling at every offset."""
    endpoint.reply = (200, b'{"errcode":0,"errmsg":"ok"}')
    log = "a" * shift + HUGE_LOG + "\n最后一行 😀 last line"
    req = render("wecom", endpoint.url + "/cgi-bin/webhook/send?key=k", "ignored", failure(log), 0)
    status, reply = endpoint.send(req)
    got = endpoint.received[0]
    content = json.loads(got.body.decode("utf-8", "strict"))["markdown"]["content"]
    raw = content.encode("utf-8")
    assert 3500 < len(raw) <= 4096  # full, not emptied
    raw.decode("utf-8", "strict")
    assert content.endswith("[Open in Orbit](http://orbit.test:7777/runs/12)")
    assert "> 最后一行 😀 last line" in content
    assert content.startswith('**<font color="warning">run 12 (lr-0.1) failed')
    assert got.query == "key=k" and "sign" not in got.body.decode()
    assert judge("wecom", status, reply).ok


def test_wecom_cannot_be_made_to_mention_someone() -> None:
    req = render("wecom", "http://x", None, failure("oops <@zhangsan>", title="<@all> run"), 0)
    content = json.loads(req.body)["markdown"]["content"]
    assert "<@" not in content


# --- Slack --------------------------------------------------------------------------------
def slack_limits_broken(body: dict[str, Any]) -> list[str]:
    """Slack's documented block limits, checked independently of orbit's constants."""
    broken = []
    blocks = body["blocks"]
    if len(blocks) > 50:
        broken.append("more than 50 blocks")
    if not body.get("text"):
        broken.append("no text fallback")
    for b in blocks:
        if b["type"] == "header" and len(b["text"]["text"]) > 150:
            broken.append("header over 150")
        if b["type"] == "section":
            if "text" in b and len(b["text"]["text"]) > 3000:
                broken.append("section text over 3000")
            if len(b.get("fields", [])) > 10:
                broken.append("more than 10 fields")
            if any(len(f["text"]) > 2000 for f in b.get("fields", [])):
                broken.append("field over 2000")
    return broken


def test_slack_blocks_keep_every_limit_with_a_text_fallback(endpoint: Endpoint) -> None:
    many = failure(
        title="t" * 400,
        fields=[(f"metric_{i}", "v" * 3000) for i in range(30)],
        lines=[f"line {i} <b>&" for i in range(2000)],
    )
    status, reply = endpoint.send(render("slack", endpoint.url, None, many, 0))
    body = json.loads(endpoint.received[0].body)
    assert slack_limits_broken(body) == []
    assert slack_limits_broken({"text": "x", "blocks": [{"type": "section", "fields": []}] * 51})
    code = [b for b in body["blocks"] if b.get("text", {}).get("text", "").startswith("```")]
    assert len(code) == 1 and HUGE_LOG.split("\n")[-1] in code[0]["text"]["text"]
    lines = next(b for b in body["blocks"] if "line 0" in b.get("text", {}).get("text", ""))
    assert lines["text"]["type"] == "plain_text"  # as written: plain_text is never parsed
    assert "line 0 <b>&" in lines["text"]["text"] and "more" in lines["text"]["text"]
    assert body["blocks"][-1]["elements"][0]["url"] == "http://orbit.test:7777/runs/12"
    assert status == 200 and judge("slack", status, reply).ok


def test_slack_small_message_is_whole(endpoint: Endpoint) -> None:
    msg = failure("Traceback\nValueError: bad")
    body = json.loads(render("slack", endpoint.url, None, msg, 0).body)
    assert body["text"].startswith("run 12 (lr-0.1) failed: exit code 1")
    assert body["blocks"][0]["text"]["text"] == "❌ run 12 (lr-0.1) failed: exit code 1"
    assert any(
        b.get("text", {}).get("text") == "```Traceback\nValueError: bad```" for b in body["blocks"]
    )


# --- Generic webhook ------------------------------------------------------------------------
def doc_recipe() -> Callable[..., bool]:
    """The `verify` function of docs/notify.md's recipe, executed as a receiver would paste it."""
    text = DOCS.read_text()
    section = text.split("## Verifying Orbit's webhook signature", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "the recipe's code block is missing"
    namespace: dict[str, Any] = {}
    exec(code.group(1), namespace)
    verify: Callable[..., bool] = namespace["verify"]
    return verify


def test_webhook_signature_verifies_with_the_documented_recipe(endpoint: Endpoint) -> None:
    verify = doc_recipe()
    msg = failure("Traceback\nValueError: bad 日志")
    endpoint.send(render("webhook", endpoint.url + "/hook", SECRET, msg, time.time()))
    got = endpoint.received[0]
    headers = got.headers
    assert headers["X-Orbit-Signature-256"].startswith("sha256=")
    assert verify(SECRET, headers, got.body)
    assert not verify("another secret", headers, got.body)
    assert not verify(SECRET, headers, got.body.replace(b"bad", b"good"))
    old = {**headers, "X-Orbit-Timestamp": str(int(headers["X-Orbit-Timestamp"]) - 600)}
    assert not verify(SECRET, old, got.body)  # a replay with a changed timestamp
    stale = render("webhook", endpoint.url, SECRET, msg, time.time() - 3600)
    assert not verify(SECRET, stale.headers, stale.body)  # signed an hour ago
    event = json.loads(got.body)
    assert (
        event["format"] == 1
        and Message.from_json({k: v for k, v in event.items() if k != "format"}) == msg
    )
    assert headers["X-Orbit-Event"] == "failed" and headers["X-Orbit-Key"] == "run-12-failed"


def test_webhook_without_secret_is_unsigned() -> None:
    req = render("webhook", "http://x", None, failure(None), 1_700_000_000)
    assert "X-Orbit-Signature-256" not in req.headers
    assert req.headers["X-Orbit-Timestamp"] == "1700000000"


# --- Judging answers --------------------------------------------------------------------------
JUDGED = [
    # kind, status, body, ok, retry
    ("feishu", 200, b'{"code":0,"msg":"success","data":{}}', True, False),
    ("feishu", 200, b'{"StatusCode":0,"StatusMessage":"success"}', True, False),
    ("feishu", 200, b'{"code":11232,"msg":"frequency limited"}', False, True),
    (
        "feishu",
        200,
        b'{"code":19021,"msg":"sign match fail or timestamp is not within one hour"}',
        False,
        False,
    ),
    ("feishu", 200, b"<html>proxy</html>", False, False),
    ("dingtalk", 200, b'{"errcode":0,"errmsg":"ok"}', True, False),
    ("dingtalk", 200, b'{"errcode":130101,"errmsg":"send too fast"}', False, True),
    ("dingtalk", 200, b'{"errcode":310000,"errmsg":"sign not match"}', False, False),
    ("wecom", 200, b'{"errcode":0,"errmsg":"ok"}', True, False),
    ("wecom", 200, b'{"errcode":45009,"errmsg":"api freq out of limit"}', False, True),
    ("wecom", 200, b'{"errcode":93000,"errmsg":"invalid webhook url"}', False, False),
    ("slack", 200, b"ok", True, False),
    ("slack", 400, b"invalid_payload", False, False),
    ("slack", 404, b"no_service", False, False),
    ("slack", 429, b"rate_limited", False, True),
    ("webhook", 204, b"", True, False),
    ("webhook", 500, b"boom", False, True),
    ("webhook", 503, b"unavailable", False, True),
    ("webhook", 401, b"bad signature", False, False),
    ("feishu", 502, b"bad gateway", False, True),
]


@pytest.mark.parametrize(("kind", "status", "reply", "ok", "retry"), JUDGED)
def test_judge_reads_the_real_reply(
    endpoint: Endpoint, kind: str, status: int, reply: bytes, ok: bool, retry: bool
) -> None:
    endpoint.reply = (status, reply)
    got_status, got_body = endpoint.send(
        render(kind, endpoint.url, SECRET, failure(None), time.time())
    )
    verdict = judge(kind, got_status, got_body)
    assert (verdict.ok, verdict.retry) == (ok, retry)
    assert verdict.detail.startswith(f"HTTP {status}") and len(verdict.detail) <= 200
    if reply.strip():
        assert reply.decode()[:20] in verdict.detail


def test_rates_and_kinds() -> None:
    assert set(RATES) == {*KINDS, "feishu-app"}  # the webhooks' and a Feishu app's bot's
    assert RATES["feishu"] == Rate(5, 100) and RATES["feishu-app"] == Rate(5, None)
    assert RATES["dingtalk"] == Rate(None, 20) and RATES["wecom"] == Rate(None, 20)
    assert RATES["slack"] == Rate(1, None) and RATES["webhook"] == Rate(None, None)
    with pytest.raises(UsageError):
        render("telegram", "http://x", None, failure(), 0)


@pytest.mark.parametrize("kind", KINDS)
def test_a_lone_surrogate_or_a_huge_title_still_renders(kind: str) -> None:
    odd = failure("bad \ud800 byte", title="x" * 50_000 + "\udcff", lines=["ok \ud83d"] * 200)
    req = render(kind, "http://x", SECRET, odd, time.time())
    json.loads(req.body.decode("utf-8", "strict"))


@pytest.mark.parametrize(
    ("kind", "status", "reply", "limited"),
    [
        ("webhook", 429, b"slow down", True),
        ("slack", 429, b"rate_limited", True),
        ("feishu", 200, b'{"code":11232,"msg":"frequency limited"}', True),
        ("dingtalk", 200, b'{"errcode":130101,"errmsg":"send too fast"}', True),
        ("wecom", 200, b'{"errcode":45009,"errmsg":"api freq out of limit"}', True),
        ("webhook", 500, b"boom", False),
        ("feishu", 502, b"bad gateway", False),
        ("dingtalk", 200, b'{"errcode":310000,"errmsg":"sign not match"}', False),
    ],
)
def test_only_a_rate_limit_answer_holds_back_the_endpoint(
    kind: str, status: int, reply: bytes, limited: bool
) -> None:
    verdict = judge(kind, status, reply)
    assert verdict.limited == limited and not verdict.ok


def test_slack_backticks_stay_inside_the_code_block_and_run_text_is_never_formatted() -> None:
    log = "step 1\n```python\nboom```\nend`"
    msg = failure(
        log, fields=[("name", "*lr*_0.1_ ~x~ `y` <!channel>")], lines=["*all* _of_ ~it~ ```"]
    )
    body = json.loads(render("slack", "http://x", None, msg, 0).body)
    (code,) = [
        b["text"]["text"] for b in body["blocks"] if b.get("text", {}).get("type") == "mrkdwn"
    ]
    # One block that opens and closes once: no ``` (nor a backtick beside the fence) inside.
    assert code.startswith("```") and code.endswith("```") and code.count("```") == 2
    inner = code[3:-3]
    assert "``" not in inner and not inner.endswith("`") and inner.replace("\u200b", "") == log
    fields = [f for b in body["blocks"] for f in b.get("fields", [])]
    assert fields and all(f["type"] == "plain_text" for f in fields)  # Slack formats none
    assert {"type": "plain_text", "text": "name: *lr*_0.1_ ~x~ `y` <!channel>", "emoji": False} in (
        fields
    )
    (lines,) = [b["text"] for b in body["blocks"] if "all" in b.get("text", {}).get("text", "")]
    assert lines == {"type": "plain_text", "text": "*all* _of_ ~it~ ```", "emoji": False}

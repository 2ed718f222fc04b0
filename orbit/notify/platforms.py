"""Each platform's native shape, signature, limits and answer (docs/notify.md).

    render(kind, url, secret, message, now) -> Request   what to POST, signed, within limits
    judge(kind, status, body) -> Verdict                   sent, retry later, or given up
    RATES[kind]                                            how fast one endpoint may be sent to

Both functions are pure: no network, no clock (the caller passes `now`), no files.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from orbit.errors import UsageError
from orbit.notify.fit import cut, cut_bytes, fit, head, tail, tidy
from orbit.notify.message import Message

KINDS = ("feishu", "dingtalk", "wecom", "slack", "webhook")


@dataclass(frozen=True)
class Request:
    url: str  # the profile's URL, plus the signed query for dingtalk
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    retry: bool  # a failure worth retrying (429, 5xx, the platform's rate-limit code)
    detail: str  # the endpoint's answer, short, for `orbit notify log`
    limited: bool = False  # "too fast" (429, the platform's rate-limit code): the endpoint waits


@dataclass(frozen=True)
class Rate:
    per_second: float | None  # at most this many per second (None: no limit)
    per_minute: float | None  # at most this many per minute (None: no limit)


RATES: dict[str, Rate] = {
    "feishu": Rate(5, 100),  # per bot
    "dingtalk": Rate(None, 20),  # per robot; beyond it the robot is throttled for 10 minutes
    "wecom": Rate(None, 20),  # per robot
    "slack": Rate(1, None),  # about 1 per second, short bursts allowed
    "webhook": Rate(None, None),
    # A Feishu app's bot (feishu_app.py): Feishu allows 5 messages a second to one user; each
    # of Orbit's requests here is one card to every paired user, never merged into a digest.
    "feishu-app": Rate(5, None),
}

FEISHU_MAX_BODY = 20_000  # bytes of the request body (the platform's limit is 20 KB)
DINGTALK_MAX_BODY = 20_000  # Orbit's own bound: DingTalk's documentation states none
WECOM_MAX_CONTENT = 4096  # bytes of markdown.content, UTF-8
SLACK_SECTION_CHARS = 3000  # a section's text
SLACK_FIELD_CHARS = 2000  # one of a section's fields
SLACK_FIELDS = 10  # fields per section
SLACK_HEADER_CHARS = 150
SLACK_MAX_BLOCKS = 50
WEBHOOK_MAX_BODY = 256 * 1024
# A 2xx reply whose code is one of these means "too fast": worth sending again later.
RATE_LIMITED = {"feishu": {11232}, "dingtalk": {130101}, "wecom": {45009}}
DETAIL_CHARS = 200
JSON_TYPE = "application/json; charset=utf-8"

FEISHU_TEMPLATE = {"succeeded": "green", "failed": "red", "lost": "orange", "cancelled": "grey"}
WECOM_COLOR = {"succeeded": "info", "failed": "warning", "lost": "warning"}
MARK = {"succeeded": "✅", "failed": "❌", "lost": "⚠️", "cancelled": "⏹️"}
LINK_TEXT = "Open in Orbit"


def _json(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _b64_hmac(key: str, msg: str) -> str:
    digest = hmac.new(key.encode("utf-8"), msg.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def _mark(state: str) -> str:
    return MARK.get(state, "🔵")


# --- Feishu: an interactive card; the signature is HMAC-SHA256 keyed with
# f"{timestamp}\n{secret}" over an empty message, base64, beside msg_type in the body.
def feishu_sign(secret: str, timestamp: int) -> str:
    return _b64_hmac(f"{timestamp}\n{secret}", "")


def _feishu_card(m: Message) -> dict[str, Any]:
    # User text (names, reasons, logs) goes in plain_text only: lark_md would turn a run
    # named "<at id=all></at>" into a mention of everyone.
    elements: list[dict[str, Any]] = []
    if m.fields:
        fields = [
            {"is_short": True, "text": {"tag": "plain_text", "content": f"{k}: {v}"}}
            for k, v in m.fields
        ]
        elements.append({"tag": "div", "fields": fields})
    if m.lines:
        elements.append(
            {"tag": "div", "text": {"tag": "plain_text", "content": "\n".join(m.lines)}}
        )
    if m.code:
        elements.append({"tag": "hr"})
        elements.append({"tag": "div", "text": {"tag": "plain_text", "content": m.code}})
    if m.link:
        button = {"tag": "button", "text": {"tag": "plain_text", "content": LINK_TEXT}}
        button.update(type="primary", url=m.link)
        elements.append({"tag": "action", "actions": [button]})
    return {
        "config": {"wide_screen_mode": True},
        "header": {
            "title": {"tag": "plain_text", "content": m.title},
            "template": FEISHU_TEMPLATE.get(m.state, "blue"),
        },
        "elements": elements,
    }


def _feishu(url: str, secret: str | None, message: Message, now: float) -> Request:
    signed: dict[str, Any] = {}
    if secret:
        ts = int(now)
        signed = {"timestamp": str(ts), "sign": feishu_sign(secret, ts)}

    def body(m: Message) -> bytes:
        return _json({**signed, "msg_type": "interactive", "card": _feishu_card(m)})

    message = fit(message, lambda m: len(body(m)) <= FEISHU_MAX_BODY)
    return Request(url, body(message), {"Content-Type": JSON_TYPE})


# --- DingTalk: markdown; signed in the query: HMAC-SHA256 keyed with the secret over
# f"{timestamp_ms}\n{secret}", base64, URL-encoded.
def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    return _b64_hmac(secret, f"{timestamp_ms}\n{secret}")


def _dingtalk_text(m: Message) -> str:
    parts = [f"#### {_mark(m.state)} {m.title}"]
    if m.fields:
        parts.append("\n".join(f"- **{k}**: {v}" for k, v in m.fields))
    parts.extend(m.lines)
    if m.code:  # DingTalk's markdown has no code blocks: the log is quoted line by line
        parts.append("\n".join(f"> {line}" for line in m.code.split("\n")))
    if m.link:
        parts.append(f"[{LINK_TEXT}]({m.link})")
    return "\n\n".join(parts)


def _dingtalk(url: str, secret: str | None, message: Message, now: float) -> Request:
    if secret:
        ts = int(now * 1000)
        query = urlencode({"timestamp": ts, "sign": dingtalk_sign(secret, ts)})
        url += ("&" if "?" in url else "?") + query

    def body(m: Message) -> bytes:
        markdown = {"title": cut(m.title, 100), "text": _dingtalk_text(m)}
        return _json({"msgtype": "markdown", "markdown": markdown, "at": {"isAtAll": False}})

    message = fit(message, lambda m: len(body(m)) <= DINGTALK_MAX_BODY)
    return Request(url, body(message), {"Content-Type": JSON_TYPE})


# --- WeCom: markdown of at most 4096 bytes; the key in the URL is the only credential.
def _wecom_safe(text: str) -> str:
    return text.replace("<@", "< @")  # `<@userid>` would mention someone


def _wecom_content(m: Message) -> str:
    color = WECOM_COLOR.get(m.state, "comment")
    parts = [f'**<font color="{color}">{_wecom_safe(m.title)}</font>**']
    parts.extend(
        f'> {_wecom_safe(k)}: <font color="comment">{_wecom_safe(v)}</font>' for k, v in m.fields
    )
    parts.extend(_wecom_safe(line) for line in m.lines)
    if m.code:
        parts.extend(f"> {_wecom_safe(line)}" for line in m.code.split("\n"))
    if m.link:
        parts.append(f"[{LINK_TEXT}]({m.link})")
    return "\n".join(parts)


def _wecom(url: str, secret: str | None, message: Message, now: float) -> Request:
    message = fit(message, lambda m: len(_wecom_content(m).encode("utf-8")) <= WECOM_MAX_CONTENT)
    # fit() measured the bytes; cut_bytes only guards a message that cannot fit at all.
    content = cut_bytes(_wecom_content(message), WECOM_MAX_CONTENT)
    body = _json({"msgtype": "markdown", "markdown": {"content": content}})
    return Request(url, body, {"Content-Type": JSON_TYPE})


# --- Slack: blocks, with `text` as the notification's fallback. Text from a run (fields,
# lines) goes in plain_text objects, which Slack never formats: mrkdwn has no escape for
# `*`, `_`, `~` or a backtick, only for &, < and >. The log needs mrkdwn for its code block;
# there a zero-width space follows each backtick, so no ``` inside can close the block early
# (and none can touch the closing fence); the text reads the same.
ZWSP = "\u200b"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code_text(code: str | None) -> str:
    return f"```{_esc(code).replace('`', '`' + ZWSP)}```" if code else ""


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": False}


def _slack_blocks(m: Message) -> list[dict[str, Any]]:
    header = cut(f"{_mark(m.state)} {m.title}", SLACK_HEADER_CHARS)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": header, "emoji": True}}
    ]
    items = [_plain(cut(f"{k}: {v}", SLACK_FIELD_CHARS)) for k, v in m.fields]
    for i in range(0, len(items), SLACK_FIELDS):
        blocks.append({"type": "section", "fields": items[i : i + SLACK_FIELDS]})
    if m.lines:
        blocks.append({"type": "section", "text": _plain("\n".join(m.lines))})
    if m.code:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _code_text(m.code)}})
    if m.link:
        button = {
            "type": "button",
            "text": {"type": "plain_text", "text": LINK_TEXT},
            "url": m.link,
        }
        blocks.append({"type": "actions", "elements": [button]})
    return blocks[:SLACK_MAX_BLOCKS]


def _slack(url: str, secret: str | None, message: Message, now: float) -> Request:
    # Each section has its own limit: the log and the lines are cut to theirs separately.
    code = message.code
    if code:
        code = tail(code, lambda c: len(_code_text(c)) <= SLACK_SECTION_CHARS)
    lines = head(message.lines, lambda ls: len("\n".join(ls)) <= SLACK_SECTION_CHARS)
    m = replace(message, code=code, lines=lines)
    text = m.title + (f" {m.link}" if m.link else "")
    body = _json({"text": _esc(text), "blocks": _slack_blocks(m)})
    return Request(url, body, {"Content-Type": JSON_TYPE})


# --- A generic webhook: the message as JSON, signed GitHub-style over timestamp and body.
def webhook_signature(secret: str, timestamp: int, body: bytes) -> str:
    """`sha256=` and the hex HMAC-SHA256, keyed with the secret, of f"{timestamp}." + body."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _webhook(url: str, secret: str | None, message: Message, now: float) -> Request:
    def body(m: Message) -> bytes:
        return _json({"format": 1, **m.to_json()})

    message = fit(message, lambda m: len(body(m)) <= WEBHOOK_MAX_BODY)
    data = body(message)
    ts = int(now)
    headers = {
        "Content-Type": JSON_TYPE,
        "User-Agent": "orbit-notify",
        "X-Orbit-Event": message.event,
        "X-Orbit-Key": message.key,
        "X-Orbit-Timestamp": str(ts),
    }
    if secret:
        headers["X-Orbit-Signature-256"] = webhook_signature(secret, ts, data)
    return Request(url, data, headers)


RENDER: dict[str, Callable[[str, str | None, Message, float], Request]] = {
    "feishu": _feishu,
    "dingtalk": _dingtalk,
    "wecom": _wecom,
    "slack": _slack,
    "webhook": _webhook,
}


def render(kind: str, url: str, secret: str | None, message: Message, now: float) -> Request:
    """The request that delivers `message` to a `kind` endpoint at `url`, signed with
    `secret` (Feishu, DingTalk, webhook; WeCom and Slack have no signature and ignore it) as
    of `now` (epoch seconds), always within the platform's size limits: the log is cut from
    its head first, then the lines, the fields, the title. Raises UsageError for an unknown
    kind."""
    if kind not in RENDER:
        raise UsageError(f"unknown notification kind {kind!r} (kinds: {', '.join(KINDS)})")
    return RENDER[kind](url, secret, tidy(message), now)


def _detail(status: int, body: bytes) -> str:
    text = " ".join(body.decode("utf-8", "replace").split())
    return cut(f"HTTP {status}" + (f": {text}" if text else ""), DETAIL_CHARS)


def _error_code(kind: str, body: bytes) -> int | None:
    """The platform's error code in a 2xx reply: 0 for success, None when unreadable."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    names = ("code", "StatusCode") if kind == "feishu" else ("errcode",)
    for name in names:
        value = data.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def judge(kind: str, status: int, body: bytes) -> Verdict:
    """What an endpoint's answer means. 429 and 5xx: retry. Other non-2xx: give up. A 2xx
    from Feishu, DingTalk or WeCom is a success only when its JSON holds code/errcode 0; a
    non-zero code is a failure, retried only for the platform's rate-limit code; a reply
    without a readable code is a failure not retried (it may have been delivered). Slack and
    generic webhooks: any 2xx is a success. A 429 or a rate-limit code is `limited`: it holds
    back every message to that endpoint, where a 5xx holds back only its own."""
    detail = _detail(status, body)
    if status == 429:
        return Verdict(False, True, detail, limited=True)
    if 500 <= status <= 599:
        return Verdict(False, True, detail)
    if not 200 <= status <= 299:
        return Verdict(False, False, detail)
    if kind not in RATE_LIMITED:
        return Verdict(True, False, detail)
    code = _error_code(kind, body)
    if code == 0:
        return Verdict(True, False, detail)
    if code is None:
        return Verdict(False, False, cut(f"{detail} (no error code in the reply)", DETAIL_CHARS))
    limited = code in RATE_LIMITED[kind]
    return Verdict(False, limited, detail, limited=limited)

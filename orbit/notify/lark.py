"""Feishu's (and Lark's) Open API, the few calls a bot makes: a tenant token, send, reply and
update a message, read a chat, upload an image, read the bot's own identity.

The standard library only (urllib, no proxy, no redirects, a short timeout), as the webhooks'
post.py, so the sender and the CLI never import the SDK (about 5 s). Every answer is Feishu's
JSON envelope `{"code": 0, "msg": …, "data": …}`; any other code is a LarkError whose text is
one line, with whether trying again later may help (`retry`).

    Lark(base, app_id, secret).send(open_id, "interactive", card)

`base` is the Open API's origin: DOMAINS[brand], or a stand-in's `http://127.0.0.1:PORT`.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid as uuid_module
from typing import Any
from urllib.parse import quote, urlencode

from orbit.errors import OrbitError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from orbit.notify.profiles import Profile

DOMAINS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}
ACCOUNTS = {"feishu": "https://accounts.feishu.cn", "lark": "https://accounts.larksuite.com"}

TIMEOUT_S = 10.0
READ_LIMIT = 4 * 1024 * 1024  # of an answer (a chat's page of messages is the largest)
TOKEN_MARGIN_S = 300  # a cached token is renewed this long before it expires
# Answers that mean "too fast" or "busy": worth trying again later (Feishu's docs: frequency
# limit 99991400, the message API's rate limits 230020, internal errors 1000 …).
RETRY_CODES = {99991400, 230020, 11232, 1000, 1001, 99991401}
# The token was refused (expired or invalid): fetched again once, then given up.
TOKEN_CODES = {99991663, 99991668, 99991661}
SECRET_CODES = {10014: "the app secret is wrong", 10003: "the app id is unknown"}

# Every message Orbit's bots send says which binding (machine and home) sent it, so a bot can
# tell that the same app is also bound elsewhere (docs/notify.md#one-binding-per-app).
BINDING_PREFIX = "orbit binding: "
BINDING_RE = re.compile(re.escape(BINDING_PREFIX) + r"(\S+?:[^\n\"]+)")

TEMPLATE = {"succeeded": "green", "failed": "red", "lost": "orange", "cancelled": "grey"}


class LarkError(OrbitError):
    """Feishu refused a call, or could not be reached; `str()` is one line."""

    def __init__(self, what: str, code: int, msg: str, *, retry: bool) -> None:
        self.code, self.msg, self.retry = code, msg, retry
        super().__init__(f"{what}: {msg}" + (f" (Feishu code {code})" if code > 0 else ""))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}))


def base_of(domain: str) -> str:
    """`feishu`, `lark` or an http(s) origin: the Open API's origin."""
    if domain in DOMAINS:
        return DOMAINS[domain]
    if not domain.startswith(("http://", "https://")) or any(c.isspace() for c in domain):
        raise OrbitError(f"--domain takes feishu, lark or an http(s) URL, got {domain!r}")
    return domain.rstrip("/")


def accounts_of(domain: str) -> str:
    """The accounts host (app registration) for `domain`: its brand's, or the URL itself."""
    return ACCOUNTS.get(domain) or base_of(domain)


def binding_of(home_root: str, host: str | None = None) -> str:
    """This binding's name in messages: `HOST:HOME` (this machine's host name by default)."""
    return f"{host or socket.gethostname()}:{home_root}"


def bindings_in(content: str) -> list[str]:
    """The bindings named by the tags in a message's content (its JSON string, as read back)."""
    try:
        parsed: Any = json.loads(content)
    except ValueError:
        parsed = content
    found: list[str] = []
    stack = [parsed]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.extend(m.group(1).strip() for m in BINDING_RE.finditer(item))
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


class Lark:
    """One app's calls. Thread-safe: the token is shared under a lock.

    With `binding` (binding_of(…)), every message sent, replied or updated carries its tag:
    a last line of a text, a note at the end of a card's elements."""

    def __init__(
        self,
        base: str,
        app_id: str,
        secret: str,
        timeout: float = TIMEOUT_S,
        binding: str | None = None,
    ) -> None:
        self.base = base.rstrip("/")
        self.app_id = app_id
        self.secret = secret
        self.timeout = timeout
        self.binding = binding
        self._token: tuple[str, float] | None = None  # (token, expires at: time.time())
        self._lock = threading.Lock()

    # --- the token
    def token(self) -> str:
        with self._lock:
            if self._token and time.time() < self._token[1] - TOKEN_MARGIN_S:
                return self._token[0]
            body = {"app_id": self.app_id, "app_secret": self.secret}
            answer = self._call(
                "POST", "/open-apis/auth/v3/tenant_access_token/internal", body, None, "token"
            )
            token = answer.get("tenant_access_token")
            if not isinstance(token, str) or not token:
                raise LarkError("a tenant token", -1, "no tenant_access_token in the answer",
                                retry=False)  # fmt: skip
            expire = answer.get("expire")
            ttl = float(expire) if isinstance(expire, int | float) else 7200.0
            self._token = (token, time.time() + ttl)
            return token

    def forget_token(self) -> None:
        with self._lock:
            self._token = None

    # --- messages
    def send(
        self,
        receive_id: str,
        msg_type: str,
        content: dict[str, Any],
        id_type: str = "open_id",
        uuid: str | None = None,
    ) -> dict[str, Any]:
        """Send a message; Feishu's `data` (message_id, chat_id, …). `uuid` makes a repeat
        within an hour a no-op on Feishu's side (at most 50 characters)."""
        body: dict[str, Any] = {
            "receive_id": receive_id,
            "msg_type": msg_type,
            "content": json.dumps(self.tagged(msg_type, content), ensure_ascii=False),
        }
        if uuid:
            body["uuid"] = uuid[:50]
        path = "/open-apis/im/v1/messages?" + urlencode({"receive_id_type": id_type})
        return self._data("POST", path, body, "sending a message")

    def reply(
        self, message_id: str, msg_type: str, content: dict[str, Any], *, tag: bool = True
    ) -> dict[str, Any]:
        """Reply in the message's chat; without `tag`, no binding tag (a stranger's pairing
        code: they learn nothing of the machine)."""
        body = {
            "msg_type": msg_type,
            "content": json.dumps(
                self.tagged(msg_type, content) if tag else content, ensure_ascii=False
            ),
            "uuid": uuid_module.uuid4().hex,
        }
        path = f"/open-apis/im/v1/messages/{quote(message_id, safe='')}/reply"
        return self._data("POST", path, body, "replying")

    def patch(self, message_id: str, card: dict[str, Any]) -> dict[str, Any]:
        """Replace a card message's content (the card needs `config.update_multi`)."""
        body = {"content": json.dumps(self.tagged("interactive", card), ensure_ascii=False)}
        path = f"/open-apis/im/v1/messages/{quote(message_id, safe='')}"
        return self._data("PATCH", path, body, "updating a card")

    def tagged(self, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
        """`content` with this binding's tag (a copy; unchanged without a binding, or for a
        type or card shape that has no place for it)."""
        if not self.binding:
            return content
        tag = BINDING_PREFIX + self.binding
        if msg_type == "text" and isinstance(content.get("text"), str):
            return {**content, "text": f"{content['text']}\n{tag}"}
        elements = content.get("elements")
        if msg_type == "interactive" and isinstance(elements, list):
            note = {"tag": "note", "elements": [plain(tag)]}
            return {**content, "elements": [*elements, note]}
        return content

    def messages(self, chat_id: str, page_size: int = 20) -> list[dict[str, Any]]:
        """The chat's newest messages first (one page)."""
        query = urlencode(
            {
                "container_id_type": "chat",
                "container_id": chat_id,
                "sort_type": "ByCreateTimeDesc",
                "page_size": page_size,
            }
        )
        data = self._data("GET", f"/open-apis/im/v1/messages?{query}", None, "reading a chat")
        items = data.get("items")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    # --- images and the bot
    def upload_image(self, image: bytes, filename: str = "chart.png") -> str:
        """Upload an image for messages; its image_key."""
        boundary = uuid_module.uuid4().hex
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="image_type"\r\n\r\nmessage\r\n',
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="{filename}"'
            "\r\nContent-Type: application/octet-stream\r\n\r\n",
        ]
        body = parts[0].encode() + parts[1].encode() + image + f"\r\n--{boundary}--\r\n".encode()
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        data = self._data("POST", "/open-apis/im/v1/images", body, "uploading an image", headers)
        key = data.get("image_key")
        if not isinstance(key, str) or not key:
            raise LarkError("uploading an image", -1, "no image_key in the answer", retry=False)
        return key

    def bot_info(self) -> dict[str, Any]:
        answer = self._authorized("GET", "/open-apis/bot/v3/info", None, "reading the bot")
        bot = answer.get("bot")
        return bot if isinstance(bot, dict) else {}

    # --- the envelope
    def _data(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | bytes | None,
        what: str,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        data = self._authorized(method, path, body, what, headers).get("data")
        return data if isinstance(data, dict) else {}

    def _authorized(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | bytes | None,
        what: str,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A call with the tenant token; a token Feishu no longer takes is fetched again once."""
        for attempt in (1, 2):
            auth = {"Authorization": f"Bearer {self.token()}", **(headers or {})}
            try:
                return self._call(method, path, body, auth, what)
            except LarkError as exc:
                if exc.code not in TOKEN_CODES or attempt == 2:
                    raise
                self.forget_token()
        raise AssertionError("unreachable")

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | bytes | None,
        headers: dict[str, str] | None,
        what: str,
    ) -> dict[str, Any]:
        data = body if isinstance(body, bytes) or body is None else _json(body)
        all_headers = dict(headers or {})
        if isinstance(body, dict):
            all_headers.setdefault("Content-Type", "application/json; charset=utf-8")
        req = urllib.request.Request(self.base + path, data=data, headers=all_headers,
                                     method=method)  # fmt: skip
        status, raw = self._open(req, what)
        try:
            answer = json.loads(raw.decode("utf-8"))
        except ValueError:
            retry = status >= 500 or status == 429
            raise LarkError(what, -1, f"HTTP {status}, not Feishu's JSON", retry=retry) from None
        if not isinstance(answer, dict):
            raise LarkError(what, -1, f"HTTP {status}, not Feishu's JSON", retry=False)
        code = answer.get("code")
        if code == 0 and 200 <= status < 300:
            return answer
        code = code if isinstance(code, int) else -1
        msg = str(answer.get("msg") or f"HTTP {status}")[:200]
        if code in SECRET_CODES:
            msg = f"{SECRET_CODES[code]} ({msg})"
        retry = code in RETRY_CODES or status >= 500 or status == 429
        raise LarkError(what, code, msg, retry=retry)

    def _open(self, req: urllib.request.Request, what: str) -> tuple[int, bytes]:
        try:
            with _OPENER.open(req, timeout=self.timeout) as answer:
                return answer.status, answer.read(READ_LIMIT)
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, exc.read(READ_LIMIT)
            except OSError:
                return exc.code, b""
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = reason.strerror if isinstance(reason, OSError) and reason.strerror else reason
            raise LarkError(what, -1, f"{self.base} not reached: {text}", retry=True) from None
        except TimeoutError:
            raise LarkError(what, -1, f"no answer within {self.timeout:g} s", retry=True) from None
        except (OSError, ValueError) as exc:
            raise LarkError(what, -1, f"{exc.__class__.__name__}: {exc}", retry=True) from None


def _json(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def plain(text: str) -> dict[str, str]:
    """A text object Feishu never formats (lark_md would turn `<at id=all>` into a mention)."""
    return {"tag": "plain_text", "content": text}


# Feishu refuses a card message whose request body is over 30 KB (code 230025, "卡片及富文本消息
# 请求体最大不能超过30KB"); the card travels JSON-encoded inside that body, beside the receiver's id
# and the message type: a card's share is kept below this (card_bytes).
CARD_BYTES = 28 * 1024


def card_bytes(content: dict[str, Any]) -> int:
    """A card's bytes as a message's request body carries it: a JSON string inside the JSON."""
    return len(json.dumps(json.dumps(content, ensure_ascii=False), ensure_ascii=False).encode())


def card(title: str, state: str, elements: list[dict[str, Any]]) -> dict[str, Any]:
    """An interactive card: a header coloured by `state` (blue when no state says otherwise)."""
    return {
        "config": {"wide_screen_mode": True, "update_multi": True},
        "header": {"title": plain(title), "template": TEMPLATE.get(state, "blue")},
        "elements": elements,
    }


def lark_for(profile: Profile, home_root: str, timeout: float = TIMEOUT_S) -> Lark:
    """The client of a feishu-app profile, its messages tagged with this home's binding."""
    return Lark(profile.url, profile.app_id or "", profile.secret or "", timeout,
                binding=binding_of(home_root))  # fmt: skip

"""A stand-in Feishu Open Platform on loopback: the Open API a bot uses, with the payloads,
envelopes and error codes Feishu documents, so Orbit's own client and the real `lark-oapi` SDK
can be pointed at it (their domain: `fs.base`).

    with StandinFeishu() as fs:
        app_id, secret = fs.add_app()
        fs.add_user("ou_alice", "Alice")
        ...                                  # Orbit talks to fs.base
        card = fs.wait_sent(lambda m: m["receive_id"] == "ou_alice")

Served here (https://open.feishu.cn/document/server-docs/…):
  POST  /open-apis/auth/v3/tenant_access_token/internal   {app_id, app_secret} -> token, expire
  POST  /open-apis/im/v1/messages?receive_id_type=T       send (content: a JSON *string*)
  POST  /open-apis/im/v1/messages/:id/reply               reply in the message's chat
  PATCH /open-apis/im/v1/messages/:id                     update a card
  GET   /open-apis/im/v1/messages?container_id_type=chat  a chat's messages
  POST  /open-apis/im/v1/images                           multipart: image_type, image
  GET   /open-apis/bot/v3/info                            the bot's identity

Other protocol parts (the app registration device flow, the long connection) register their
own routes with `fs.route(...)` from their modules (feishu_registration.py, feishu_ws.py).
Every request is kept in `fs.requests`; every message sent in `fs.sent`; `fs.fail()` makes the
next requests to a path fail as asked.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN_TTL_S = 7200
CARD_LIMIT = 30 * 1024  # bytes of an interactive message's content
TEXT_LIMIT = 150 * 1024
IMAGE_LIMIT = 10 * 1024 * 1024
ID_TYPES = ("open_id", "user_id", "union_id", "email", "chat_id")
MSG_TYPES = (
    "text",
    "post",
    "image",
    "file",
    "audio",
    "media",
    "sticker",
    "interactive",
    "share_chat",
    "share_user",
)
BAD_TOKEN = {
    "code": 99991663,
    "msg": "Invalid access token for authorization. Please make a request with token attached.",
}


@dataclass
class Req:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    json: Any = None
    form: dict[str, str] | None = None
    app_id: str | None = None  # whose tenant token came with it

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


Answer = tuple[int, Any]  # (HTTP status, a JSON body (dict) or raw bytes)
Handler = Callable[["StandinFeishu", Req], Answer]


@dataclass
class App:
    app_id: str
    secret: str
    name: str
    bot_open_id: str
    tokens: set[str] = field(default_factory=set)


def ok(data: Any = None, **top: Any) -> Answer:
    body: dict[str, Any] = {"code": 0, "msg": "success", **top}
    if data is not None:
        body["data"] = data
    return 200, body


def err(code: int, msg: str, status: int = 400) -> Answer:
    return status, {"code": code, "msg": msg}


class Refuse(Exception):
    """Raised by a handler (or what it calls): answer with this error."""

    def __init__(self, code: int, msg: str, status: int = 400) -> None:
        super().__init__(msg)
        self.answer = err(code, msg, status)


class StandinFeishu:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.apps: dict[str, App] = {}
        self.users: dict[str, str] = {}  # open_id -> name
        self.requests: list[Req] = []
        self.sent: list[dict[str, Any]] = []
        self.messages: dict[str, dict[str, Any]] = {}  # message_id -> the message
        self.chats: dict[str, list[str]] = {}  # chat_id -> its message ids, oldest first
        self.p2p: dict[tuple[str, str], str] = {}  # (app_id, open_id) -> chat_id
        self.images: dict[str, bytes] = {}
        self.uuids: dict[tuple[str, str], tuple[float, str]] = {}  # (app, uuid) -> (at, msg id)
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self._failures: list[list[Any]] = []  # [method or None, pattern, status, body, times]
        self._builtin_routes()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # --- lifetime
    def __enter__(self) -> StandinFeishu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- the world
    def add_app(
        self, app_id: str | None = None, secret: str | None = None, name: str = "Orbit"
    ) -> tuple[str, str]:
        app_id = app_id or f"cli_{secrets.token_hex(8)}"
        secret = secret or secrets.token_urlsafe(24)
        with self.lock:
            self.apps[app_id] = App(app_id, secret, name, f"ou_{secrets.token_hex(16)}")
        return app_id, secret

    def add_user(self, open_id: str, name: str) -> None:
        with self.lock:
            self.users[open_id] = name

    def chat_of(self, app_id: str, open_id: str) -> str:
        """The p2p chat of the app's bot with a user (made on first use, as Feishu does)."""
        with self.lock:
            key = (app_id, open_id)
            if key not in self.p2p:
                self.p2p[key] = f"oc_{secrets.token_hex(16)}"
                self.chats[self.p2p[key]] = []
            return self.p2p[key]

    # --- hooks for tests and protocol modules
    def route(self, method: str, pattern: str, handler: Handler) -> None:
        """Serve `method` on paths matching `pattern` (a regex, full match) with `handler`;
        later routes come first, so a module can take a path over."""
        with self.lock:
            self._routes.insert(0, (method, re.compile(pattern), handler))

    def fail(
        self, pattern: str, status: int, body: Any, times: int = 1, method: str | None = None
    ) -> None:
        """The next `times` requests to a path matching `pattern` get this answer."""
        with self.lock:
            self._failures.append([method, re.compile(pattern), status, body, times])

    def wait_sent(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = 15.0
    ) -> dict[str, Any]:
        """The first message sent that `pred` accepts, waiting up to `timeout` for it."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for message in self.sent:
                    if pred(message):
                        return message
                left = deadline - time.monotonic()
                if left <= 0:
                    shown = [(m["receive_id"], m["msg_type"]) for m in self.sent]
                    raise AssertionError(f"no such message within {timeout} s; sent: {shown}")
                self.lock.wait(min(left, 0.2))

    def requests_to(self, pattern: str) -> list[Req]:
        with self.lock:
            return [r for r in self.requests if re.fullmatch(pattern, r.path)]

    # --- serving
    def handle(self, req: Req) -> Answer:
        with self.lock:
            self.requests.append(req)
            self.lock.notify_all()
            for failure in self._failures:
                method, pattern, status, body, times = failure
                if times > 0 and pattern.fullmatch(req.path) and method in (None, req.method):
                    failure[4] -= 1
                    return status, body
            routes = list(self._routes)
        for method, pattern, handler in routes:
            if method == req.method and pattern.fullmatch(req.path):
                try:
                    return handler(self, req)
                except Refuse as refused:
                    return refused.answer
        return err(404, f"no route {req.method} {req.path}", status=404)

    def authorize(self, req: Req) -> App | None:
        """The app whose tenant token `req` carries, or None."""
        auth = req.headers.get("authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        with self.lock:
            for app in self.apps.values():
                if token and token in app.tokens:
                    req.app_id = app.app_id
                    return app
        return None

    def _builtin_routes(self) -> None:
        self.route("POST", r"/open-apis/auth/v3/tenant_access_token/internal", _token)
        self.route("POST", r"/open-apis/im/v1/messages", _authorized(_send))
        self.route("GET", r"/open-apis/im/v1/messages", _authorized(_list))
        self.route("POST", r"/open-apis/im/v1/messages/([^/]+)/reply", _authorized(_reply))
        self.route("PATCH", r"/open-apis/im/v1/messages/([^/]+)", _authorized(_patch))
        self.route("POST", r"/open-apis/im/v1/images", _authorized(_image))
        self.route("GET", r"/open-apis/bot/v3/info", _authorized(_bot_info))

    # --- messages (used by the routes, and by protocol modules for users' messages)
    def record(
        self, app: App, chat_id: str, msg_type: str, content: Any, **extra: Any
    ) -> dict[str, Any]:
        """A message the bot sent into `chat_id`: kept, listed in its chat, and in `sent`."""
        now_ms = str(int(time.time() * 1000))
        message = {
            "message_id": f"om_{secrets.token_hex(16)}",
            "root_id": extra.get("reply_to") or "",
            "parent_id": extra.get("reply_to") or "",
            "msg_type": msg_type,
            "create_time": now_ms,
            "update_time": now_ms,
            "deleted": False,
            "updated": False,
            "chat_id": chat_id,
            "sender": {
                "id": app.app_id,
                "id_type": "app_id",
                "sender_type": "app",
                "tenant_key": "stand-in",
            },
            "body": {"content": json.dumps(content, ensure_ascii=False)},
            "mentions": [],
        }
        with self.lock:
            self.messages[message["message_id"]] = message
            self.chats.setdefault(chat_id, []).append(message["message_id"])
            self.sent.append(
                {
                    "app_id": app.app_id,
                    "receive_id": extra.get("receive_id", chat_id),
                    "receive_id_type": extra.get("receive_id_type", "chat_id"),
                    "msg_type": msg_type,
                    "content": content,
                    "message_id": message["message_id"],
                    "chat_id": chat_id,
                    "reply_to": extra.get("reply_to"),
                    "uuid": extra.get("uuid"),
                }
            )
            self.lock.notify_all()
        return message


def _authorized(handler: Callable[[StandinFeishu, Req, App], Answer]) -> Handler:
    def serve(fs: StandinFeishu, req: Req) -> Answer:
        app = fs.authorize(req)
        if app is None:
            return 400, BAD_TOKEN
        return handler(fs, req, app)

    return serve


def _token(fs: StandinFeishu, req: Req) -> Answer:
    body = req.json if isinstance(req.json, dict) else {}
    app = fs.apps.get(str(body.get("app_id")))
    if app is None:
        return err(10003, "invalid param: app_id is invalid")
    if body.get("app_secret") != app.secret:
        return err(10014, "app secret invalid")
    token = f"t-{secrets.token_hex(20)}"
    with fs.lock:
        app.tokens.add(token)
    return 200, {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": TOKEN_TTL_S}


def _content(body: dict[str, Any]) -> tuple[str, Any]:
    """The message type and its parsed content; Refuse as Feishu does."""
    msg_type, content = body.get("msg_type"), body.get("content")
    if msg_type not in MSG_TYPES:
        raise Refuse(230001, f"invalid msg_type: {msg_type!r}")
    if not isinstance(content, str):  # content is a JSON string, not an object
        raise Refuse(230001, "content must be a string of JSON")
    limit = CARD_LIMIT if msg_type == "interactive" else TEXT_LIMIT
    if len(content.encode()) > limit:
        raise Refuse(230025, f"message content too long ({len(content.encode())} bytes)")
    try:
        parsed = json.loads(content)
    except ValueError:
        raise Refuse(230001, "content is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise Refuse(230001, "content is not a JSON object")
    if msg_type == "interactive" and not {"elements", "i18n_elements", "body"} & parsed.keys():
        raise Refuse(230099, "Failed to create card content: no elements")
    if msg_type == "text" and not isinstance(parsed.get("text"), str):
        raise Refuse(230001, 'a text message\'s content is {"text": ...}')
    return str(msg_type), parsed


def _known_images(fs: StandinFeishu, card: Any) -> str | None:
    """An img_key the card names that was never uploaded, if any."""
    found = re.findall(r'"img_key":\s*"([^"]*)"', json.dumps(card))
    missing = [k for k in found if k not in fs.images]
    return missing[0] if missing else None


def _send(fs: StandinFeishu, req: Req, app: App) -> Answer:
    id_type = req.arg("receive_id_type")
    if id_type not in ID_TYPES:
        return err(99992402, "field validation failed: receive_id_type")
    body = req.json if isinstance(req.json, dict) else {}
    receive_id = body.get("receive_id")
    msg_type, content = _content(body)
    if msg_type == "interactive" and (missing := _known_images(fs, content)):
        return err(230099, f"Failed to create card content: image {missing} not found")
    uuid = body.get("uuid")
    if uuid is not None and (not isinstance(uuid, str) or len(uuid) > 50):
        return err(99992402, "field validation failed: uuid (at most 50 characters)")
    with fs.lock:
        if uuid and (app.app_id, uuid) in fs.uuids:
            at, message_id = fs.uuids[(app.app_id, uuid)]
            if time.time() - at < 3600:  # a repeat within the hour: the same message, not sent
                return ok(fs.messages[message_id])
    if id_type == "open_id":
        if receive_id not in fs.users:
            return err(230013, "Bot has NO availability to this user.")
        chat_id = fs.chat_of(app.app_id, str(receive_id))
    elif id_type == "chat_id":
        if receive_id not in fs.chats:
            return err(230002, "Bot/User can NOT be out of the chat.")
        chat_id = str(receive_id)
    else:
        return err(99992402, f"the stand-in knows open_id and chat_id, not {id_type}")
    message = fs.record(
        app, chat_id, msg_type, content, receive_id=receive_id, receive_id_type=id_type, uuid=uuid
    )
    if uuid:
        with fs.lock:
            fs.uuids[(app.app_id, uuid)] = (time.time(), message["message_id"])
    return ok(message)


def _reply(fs: StandinFeishu, req: Req, app: App) -> Answer:
    message_id = req.path.split("/")[-2]
    parent = fs.messages.get(message_id)
    if parent is None:
        return err(230011, "The message was withdrawn or does not exist.")
    body = req.json if isinstance(req.json, dict) else {}
    msg_type, content = _content(body)
    message = fs.record(
        app, parent["chat_id"], msg_type, content, reply_to=message_id, uuid=body.get("uuid")
    )
    return ok(message)


def _patch(fs: StandinFeishu, req: Req, app: App) -> Answer:
    message = fs.messages.get(req.path.rsplit("/", 1)[-1])
    if message is None or message["sender"]["id"] != app.app_id:
        return err(230011, "The message was withdrawn or does not exist.")
    if message["msg_type"] != "interactive":
        return err(230001, "only a card can be updated")
    body = req.json if isinstance(req.json, dict) else {}
    try:
        card = json.loads(body.get("content") or "")
    except ValueError:
        return err(230001, "content is not valid JSON")
    with fs.lock:
        message["body"]["content"] = json.dumps(card, ensure_ascii=False)
        message["updated"] = True
        message["update_time"] = str(int(time.time() * 1000))
    return ok({})


def _list(fs: StandinFeishu, req: Req, app: App) -> Answer:
    if req.arg("container_id_type") != "chat":
        return err(99992402, "field validation failed: container_id_type")
    chat_id = req.arg("container_id") or ""
    if chat_id not in fs.chats:
        return err(230002, "Bot/User can NOT be out of the chat.")
    size = min(50, max(1, int(req.arg("page_size") or 20)))
    with fs.lock:
        items = [fs.messages[m] for m in fs.chats[chat_id]]
    if req.arg("sort_type") == "ByCreateTimeDesc":
        items = items[::-1]
    return ok({"has_more": len(items) > size, "page_token": "", "items": items[:size]})


def _image(fs: StandinFeishu, req: Req, app: App) -> Answer:
    ctype = req.headers.get("content-type", "")
    if not ctype.startswith("multipart/form-data"):
        return err(234001, "Invalid request param: not multipart/form-data")
    parts = _multipart(ctype, req.body)
    if parts.get("image_type") != b"message":
        return err(234001, "Invalid request param: image_type must be message")
    image = parts.get("image")
    if not image:
        return err(234001, "Invalid request param: no image")
    if len(image) > IMAGE_LIMIT:
        return err(234006, "The image size exceeds the limit.")
    if not (image.startswith(b"\x89PNG\r\n\x1a\n") or image.startswith(b"\xff\xd8\xff")):
        return err(234011, "Can't recognise image format.")
    key = f"img_v2_{secrets.token_hex(16)}"
    with fs.lock:
        fs.images[key] = image
    return ok({"image_key": key})


def _bot_info(fs: StandinFeishu, req: Req, app: App) -> Answer:
    bot = {
        "activate_status": 2,
        "app_name": app.name,
        "avatar_url": "",
        "ip_white_list": [],
        "open_id": app.bot_open_id,
    }
    return 200, {"code": 0, "msg": "ok", "bot": bot}


def _multipart(ctype: str, body: bytes) -> dict[str, bytes]:
    parser = email.parser.BytesParser(policy=email.policy.HTTP)
    message = parser.parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + body)
    found: dict[str, bytes] = {}
    for part in message.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if name and payload is not None:
            found[str(name)] = payload
    return found


def _handler_class(fs: StandinFeishu) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            req = Req(self.command, parts.path, parse_qs(parts.query), headers, body)
            ctype = headers.get("content-type", "")
            if "json" in ctype:
                try:
                    req.json = json.loads(body or b"null")
                except ValueError:
                    self._answer(*err(9499, "Bad Request: body is not JSON"))
                    return
            elif ctype.startswith("application/x-www-form-urlencoded"):
                form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
                req.form = {k: v[0] for k, v in form.items()}
            try:
                status, answer = fs.handle(req)
            except Exception as exc:  # a bug in a handler: a 500 the client sees
                status, answer = 500, {"code": 1000, "msg": f"stand-in error: {exc!r}"}
            self._answer(status, answer)

        def _answer(self, status: int, answer: Any) -> None:
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    return Handler

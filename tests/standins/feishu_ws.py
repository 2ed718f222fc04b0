"""Feishu's long connection (the event subscription "persistent connection" mode) on loopback,
added to a StandinFeishu, for the real `lark-oapi` SDK's `lark_oapi.ws.Client`.

    with StandinFeishu() as fs, StandinFeishuWS(fs) as ws:
        app_id, secret = fs.add_app()
        ...                                   # a bot connects to fs.base
        ws.wait_connections(app_id, 1)
        message_id = ws.send_message(app_id, "ou_alice", "/gpu")
        ws.wait_ack(message_id)

What it speaks is the SDK's (lark_oapi/ws/client.py, lark_oapi/ws/pb/pbbp2.proto):
  POST {base}/callback/ws/endpoint  {"AppID", "AppSecret"} -> {"code": 0, "data": {"URL":
        "ws://…?device_id=…&service_id=…", "ClientConfig": {ReconnectCount, ReconnectInterval,
        ReconnectNonce, PingInterval}}}; another code is an error the SDK raises as
        ClientException(code, msg) and never retries.
  the websocket carries pbbp2 Frames, binary: method 0 (CONTROL) with a header type=ping from
  the client, answered by type=pong (its payload a ClientConfig); method 1 (DATA) with headers
  type=event, message_id, sum, seq, trace_id and the event's JSON as payload, which the client
  answers with the same frame, its payload {"code": 200} (or 500 when its handler raised).

Test controls: `send_message` (an im.message.receive_v1 event, schema 2.0), `redeliver`,
`wait_ack`, `drop` (cut every connection: the SDK reconnects), `connections`, `refuse` (the
endpoint answers an app with an error: a wrong mode, a limit).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lark_oapi.ws.pb.pbbp2_pb2 import Frame
from standins.feishu import App, Req, StandinFeishu, err, ok
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

CONTROL, DATA = 0, 1
# The answer to a wrong secret. Feishu's code for it on this endpoint is not documented in
# the sources at hand; the tenant-token endpoint's 10014 is used (the SDK raises any code
# other than 0, 1 and 1000040343 as a ClientException and stops).
WRONG_SECRET = (10014, "app secret invalid")


class StandinFeishuWS:
    def __init__(
        self,
        fs: StandinFeishu,
        ping_interval: int = 120,
        reconnect_interval: int = 1,
        reconnect_nonce: int = 0,
    ) -> None:
        self.fs = fs
        self.config = {
            "ReconnectCount": -1,
            "ReconnectInterval": reconnect_interval,
            "ReconnectNonce": reconnect_nonce,
            "PingInterval": ping_interval,
        }
        self.cond = threading.Condition()
        self.tickets: dict[str, str] = {}  # ticket in the URL -> app id
        self.conns: dict[str, list[ServerConnection]] = {}  # app id -> open connections
        self.acks: dict[str, dict[str, Any]] = {}  # frame message_id -> the client's answer
        self.events: dict[str, tuple[str, bytes]] = {}  # frame message_id -> (app id, payload)
        self.pings = 0
        self.refusals: dict[str, tuple[int, str]] = {}
        self.server = serve(self._serve, "127.0.0.1", 0)
        self.port = self.server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        fs.route("POST", r"/callback/ws/endpoint", self._endpoint)

    def __enter__(self) -> StandinFeishuWS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop()
        self.server.shutdown()

    # --- the endpoint
    def refuse(self, app_id: str, code: int, msg: str) -> None:
        """The endpoint answers `app_id` with this error from now on."""
        self.refusals[app_id] = (code, msg)

    def _endpoint(self, fs: StandinFeishu, req: Req) -> tuple[int, Any]:
        body = req.json if isinstance(req.json, dict) else {}
        app = fs.apps.get(str(body.get("AppID")))
        # Errors come as HTTP 200 with Feishu's code (the SDK reads the code only then; what
        # Feishu's HTTP status is for them is not documented in the sources at hand).
        if app is None:
            return err(10003, "invalid param: app_id is invalid", status=200)
        if body.get("AppSecret") != app.secret:
            return err(*WRONG_SECRET, status=200)
        if app.app_id in self.refusals:
            return err(*self.refusals[app.app_id], status=200)
        ticket = secrets.token_hex(12)
        with self.cond:
            self.tickets[ticket] = app.app_id
        device = secrets.token_hex(8)
        url = (
            f"ws://127.0.0.1:{self.port}/ws/v2?fpid=1&aid=1&device_id={device}"
            f"&access_key={ticket}&service_id=1&ticket={ticket}"
        )
        return ok({"URL": url, "ClientConfig": self.config})

    # --- the websocket
    def _serve(self, conn: ServerConnection) -> None:
        query = parse_qs(urlsplit(conn.request.path if conn.request else "").query)
        with self.cond:
            app_id = self.tickets.pop((query.get("ticket") or [""])[0], None)
        if app_id is None:
            conn.close(1008, "unknown ticket")
            return
        with self.cond:
            self.conns.setdefault(app_id, []).append(conn)
            self.cond.notify_all()
        try:
            for raw in conn:
                if isinstance(raw, bytes):
                    self._received(conn, raw)
        except ConnectionClosed:
            pass
        finally:
            with self.cond:
                if conn in self.conns.get(app_id, []):
                    self.conns[app_id].remove(conn)
                self.cond.notify_all()

    def _received(self, conn: ServerConnection, raw: bytes) -> None:
        frame = Frame()
        frame.ParseFromString(raw)
        headers = {h.key: h.value for h in frame.headers}
        if frame.method == CONTROL and headers.get("type") == "ping":
            with self.cond:
                self.pings += 1
            pong = Frame(SeqID=0, LogID=0, service=frame.service, method=CONTROL)
            header = pong.headers.add()
            header.key, header.value = "type", "pong"
            pong.payload = json.dumps(self.config).encode()
            conn.send(pong.SerializeToString())
        elif frame.method == DATA:
            try:
                answer = json.loads(frame.payload)
            except ValueError:
                answer = {"unparsed": frame.payload.decode("utf-8", "replace")}
            with self.cond:
                self.acks[headers.get("message_id", "")] = {"answer": answer, "headers": headers}
                self.cond.notify_all()

    # --- test controls
    def connections(self, app_id: str) -> int:
        with self.cond:
            return len(self.conns.get(app_id, []))

    def wait_connections(self, app_id: str, count: int = 1, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.conns.get(app_id, [])) != count:
                left = deadline - time.monotonic()
                if left <= 0:
                    have = len(self.conns.get(app_id, []))
                    raise AssertionError(f"{have} connection(s) of {app_id}, not {count}")
                self.cond.wait(min(left, 0.2))

    def drop(self, app_id: str | None = None) -> None:
        """Close the connections (of `app_id`, or all): the SDK sees them closed."""
        with self.cond:
            conns = [c for a, cs in self.conns.items() if app_id in (None, a) for c in cs]
        for conn in conns:
            conn.close(1001, "going away")

    def send_message(
        self,
        app_id: str,
        open_id: str,
        text: str,
        chat_type: str = "p2p",
        mentions: list[dict[str, Any]] | None = None,
        chat_id: str | None = None,
        message_type: str = "text",
    ) -> str:
        """A user's message to the bot, as Feishu delivers it: kept in its chat (so the bot
        can reply to it) and pushed as an im.message.receive_v1 event on one of the app's
        connections. Its message_id (the frame's: `wait_ack` takes it)."""
        app = self.fs.apps[app_id]
        if chat_id is None:
            chat_id = self.fs.chat_of(app_id, open_id) if chat_type == "p2p" else "oc_group"
        message = self._keep(chat_id, open_id, text, message_type)
        event = {
            "schema": "2.0",
            "header": {
                "event_id": secrets.token_hex(16),
                "token": "",
                "create_time": message["create_time"],
                "event_type": "im.message.receive_v1",
                "tenant_key": "stand-in",
                "app_id": app_id,
            },
            "event": {
                "sender": {
                    "sender_id": {
                        "union_id": "on_" + open_id[3:],
                        "user_id": "",
                        "open_id": open_id,
                    },
                    "sender_type": "user",
                    "tenant_key": "stand-in",
                },
                "message": {
                    "message_id": message["message_id"],
                    "root_id": "",
                    "parent_id": "",
                    "create_time": message["create_time"],
                    "update_time": message["create_time"],
                    "chat_id": chat_id,
                    "chat_type": chat_type,
                    "message_type": message_type,
                    "content": message["body"]["content"],
                    "mentions": mentions or [],
                    "user_agent": "stand-in",
                },
            },
        }
        payload = json.dumps(event, ensure_ascii=False).encode()
        frame_id = message["message_id"]
        with self.cond:
            self.events[frame_id] = (app.app_id, payload)
        self._push(app.app_id, frame_id, payload)
        return frame_id

    def redeliver(self, message_id: str) -> None:
        """The same event again (Feishu redelivers what it thinks was not received)."""
        app_id, payload = self.events[message_id]
        with self.cond:
            self.acks.pop(message_id, None)
        self._push(app_id, message_id, payload)

    def mention(self, app_id: str, key: str = "@_user_1") -> dict[str, Any]:
        """The mention of the app's bot in a group message's `mentions`."""
        bot = self.fs.apps[app_id]
        return {
            "key": key,
            "id": {"union_id": "", "user_id": "", "open_id": bot.bot_open_id},
            "name": bot.name,
            "tenant_key": "stand-in",
        }

    def wait_ack(self, message_id: str, timeout: float = 15.0) -> dict[str, Any]:
        """The client's answer to the event frame `message_id` ({"code": 200, …})."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while message_id not in self.acks:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no answer to event {message_id} within {timeout} s")
                self.cond.wait(min(left, 0.2))
            return dict(self.acks[message_id]["answer"])

    def _keep(self, chat_id: str, open_id: str, text: str, message_type: str) -> dict[str, Any]:
        now_ms = str(int(time.time() * 1000))
        content = {"text": text} if message_type == "text" else {"image_key": "img_x"}
        message = {
            "message_id": f"om_{secrets.token_hex(16)}",
            "root_id": "",
            "parent_id": "",
            "msg_type": message_type,
            "create_time": now_ms,
            "update_time": now_ms,
            "deleted": False,
            "updated": False,
            "chat_id": chat_id,
            "sender": {
                "id": open_id,
                "id_type": "open_id",
                "sender_type": "user",
                "tenant_key": "stand-in",
            },
            "body": {"content": json.dumps(content, ensure_ascii=False)},
            "mentions": [],
        }
        with self.fs.lock:
            self.fs.messages[message["message_id"]] = message
            self.fs.chats.setdefault(chat_id, []).append(message["message_id"])
        return message

    def _push(self, app_id: str, frame_id: str, payload: bytes) -> None:
        with self.cond:
            conns = list(self.conns.get(app_id, []))
        if not conns:
            raise AssertionError(f"no connection of {app_id} to deliver an event on")
        frame = Frame(SeqID=0, LogID=0, service=1, method=DATA)
        for key, value in (
            ("type", "event"),
            ("message_id", frame_id),
            ("sum", "1"),
            ("seq", "0"),
            ("trace_id", secrets.token_hex(8)),
        ):
            header = frame.headers.add()
            header.key, header.value = key, value
        frame.payload = payload
        conns[0].send(frame.SerializeToString())  # Feishu gives an event to one connection


def record_foreign(fs: StandinFeishu, app: App, chat_id: str, tag: str) -> None:
    """A message another machine's bot of the same app sent into `chat_id`, carrying its
    binding tag (what a bot looks for at start)."""
    fs.record(app, chat_id, "text", {"text": f"an answer\n{tag}"})

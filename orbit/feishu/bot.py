"""The Feishu bot's process: `python -m orbit.feishu.bot NAME` (store/feishu.py:bot_worker),
one per feishu-app profile, started by `notify add`, `orbit feishu init` and every tick
(control.start: a lock check when it lives).

It holds its worker lock (bot.lock) and this machine's lock of its app id (machine.py) for its
whole life, looks for another binding of the app in its paired users' chats (binding.py), then
keeps the official SDK's long connection (`lark_oapi.ws.Client`: only this process imports
lark_oapi, about 5 s) and answers im.message.receive_v1 events: text in a direct chat, or in a
group when the bot is mentioned. A paired user's text is answered by commands.answer's card; an
unpaired user gets a pairing code and nothing else. Each event is handled in a thread of its
own (the SDK acknowledges it at once) and an event seen before (Feishu redelivers) is dropped.

What the connection does is in connection.json (store/feishu.py STATES): connecting, connected,
reconnecting (the SDK's own reconnect, seen through its hooks), failed (Feishu's code and
message), refused (another binding), stopped (SIGTERM: the SDK's module-level asyncio loop is
stopped from the main thread, its tasks cancelled and the websocket closed).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from orbit.detach import exit_from
from orbit.errors import ConflictError, OrbitError
from orbit.feishu import commands, pairing
from orbit.feishu.binding import foreign_binding
from orbit.feishu.machine import take
from orbit.notify.lark import Lark, LarkError, lark_for
from orbit.notify.profiles import Profile, load
from orbit.store.feishu import bot_worker, load_users, write_connection
from orbit.store.home import Home
from orbit.store.worker import worker_main

log = logging.getLogger(__name__)

SEEN_KEPT = 2000  # message ids remembered against redelivery
MENTION_KEY = re.compile(r"@_user_\d+")
# Feishu's answers that mean the app is not set up for a long connection (the SDK gives the
# endpoint's code and msg as they came); the hint says where to look.
SETUP_HINT = (
    "check the app's event subscription: the long connection (persistent connection) mode, "
    "with im.message.receive_v1 subscribed"
)


def pair_hint(name: str, code: str) -> str:
    return f"Ask Orbit's owner to run: orbit notify pair {name} {code}"


@dataclass
class Incoming:
    """What the bot needs of one im.message.receive_v1 event."""

    message_id: str
    chat_id: str
    chat_type: str
    message_type: str
    content: str
    open_id: str
    sender_type: str
    mentions: list[tuple[str, str]] = field(default_factory=list)  # (key, open id)


def incoming(data: Any) -> Incoming | None:
    """The event's message, or None for an event without one."""
    event = getattr(data, "event", None)
    message = getattr(event, "message", None)
    sender = getattr(event, "sender", None)
    if message is None or sender is None or not message.message_id:
        return None
    ids = sender.sender_id
    mentions = [
        (str(m.key or ""), str(getattr(m.id, "open_id", "") or "")) for m in message.mentions or []
    ]
    return Incoming(
        message_id=str(message.message_id),
        chat_id=str(message.chat_id or ""),
        chat_type=str(message.chat_type or ""),
        message_type=str(message.message_type or ""),
        content=str(message.content or ""),
        open_id=str(getattr(ids, "open_id", "") or ""),
        sender_type=str(sender.sender_type or ""),
        mentions=mentions,
    )


def text_of(msg: Incoming, bot_open_id: str) -> str | None:
    """The command in `msg`, mention keys taken out; None when the bot should not answer
    (a group message that does not mention it, another bot's). Not text: ""."""
    import json

    if msg.sender_type and msg.sender_type != "user":
        return None
    if msg.chat_type != "p2p":
        ours = [k for k, who in msg.mentions if not bot_open_id or who == bot_open_id]
        if not ours:
            return None
    if msg.message_type != "text":
        return ""
    try:
        text = json.loads(msg.content).get("text", "")
    except (ValueError, AttributeError):
        return ""
    return " ".join(MENTION_KEY.sub(" ", str(text)).split())


class Bot:
    def __init__(self, home: Home, name: str, stop: threading.Event) -> None:
        self.home, self.name, self.stop = home, name, stop
        self.done = threading.Event()  # the connection ended for good (failed)
        self.lark: Lark | None = None
        self.bot_open_id = ""
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.seen_lock = threading.Lock()
        self.state = ""
        self.extra: dict[str, Any] = {}

    def say(self, state: str, detail: str = "") -> None:
        self.state = state
        write_connection(self.home, self.name, state, detail, **self.extra)
        log.info("%s%s", state, f": {detail}" if detail else "")

    # --- the life
    def run(self) -> str:
        try:
            return self._run()
        except OrbitError as exc:  # a broken notify.yaml or users.json: said, then retried later
            self.say("failed", str(exc))
            return f"failed: {exc}"

    def _run(self) -> str:
        profile = load(self.home).get(self.name)
        if profile is None or not profile.app or not profile.app_id:
            return f"no feishu-app profile {self.name} in notify.yaml: nothing to do"
        self.lark = lark_for(profile, str(self.home.root))
        self.extra = {"app_id": profile.app_id, "binding": self.lark.binding}
        try:
            held = take(profile.app_id, str(self.home.root), self.name)
        except ConflictError as exc:
            self.say("refused", str(exc))
            return f"refused: {exc}"
        except (OrbitError, OSError) as exc:
            self.say("failed", f"this machine's lock of app {profile.app_id}: {exc}")
            return f"failed: {exc}"
        try:
            return self._bound(profile, self.lark)
        finally:
            held.close()

    def _bound(self, profile: Profile, lark: Lark) -> str:
        self.say("connecting", f"to {profile.url}")
        try:
            lark.token()
            self.bot_open_id = str(lark.bot_info().get("open_id") or "")
        except LarkError as exc:
            if not exc.retry:  # a wrong secret, an unknown app: no connection will help
                self.say("failed", str(exc))
                return f"failed: {exc}"
            log.warning("the Open API is not answering yet: %s", exc)
        other = foreign_binding(lark, load_users(self.home, self.name), str(lark.binding))
        if other is not None:
            self.say("refused", other.line())
            return f"refused: {other.line()}"
        if self.stop.is_set():
            self.say("stopped", "stopped by a signal")
            return "stopped by a signal"
        return self._connected(profile)

    def _connected(self, profile: Profile) -> str:
        """Run the SDK's client in a thread until a signal or a failure ends it."""
        if not self._sdk_imported():
            self.say("stopped", "stopped by a signal")
            return "stopped by a signal"
        import lark_oapi
        import lark_oapi.ws.client as ws_client

        sdk_log = logging.getLogger("Lark")
        for handler in list(sdk_log.handlers):  # its lines go through this log's format
            sdk_log.removeHandler(handler)
        sdk_log.addFilter(_masked)
        events = (
            lark_oapi.EventDispatcherHandler.builder("", "")
            .register_p2_im_message_receive_v1(self._on_message)
            .build()
        )
        client = _client_class(self, ws_client.Client)(
            str(profile.app_id),
            str(profile.secret),
            log_level=lark_oapi.LogLevel.INFO,
            event_handler=events,
            domain=profile.url,
        )
        runner = threading.Thread(target=self._sdk, args=(client, ws_client.loop), daemon=True)
        runner.start()
        lock = bot_worker(self.home, self.name).lock
        inode = _inode(lock)
        while not self.stop.wait(0.2):
            if self.done.is_set() or not runner.is_alive():
                break
            if _inode(lock) != inode:  # its files removed (notify rm, a deleted home)
                log.info("its files are gone: stopping")
                client._auto_reconnect = False
                ws_client.loop.call_soon_threadsafe(ws_client.loop.stop)
                runner.join(5)
                return "its files are gone"
        ws_client.loop.call_soon_threadsafe(ws_client.loop.stop)
        runner.join(5)
        if self.stop.is_set():
            self.say("stopped", "stopped by a signal")
            return "stopped by a signal"
        return f"{self.state}: the long connection ended"

    def _sdk_imported(self) -> bool:
        """Import the SDK (about 5 s) in a thread, so that a stop meanwhile is not kept
        waiting (the process then exits with the import unfinished); False when stopped."""
        failed: list[BaseException] = []

        def load() -> None:
            try:
                import lark_oapi.ws.client  # noqa: F401  (its module makes the loop it runs in)
            except BaseException as exc:  # said in the main thread
                failed.append(exc)

        loader = threading.Thread(target=load, name="import-lark-oapi", daemon=True)
        loader.start()
        while loader.is_alive():
            if self.stop.wait(0.1):
                return False
        if failed:
            raise OrbitError(f"the lark-oapi SDK cannot be imported: {failed[0]}")
        return True

    def _sdk(self, client: Any, loop: asyncio.AbstractEventLoop) -> None:
        """The SDK's start() (it blocks in its module's loop); then its tasks cancelled and
        the websocket closed, in that loop."""
        try:
            client.start()
        except RuntimeError:  # "Event loop stopped before Future completed": stop or failure
            pass
        except Exception as exc:  # ClientException: Feishu refused (a wrong secret, no mode)
            self.failed(exc)
        client._auto_reconnect = False
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(client._disconnect())
        except Exception as exc:  # the websocket already gone
            log.info("closing the connection: %s", exc)

    def failed(self, exc: BaseException) -> None:
        code = getattr(exc, "code", None)
        msg = str(exc.args[0]) if exc.args else str(exc)
        said = f"Feishu refused the long connection: {msg}" + (
            f" (code {code})" if code is not None else ""
        )
        self.say("failed", f"{said}; {SETUP_HINT}")
        self.done.set()

    # --- events
    def _on_message(self, data: Any) -> None:
        """In the SDK's loop: note the event and answer it in a thread (never block here)."""
        msg = incoming(data)
        if msg is None:
            return
        with self.seen_lock:
            if msg.message_id in self.seen:
                log.info("event for message %s again: already handled", msg.message_id)
                return
            self.seen[msg.message_id] = None
            while len(self.seen) > SEEN_KEPT:
                self.seen.popitem(last=False)
        threading.Thread(target=self._answer, args=(msg,), daemon=True).start()

    def _answer(self, msg: Incoming) -> None:
        lark = self.lark
        assert lark is not None
        try:
            text = text_of(msg, self.bot_open_id)
            if text is None:
                return
            users = load_users(self.home, self.name)
            if msg.open_id not in users.paired:
                chat = msg.chat_id if msg.chat_type == "p2p" else ""
                code = pairing.code_for(self.home, self.name, msg.open_id, chat)
                hint = {"text": pair_hint(self.name, code)}
                lark.reply(msg.message_id, "text", hint, tag=False)  # no data, not even a host
                log.info("pairing code given to %s", msg.open_id)
                return
            if not text:
                lark.reply(msg.message_id, "text", {"text": "Orbit reads text: try /help"})
                return
            try:
                answer = commands.answer(self.home, text, upload=self._upload)
            except Exception as exc:  # a bug or a broken home file: they hear of it, in a line
                log.warning("could not answer %r: %s", text[:80], exc, exc_info=True)
                first = (str(exc).splitlines() or [exc.__class__.__name__])[0][:200]
                lark.reply(msg.message_id, "text", {"text": f"Orbit could not answer: {first}"})
                return
            lark.reply(msg.message_id, "interactive", answer)
            log.info("answered %s: %s", msg.open_id, text[:80])
        except Exception as exc:  # one message's failure: said in the log, the bot goes on
            log.warning("could not answer message %s: %s", msg.message_id, exc, exc_info=True)

    def _upload(self, image: bytes) -> str | None:
        """A /show card's curves uploaded: their image_key, None when Feishu refused them
        (the card goes without its image)."""
        assert self.lark is not None
        try:
            return self.lark.upload_image(image)
        except LarkError as exc:
            log.warning("the curves were not uploaded: %s", exc)
            return None


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


SECRET_QUERY = re.compile(r"((?:access_key|ticket)=)[^&\s]+")


def _masked(record: logging.LogRecord) -> bool:
    """The SDK logs its websocket URL, whose query holds the connection's credentials."""
    text = record.getMessage()
    if SECRET_QUERY.search(text):
        record.msg, record.args = SECRET_QUERY.sub(r"\1***", text), None
    return True


def _client_class(bot: Bot, base: type) -> type:
    from lark_oapi.ws.exception import ClientException, ServerException

    """The SDK's client, telling `bot` what its connection does. The SDK has hooks for the
    reconnect (on_reconnecting, on_reconnected) but none for the first connection, nor for a
    reconnect that gives up (its exception ends a task nobody awaits): `_connect` and
    `_reconnect` are wrapped for those."""

    class Client(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.on_reconnecting = lambda: bot.say("reconnecting", "the connection was lost")

        async def _connect(self) -> None:
            try:
                await super()._connect()
            except ServerException as exc:  # an HTTP 4xx of the endpoint: retrying won't help
                if 400 <= exc.code < 500:
                    raise ClientException(exc.code, str(exc.args[0] if exc.args else exc)) from None
                raise
            if self._conn is not None:
                bot.say("connected", f"connection {self._conn_id}")

        async def _reconnect(self) -> None:
            try:
                await super()._reconnect()
            except Exception as exc:
                bot.failed(exc)

    return Client


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m orbit.feishu.bot NAME\n")
        return 2
    name = argv[0]

    def body(home: Home, handle: IO[str], stop: threading.Event) -> str:
        return Bot(home, name, stop).run()

    return worker_main(lambda home: bot_worker(home, name), body)


if __name__ == "__main__":
    exit_from(main)

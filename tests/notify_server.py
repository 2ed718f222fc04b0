"""A real local HTTP endpoint for notification tests (127.0.0.1 only), and helpers around the
sender process.

The endpoint records every POST (headers, JSON body, arrival time) and answers from a script:
a list of actions used in order, the last one repeated. An action is `(status, body)` or
`HOLD`: keep the request open until the test calls `release()` (or the server stops). A
message can have a script of its own (`by_key`, by idempotency key): its requests follow that
one, and the shared script counts only the others.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOLD = "hold"
OK = (200, b"ok")
DINGTALK_OK = (200, b'{"errcode":0,"errmsg":"ok"}')


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()

    @property
    def key(self) -> str:
        return self.headers.get("X-Orbit-Idempotency-Key", "")

    def json(self) -> Any:
        return json.loads(self.body)


class Endpoint:
    def __init__(
        self, script: list[Any] | None = None, by_key: dict[str, list[Any]] | None = None
    ) -> None:
        self.script = list(script or [OK])
        self.by_key = dict(by_key or {})
        self.received: list[Received] = []
        self.answered: list[Received] = []  # those that got an answer
        self.lock = threading.Lock()
        self.released = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                got = Received(self.path, dict(self.headers), self.rfile.read(length), 0.0)
                got.at = time.monotonic()
                with endpoint.lock:
                    endpoint.received.append(got)
                    action = endpoint.action_for(got.key)
                if action == HOLD:
                    endpoint.released.wait(60)
                    action = OK
                status, body = action
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    return  # the client died meanwhile
                with endpoint.lock:
                    endpoint.answered.append(got)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def action_for(self, key: str) -> Any:
        """The answer to the latest request (called under the lock, once it is recorded)."""
        if key in self.by_key:
            script = self.by_key[key]
            n = sum(1 for r in self.received if r.key == key)
        else:
            script = self.script
            n = sum(1 for r in self.received if r.key not in self.by_key)
        return script[min(n, len(script)) - 1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook/abcdef0123456789"

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, pred: Callable[[list[Received]], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if pred(list(self.received)):
                    return
            time.sleep(0.02)
        raise AssertionError(f"the endpoint never saw it; received {self.summary()}")

    def summary(self) -> list[str]:
        with self.lock:
            return [f"{r.key} @{r.at:.2f}" for r in self.received]


def endpoints(*scripts: list[Any]) -> Iterator[list[Endpoint]]:
    made = [Endpoint(s) for s in scripts]
    try:
        yield made
    finally:
        for e in made:
            e.close()


def sender_pid(home: Path) -> int | None:
    from orbit.store.locks import lock_holder

    holder = lock_holder(home / "notify" / "sender.lock")
    return holder.pid if holder else None


def wait_sender(home: Path, timeout: float = 60) -> None:
    """Until no sender holds the home's lock (it has nothing left to send)."""
    from orbit.store.locks import is_locked

    deadline = time.monotonic() + timeout
    while is_locked(home / "notify" / "sender.lock"):
        assert time.monotonic() < deadline, "the sender did not finish"
        time.sleep(0.05)


def stop_sender(home: Path, timeout: float = 10) -> None:
    """End the home's sender, if one lives (a test must not leave one behind). Until the
    sender has taken the lock as its own, /proc/locks names its starter: wait for that."""
    from orbit.store.locks import is_locked

    deadline = time.monotonic() + timeout
    while is_locked(home / "notify" / "sender.lock") and time.monotonic() < deadline:
        pid = sender_pid(home)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"orbit.notify.sender" in f.read():
                    os.kill(pid, signal.SIGKILL)
        except (OSError, TypeError):
            pass
        time.sleep(0.05)

"""The web server process: binds 127.0.0.1, holds runtime/web.lock while it lives, and records
its pid and port in runtime/web.json (for people and `orbit web`; liveness is the lock)."""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import signal
import socketserver
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from orbit.errors import ConflictError, OrbitError, UsageError
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.locks import is_locked, release, try_lock

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_PORT = 7717
PORT_TRIES = 50
UNIT_TEMPLATE = Path(__file__).resolve().parents[2] / "systemd" / "orbit-web.service"


def lock_path(home: Home) -> Path:
    return home.runtime_dir / "web.lock"


def info_path(home: Home) -> Path:
    return home.runtime_dir / "web.json"


@dataclass
class Running:
    pid: int
    port: int

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def running(home: Home) -> Running | None:
    """The live server of this home, or None (a held lock is what makes it live)."""
    if not is_locked(lock_path(home)):
        return None
    try:
        data = json.loads(info_path(home).read_text())
        return Running(int(data["pid"]), int(data["port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # starting: the lock is taken just before web.json is written


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a slow client never keeps the server from stopping


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


def bind(app: Any, port: int | None) -> WSGIServer:
    """A server on `port`, or on the first free port from 7717 when `port` is None."""
    candidates = [port] if port is not None else range(DEFAULT_PORT, DEFAULT_PORT + PORT_TRIES)
    for candidate in candidates:
        try:
            return make_server(HOST, candidate, app, _Server, _QuietHandler)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    if port is not None:
        raise ConflictError(f"port {port} on {HOST} is in use (choose another with --port)")
    raise ConflictError(f"no free port in {DEFAULT_PORT}–{DEFAULT_PORT + PORT_TRIES - 1}")


def serve(home: Home, port: int | None) -> None:
    """Serve until SIGTERM or SIGINT; returns at once (ConflictError) if one already serves."""
    from orbit.web.app import make_app

    home.ensure()
    lock = try_lock(lock_path(home))
    if lock is None:
        raise ConflictError("the web server of this ORBIT_HOME is already running")
    try:
        server = bind(make_app(home), port)
        _record(home, server.server_port)

        def stop(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        log.info("serving %s on http://%s:%d", home.root, HOST, server.server_port)
        try:
            server.serve_forever(poll_interval=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    finally:
        try:
            info_path(home).unlink()
        except FileNotFoundError:
            pass
        release(lock)


def _record(home: Home, port: int) -> None:
    data = {"pid": os.getpid(), "port": port, "host": HOST, "home": str(home.root)}
    atomic_write(info_path(home), (json.dumps(data) + "\n").encode())


def stop(home: Home, timeout: float = 10.0) -> bool:
    """Stop this home's server; False when none was running."""
    import time

    live = running(home)
    if live is None:
        return False
    try:
        os.kill(live.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while is_locked(lock_path(home)):
        if time.monotonic() > deadline:
            raise OrbitError(f"the web server (pid {live.pid}) did not stop within {timeout:g} s")
        time.sleep(0.05)
    return True


def server_command(port: int | None) -> list[str]:
    cmd = [sys.executable, "-m", "orbit", "web", "--serve"]
    return [*cmd, "--port", str(port)] if port is not None else cmd


def render_unit(home: Home) -> str:
    """systemd/orbit-web.service filled in for `home` (same quoting as the tick's units)."""
    from orbit.sched.supervisor import _quote_unit, tick_environment

    if "\n" in str(home.root):
        raise UsageError("ORBIT_HOME must not contain a line break")
    values = {
        "HOME": str(home.root),
        "HOME_TEXT": str(home.root).replace("%", "%%"),
        "ENVIRONMENT": " ".join(_quote_unit(f"{k}={v}") for k, v in tick_environment(home).items()),
        "EXEC_START": " ".join(_quote_unit(a, exec_arg=True) for a in server_command(None)),
    }
    text = UNIT_TEMPLATE.read_text()
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], text)

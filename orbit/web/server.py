"""The web server process: binds 127.0.0.1 (and ::1, same port), holds runtime/web.lock while it
lives, and records its pid and port in runtime/web.json (for people and `orbit web`; liveness
is the lock).

HTTP is served by waitress: one event loop reads requests without a thread per connection, a
pool of worker threads runs the app, the listen backlog is 1024, a connection idle for
IDLE_TIMEOUT_S is closed, and at most `connection_limit()` connections are kept: beyond that the
longest-idle connection that has no request in progress is dropped, so idle or half-open sockets
cannot lock other clients out."""

from __future__ import annotations

import errno
import json
import logging
import os
import resource
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask

from orbit.errors import ConflictError, OrbitError
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.locks import is_locked, release, try_lock

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_PORT = 7717
PORT_TRIES = 50


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


IDLE_TIMEOUT_S = 30
WORKER_THREADS = 8
BODY_MAX = 1 << 20  # a note is at most 64 KiB; nothing posts more than this
FD_RESERVE = 256  # descriptors kept for files, locks and logs


def raise_fd_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def connection_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(32, min(4096, soft - FD_RESERVE))


class _ErrorTask(ErrorTask):
    """waitress's own error answers (a malformed request, a body over BODY_MAX) carry the
    security headers too."""

    def execute(self) -> None:
        from orbit.web.app import SECURITY_HEADERS

        self.response_headers.extend(SECURITY_HEADERS.items())
        super().execute()


class _Channel(HTTPChannel):
    error_task_class = _ErrorTask


class _Listener(TcpWSGIServer):
    """One listening socket of the server (127.0.0.1 or ::1): it makes room under the shared
    connection limit of `main` before it accepts, and frees its socket when it cannot bind."""

    channel_class = _Channel
    main: Server

    def bind_server_socket(self) -> None:
        try:
            super().bind_server_socket()
        except OSError:
            self.close()  # the socket and the wake-up pipe: `bind` tries the next port
            raise

    def handle_accept(self) -> None:
        self.main.make_room()
        super().handle_accept()


class Server(_Listener):
    """waitress's server that drops the longest-idle connection instead of refusing new ones,
    with the serve_forever/shutdown/server_close interface the CLI and tests use."""

    def __init__(self, app: Any, port: int, limit: int) -> None:
        self.main = self
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self.limit = limit
        super().__init__(
            app,
            host=HOST,
            port=port,
            threads=WORKER_THREADS,
            backlog=1024,
            connection_limit=limit + 16,  # waitress's own stop-accepting guard, never reached
            channel_timeout=IDLE_TIMEOUT_S,
            cleanup_interval=2,
            asyncore_use_poll=True,  # select() fails past descriptor 1023
            max_request_body_size=BODY_MAX,
            ident="",  # no Server: header
            expose_tracebacks=False,
        )

    @property
    def server_port(self) -> int:
        return int(self.effective_port)

    def make_room(self) -> None:
        """Before a connection is accepted (on either address): drop the longest-idle one when
        `limit` connections are open."""
        if len(self._channels()) >= self.limit:
            self._drop_idlest()

    def _channels(self) -> list[HTTPChannel]:
        return [c for c in self._map.values() if isinstance(c, HTTPChannel)]

    def _drop_idlest(self) -> None:
        idle = [c for c in self._channels() if not c.requests]
        if idle:
            oldest = min(idle, key=lambda c: c.last_activity)
            log.debug("connection limit %d reached: dropping an idle connection", self.limit)
            oldest.handle_close()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        try:
            while not self._stop.is_set():
                wasyncore.loop(timeout=poll_interval, map=self._map, use_poll=True, count=1)
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        self._stop.set()
        self.pull_trigger()
        self._stopped.wait(10)

    def server_close(self) -> None:
        for channel in list(self._map.values()):
            if channel is not self:
                try:
                    channel.close()
                except OSError:
                    pass
        self.close()
        self.task_dispatcher.shutdown(timeout=5)


def _add_loopback6(server: Server) -> None:
    """Listen on [::1]:<the server's port> too; nothing when this host has no IPv6 loopback
    (then no one can listen there). Raises OSError(EADDRINUSE) when someone else does."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError as exc:
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            return
        raise
    sockinfo = (
        socket.AF_INET6,
        socket.SOCK_STREAM,
        socket.IPPROTO_TCP,
        ("::1", server.server_port),
    )
    # The same server on [::1] and the same port, sharing the event loop, the workers and the
    # connection limit. A browser may resolve `localhost` to ::1 first: a port left free there
    # could be taken by another local user's server, which would then get every visit to
    # http://localhost:<port>/ (and could ask for the token on a copy of the login page).
    sibling = _Listener(
        server.application,
        map=server._map,
        dispatcher=server.task_dispatcher,
        adj=server.adj,
        sockinfo=sockinfo,
    )
    sibling.main = server


def bind(app: Any, port: int | None) -> Server:
    """A server on `port` (of 127.0.0.1 and, where it exists, ::1), or on the first port from
    7717 that is free on both when `port` is None (0: any free port)."""
    candidates: Any = [port] if port is not None else range(DEFAULT_PORT, DEFAULT_PORT + PORT_TRIES)
    if port == 0:
        candidates = [0] * PORT_TRIES  # the kernel picks one; ::1 may hold it already
    limit = connection_limit()
    for candidate in candidates:
        try:
            server = Server(app, candidate, limit)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            continue
        try:
            _add_loopback6(server)
        except OSError as exc:
            server.server_close()
            if exc.errno != errno.EADDRINUSE:
                raise
            if port:
                raise ConflictError(
                    f"port {port} on [::1] (localhost) is in use by another program "
                    "(choose another with --port)"
                ) from None
            continue
        return server
    if port:
        raise ConflictError(f"port {port} on {HOST} is in use (choose another with --port)")
    raise ConflictError(f"no free port in {DEFAULT_PORT}–{DEFAULT_PORT + PORT_TRIES - 1}")


def serve(home: Home, port: int | None) -> None:
    """Serve until SIGTERM or SIGINT; returns at once (ConflictError) if one already serves."""
    from orbit.web.app import make_app

    home.ensure()
    lock = try_lock(lock_path(home))
    if lock is None:
        raise ConflictError("the web server of this ORBIT_HOME is already running")
    raise_fd_limit()
    # waitress logs a line for each request that waits for a worker and for each client that
    # hangs up early: any local user, without a token, could grow runtime/web.log at will.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    logging.getLogger("waitress").setLevel(logging.WARNING)
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

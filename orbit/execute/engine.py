"""A small client of the Docker Engine API: HTTP/1.1 over Docker's socket, JSON bodies.

Orbit's processes are short (the CLI) or many (a shepherd per run): the Docker SDK and the
`requests` stack it stands on cost 80–130 ms to import and ~10 MB of private memory in each
(docs/architecture.md, "Dependencies", has the measurement).
This client uses the standard library's `socket` and `json` only, one connection per request
(`Connection: close`; a Unix socket connects in microseconds), and covers exactly what Orbit
asks of the engine.

`DOCKER_HOST` chooses the engine as for the docker CLI: `unix:///path` (the default
`/var/run/docker.sock`) or `tcp://host:port`, with TLS when `DOCKER_TLS_VERIFY` is set (the
client certificate and CA from `DOCKER_CERT_PATH`, default `~/.docker`). `ssh://` is refused
with a one-line error: forward the engine's socket instead (`ssh -L`).
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterable, Iterator
from urllib.parse import quote, urlencode, urlsplit

from orbit.errors import DockerError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

API = "/v1.41"  # Docker 20.10 and later; every call Orbit makes exists in it
DEFAULT_HOST = "unix:///var/run/docker.sock"
START_HINT = "start it with `sudo systemctl start docker` (or `sudo dockerd &` without systemd)"


class EngineError(DockerError):
    """The engine answered with an error: `status` is the HTTP status, `explanation` the
    engine's own message."""

    def __init__(self, status: int, explanation: str) -> None:
        super().__init__(explanation)
        self.status = status
        self.explanation = explanation


class NotFound(EngineError):
    pass


class Unreachable(DockerError):
    """No answer: the socket refused, is missing, or the engine did not answer in time
    (`timed_out`)."""

    def __init__(self, message: str, *, timed_out: bool = False, denied: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        self.denied = denied


class Response:
    """A response whose body is read on demand: `read()` all of it, or `chunks()`."""

    def __init__(self, sock: socket.socket, status: int, headers: dict[str, str], rest: bytes):
        self.sock = sock
        self.status = status
        self.headers = headers
        self._rest = rest

    def _recv(self, size: int = 1 << 16) -> bytes:
        if self._rest:
            data, self._rest = self._rest, b""
            return data
        return self.sock.recv(size)

    def _exactly(self, size: int) -> bytes:
        parts, got = [], 0
        while got < size:
            part = self._recv(min(size - got, 1 << 20))
            if not part:
                raise Unreachable("Docker closed the connection mid-answer")
            if len(part) > size - got:  # only from _rest
                self._rest = part[size - got :]
                part = part[: size - got]
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def _line(self) -> bytes:
        data = b""
        while b"\r\n" not in data:
            part = self._recv()
            if not part:
                raise Unreachable("Docker closed the connection mid-answer")
            data += part
        line, _, self._rest = data.partition(b"\r\n")
        return line

    def chunks(self) -> Iterator[bytes]:
        """The body in pieces as they arrive."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(self._line().split(b";", 1)[0], 16)
                if size == 0:
                    return
                yield self._exactly(size)
                self._exactly(2)
        elif "content-length" in self.headers:
            left = int(self.headers["content-length"])
            while left > 0:
                part = self._recv(min(left, 1 << 20))
                if not part:
                    raise Unreachable("Docker closed the connection mid-answer")
                yield part[:left]
                left -= len(part)
        else:
            while part := self._recv(1 << 20):
                yield part

    def read(self) -> bytes:
        try:
            return b"".join(self.chunks())
        finally:
            self.close()

    def json(self) -> Any:
        data = self.read()
        return json.loads(data) if data.strip() else None

    def close(self) -> None:
        self.sock.close()


class Engine:
    """One Docker engine, as `DOCKER_HOST` (or `host`) names it. Every method raises
    DockerError (EngineError for the engine's refusals, NotFound for a 404, Unreachable
    when nothing answers); none prints."""

    def __init__(self, host: str | None = None, timeout: float | None = 60.0) -> None:
        self.host = host or os.environ.get("DOCKER_HOST") or DEFAULT_HOST
        self.timeout = timeout
        parts = urlsplit(self.host)
        self.scheme = parts.scheme
        if parts.scheme == "unix":
            self.address: Any = parts.path
        elif parts.scheme in ("tcp", "http", "https"):
            self.address = (parts.hostname or "localhost", parts.port or 2375)
        else:
            raise DockerError(
                f"DOCKER_HOST={self.host}: Orbit reaches Docker over a Unix socket or TCP; "
                "forward a remote engine's socket (`ssh -L`) and point DOCKER_HOST at it"
            )
        self.tls = parts.scheme == "https" or bool(os.environ.get("DOCKER_TLS_VERIFY"))

    # --- the connection -------------------------------------------------------------------
    def connect(self, timeout: float | None) -> socket.socket:
        family = socket.AF_UNIX if self.scheme == "unix" else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.address)
            if self.tls:
                sock = self._wrap_tls(sock)
        except PermissionError:
            sock.close()
            raise Unreachable(
                "Docker refused access: add your user to the `docker` group "
                "(`sudo usermod -aG docker $USER`, then log in again)",
                denied=True,
            ) from None
        except TimeoutError:
            sock.close()
            raise Unreachable(self._silent(timeout), timed_out=True) from None
        except OSError:
            sock.close()
            raise Unreachable(f"Docker is not reachable; {START_HINT}") from None
        return sock

    def _wrap_tls(self, sock: socket.socket) -> socket.socket:
        import ssl

        certs = os.environ.get("DOCKER_CERT_PATH") or os.path.expanduser("~/.docker")
        context = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
        context.load_cert_chain(os.path.join(certs, "cert.pem"), os.path.join(certs, "key.pem"))
        return context.wrap_socket(sock, server_hostname=self.address[0])

    def _silent(self, timeout: float | None) -> str:
        return (
            f"Docker did not answer within {timeout:g} s: the daemon accepts connections but "
            "hangs; see `sudo systemctl status docker` (or restart it)"
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        data: bytes | Iterable[bytes] | None = None,
        content_type: str = "application/json",
        timeout: float | str | None = "default",
        upgrade: bool = False,
    ) -> Response:
        """Send one request; the response once its head has arrived (an error status
        raises). `body` is sent as JSON, `data` as bytes or chunked from an iterable."""
        wait = self.timeout if timeout == "default" else timeout
        assert not isinstance(wait, str)
        target = API + path + ("?" + urlencode(query) if query else "")
        head = [f"{method} {target} HTTP/1.1", "Host: docker"]
        payload: bytes | None = None
        if body is not None:
            payload = json.dumps(body).encode()
        elif isinstance(data, bytes):
            payload = data
        if upgrade:
            head += ["Connection: Upgrade", "Upgrade: tcp"]
        else:
            head.append("Connection: close")
        if payload is not None or data is not None:
            head.append(f"Content-Type: {content_type}")
        if payload is not None:
            head.append(f"Content-Length: {len(payload)}")
        elif data is not None:
            head.append("Transfer-Encoding: chunked")
        else:
            head.append("Content-Length: 0")
        sock = self.connect(wait)
        try:
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + (payload or b""))
            if payload is None and data is not None and not isinstance(data, bytes):
                _send_chunked(sock, data)
            response = self._head(sock, byte_by_byte=upgrade)
        except _SourceError as failed:
            sock.close()
            raise failed.error from None
        except TimeoutError:
            sock.close()
            raise Unreachable(self._silent(wait), timed_out=True) from None
        except OSError as exc:
            sock.close()
            raise Unreachable(f"Docker is not reachable ({exc.strerror or exc})") from None
        except BaseException:
            sock.close()
            raise
        if response.status >= 400:
            raise _error(response)
        return response

    @staticmethod
    def _head(sock: socket.socket, *, byte_by_byte: bool) -> Response:
        """Read the status line and headers. For an upgraded stream the head is read a byte
        at a time, so nothing of the stream after it is taken with it."""
        data = b""
        while b"\r\n\r\n" not in data:
            part = sock.recv(1 if byte_by_byte else 1 << 16)
            if not part:
                raise Unreachable("Docker closed the connection without an answer")
            data += part
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status_line = lines[0].split()
        if len(status_line) < 2 or not status_line[1].isdigit():
            raise Unreachable(f"Docker answered something else than HTTP: {lines[0][:60]!r}")
        headers = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        return Response(sock, int(status_line[1]), headers, rest)

    def get_whole(self, path: str, *, query: dict[str, Any], timeout: float) -> bytes:
        """The whole body of a GET (a log read). Over a Unix socket it is asked for as HTTP/1.0:
        the answer then comes unchunked until the connection closes, which spares a Python
        step per log frame (Docker sends each as a chunk over HTTP/1.1)."""
        if self.scheme != "unix":
            return self.request("GET", path, query=query, timeout=timeout).read()
        target = API + path + "?" + urlencode(query)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            # A kernel timeout keeps the socket blocking, so MSG_WAITALL gathers whole megabytes.
            timeval = struct.pack("ll", int(timeout), 0)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
            parts = []
            try:
                sock.connect(self.address)
                sock.sendall(f"GET {target} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
                while part := sock.recv(1 << 22, socket.MSG_WAITALL):  # fewer, larger reads
                    parts.append(part)
            except OSError as exc:
                raise Unreachable(f"Docker is not reachable ({exc.strerror or exc})") from None
        head, _, body = b"".join(parts).partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].split()
        if len(status) < 2 or status[1] != b"200":
            message = body.decode("utf-8", "replace").strip()[:200]
            raise DockerError(f"Docker's log read failed: {head[:40]!r} {message}")
        return body

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """`request`, then the whole body as JSON (None when empty)."""
        return self.request(method, path, **kwargs).json()

    # --- the engine -------------------------------------------------------------------------
    def ping(self) -> None:
        self.request("GET", "/_ping").read()

    def info(self) -> dict[str, Any]:
        return dict(self.call("GET", "/info") or {})

    def version(self) -> dict[str, Any]:
        return dict(self.call("GET", "/version") or {})

    # --- images ---------------------------------------------------------------------------
    def image(self, name: str) -> dict[str, Any] | None:
        """The image's inspect document, or None when it is not local."""
        try:
            return dict(self.call("GET", f"/images/{quote(name, safe='')}/json") or {})
        except NotFound:
            return None

    def pull(self, image: str) -> None:
        """Pull `image` (`repo[:tag]`, `latest` when untagged); the engine's error, if the
        pull's progress stream ends with one, is raised."""
        last_slash = image.rfind("/")
        repo, tag = image, "latest"
        if ":" in image[last_slash + 1 :]:
            repo, _, tag = image.rpartition(":")
        response = self.request(
            "POST", "/images/create", query={"fromImage": repo, "tag": tag}, timeout=None
        )
        for line in response.read().splitlines():
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("error"):
                raise EngineError(500, str(message["error"]))

    def remove_image(self, name: str, *, force: bool = False) -> None:
        self.request(
            "DELETE", f"/images/{quote(name, safe='')}", query={"force": int(force)}
        ).read()

    # --- containers -----------------------------------------------------------------------
    def container(self, name_or_id: str) -> Container | None:
        """The container, or None when it does not exist."""
        try:
            attrs = self.call("GET", f"/containers/{quote(name_or_id, safe='')}/json")
        except NotFound:
            return None
        return Container(self, dict(attrs or {}))

    def create(self, config: dict[str, Any], name: str | None = None) -> Container:
        """Create a container from an Engine API create document (see docker_ops)."""
        query = {"name": name} if name else None
        created = self.call("POST", "/containers/create", query=query, body=config)
        found = self.container(str(created["Id"]))
        if found is None:
            raise NotFound(404, f"container {created['Id'][:12]} vanished after its creation")
        return found


class Container:
    """A container as last inspected (`attrs`); `reload()` inspects it again."""

    def __init__(self, engine: Engine, attrs: dict[str, Any]) -> None:
        self.engine = engine
        self.attrs = attrs

    @property
    def id(self) -> str:
        return str(self.attrs.get("Id") or "")

    @property
    def name(self) -> str:
        return str(self.attrs.get("Name") or "").lstrip("/")

    @property
    def status(self) -> str:
        return str((self.attrs.get("State") or {}).get("Status") or "")

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.attrs.get("Config") or {}).get("Labels") or {})

    def _path(self, action: str = "") -> str:
        return f"/containers/{self.id}{action}"

    def reload(self) -> None:
        self.attrs = dict(self.engine.call("GET", self._path("/json")) or {})

    def start(self) -> None:
        self.engine.request("POST", self._path("/start")).read()

    def stop(self, timeout: int) -> None:
        self.engine.request(
            "POST", self._path("/stop"), query={"t": timeout}, timeout=timeout + 60
        ).read()

    def remove(self, *, force: bool = False) -> None:
        self.engine.request("DELETE", self._path(), query={"force": int(force)}).read()

    def wait(self) -> int:
        """Block until the container ends; its exit code."""
        result = self.engine.call("POST", self._path("/wait"), timeout=None) or {}
        return int(result.get("StatusCode", -1))

    def commit(self, repository: str, tag: str | None) -> None:
        query = {"container": self.id, "repo": repository}
        if tag:
            query["tag"] = tag
        self.engine.request("POST", "/commit", query=query, body={}, timeout=None).read()

    def put_archive(self, path: str, data: Iterable[bytes]) -> None:
        self.engine.request(
            "PUT",
            self._path("/archive"),
            query={"path": path},
            data=data,
            content_type="application/x-tar",
            timeout=None,
        ).read()

    def get_archive(self, path: str) -> Response:
        """A tar of `path` in the container, to be read from the response."""
        return self.engine.request("GET", self._path("/archive"), query={"path": path})


class _SourceError(Exception):
    """An error raised by the iterable a request's body is read from (it is re-raised as it
    was, not taken for Docker's)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _send_chunked(sock: socket.socket, data: Iterable[bytes]) -> None:
    pieces = iter(data)
    while True:
        try:
            piece = next(pieces)
        except StopIteration:
            break
        except Exception as exc:
            raise _SourceError(exc) from exc
        if piece:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
    sock.sendall(b"0\r\n\r\n")


def _error(response: Response) -> EngineError:
    try:
        raw = response.read()
    except DockerError:
        raw = b""
    try:
        message = str((json.loads(raw) or {}).get("message") or "")
    except (ValueError, AttributeError):
        message = raw.decode("utf-8", "replace").strip()
    message = message.splitlines()[0][:300] if message else f"HTTP {response.status}"
    cls = NotFound if response.status == 404 else EngineError
    return cls(response.status, message)

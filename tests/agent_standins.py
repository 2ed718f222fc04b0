"""Stand-in `claude` and `codex` CLIs and a stand-in model provider, for tests (docs/testing.md).

No model provider is reachable here, so tests install these instead of the real CLIs:

* install(prefix) lays out what `npm install -g --prefix PREFIX @anthropic-ai/claude-code
  @openai/codex` lays out, with the stand-ins (tests/standins/) as the executables, and returns
  PREFIX/bin. The layout is relocatable (relative links), so it can be mounted read-only into a
  container anywhere.
* provider_server(keys) is a real local HTTP server answering the Anthropic Messages API
  (POST /v1/messages) and the OpenAI Responses API (POST /v1/responses) for the given keys.
  Point ANTHROPIC_BASE_URL at server.url, OPENAI_BASE_URL at server.url + "/v1".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STANDINS = Path(__file__).resolve().parent / "standins"
sys.path.insert(0, str(STANDINS))

from standin_common import reply_for, tokens  # noqa: E402 (the path above)

CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
CODEX_PACKAGE = "@openai/codex"


def _package(prefix: Path, name: str, version: str, command: str, exe: str, source: str) -> None:
    pkg = prefix / "lib" / "node_modules" / name
    (pkg / "bin").mkdir(parents=True, exist_ok=True)
    manifest = {"name": name, "version": version, "bin": {command: exe}}
    (pkg / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    target = pkg / exe
    shutil.copyfile(STANDINS / source, target)
    target.chmod(0o755)
    # The support modules sit beside each executable, which imports them from its own directory.
    for module in [STANDINS / "standin_common.py", *STANDINS.glob(f"{command}_*.py")]:
        shutil.copyfile(module, pkg / "bin" / module.name)
    link = prefix / "bin" / command
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def install(prefix: Path) -> Path:
    """An npm-like global install of the two stand-ins under prefix; returns prefix/bin."""
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    _package(prefix, CLAUDE_PACKAGE, CLAUDE_VERSION, "claude", "bin/claude.exe", "claude.py")
    _package(prefix, CODEX_PACKAGE, CODEX_VERSION, "codex", "bin/codex.js", "codex.py")
    # Readable by any container user whatever the umask: an in-process `orbit` command earlier
    # in the test session leaves the private home's umask (077) on this process.
    for path in [prefix, *prefix.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return prefix / "bin"


# --- the provider ------------------------------------------------------------------------------


@dataclass
class Request:
    """One request the provider received: path (without the query), headers (lower-case), body."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class ProviderServer:
    url: str
    keys: tuple[str, ...]
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def by_path(self, path: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path == path]


def _first_user_text(messages: Any) -> str:
    """The prompt: the first user message's text, in either API's message shape."""
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text"):
                return str(part.get("text", ""))
    return ""


def _handler(server: ProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def answer(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode(errors="replace")
            path = self.path.split("?", 1)[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            with server.lock:
                server.requests.append(Request(path, headers, body))
            bearer = headers.get("authorization", "").removeprefix("Bearer ")
            if path == "/v1/messages":
                self.anthropic_messages(headers.get("x-api-key") or bearer, headers, body)
            elif path == "/v1/responses":
                self.openai_responses(bearer, body)
            else:
                self.answer(
                    404,
                    {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}},
                )

        def anthropic_messages(self, key: str, headers: dict[str, str], body: Any) -> None:
            if key not in server.keys:
                self.answer(
                    401,
                    {
                        "type": "error",
                        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                    },
                )
                return
            if "anthropic-version" not in headers:
                self.answer(
                    400,
                    {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": "anthropic-version: header is required",
                        },
                    },
                )
                return
            if not isinstance(body, dict) or not all(
                k in body for k in ("model", "max_tokens", "messages")
            ):
                self.answer(
                    400,
                    {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": "model, max_tokens and messages are required",
                        },
                    },
                )
                return
            text = reply_for(_first_user_text(body["messages"]))
            self.answer(
                200,
                {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": tokens(json.dumps(body["messages"])),
                        "output_tokens": tokens(text),
                    },
                },
            )

        def openai_responses(self, key: str, body: Any) -> None:
            if key not in server.keys:
                self.answer(
                    401,
                    {
                        "error": {
                            "message": "Incorrect API key provided.",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": "invalid_api_key",
                        }
                    },
                )
                return
            if not isinstance(body, dict) or "model" not in body or "input" not in body:
                self.answer(
                    400,
                    {
                        "error": {
                            "message": "model and input are required",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": None,
                        }
                    },
                )
                return
            prompt = (
                body["input"] if isinstance(body["input"], str) else _first_user_text(body["input"])
            )
            text = reply_for(prompt)
            used_in, used_out = tokens(json.dumps(body["input"])), tokens(text)
            self.answer(
                200,
                {
                    "id": f"resp_{uuid.uuid4().hex}",
                    "object": "response",
                    "status": "completed",
                    "model": body["model"],
                    "output": [
                        {
                            "type": "message",
                            "id": f"msg_{uuid.uuid4().hex}",
                            "status": "completed",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": text, "annotations": []}],
                        }
                    ],
                    "usage": {
                        "input_tokens": used_in,
                        "output_tokens": used_out,
                        "total_tokens": used_in + used_out,
                    },
                },
            )

    return Handler


@contextmanager
def provider_server(
    keys: tuple[str, ...] | list[str] = ("sk-standin-key",),
) -> Iterator[ProviderServer]:
    """A model provider on 127.0.0.1 (ephemeral port) that accepts exactly `keys`."""
    server = ProviderServer(url="", keys=tuple(keys))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


# --- running them in tests ----------------------------------------------------------------------


def shared_dir(path: Path) -> Path:
    """A host folder the container's uid 1234 can write (Orbit bind-mounts run folders alike)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def run_host(
    prefix: Path, *argv: str, env: dict[str, str], cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "CLAUDE"))}
    clean = {k: v for k, v in clean.items() if not k.startswith(("CODEX", "OPENAI"))}
    return subprocess.run(
        [str(prefix / "bin" / argv[0]), *argv[1:]],
        env={**clean, **env},
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def run_container(
    image: str,
    prefix: Path,
    script: str,
    env: dict[str, str] | None = None,
    user: str = "1234:1234",
    mounts: dict[Path, str] | None = None,
    network_host: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`sh -c script` in the image with the install at /opt/agents (read-only), HOME on a tmpfs."""
    uid = user.split(":")[0]
    argv = ["docker", "run", "--rm", "--user", user, "-v", f"{prefix}:/opt/agents:ro"]
    argv += ["--tmpfs", f"/home/agent:uid={uid},gid={uid}", "-e", "HOME=/home/agent"]
    argv += ["-e", "PATH=/opt/agents/bin:/usr/local/bin:/usr/bin:/bin", "-w", "/home/agent"]
    for source, target in (mounts or {}).items():
        argv += ["-v", f"{source}:{target}"]
    for name, value in (env or {}).items():
        argv += ["-e", f"{name}={value}"]
    if network_host:
        argv += ["--network", "host"]
    argv += [image, "sh", "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def assert_no_secret(secret: str, *roots: Path) -> None:
    for path in files_under(*roots):
        assert secret not in path.read_text(errors="replace"), path

"""What the claude and codex stand-ins share: the "model", the tools it calls, HTTP, the trace.

Standard library only: the stand-ins run in orbit-test/python:3 (Debian's python3-minimal).
install() copies this file beside each stand-in, which imports it from its own directory.

The "model" reads the prompt line by line:
  Reply with exactly: X            the final answer is X
  create PATH containing TEXT      write TEXT plus a newline to PATH (relative to the cwd)
  edit PATH: OLD -> NEW            replace OLD by NEW in PATH
  run: CMD                         run CMD with the shell; the tool result is its output
Without a "Reply with exactly" line the final answer is "Done." (or "OK." when no tool ran).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPLY_RE = re.compile(r"Reply with exactly:\s*(.*?)\s*$", re.MULTILINE)
CREATE_RE = re.compile(r"^\s*create (\S+) containing (.*)$")
EDIT_RE = re.compile(r"^\s*edit (\S+?): (.*) -> (.*)$")
RUN_RE = re.compile(r"^\s*run: (.+)$")


@dataclass
class Step:
    """One tool call the "model" makes: kind is write, edit or run."""

    kind: str
    path: str = ""
    text: str = ""
    old: str = ""
    new: str = ""
    command: str = ""


@dataclass
class Outcome:
    """What a tool call did: the text the model sees, whether it failed, the details."""

    output: str
    is_error: bool = False
    exit_code: int = 0
    details: dict[str, Any] = field(default_factory=dict)


def steps_of(prompt: str) -> list[Step]:
    steps: list[Step] = []
    for line in prompt.splitlines():
        if m := CREATE_RE.match(line):
            steps.append(Step("write", path=m[1], text=m[2]))
        elif m := EDIT_RE.match(line):
            steps.append(Step("edit", path=m[1], old=m[2], new=m[3]))
        elif m := RUN_RE.match(line):
            steps.append(Step("run", command=m[1].strip()))
    return steps


def reply_for(prompt: str) -> str:
    """The final answer for a prompt, the same in the stand-ins and in the provider server."""
    if m := REPLY_RE.search(prompt):
        return m[1]
    return "Done." if steps_of(prompt) else "OK."


def tokens(text: str) -> int:
    """A rough token count: enough for usage numbers that grow with the text."""
    return max(1, len(text) // 4)


# --- tools -----------------------------------------------------------------------------------


def write_file(cwd: Path, rel: str, text: str) -> Outcome:
    path = cwd / rel
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    except OSError as exc:
        return Outcome(f"Error writing {path}: {exc.strerror}", is_error=True, exit_code=1)
    return Outcome(str(path), details={"type": "update" if existed else "create"})


def edit_file(cwd: Path, rel: str, old: str, new: str) -> Outcome:
    path = cwd / rel
    try:
        original = path.read_text()
    except OSError:
        return Outcome(f"File does not exist: {path}", is_error=True, exit_code=1)
    if old not in original:
        return Outcome(f"String to replace not found in file.\nString: {old}", True, 1)
    try:
        path.write_text(original.replace(old, new, 1))
    except OSError as exc:
        return Outcome(f"Error editing {path}: {exc.strerror}", is_error=True, exit_code=1)
    return Outcome(str(path), details={"originalFile": original})


def run_command(cwd: Path, argv: list[str], env: dict[str, str]) -> Outcome:
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
        )
    except subprocess.TimeoutExpired:
        return Outcome("Command timed out after 600 s", is_error=True, exit_code=124)
    except OSError as exc:
        return Outcome(str(exc), is_error=True, exit_code=127)
    return Outcome(
        proc.stdout + proc.stderr,
        is_error=proc.returncode != 0,
        exit_code=proc.returncode,
        details={"stdout": proc.stdout, "stderr": proc.stderr},
    )


def scrubbed_env(names: tuple[str, ...] = (), markers: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment for a tool's subprocess without the agent's credentials."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in names and not any(m in k.upper() for m in markers)
    }


# --- HTTP ------------------------------------------------------------------------------------


class ProviderError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status} {body}")
        self.status = status
        self.body = body


def post_json(url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """POST JSON, return the JSON answer; ProviderError on an HTTP error (status 0: no answer)."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST")
    request.add_header("content-type", "application/json")
    for key, value in headers.items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return dict(json.loads(response.read() or b"{}"))
    except urllib.error.HTTPError as exc:
        raise ProviderError(exc.code, exc.read().decode(errors="replace")) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ProviderError(0, str(exc)) from None


# --- ids, times, files -----------------------------------------------------------------------


def iso_now() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def uuid7() -> str:
    """A time-ordered UUID (version 7), as Codex uses for thread ids."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 64) & 0xFFF) << 64
    value |= (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def random_id(prefix: str, length: int = 24) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """One whole line per write, flushed, as the real CLIs append their transcripts."""
    with path.open("a") as fh:
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")


def write_private(path: Path, text: str) -> None:
    """Write a credentials file with mode 0600 from the start (never readable by others)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_trace(config_dir: str, is_sandbox: bool) -> None:
    """STANDIN_TRACE=PATH: what the stand-in saw, for tests. Variable names only, never values."""
    target = os.environ.get("STANDIN_TRACE")
    if not target:
        return
    trace = {
        "argv": sys.argv[1:],
        "uid": os.getuid(),
        "gid": os.getgid(),
        "cwd": os.getcwd(),
        "home": os.environ.get("HOME", ""),
        "env_names": sorted(os.environ),
        "config_dir": config_dir,
        "is_sandbox": is_sandbox,
    }
    try:
        Path(target).write_text(json.dumps(trace, indent=2) + "\n")
    except OSError as exc:
        print(f"stand-in: cannot write STANDIN_TRACE {target}: {exc.strerror}", file=sys.stderr)


def git_branch(cwd: Path) -> str:
    """The branch of the repository holding cwd, read from .git/HEAD (no git needed)."""
    for folder in (cwd, *cwd.parents):
        head = folder / ".git" / "HEAD"
        if head.is_file():
            text = head.read_text().strip()
            return text.removeprefix("ref: refs/heads/") if text.startswith("ref:") else "HEAD"
    return "HEAD"


def in_git_repo(cwd: Path) -> bool:
    return any((folder / ".git").exists() for folder in (cwd, *cwd.parents))

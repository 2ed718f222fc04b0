"""One `claude -p` turn of the claude stand-in: the transcript lines, the stream-json messages,
and the tools (Write, Edit, Bash) that really change files and run commands."""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from standin_common import (
    Outcome,
    Step,
    append_jsonl,
    edit_file,
    git_branch,
    iso_now,
    random_id,
    run_command,
    scrubbed_env,
    write_file,
)

VERSION = "2.1.332"
DEFAULT_MODEL = "claude-opus-5-5"
ROOT_REFUSAL = (
    "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"
)
# What CLAUDE_CODE_SUBPROCESS_ENV_SCRUB takes away from the Bash tool's environment (the real
# CLI passes everything through unless that variable is set).
SCRUBBED_VARS = (
    "ANTHROPIC_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_FOUNDRY_API_KEY",
    "ANTHROPIC_CUSTOM_HEADERS",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_SECRET",
)
TOOLS = ["Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "WebFetch", "TodoWrite"]


class Usage(Exception):
    """A command-line error: the message goes to stderr, exit 1 (as commander does)."""


def bypass_requested(opts: dict[str, Any]) -> bool:
    return bool(opts.get("bypass")) or opts.get("permission_mode") == "bypassPermissions"


def config_dir() -> Path:
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else Path.home() / ".claude"


def project_dir_name(cwd: str) -> str:
    if os.environ.get("CLAUDE_CONFIG_DIR") and os.environ.get("CLAUDE_CODE_PROJECT_DIR_NAME"):
        return os.environ["CLAUDE_CODE_PROJECT_DIR_NAME"]
    name = re.sub(r"[^A-Za-z0-9]", "-", cwd)
    if len(name) > 200:
        name = name[:200] + "-" + hashlib.sha256(cwd.encode()).hexdigest()[:8]
    return name


def last_uuid(transcript: Path) -> str | None:
    """The uuid of the last message line, which a resumed turn continues from."""
    last = None
    for line in transcript.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("uuid"):
            last = entry["uuid"]
    return last


class Session:
    """One -p turn: the transcript lines, the stream-json messages, the usage."""

    def __init__(self, opts: dict[str, Any], prompt: str) -> None:
        self.opts = opts
        self.prompt = prompt
        self.cwd = Path(os.getcwd())
        self.session_id = opts.get("resume") or opts.get("session_id") or str(uuid.uuid4())
        self.model = opts.get("model") or os.environ.get("ANTHROPIC_MODEL") or DEFAULT_MODEL
        self.stream = opts.get("output_format") == "stream-json"
        self.parent: str | None = None
        folder = config_dir() / "projects" / project_dir_name(str(self.cwd))
        existing = folder / f"{self.session_id}.jsonl"
        if opts.get("resume"):
            if not existing.is_file():
                raise Usage(f"No conversation found with session ID: {self.session_id}")
            self.parent = last_uuid(existing)
        elif opts.get("session_id") and existing.exists():
            raise Usage(f"Error: Session ID {self.session_id} is already in use.")
        self.transcript: Path | None = None
        if not opts.get("no_persist"):
            folder.mkdir(parents=True, exist_ok=True)
            self.transcript = existing
        self.branch = git_branch(self.cwd)
        self.usage = {"input_tokens": 0, "output_tokens": 0}
        self.turns = 0
        self.denials: list[dict[str, Any]] = []

    # -- output -----------------------------------------------------------------------------

    def emit(self, message: dict[str, Any]) -> None:
        if self.stream:
            print(json.dumps(message, separators=(",", ":")), flush=True)

    def record(self, line: dict[str, Any]) -> None:
        if self.transcript is not None:
            append_jsonl(self.transcript, line)

    def entry(self, kind: str, message: dict[str, Any], **extra: Any) -> str:
        line_uuid = str(uuid.uuid4())
        self.record(
            {
                "parentUuid": self.parent,
                "isSidechain": False,
                "type": kind,
                "message": message,
                **extra,
                "uuid": line_uuid,
                "timestamp": iso_now(),
                "userType": "external",
                "entrypoint": "sdk-cli",
                "cwd": str(self.cwd),
                "sessionId": self.session_id,
                "version": VERSION,
                "gitBranch": self.branch,
            }
        )
        self.parent = line_uuid
        return line_uuid

    def start(self, api_key_source: str) -> None:
        now = iso_now()
        base = {"type": "queue-operation", "timestamp": now, "sessionId": self.session_id}
        self.record({**base, "operation": "enqueue", "content": self.prompt})
        self.record({**base, "operation": "dequeue"})
        self.entry(
            "user",
            {"role": "user", "content": self.prompt},
            promptId=str(uuid.uuid4()),
            permissionMode=self.permission_mode(),
            promptSource="sdk",
        )
        self.emit(
            {
                "type": "system",
                "subtype": "init",
                "cwd": str(self.cwd),
                "session_id": self.session_id,
                "tools": TOOLS,
                "mcp_servers": [],
                "model": self.model,
                "permissionMode": self.permission_mode(),
                "slash_commands": [],
                "apiKeySource": api_key_source,
                "claude_code_version": VERSION,
                "output_style": "default",
                "agents": [],
                "skills": [],
                "plugins": [],
                "uuid": str(uuid.uuid4()),
            }
        )

    def permission_mode(self) -> str:
        return (
            "bypassPermissions"
            if bypass_requested(self.opts)
            else (self.opts.get("permission_mode") or "default")
        )

    # -- the model's messages ---------------------------------------------------------------

    def assistant(self, blocks: list[dict[str, Any]], stop: str, usage: dict[str, int]) -> str:
        """One model message: one transcript line per content block sharing message.id."""
        self.turns += 1
        for key in ("input_tokens", "output_tokens"):
            self.usage[key] += usage[key]
        message_id = random_id("msg_01")
        request_id = random_id("req_011")
        full_usage = {
            "input_tokens": usage["input_tokens"],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": usage["output_tokens"],
            "service_tier": "standard",
        }
        last = ""
        for block in blocks:
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [block],
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": full_usage,
            }
            last = self.entry("assistant", message, requestId=request_id)
            self.emit(
                {
                    "type": "assistant",
                    # Streamed blocks carry no stop_reason yet; the transcript line has it.
                    "message": {**message, "stop_reason": None},
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": last,
                    "timestamp": iso_now(),
                }
            )
        return last

    def tool_result(self, use_id: str, source: str, outcome: Outcome, result: Any) -> None:
        block = {
            "tool_use_id": use_id,
            "type": "tool_result",
            "content": outcome.output,
            "is_error": outcome.is_error,
        }
        message = {"role": "user", "content": [block]}
        line = self.entry("user", message, toolUseResult=result, sourceToolAssistantUUID=source)
        self.emit(
            {
                "type": "user",
                "message": message,
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": line,
                "timestamp": iso_now(),
                "tool_use_result": result,
            }
        )

    def finish(self) -> None:
        self.record(
            {
                "type": "last-prompt",
                "lastPrompt": self.prompt,
                "leafUuid": self.parent,
                "sessionId": self.session_id,
            }
        )


# --- tools ---------------------------------------------------------------------------------


def tool_call(step: Step, cwd: Path) -> tuple[str, dict[str, Any]]:
    if step.kind == "write":
        return "Write", {"file_path": str(cwd / step.path), "content": step.text + "\n"}
    if step.kind == "edit":
        return "Edit", {
            "file_path": str(cwd / step.path),
            "old_string": step.old,
            "new_string": step.new,
            "replace_all": False,
        }
    return "Bash", {"command": step.command, "description": f"Run {step.command}"}


# Commands that -p runs without a permission, as the real CLI auto-approves read-only ones.
READ_ONLY_COMMAND = re.compile(
    r"^(echo|cat|ls|pwd|head|tail|wc|grep|true|date|whoami|id)\b[^;&|<>`$]*$"
)


def allowed(step: Step, name: str, opts: dict[str, Any]) -> bool:
    mode = opts.get("permission_mode")
    if bypass_requested(opts) or (mode == "acceptEdits" and name in ("Write", "Edit")):
        return True
    if name == "Bash" and READ_ONLY_COMMAND.match(step.command.strip()):
        return True
    listed = re.split(r"[,\s]+", opts.get("allowed_tools") or "")
    return any(item.split("(")[0] == name for item in listed if item)


def run_tool(step: Step, cwd: Path) -> tuple[Outcome, Any]:
    """Really do what the tool does; the tool_result text and the toolUseResult record."""
    if step.kind == "write":
        out = write_file(cwd, step.path, step.text)
        if out.is_error:
            return out, f"Error: {out.output}"
        kind = out.details["type"]
        verb = "created" if kind == "create" else "updated"
        result = {"type": kind, "filePath": out.output, "content": step.text + "\n"}
        return Outcome(f"File {verb} successfully at: {out.output}"), {
            **result,
            "structuredPatch": [],
        }
    if step.kind == "edit":
        out = edit_file(cwd, step.path, step.old, step.new)
        if out.is_error:
            text = f"<tool_use_error>{out.output}</tool_use_error>"
            return Outcome(text, is_error=True), f"Error: {out.output}"
        return Outcome(f"The file {out.output} has been updated successfully."), {
            "filePath": out.output,
            "oldString": step.old,
            "newString": step.new,
            "originalFile": out.details["originalFile"],
            "structuredPatch": [],
            "userModified": False,
            "replaceAll": False,
        }
    scrub = os.environ.get("CLAUDE_CODE_SUBPROCESS_ENV_SCRUB", "").lower() in ("1", "true", "yes")
    env = scrubbed_env(names=SCRUBBED_VARS) if scrub else dict(os.environ)
    out = run_command(cwd, ["bash", "-c", step.command], env)
    if out.is_error:
        text = f"Exit code {out.exit_code}\n{out.output}".rstrip("\n")
        return Outcome(text, is_error=True), f"Error: {text}"
    details = out.details
    return Outcome(out.output.rstrip("\n")), {
        "stdout": details.get("stdout", "").rstrip("\n"),
        "stderr": details.get("stderr", "").rstrip("\n"),
        "interrupted": False,
        "isImage": False,
        "noOutputExpected": False,
    }

#!/usr/bin/env python3
"""Stand-in for Claude Code 2.1.332 (`claude`), for tests where no model provider is reachable.

It behaves like the real CLI where Orbit depends on it: `--version`, `-p` with its flags and
errors, the root guard, credentials in the documented precedence, a real POST to
$ANTHROPIC_BASE_URL/v1/messages when that is set, tools that really change files and run
commands, and the transcript at $CLAUDE_CONFIG_DIR/projects/<cwd, non-alphanumerics as '-'>/
<session-id>.jsonl in the real line format. The "model" is described in standin_common.py.
See docs/testing.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from standin_common import (
    Outcome,
    ProviderError,
    Step,
    append_jsonl,
    edit_file,
    git_branch,
    iso_now,
    post_json,
    random_id,
    reply_for,
    run_command,
    scrubbed_env,
    steps_of,
    tokens,
    write_file,
    write_trace,
)

VERSION = "2.1.332"
DEFAULT_MODEL = "claude-opus-5-5"
NOT_LOGGED_IN = "Not logged in · Please run /login"
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
FLAGS = {
    "-p": "print",
    "--print": "print",
    "--verbose": "verbose",
    "--dangerously-skip-permissions": "bypass",
    "--no-session-persistence": "no_persist",
    "--include-partial-messages": "partial",
    "--continue": "continue",
    "-c": "continue",
    "--bare": "bare",
    "-d": "debug",
    "--debug": "debug",
}
VALUED = {
    "--output-format": "output_format",
    "--input-format": "input_format",
    "--session-id": "session_id",
    "--model": "model",
    "--permission-mode": "permission_mode",
    "--max-turns": "max_turns",
    "--max-budget-usd": "max_budget",
    "--allowedTools": "allowed_tools",
    "--allowed-tools": "allowed_tools",
    "--disallowedTools": "disallowed_tools",
    "--disallowed-tools": "disallowed_tools",
    "--append-system-prompt": "append_system_prompt",
    "--system-prompt": "system_prompt",
    "--add-dir": "add_dir",
    "--settings": "settings",
    "--setting-sources": "setting_sources",
    "--plugin-dir": "plugin_dir",
    "--resume": "resume",
    "-r": "resume",
    "--fallback-model": "fallback_model",
    "--mcp-config": "mcp_config",
}
PERMISSION_MODES = ("default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions")


class Usage(Exception):
    """A command-line error: the message goes to stderr, exit 1 (as commander does)."""


def parse(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"positional": []}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if arg == "--":
            opts["positional"].extend(argv[i + 1 :])
            break
        if name in FLAGS and not eq:
            opts[FLAGS[name]] = True
        elif name in VALUED:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise Usage(f"error: option '{name} <value>' argument missing")
            opts[VALUED[name]] = value
        elif arg.startswith("-") and arg != "-":
            raise Usage(f"error: unknown option '{name}'")
        else:
            opts["positional"].append(arg)
        i += 1
    return opts


def bypass_requested(opts: dict[str, Any]) -> bool:
    return bool(opts.get("bypass")) or opts.get("permission_mode") == "bypassPermissions"


def credential() -> tuple[str, str, str] | None:
    """(header, value, source) in the documented precedence, or None when not logged in."""
    env = os.environ
    if env.get("ANTHROPIC_AUTH_TOKEN"):
        return "authorization", "Bearer " + env["ANTHROPIC_AUTH_TOKEN"], "ANTHROPIC_AUTH_TOKEN"
    if env.get("ANTHROPIC_API_KEY"):
        return "x-api-key", env["ANTHROPIC_API_KEY"], "ANTHROPIC_API_KEY"
    if env.get("CLAUDE_CODE_OAUTH_TOKEN"):
        return (
            "authorization",
            "Bearer " + env["CLAUDE_CODE_OAUTH_TOKEN"],
            "CLAUDE_CODE_OAUTH_TOKEN",
        )
    try:
        stored = json.loads((config_dir() / ".credentials.json").read_text())
        token = stored["claudeAiOauth"]["accessToken"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return "authorization", "Bearer " + str(token), "/login managed key"


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
                    "message": message,
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": last,
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


def allowed(name: str, opts: dict[str, Any]) -> bool:
    mode = opts.get("permission_mode")
    if bypass_requested(opts) or (mode == "acceptEdits" and name in ("Write", "Edit")):
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
    }


# --- the provider ----------------------------------------------------------------------------


def ask_model(session: Session, auth: tuple[str, str, str], history: list[Any]) -> dict[str, Any]:
    """A real request to $ANTHROPIC_BASE_URL when set, else a local answer; returns the reply."""
    base = os.environ.get("ANTHROPIC_BASE_URL")
    if not base:
        return {
            "content": [{"type": "text", "text": reply_for(session.prompt)}],
            "usage": {"input_tokens": tokens(json.dumps(history)), "output_tokens": 8},
        }
    header, value, _source = auth
    body = {"model": session.model, "max_tokens": 32000, "messages": history}
    if session.opts.get("append_system_prompt"):
        body["system"] = session.opts["append_system_prompt"]
    headers = {
        header: value,
        "anthropic-version": "2023-06-01",
        "user-agent": f"claude-cli/{VERSION} (external, sdk-cli)",
        "x-app": "cli",
        "x-claude-code-session-id": session.session_id,
    }
    return post_json(base.rstrip("/") + "/v1/messages?beta=true", headers, body)


def api_error_text(exc: ProviderError, auth: tuple[str, str, str]) -> str:
    if exc.status == 401:
        if auth[2] in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
            return "Invalid API key · Fix external API key"
        return "Invalid API key · Please run /login"
    if exc.status == 0:
        return "API Error: Connection error."
    return f"API Error: {exc.status} {exc.body}"


def converse(session: Session, auth: tuple[str, str, str]) -> tuple[str, str]:
    """The agent loop; returns (subtype, result text)."""
    history: list[Any] = [{"role": "user", "content": session.prompt}]
    max_turns = int(session.opts.get("max_turns") or 0)
    for step in steps_of(session.prompt):
        if max_turns and session.turns >= max_turns:
            return "error_max_turns", f"Error: Reached max turns ({max_turns})"
        reply = ask_model(session, auth, history)
        name, tool_input = tool_call(step, session.cwd)
        use: dict[str, Any] = {
            "type": "tool_use",
            "id": random_id("toolu_01"),
            "name": name,
            "input": tool_input,
        }
        source = session.assistant([use], "tool_use", reply["usage"])
        if allowed(name, session.opts):
            outcome, result = run_tool(step, session.cwd)
        else:
            text = f"Claude requested permissions to use {name}, but you haven't granted it yet."
            outcome, result = Outcome(text, is_error=True), f"Error: {text}"
            session.denials.append(
                {"tool_name": name, "tool_use_id": use["id"], "tool_input": tool_input}
            )
        session.tool_result(use["id"], source, outcome, result)
        history.append({"role": "assistant", "content": [use]})
        history.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use["id"], "content": outcome.output}
                ],
            }
        )
    if max_turns and session.turns >= max_turns:
        return "error_max_turns", f"Error: Reached max turns ({max_turns})"
    reply = ask_model(session, auth, history)
    text = "".join(b.get("text", "") for b in reply.get("content", []) if b.get("type") == "text")
    session.assistant([{"type": "text", "text": text}], "end_turn", reply["usage"])
    return "success", text


def result_message(
    session: Session, subtype: str, text: str, failed: bool, started: float
) -> dict[str, Any]:
    is_error = failed or subtype != "success"
    usage = {**session.usage, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    cost = round(session.usage["input_tokens"] * 5e-6 + session.usage["output_tokens"] * 25e-6, 6)
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "duration_api_ms": 0,
        "num_turns": max(session.turns, 1),
        "result": text,
        "stop_reason": "end_turn",
        "session_id": session.session_id,
        "total_cost_usd": cost,
        "usage": usage,
        "modelUsage": {},
        "permission_denials": session.denials,
        "uuid": str(uuid.uuid4()),
    }


def print_mode(opts: dict[str, Any]) -> int:
    started = time.monotonic()
    fmt = opts.get("output_format") or "text"
    if fmt not in ("text", "json", "stream-json"):
        raise Usage(
            f"error: option '--output-format <format>' argument '{fmt}' is invalid. "
            "Allowed choices are text, json, stream-json."
        )
    if fmt == "stream-json" and not opts.get("verbose"):
        raise Usage("Error: When using --print, --output-format=stream-json requires --verbose")
    mode = opts.get("permission_mode")
    if mode and mode not in PERMISSION_MODES:
        raise Usage(
            f"error: option '--permission-mode <mode>' argument '{mode}' is invalid. "
            f"Allowed choices are {', '.join(PERMISSION_MODES)}."
        )
    if opts.get("session_id"):
        try:
            uuid.UUID(opts["session_id"])
        except ValueError:
            raise Usage("Error: Invalid session ID. Must be a valid UUID.") from None
    if bypass_requested(opts) and os.getuid() == 0 and not sandboxed():
        raise Usage(ROOT_REFUSAL)
    prompt = " ".join(opts["positional"]) if opts["positional"] else ""
    if not prompt and not sys.stdin.isatty():
        prompt = sys.stdin.read().strip()
    if not prompt:
        raise Usage(
            "Error: Input must be provided either through stdin or as a prompt argument "
            "when using --print"
        )
    session = Session(opts, prompt)
    auth = credential()
    session.start(auth[2] if auth else "none")
    failed = True
    if auth is None:
        subtype, text = "success", NOT_LOGGED_IN
        session.assistant([{"type": "text", "text": text}], "stop_sequence", zero_usage())
    else:
        try:
            subtype, text = converse(session, auth)
            failed = False
        except ProviderError as exc:
            subtype, text = "success", api_error_text(exc, auth)
            session.assistant([{"type": "text", "text": text}], "stop_sequence", zero_usage())
    session.finish()
    result = result_message(session, subtype, text, failed, started)
    if fmt == "text":
        print(text)
    else:
        print(json.dumps(result, separators=(",", ":")), flush=True)
    return 1 if result["is_error"] else 0


def zero_usage() -> dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0}


def sandboxed() -> bool:
    return os.environ.get("IS_SANDBOX") == "1" or os.environ.get("CLAUDE_CODE_BUBBLEWRAP") == "1"


def setup_token() -> int:
    token = "sk-ant-oat01-" + secrets.token_urlsafe(80) + "AA"
    print("Opening browser to sign in…")
    print("Browser didn't open? Use the url below to sign in:\n")
    print("https://claude.ai/oauth/authorize?code=true&client_id=stand-in\n")
    print("✓ Long-lived authentication token created successfully!\n")
    print("Your OAuth token (valid for 1 year):\n")
    print(token + "\n")
    print("Store this token securely. You won't be able to see it again.\n")
    print("Use this token by setting: export CLAUDE_CODE_OAUTH_TOKEN=<token>")
    return 0


def main(argv: list[str]) -> int:
    write_trace(str(config_dir()), sandboxed())
    if argv[:1] in (["--version"], ["-v"]):
        print(f"{VERSION} (Claude Code)")
        return 0
    if argv[:1] == ["setup-token"]:
        return setup_token()
    if argv[:1] in (["-h"], ["--help"]):
        print(
            "Usage: claude [options] [command] [prompt]\n\n(stand-in: -p, --version, setup-token)"
        )
        return 0
    try:
        opts = parse(argv)
        if not opts.get("print"):
            raise Usage("stand-in: only -p/--print, --version and setup-token are supported")
        return print_mode(opts)
    except Usage as exc:
        print(str(exc), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

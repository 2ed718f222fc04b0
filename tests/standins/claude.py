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

import json
import os
import secrets
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from claude_session import (
    ROOT_REFUSAL,
    VERSION,
    Session,
    Usage,
    allowed,
    bypass_requested,
    config_dir,
    run_tool,
    tool_call,
)
from standin_common import (
    Outcome,
    ProviderError,
    post_json,
    random_id,
    reply_for,
    steps_of,
    tokens,
    write_trace,
)

NOT_LOGGED_IN = "Not logged in · Please run /login"
INVALID_KEY = "Invalid API key · Fix external API key"
OAUTH_BETA = "claude-code-20250219,oauth-2025-04-20"
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


@dataclass
class Auth:
    """The headers a model request carries and the source shown as apiKeySource."""

    headers: dict[str, str]
    source: str


def credential() -> Auth | None:
    """The credentials in the documented precedence, or None when not logged in. As the real
    CLI does (checked here), ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY are both sent when both
    are set; OAuth tokens add the oauth beta header."""
    env = os.environ
    headers: dict[str, str] = {}
    if env.get("ANTHROPIC_AUTH_TOKEN"):
        headers["authorization"] = "Bearer " + env["ANTHROPIC_AUTH_TOKEN"]
    if env.get("ANTHROPIC_API_KEY"):
        headers["x-api-key"] = env["ANTHROPIC_API_KEY"]
    if headers:
        source = "ANTHROPIC_AUTH_TOKEN" if "authorization" in headers else "ANTHROPIC_API_KEY"
        return Auth(headers, source)
    oauth = {"anthropic-beta": OAUTH_BETA}
    if env.get("CLAUDE_CODE_OAUTH_TOKEN"):
        token = env["CLAUDE_CODE_OAUTH_TOKEN"]
        return Auth({"authorization": "Bearer " + token, **oauth}, "CLAUDE_CODE_OAUTH_TOKEN")
    try:
        stored = json.loads((config_dir() / ".credentials.json").read_text())
        token = str(stored["claudeAiOauth"]["accessToken"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Auth({"authorization": "Bearer " + token, **oauth}, "/login managed key")


# --- the provider ----------------------------------------------------------------------------


def ask_model(session: Session, auth: Auth, history: list[Any]) -> dict[str, Any]:
    """A real request to $ANTHROPIC_BASE_URL when set, else a local answer; returns the reply."""
    base = os.environ.get("ANTHROPIC_BASE_URL")
    if not base:
        return {
            "content": [{"type": "text", "text": reply_for(session.prompt)}],
            "usage": {"input_tokens": tokens(json.dumps(history)), "output_tokens": 8},
        }
    body = {"model": session.model, "max_tokens": 32000, "messages": history}
    if session.opts.get("append_system_prompt"):
        body["system"] = session.opts["append_system_prompt"]
    headers = {
        "anthropic-beta": "claude-code-20250219",
        **auth.headers,
        "anthropic-version": "2023-06-01",
        "user-agent": f"claude-cli/{VERSION} (external, sdk-cli)",
        "x-app": "cli",
        "x-claude-code-session-id": session.session_id,
    }
    return post_json(base.rstrip("/") + "/v1/messages?beta=true", headers, body)


def api_error_text(exc: ProviderError, auth: Auth) -> str:
    if exc.status == 401:  # the real texts: an API key is "invalid", a bearer token "not logged in"
        return INVALID_KEY if "x-api-key" in auth.headers else NOT_LOGGED_IN
    if exc.status == 0:
        return "API Error: Connection error."
    return f"API Error: {exc.status} {exc.body}"


def converse(session: Session, auth: Auth) -> tuple[str, str]:
    """The agent loop; returns (subtype, result text)."""
    history: list[Any] = [{"role": "user", "content": session.prompt}]
    max_turns = int(session.opts.get("max_turns") or 0)
    for step in steps_of(session.prompt):
        if max_turns and session.turns >= max_turns:
            return "error_max_turns", ""
        reply = ask_model(session, auth, history)
        name, tool_input = tool_call(step, session.cwd)
        use: dict[str, Any] = {
            "type": "tool_use",
            "id": random_id("toolu_01"),
            "name": name,
            "input": tool_input,
        }
        source = session.assistant([use], "tool_use", reply["usage"])
        if allowed(step, name, session.opts):
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
        return "error_max_turns", ""
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
        # The turn refused by --max-turns counts, as in the real CLI, which gives no result then.
        "num_turns": session.turns + 1 if subtype == "error_max_turns" else max(session.turns, 1),
        "result": text if subtype != "error_max_turns" else None,
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
    session.start(auth.source if auth else "none")
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
    if fmt == "text" and subtype == "error_max_turns":
        print(f"Error: Reached max turns ({opts['max_turns']})", end="", flush=True)
    elif fmt == "text":
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
    except OSError as exc:  # e.g. an unwritable CLAUDE_CONFIG_DIR: one line, as node prints it
        print(f"Error: {exc.strerror}, {exc.filename or ''}".rstrip(", "), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

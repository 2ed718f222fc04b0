"""Codex rollouts (`sessions/YYYY/MM/DD/rollout-….jsonl`) for orbit.review.conversation (the
parser orbit/harnesses/codex.py names).

Each line is `{timestamp, type, payload}`: `session_meta` (id, cwd, cli_version), `turn_context`
(model), `response_item` (a message, reasoning, a function or custom tool call and its output,
paired by `call_id`), `event_msg` and `compacted`. The `event_msg` lines repeat the messages and
reasoning for Codex's own interface; only `token_count` (the running total of tokens) and
`error` are read from them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from orbit.review.items import Builder, command_text, text_of

# Context Codex adds as user or developer messages: shown as meta, not as the person's words.
CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "<permissions", "# AGENTS.md")
# The head of a shell tool's plain-text output: `Exit code: N` (shell_command) or, after a
# chunk id and the wall time, `Process exited with code N` (exec_command).
EXIT_LINE = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)", re.MULTILINE)
SHELL_TOOLS = {"shell", "shell_command", "exec_command", "container.exec", "local_shell"}


def is_message(obj: dict[str, Any]) -> bool:
    """Whether the line is a message (as `orbit show` counts them)."""
    payload = obj.get("payload")
    return (
        obj.get("type") == "response_item"
        and isinstance(payload, dict)
        and payload.get("type") == "message"
    )


def parse_line(b: Builder, obj: dict[str, Any], line: str) -> None:
    kind, payload = obj.get("type"), obj.get("payload")
    if not isinstance(payload, dict):
        b.raw(line)
    elif kind == "session_meta":
        _session_meta(b, payload)
    elif kind == "turn_context":
        if payload.get("model"):
            b.conv.header["model"] = str(payload["model"])
    elif kind == "response_item":
        _turn(b, obj.get("timestamp"))
        _response_item(b, payload, line, obj.get("timestamp"))
    elif kind == "event_msg":
        _event(b, payload)
    elif kind == "compacted":
        b.add("meta", "context compacted: " + str(payload.get("message") or ""))
    else:
        b.raw(line)


def _turn(b: Builder, stamp: Any) -> None:
    """The model call the next items come from: a `token_count` event closes each call (see
    _event), so the items between two of them are one call's output."""
    b.turn = {"call": f"call-{len(b.usage_by_id) + 1}", "timestamp": stamp}
    if b.conv.header.get("model"):
        b.turn["model"] = b.conv.header["model"]


def _session_meta(b: Builder, payload: dict[str, Any]) -> None:
    keys = {"session_id": "id", "cwd": "cwd", "version": "cli_version"}
    for key, src in keys.items():
        if payload.get(src):
            b.conv.header.setdefault(key, str(payload[src]))
    parts = [f"session {payload.get('id', '?')}"]
    if payload.get("cli_version"):
        parts.append(f"codex {payload['cli_version']}")
    if payload.get("cwd"):
        parts.append(f"in {payload['cwd']}")
    b.add("meta", " · ".join(parts))


def _response_item(b: Builder, p: dict[str, Any], line: str, stamp: Any) -> None:
    kind = p.get("type")
    if kind == "message":
        b.conv.messages += 1
        role, text = str(p.get("role") or "assistant"), text_of(p.get("content"))
        if role == "developer" or role == "system" or text.lstrip().startswith(CONTEXT_PREFIXES):
            b.add("meta", text)
        else:
            b.add(role if role in ("user", "assistant") else "meta", text, timestamp=stamp)
    elif kind == "reasoning":
        summary = text_of(p.get("summary")) or text_of(p.get("content"))
        b.add("thinking", summary or "(reasoning not recorded)")
    elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
        _call(b, p)
    elif kind == "web_search_call":
        b.tool_use(p.get("id"), "web_search", p.get("action"), None, None)
        b.tool_result(p.get("id"), str(p.get("status") or ""), p.get("status") == "failed")
    elif kind in ("function_call_output", "custom_tool_call_output"):
        text, failed = _output(p.get("output"))
        b.tool_result(p.get("call_id"), text, failed)
    else:
        b.raw(line)


def _call(b: Builder, p: dict[str, Any]) -> None:
    name = p.get("name") or ("shell" if p.get("type") == "local_shell_call" else None)
    if p.get("type") == "local_shell_call":
        args: Any = p.get("action")
    elif p.get("type") == "custom_tool_call":
        args = p.get("input")
    else:
        args = p.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                pass
    command = None
    if isinstance(args, dict) and (name in SHELL_TOOLS or "command" in args or "cmd" in args):
        command = command_text(args.get("command", args.get("cmd")))
    patch = _patch_text(name, args, command)
    diff = None
    if patch is not None:
        diff = [ln for ln in patch.splitlines() if ln not in ("*** Begin Patch", "*** End Patch")]
        command = None
    b.tool_use(p.get("call_id") or p.get("id"), name, args, command, diff)


def _patch_text(name: Any, args: Any, command: str | None) -> str | None:
    """The patch of an apply_patch call: its input, or the argument of `apply_patch PATCH`."""
    if name == "apply_patch":
        if isinstance(args, str):
            return args
        if isinstance(args, dict) and isinstance(args.get("input"), str):
            return str(args["input"])
    if isinstance(args, dict):
        argv = args.get("command")
        if isinstance(argv, list) and len(argv) == 2 and argv[0] == "apply_patch":
            return str(argv[1])
    if command and command.startswith("apply_patch <<") and "\n" in command:
        return command.split("\n", 1)[1]
    return None


def _output(output: Any) -> tuple[str, bool]:
    """A tool's output as (text, failed): `{"output", "metadata": {"exit_code"}}` as JSON text,
    plain text (with an exit code line when a shell ran, see EXIT_LINE), or an object with
    `success`."""
    if isinstance(output, str):
        try:
            data = json.loads(output)
        except ValueError:
            data = None
        if isinstance(data, dict) and "output" in data:
            meta = data.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return text_of(data["output"]), isinstance(code, int) and code != 0
        code = EXIT_LINE.search(output[:500])
        return output, code is not None and code.group(1) != "0"
    if isinstance(output, dict):
        text = text_of(output.get("content", output.get("output", output)))
        return text, output.get("success") is False
    return text_of(output), False


def _event(b: Builder, p: dict[str, Any]) -> None:
    kind = p.get("type")
    if kind == "token_count":
        info = p.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):  # a running total: the last one counts
            b.total_usage = {k: v for k, v in total.items() if isinstance(v, int)}
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        call = b.turn.get("call")
        made = any(item.get("call") == call for item in b.conv.items[-50:])
        if isinstance(last, dict) and call and made and call not in b.usage_by_id:
            b.usage_by_id[call] = {k: v for k, v in last.items() if isinstance(v, int)}
    elif kind in ("error", "stream_error"):
        b.add("meta", "error: " + str(p.get("message") or ""))

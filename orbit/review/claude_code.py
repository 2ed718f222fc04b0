"""Claude Code transcripts (`projects/<folder>/<session-id>.jsonl`, and the lines of
`claude -p --output-format stream-json`) for orbit.review.conversation (the parser
orbit/harnesses/claude_code.py names).

Each line is one object with a `type`: `user` and `assistant` lines carry a `message` (its
content blocks: text, thinking, tool_use, tool_result, image, and its usage), `system`,
`summary` and `result` lines say what happened around them; the rest is Claude Code's own
bookkeeping and is skipped.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from orbit.harnesses.claude_code import SKIP
from orbit.review.items import Builder, text_of

DIFF_INPUT_MAX = 1 << 20  # characters of old + new text diffed; beyond, the input alone


def is_message(obj: dict[str, Any]) -> bool:
    """Whether the line is a user or assistant line (as `orbit show` counts them)."""
    return obj.get("type") in ("user", "assistant")


def parse_line(b: Builder, obj: dict[str, Any], line: str) -> None:
    """One line of a Claude Code transcript (or of `claude -p --output-format stream-json`)."""
    kind = obj.get("type")
    message = obj.get("message")
    if kind in ("user", "assistant") and isinstance(message, dict):
        b.conv.messages += 1
        _claude_header(b, obj)
        # Text Claude Code adds in the user's name (a caveat, a compaction summary) is a note.
        meta = obj.get("isMeta") or obj.get("isCompactSummary")
        role = "meta" if meta else str(message.get("role") or kind)
        b.turn = _turn(obj, message, b.conv.lines) if role == "assistant" else {}
        _claude_message(b, role, message, obj.get("timestamp"))
        _subagent_link(b, obj, message)
    elif kind in SKIP:
        return  # Claude Code's own bookkeeping
    elif kind == "summary":
        b.add("meta", "summary: " + str(obj.get("summary", "")))
    elif kind == "system":
        _claude_system(b, obj)
    elif kind == "result":
        _claude_result(b, obj)
    else:
        b.raw(line)


def _turn(obj: dict[str, Any], message: dict[str, Any], line: int) -> dict[str, Any]:
    """The model call an assistant line is part of: Claude Code writes one line per content
    block, each with its message's id (and usage); a line without one is a call of its own."""
    call = message.get("id") or obj.get("uuid") or f"line-{line}"
    turn = {"call": str(call), "timestamp": obj.get("timestamp")}
    if message.get("model"):
        turn["model"] = str(message["model"])
    return turn


def _subagent_link(b: Builder, obj: dict[str, Any], message: dict[str, Any]) -> None:
    """A Task tool's result names the subagent it ran (`toolUseResult.agentId`, the
    `subagents/agent-<id>.jsonl` beside the transcript): kept on the tool item."""
    result, content = obj.get("toolUseResult"), message.get("content")
    if not isinstance(result, dict) or not result.get("agentId") or not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            item = b.tools.get(str(block.get("tool_use_id")))
            if item is not None:
                item["agent_id"] = str(result["agentId"])


def _claude_header(b: Builder, obj: dict[str, Any]) -> None:
    if b.conv.header:
        return
    keys = {"session_id": "sessionId", "cwd": "cwd", "version": "version"}
    b.conv.header = {k: str(obj[src]) for k, src in keys.items() if obj.get(src)}


def _claude_message(b: Builder, role: str, message: dict[str, Any], stamp: Any) -> None:
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    for block in blocks:
        if block is not None:
            _claude_block(b, role, block, stamp)
    if isinstance(message.get("usage"), dict):
        b.usage(message["usage"], message.get("id"))
    if message.get("model") and "model" not in b.conv.header:
        b.conv.header["model"] = str(message["model"])


def _claude_block(b: Builder, role: str, block: Any, stamp: Any) -> None:
    if isinstance(block, str):
        b.add(role, block, timestamp=stamp)
        return
    if not isinstance(block, dict):
        b.raw(json.dumps(block, ensure_ascii=False))
        return
    kind = block.get("type")
    if kind == "text":
        b.add(role, str(block.get("text", "")), timestamp=stamp)
    elif kind == "thinking":
        b.add("thinking", str(block.get("thinking", "")))
    elif kind == "redacted_thinking":
        b.add("thinking", "(redacted)")
    elif kind == "tool_use":
        name, tool_input = block.get("name"), block.get("input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        command = command if name == "Bash" and isinstance(command, str) else None
        b.tool_use(block.get("id"), name, tool_input, command, edit_diff(name, tool_input))
    elif kind == "tool_result":
        text = text_of(block.get("content"))
        b.tool_result(block.get("tool_use_id"), text, bool(block.get("is_error")))
    elif kind == "image":
        b.add(role, "[image]", timestamp=stamp)
    else:
        b.raw(json.dumps(block, ensure_ascii=False))


def _claude_system(b: Builder, obj: dict[str, Any]) -> None:
    subtype = obj.get("subtype")
    if subtype == "init":
        for key in ("model", "cwd"):
            if obj.get(key):
                b.conv.header[key] = str(obj[key])
        if obj.get("session_id"):
            b.conv.header.setdefault("session_id", str(obj["session_id"]))
    text = obj.get("content") or obj.get("message") or ""
    label = f"system ({subtype})" if subtype else "system"
    b.add("meta", f"{label}: {text_of(text)}" if text else label)


def _claude_result(b: Builder, obj: dict[str, Any]) -> None:
    cost = obj.get("total_cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        b.conv.cost_usd = float(cost)
    if isinstance(obj.get("usage"), dict):  # the whole session's: it replaces the sum
        b.total_usage = {k: v for k, v in obj["usage"].items() if isinstance(v, int)}
    parts = [str(obj.get("subtype") or "done")]
    if isinstance(obj.get("num_turns"), int):
        parts.append(f"{obj['num_turns']} turns")
    if b.conv.cost_usd is not None:
        parts.append(f"${b.conv.cost_usd:.4f}")
    b.add("meta", "result: " + ", ".join(parts))


def unified(path: str, old: str, new: str) -> list[str]:
    """A unified diff of one file's change, without the ---/+++ lines' dates."""
    if len(old) + len(new) > DIFF_INPUT_MAX:
        return [f"@@ a change of {len(old)} → {len(new)} characters: too large to diff @@"]
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), path, path, lineterm="", n=2)
    return list(lines)


def edit_diff(name: Any, tool_input: Any) -> list[str] | None:
    """The diff a Claude Code file tool (Edit, MultiEdit, Write, NotebookEdit) makes."""
    if not isinstance(tool_input, dict):
        return None
    path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
    strings = lambda *keys: all(isinstance(tool_input.get(k), str) for k in keys)  # noqa: E731
    if name == "Edit" and strings("old_string", "new_string"):
        return unified(path, tool_input["old_string"], tool_input["new_string"])
    if name == "MultiEdit" and isinstance(tool_input.get("edits"), list):
        out: list[str] = []
        for edit in tool_input["edits"]:
            if isinstance(edit, dict) and isinstance(edit.get("old_string"), str):
                diff = unified(path, edit["old_string"], str(edit.get("new_string", "")))
                out.extend(diff if not out else diff[2:])
        return out
    if name == "Write" and strings("content"):
        return added(path, tool_input["content"])
    if name == "NotebookEdit" and strings("new_source"):
        cell = tool_input.get("cell_id") or tool_input.get("cell_number") or "new"
        mode = tool_input.get("edit_mode") or "replace"
        return [f"*** {path} cell {cell} ({mode})", *added("", tool_input["new_source"])[1:]]
    return None


def added(path: str, text: str) -> list[str]:
    """A whole new file as a diff: every line added."""
    lines = text.splitlines()
    return [f"+++ {path}", f"@@ -0,0 +1,{len(lines)} @@", *("+" + line for line in lines)]

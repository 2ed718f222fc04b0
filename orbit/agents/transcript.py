"""A run's agent session, read from the transcript its Stop hook copied into `session/`.

Claude Code's transcript is JSON Lines whose format is internal and changes between versions
(docs/agents.md). Observed: `type` user|assistant|system|summary|…, `message: {role, content}`,
content a string or blocks (`text`, `thinking`, `tool_use{id,name,input}`,
`tool_result{tool_use_id,content}`). Parsed leniently: what is not understood is kept raw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orbit.store.model import Run

SHORT = 400  # characters of a tool input or result shown


def shorten(text: str, limit: int = SHORT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def transcript_file(run: Run) -> Path | None:
    """The session transcript in the run's `session/` folder: `<session_id>.jsonl` (the copy
    the Stop hook makes), else the largest `*.jsonl` under `session/`; None when there is none."""
    folder = run.path("session")
    agent = run.spec.get("agent") if isinstance(run.spec.get("agent"), dict) else None
    if agent and isinstance(agent.get("session_id"), str):
        named = folder / f"{agent['session_id']}.jsonl"
        if named.is_file():
            return named
    try:
        found = [p for p in folder.rglob("*.jsonl") if p.is_file()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_size) if found else None


def _text_of(content: Any) -> str:
    """A tool result's content (a string or blocks) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            else:
                parts.append(json.dumps(block, ensure_ascii=False))
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _block(role: str, block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"kind": role, "text": block}
    if not isinstance(block, dict):
        return {"kind": "raw", "text": json.dumps(block, ensure_ascii=False)}
    kind = block.get("type")
    if kind == "text":
        return {"kind": role, "text": str(block.get("text", ""))}
    if kind == "thinking":
        return {"kind": "thinking", "text": str(block.get("thinking", ""))}
    if kind == "tool_use":
        return {
            "kind": "tool_use",
            "id": block.get("id"),
            "name": block.get("name"),
            "input": block.get("input"),
        }
    if kind == "tool_result":
        return {
            "kind": "tool_result",
            "tool_use_id": block.get("tool_use_id"),
            "is_error": bool(block.get("is_error")),
            "text": _text_of(block.get("content")),
        }
    return {"kind": "raw", "text": json.dumps(block, ensure_ascii=False)}


def parse_line(line: str) -> list[dict[str, Any]]:
    """The items of one transcript line: user/assistant text, thinking, tool_use, tool_result,
    or one `raw` item for anything else (a line that is not JSON, an unknown type)."""
    line = line.strip()
    if not line:
        return []
    try:
        obj = json.loads(line)
    except ValueError:
        return [{"kind": "raw", "text": line}]
    if not isinstance(obj, dict):
        return [{"kind": "raw", "text": line}]
    kind = obj.get("type")
    message = obj.get("message")
    if kind in ("user", "assistant") and isinstance(message, dict):
        role = str(message.get("role") or kind)
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        items = [_block(role, b) for b in blocks if b is not None]
        stamp = obj.get("timestamp")
        for item in items:
            item["timestamp"] = stamp
        return items
    if kind == "summary":
        return [{"kind": "summary", "text": str(obj.get("summary", ""))}]
    if kind in ("file-history-snapshot", "progress", "queue-operation"):
        return []  # bookkeeping of Claude Code's, nothing to read
    return [{"kind": "raw", "text": line}]


def read_session(path: Path) -> list[dict[str, Any]]:
    """Every item of the transcript at `path`, in order."""
    items: list[dict[str, Any]] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            items.extend(parse_line(line))
    return items


def count_messages(path: Path) -> int:
    """The user and assistant lines of the transcript (what `orbit show` reports)."""
    n = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("type") in ("user", "assistant"):
                n += 1
    return n

"""What a transcript becomes: the `Conversation` and the `Builder` each harness's line parser
(orbit/review/claude_code.py, rollout.py) adds its items to, and the helpers they share.
orbit/review/conversation.py says what the items are and picks the parser.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

TEXT_LIMIT = 20_000  # characters of one text shown
DIFF_LINES = 400  # lines of one diff shown
RAW_LIMIT = 2_000  # characters of a line not understood
Item = dict[str, Any]


def shorten(text: str, limit: int | None) -> str:
    """`text`, or its first `limit` characters and "… N more characters"."""
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… {len(text) - limit} more characters"


def clip(value: Any, limit: int | None, depth: int = 0) -> Any:
    """A JSON value with every string in it shortened (a tool's input)."""
    if limit is None:
        return value
    if isinstance(value, str):
        return shorten(value, limit)
    if depth > 20:
        return shorten(json.dumps(value, ensure_ascii=False), limit)
    if isinstance(value, dict):
        return {k: clip(v, limit, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clip(v, limit, depth + 1) for v in value]
    return value


def text_of(content: Any) -> str:
    """A message's or tool result's content (a string or blocks) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and block.get("type") == "image":
                parts.append("[image]")
            else:
                parts.append(json.dumps(block, ensure_ascii=False))
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


@dataclass
class Conversation:
    format: str = ""  # claude, codex, unknown; "" when no line was JSON
    items: list[Item] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    header: dict[str, str] = field(default_factory=dict)  # session_id, cwd, version, model
    lines: int = 0
    messages: int = 0  # user and assistant lines (as `orbit show` counts them)
    total: bool = False  # usage is the session's total as a line stated it, not a sum
    calls: dict[str, dict[str, int]] = field(default_factory=dict)  # usage by model call

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "header": self.header,
            "usage": self.usage,
            "cost_usd": self.cost_usd,
            "lines": self.lines,
            "messages": self.messages,
            "usage_is_total": self.total,
            "items": self.items,
        }


class Builder:
    """The items so far, the tool calls waiting for their other half, the usage by message."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.conv = Conversation()
        self.tools: dict[str, Item] = {}
        self.usage_by_id: dict[str, dict[str, int]] = {}
        self.loose_usage: list[dict[str, int]] = []
        self.total_usage: dict[str, int] | None = None  # a line that gives the total itself
        # The model call the agent's next items come from ({"call", "model", "timestamp"}, set
        # by the line parser): what ATIF groups into one step with that call's usage.
        self.turn: dict[str, Any] = {}

    def add(self, kind: str, text: str, **extra: Any) -> Item:
        item: Item = {"kind": kind, "text": shorten(text, self.limit), **extra}
        if kind in ("assistant", "thinking"):
            item.update({k: v for k, v in self.turn.items() if k not in item})
        self.conv.items.append(item)
        return item

    def raw(self, line: str) -> None:
        self.add("raw", shorten(line, RAW_LIMIT if self.limit is not None else None))

    def tool_use(
        self, call_id: Any, name: Any, tool_input: Any, command: str | None, diff: Any
    ) -> None:
        """A tool call; merged into the item its result made when the result came first."""
        fields = {
            "name": None if name is None else str(name),
            "input": clip(tool_input, self.limit),
            "command": None if command is None else shorten(command, self.limit),
            "diff": self._bound_diff(diff),
        }
        key = None if call_id is None else str(call_id)
        item = self.tools.get(key) if key is not None else None
        fields.update(self.turn)
        if item is not None and item["name"] is None:
            item.update(fields)
            return
        item = {"kind": "tool", "id": key, **fields, "result": None, "is_error": False}
        self.conv.items.append(item)
        if key is not None:
            self.tools[key] = item

    def tool_result(self, call_id: Any, text: str, is_error: bool) -> None:
        key = None if call_id is None else str(call_id)
        item = self.tools.get(key) if key is not None else None
        if item is None:  # the result before its use (or its use on an earlier page)
            item = {"kind": "tool", "id": key, "name": None, "input": None, "command": None}
            item.update(diff=None, result=None, is_error=False)
            self.conv.items.append(item)
            if key is not None:
                self.tools[key] = item
        item["result"] = shorten(text, self.limit)
        item["is_error"] = bool(is_error)

    def _bound_diff(self, diff: list[str] | None) -> list[str] | None:
        if diff is None or self.limit is None or len(diff) <= DIFF_LINES:
            return diff
        return [*diff[:DIFF_LINES], f"… {len(diff) - DIFF_LINES} more lines"]

    def usage(self, usage: Any, message_id: Any = None) -> None:
        numbers = {k: int(v) for k, v in usage.items() if isinstance(v, int) and v >= 0}
        if isinstance(message_id, str) and message_id:
            self.usage_by_id[message_id] = numbers  # the same message repeats its usage
        else:
            self.loose_usage.append(numbers)

    def finish(self) -> Conversation:
        if self.total_usage is not None:
            self.conv.usage, self.conv.total = self.total_usage, True
        else:
            total: dict[str, int] = {}
            for numbers in [*self.usage_by_id.values(), *self.loose_usage]:
                for k, v in numbers.items():
                    total[k] = total.get(k, 0) + v
            self.conv.usage = total
        self.conv.calls.update(self.usage_by_id)
        return self.conv


def decode(raw: bytes | str) -> str:
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw


def load(line: str) -> dict[str, Any] | None:
    """The JSON object on a line, or None."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def command_text(command: Any) -> str | None:
    """A shell command as one line: a string as it is; an argv list joined (`bash -lc X` as X)."""
    if isinstance(command, str):
        return command
    if isinstance(command, list) and all(isinstance(c, str) for c in command) and command:
        if len(command) == 3 and command[1] in ("-lc", "-c") and command[0].endswith("sh"):
            return str(command[2])
        return shlex.join(command)
    return None

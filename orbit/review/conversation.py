"""An agent's transcript as a conversation to read: Claude Code JSONL and Codex rollouts.

`parse(lines)` takes raw lines (bytes or text) and returns a `Conversation`: display items in
order, the tokens used and the session's header. It reads nothing itself, so the caller decides
how much of a file it hands over (the web view a bounded page, `orbit session` the whole file).
Both formats are internal to their tools and change between versions, so the parser is
lenient: a line it does not understand becomes a `raw` item, never an exception.

Items (plain dicts, the same for the terminal, `--json` and the web page):

    {"kind": "user" | "assistant", "text", "timestamp"}
    {"kind": "thinking", "text"}
    {"kind": "tool", "id", "name", "input", "command", "diff", "result", "is_error"}
    {"kind": "meta", "text"}         a system line, summary, session start, compaction
    {"kind": "raw", "text"}          a line not understood (or not JSON), as it was

A tool call is one item: its use and its result are paired by id whichever comes first.
`command` is the shell command a tool ran (else None); `diff` the change a file edit makes, as
unified-diff lines (else None); `result` is None until the result is seen.

With `limit` every text is shortened to that many characters, with a "… N more characters"
marker, and diffs to DIFF_LINES lines; `limit=None` keeps everything (`orbit session --json`).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TEXT_LIMIT = 20_000  # characters of one text shown
DIFF_LINES = 400  # lines of one diff shown
DIFF_INPUT_MAX = 1 << 20  # characters of old + new text diffed; beyond, the input alone
RAW_LIMIT = 2_000  # characters of a line not understood
CLAUDE_SKIP = {"file-history-snapshot", "progress", "queue-operation"}
CLAUDE_TYPES = {"user", "assistant", "system", "summary", "result", *CLAUDE_SKIP}
CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
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


def line_kind(line: str) -> str:
    """The CSS class of a diff line: add, del, hunk, meta or ""."""
    if line.startswith(("+++", "---", "***", "diff ", "index ", "new file", "deleted file")):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return ""


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

    def add(self, kind: str, text: str, **extra: Any) -> Item:
        item: Item = {"kind": kind, "text": shorten(text, self.limit), **extra}
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


def format_of(obj: dict[str, Any]) -> str:
    if isinstance(obj.get("payload"), dict) and obj.get("type") in CODEX_TYPES:
        return "codex"
    if obj.get("type") in CLAUDE_TYPES or "sessionId" in obj or "message" in obj:
        return "claude"
    return "unknown"


TYPE_KEY = re.compile(r'"type"\s*:\s*"([A-Za-z_-]+)"')


def detect(lines: Iterable[bytes | str]) -> str:
    """The format of a transcript from its first line that is a JSON object ("" for none).
    A first line cut short (a Codex session_meta carries the agent's whole instructions) is
    told by the first `"type": "…"` in its first 2,000 characters."""
    cut = ""
    for raw in lines:
        line = decode(raw).strip()
        obj = load(line)
        if obj is not None:
            return format_of(obj)
        if not cut and line.startswith("{"):
            cut = line[:2000]
    found = TYPE_KEY.search(cut)
    if found and found.group(1) in CODEX_TYPES and cut.startswith('{"timestamp"'):
        return "codex"
    return "claude" if found and found.group(1) in CLAUDE_TYPES else ""


def parse(
    lines: Iterable[bytes | str], *, limit: int | None = TEXT_LIMIT, fmt: str = ""
) -> Conversation:
    """The conversation on `lines`; `fmt` (claude or codex) when the caller knows it from the
    file's first line (a later page), else detected from the first JSON line here."""
    from orbit.review import rollout  # it builds on this module's Builder

    b = Builder(limit)
    for raw in lines:
        line = decode(raw).strip()
        if not line:
            continue
        b.conv.lines += 1
        obj = load(line)
        if obj is None:
            b.raw(line)
            continue
        if not fmt:
            fmt = format_of(obj)
        if fmt == "codex":
            rollout.parse_line(b, obj, line)
        else:
            claude_line(b, obj, line)
    b.conv.format = fmt
    return b.finish()


def count_messages(lines: Iterable[bytes | str]) -> int:
    """The user and assistant lines of a transcript, without building its items."""
    n, fmt = 0, ""
    for raw in lines:
        obj = load(decode(raw).strip())
        if obj is None:
            continue
        fmt = fmt or format_of(obj)
        if fmt == "codex":
            payload = obj.get("payload")
            n += (
                obj.get("type") == "response_item"
                and isinstance(payload, dict)
                and (payload.get("type") == "message")
            )
        else:
            n += obj.get("type") in ("user", "assistant")
    return n


# --- Claude Code ------------------------------------------------------------------------------
def claude_line(b: Builder, obj: dict[str, Any], line: str) -> None:
    """One line of a Claude Code transcript (or of `claude -p --output-format stream-json`)."""
    kind = obj.get("type")
    message = obj.get("message")
    if kind in ("user", "assistant") and isinstance(message, dict):
        b.conv.messages += 1
        _claude_header(b, obj)
        # Text Claude Code adds in the user's name (a caveat, a compaction summary) is a note.
        meta = obj.get("isMeta") or obj.get("isCompactSummary")
        role = "meta" if meta else str(message.get("role") or kind)
        _claude_message(b, role, message, obj.get("timestamp"))
    elif kind in CLAUDE_SKIP:
        return  # Claude Code's own bookkeeping
    elif kind == "summary":
        b.add("meta", "summary: " + str(obj.get("summary", "")))
    elif kind == "system":
        _claude_system(b, obj)
    elif kind == "result":
        _claude_result(b, obj)
    else:
        b.raw(line)


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


def command_text(command: Any) -> str | None:
    """A shell command as one line: a string as it is; an argv list joined (`bash -lc X` as X)."""
    if isinstance(command, str):
        return command
    if isinstance(command, list) and all(isinstance(c, str) for c in command) and command:
        if len(command) == 3 and command[1] in ("-lc", "-c") and command[0].endswith("sh"):
            return str(command[2])
        return shlex.join(command)
    return None


def tool_summary(item: Item, limit: int = 200) -> str:
    """A tool call in one line: its command, the file it edits, or its input."""
    tool_input = item.get("input")
    if item.get("command"):
        text = str(item["command"])
    elif isinstance(tool_input, dict) and item.get("diff"):
        text = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
    elif item.get("diff"):  # a patch: the files it names
        marks = ("*** Update File: ", "*** Add File: ", "*** Delete File: ")
        text = " ".join(ln.split(": ", 1)[1] for ln in item["diff"] if ln.startswith(marks))
    elif isinstance(tool_input, str):
        text = tool_input
    else:
        text = "" if tool_input is None else json.dumps(tool_input, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

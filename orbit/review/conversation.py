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

import importlib
import json
import re
from collections.abc import Iterable
from types import ModuleType

from orbit import harnesses
from orbit.review.items import (
    DIFF_LINES,
    TEXT_LIMIT,
    Builder,
    Conversation,
    Item,
    decode,
    load,
    shorten,
)

__all__ = [
    "DIFF_LINES",
    "TEXT_LIMIT",
    "Conversation",
    "count_messages",
    "detect",
    "line_kind",
    "parse",
    "shorten",
    "tool_summary",
]


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
            return harnesses.format_of(obj)
        if not cut and line.startswith("{"):
            cut = line[:2000]
    found = TYPE_KEY.search(cut)
    return harnesses.format_of_cut(found.group(1), cut) if found else ""


def parser(fmt: str) -> ModuleType:
    """The line parser of format `fmt`: `parse_line(builder, obj, line)`, `is_message(obj)`."""
    return importlib.import_module(harnesses.transcript_parser(fmt))


def parse(
    lines: Iterable[bytes | str], *, limit: int | None = TEXT_LIMIT, fmt: str = ""
) -> Conversation:
    """The conversation on `lines`; `fmt` (a harness's format: claude, codex) when the caller
    knows it from the file's first line (a later page), else detected from the first JSON line
    here."""
    b = Builder(limit)
    module = parser(fmt) if fmt else None
    for raw in lines:
        line = decode(raw).strip()
        if not line:
            continue
        b.conv.lines += 1
        obj = load(line)
        if obj is None:
            b.raw(line)
            continue
        if module is None:
            fmt = harnesses.format_of(obj)
            module = parser(fmt)
        module.parse_line(b, obj, line)
    b.conv.format = fmt
    return b.finish()


def count_messages(lines: Iterable[bytes | str]) -> int:
    """The user and assistant lines of a transcript, without building its items."""
    n, module = 0, None
    for raw in lines:
        obj = load(decode(raw).strip())
        if obj is None:
            continue
        module = module or parser(harnesses.format_of(obj))
        n += bool(module.is_message(obj))
    return n


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

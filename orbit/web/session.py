"""A run's agent sessions in the browser: the transcripts of its `session/` folder and a
conversation view of one, a page at a time.

    GET /runs/<id>/conversation/<path under session/>?offset=N

A page is at most PAGE_LINES lines or PAGE_BYTES bytes of the file from byte `offset` (a line
cut at the page's end waits for the next page), parsed by orbit.review.conversation and shown
as the ATIF steps orbit.review.atif makes of it (what `orbit session --atif` prints). Files are
opened only through orbit.web.runfiles (confined to `session/`), so a 200 MB transcript costs
one page's read, and a container that swaps a folder for a link gets nothing served.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import quote

import bottle

from orbit import harnesses
from orbit.errors import NotFoundError
from orbit.human import human_count
from orbit.review import atif, conversation
from orbit.review.conversation import Conversation, line_kind
from orbit.store.dirlist import find_files
from orbit.web import runfiles
from orbit.web.charts import fmt_size
from orbit.web.context import Route, current, load_run

PAGE_LINES = 200
PAGE_BYTES = 2 << 20
HEAD_BYTES = 64 << 10  # read for the format and the session's header
HEAD_MAX = 1 << 20
TAIL_BYTES = 256 << 10  # read for a running total (Codex) or a result line (Claude -p)
DEPTH = 4  # folder levels under session/ (Codex: YYYY/MM/DD/)
LISTED = 100  # transcripts listed on the run page
COUNT_BYTES = 1 << 20  # a transcript up to this size has its messages counted on the run page
COUNT_BUDGET = 8 << 20  # bytes read for those counts, all transcripts together


def formats() -> dict[str, str]:
    """What each transcript format is called on the pages: its harness's name."""
    named = {h.transcript.format: h.display for h in harnesses.every() if h.transcript}
    return {**named, "unknown": "JSONL", "": "not JSONL"}


@dataclass
class TranscriptRow:
    rel: str
    size: int
    format: str
    messages: int | None  # counted for a small file (COUNT_BYTES, COUNT_BUDGET), else None


def _head(fh: IO[bytes], most: int = HEAD_BYTES) -> list[bytes]:
    """The whole lines of the file's first HEAD_BYTES; its first line alone up to `most` (a
    Codex rollout's first line carries the agent's instructions)."""
    fh.seek(0)
    data = fh.read(HEAD_BYTES)
    if len(data) == HEAD_BYTES and b"\n" not in data and most > HEAD_BYTES:
        data += fh.read(most - HEAD_BYTES)
    if b"\n" in data:
        data = data[: data.rindex(b"\n")]
    return data.splitlines()


def transcript_rows(run_dir: Any) -> list[TranscriptRow]:
    """The `*.jsonl` files under the run's `session/` (DEPTH folders down), with their format
    and, for small files, their message count; [] without session/."""
    try:
        with runfiles.opened(run_dir, "session", "") as (fd, _):
            dir_fd = runfiles.reopen(fd, os.O_RDONLY | os.O_DIRECTORY)
            try:
                found = find_files(dir_fd, ".jsonl", DEPTH, LISTED)
            finally:
                os.close(dir_fd)
    except (runfiles.Refused, NotFoundError, OSError):
        return []
    rows, budget = [], COUNT_BUDGET
    for rel, size in found:
        fmt, messages = "", None
        try:
            with runfiles.opened(run_dir, "session", rel) as (fd, st):
                if stat.S_ISREG(st.st_mode):
                    with runfiles.read_file(fd) as fh:
                        fmt = conversation.detect(_head(fh))
                        if st.st_size <= min(COUNT_BYTES, budget):
                            budget -= st.st_size
                            fh.seek(0)
                            data = fh.read(COUNT_BYTES)
                            messages = conversation.count_messages(data.splitlines())
        except (runfiles.Refused, NotFoundError, OSError):
            continue  # gone or swapped meanwhile: not listed
        rows.append(TranscriptRow(rel, size, fmt, messages))
    return rows


# --- pages of a file ----------------------------------------------------------------------------
def read_page(fh: IO[bytes], offset: int, size: int) -> tuple[list[bytes], int]:
    """The whole lines from `offset` (at most PAGE_LINES, PAGE_BYTES) and where the next page
    starts. A line longer than a page is cut, and the next page starts after the cut."""
    fh.seek(offset)
    data = fh.read(min(PAGE_BYTES, max(0, size - offset)))
    end = offset + len(data)
    if end < size:  # the last line may go on beyond the window: leave it for the next page
        nl = data.rfind(b"\n")
        if nl >= 0:
            data = data[: nl + 1]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) > PAGE_LINES:
        lines = lines[:PAGE_LINES]
        return lines, offset + sum(len(line) + 1 for line in lines)
    return lines, offset + len(data)


def start_before(fh: IO[bytes], end: int) -> int:
    """Where the page that ends at `end` starts: PAGE_LINES whole lines back at most, within
    PAGE_BYTES (a line longer than that: PAGE_BYTES back)."""
    lo = max(0, end - PAGE_BYTES)
    fh.seek(lo)
    data = fh.read(end - lo)
    pos = len(data) - 1 if data.endswith(b"\n") else len(data)
    start = None
    for _ in range(PAGE_LINES):
        nl = data.rfind(b"\n", 0, pos)
        if nl < 0:
            break
        start, pos = nl + 1, nl
    else:
        return lo + (start or 0)
    if lo == 0:
        return 0
    return lo + start if start is not None else lo


@dataclass
class Page:
    conv: Conversation
    steps: list[dict[str, Any]]  # the page's ATIF steps
    start: int
    end: int
    size: int
    prev: int | None
    last: int
    header: dict[str, str]
    totals: Conversation | None  # the whole session's usage, where the file's tail has it


def read_conversation(fh: IO[bytes], size: int, offset: int) -> Page:
    offset = max(0, min(offset, size))
    head = conversation.parse(_head(fh, HEAD_MAX), limit=200)
    fmt = head.format
    lines, end = read_page(fh, offset, size)
    conv = conversation.parse(lines, fmt=fmt)  # fmt "": found on this page
    prev = start_before(fh, offset) if offset > 0 else None
    last = start_before(fh, size) if size else 0
    totals = None
    if offset > 0 or end < size:
        fh.seek(max(0, size - TAIL_BYTES))
        tail = fh.read(TAIL_BYTES).split(b"\n")[1 if size > TAIL_BYTES else 0 :]
        totals = conversation.parse(tail, limit=200, fmt=fmt)
        if not totals.total:
            totals = None
    header = {**head.header, **conv.header}
    steps = atif.trajectory(conv)["steps"] if conv.items else []
    return Page(conv, steps, offset, end, size, prev, last, header, totals)


def step_tools(step: dict[str, Any]) -> list[dict[str, Any]]:
    """A step's tool calls with their results, as the page shows each: name, input, command,
    diff, result (None when not on this page), is_error; a result alone has no name."""
    results = {
        r.get("source_call_id"): r for r in (step.get("observation") or {}).get("results", [])
    }
    out = []
    for call in step.get("tool_calls") or []:
        shown = (call.get("extra") or {}).get("orbit", {})
        args = call["arguments"]
        result = results.get(call["tool_call_id"])
        out.append(
            {
                "name": call["function_name"],
                "input": args.get("input") if shown.get("input_is_text") else args,
                "command": shown.get("command"),
                "diff": shown.get("diff"),
                **_result_view(result),
            }
        )
    if not out and None in results:  # a result whose call is not on this page
        out.append({"name": None, "input": None, "command": None, "diff": None})
        out[-1].update(_result_view(results[None]))
    return out


def _result_view(result: dict[str, Any] | None) -> dict[str, Any]:
    if result is None:
        return {"result": None, "is_error": False}
    failed = bool((result.get("extra") or {}).get("orbit", {}).get("is_error"))
    return {"result": result.get("content"), "is_error": failed}


def usage_text(usage: dict[str, int]) -> str:
    return ", ".join(
        f"{human_count(v)} {k.removesuffix('_tokens').replace('_', ' ')}" for k, v in usage.items()
    )


def conversation_page(run_id: str, path: str) -> Any:
    ctx = current()
    run = load_run(ctx, run_id)
    rel = path.strip("/")
    try:
        offset = int(bottle.request.query.get("offset", "0") or 0)
    except ValueError:
        bottle.abort(400, "offset must be an integer")
    try:
        with runfiles.opened(run.dir, "session", rel) as (fd, st):
            if not stat.S_ISREG(st.st_mode):
                bottle.abort(404, f"session/{rel} is not a regular file")
            with runfiles.read_file(fd) as fh:
                size = os.fstat(fh.fileno()).st_size
                binary = b"\x00" in fh.read(8192)
                page = None if binary else read_conversation(fh, size, offset)
    except runfiles.Refused as exc:
        bottle.abort(403, str(exc))
    except NotFoundError as exc:
        bottle.abort(404, str(exc))
    except OSError as exc:
        bottle.abort(404, f"session/{rel} cannot be read: {exc.strerror}")
    return ctx.render(
        "conversation",
        title=f"run {run.label}: session/{rel}",
        run=run,
        rel=rel,
        pg=page,
        binary=binary,
        formats=formats(),
        usage_text=usage_text,
        line_kind=line_kind,
        tool_summary=conversation.tool_summary,
        step_tools=step_tools,
        json_full=lambda v: json.dumps(v, ensure_ascii=False, indent=2),
        fmt_size=fmt_size,
        q=quote,
    )


ROUTES: list[Route] = [
    ("GET", "/runs/<run_id>/conversation/<path:path>", conversation_page),
]

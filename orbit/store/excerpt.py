"""The error excerpt: the few lines at the end of a run's log that say why it failed.

A Python traceback gives its innermost frame (and the last frame of the run's own code when the
innermost one is in a library) with its source line, then the exception; otherwise the last
out-of-memory or shell error line; otherwise the last few non-empty lines. Only the log's tail
is read, so a huge log costs no more than a small one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from orbit.errors import CorruptError
from orbit.store.files import open_regular
from orbit.store.model import LOG, Run, RunState

TAIL_BYTES = 64 * 1024
MAX_LINES = 10
MAX_CHARS = 2000
LAST_LINES = 5  # when nothing in the log is recognised
# A match followed by more lines than this is old news (a caught error, then more output).
STALE_AFTER = 25
# Lines of the other stream looked past amid a traceback's frames before giving up on them.
STRAY_LINES = 5

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
FRAME = re.compile(r'^\s*File "([^"]*)", line \d+')
CARET = re.compile(r"^\s*[\^~]+\s*$")
EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)(?::\s.*|:)?$")
OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|\bMemoryError\b|Out of memory", re.I)
SHELL = re.compile(
    r"(?:: (?:command )?not found$|: Permission denied$|: No such file or directory$"
    r"|Segmentation fault|Bus error|Illegal instruction|Aborted|^Killed$|\bKilled\b.*$"
    r"|\[FATAL tini)"
)
LIBRARY = ("site-packages/", "dist-packages/", "/lib/python", "<frozen ")


def log_excerpt(path: Path) -> str | None:
    """The excerpt of the log at `path` (None when there is no log or nothing in it)."""
    try:
        with open_regular(path) as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL_BYTES))
            raw = fh.read(TAIL_BYTES)
    except (OSError, CorruptError):
        return None
    if size > TAIL_BYTES:
        raw = raw.partition(b"\n")[2]  # the first line is probably cut
    return excerpt(raw.decode("utf-8", "replace"))


def clean_lines(text: str) -> list[str]:
    """The log's lines without ANSI codes; of a line rewritten with carriage returns (a
    progress bar) only what was shown last."""
    out = []
    for line in ANSI.sub("", text).split("\n"):
        if "\r" in line:
            parts = [p for p in line.split("\r") if p.strip()]
            line = parts[-1] if parts else ""
        out.append(line.rstrip())
    return out


def excerpt(text: str) -> str | None:
    lines = clean_lines(text)
    found = _latest(lines)
    if found is None:
        found = [line for line in lines if line.strip()][-LAST_LINES:]
    return _fit(found) if found else None


def _latest(lines: list[str]) -> list[str] | None:
    """The recognised error that ends last in the log, unless many lines followed it."""
    candidates = [c for c in (_traceback(lines), _marked(lines, OOM), _marked(lines, SHELL)) if c]
    if not candidates:
        return None
    end, chosen = max(candidates, key=lambda c: c[0])
    after = sum(1 for line in lines[end + 1 :] if line.strip())
    return chosen if after <= STALE_AFTER else None


def _traceback(lines: list[str]) -> tuple[int, list[str]] | None:
    """(the index of its last line, the excerpt) of the last Python traceback."""
    start = next((i for i in range(len(lines) - 1, -1, -1) if TRACEBACK.match(lines[i])), None)
    if start is None:
        return None
    frames, first = _frames(lines, start + 1)
    if first is None:
        return None  # cut short: no exception line yet
    i = _exception_at(lines, first)
    out: list[str] = []
    if frames:
        own = [f for f in frames if not any(mark in f[1] for mark in LIBRARY)]
        if own and own[-1] != frames[-1]:
            out.extend(_frame(lines, own[-1][0]))
        out.extend(_frame(lines, frames[-1][0]))
    end = i
    out.append(lines[i])
    # Only indented lines continue the message: the output of the run's other stream often
    # lands right after the traceback.
    for j in range(i + 1, len(lines)):
        if not lines[j].startswith((" ", "\t")) or not lines[j].strip() or len(out) >= MAX_LINES:
            break
        out.append(lines[j])
        end = j
    return end, out


def _frames(lines: list[str], start: int) -> tuple[list[tuple[int, str]], int | None]:
    """The frames (line index, file) of a traceback whose frames begin at `start`, and the
    index of its first unindented line (the exception's, or the first of the output of the
    run's other stream that landed amid the frames: stdout and stderr reach the log through
    two pipes, so a line printed before the error can arrive in the middle of its traceback).
    Frames after such a line still count; one that reads like an exception ends the frames."""
    frames: list[tuple[int, str]] = []
    first = None
    for i in range(start, len(lines)):
        m = FRAME.match(lines[i])
        if m:
            frames.append((i, m.group(1)))
        elif not lines[i].startswith(" ") and lines[i].strip():
            if first is None:
                first = i
            if EXCEPTION.match(lines[i]) and _exception_name(lines[i]):
                return frames, first
            if i - first >= STRAY_LINES:
                break
    return frames, first


def _exception_at(lines: list[str], i: int) -> int:
    """The exception's line: the first of the next few unindented lines that reads like
    `SomeError: message` (another stream's output may land between); else line i."""
    seen = 0
    for j in range(i, len(lines)):
        if lines[j].startswith((" ", "\t")) or not lines[j].strip():
            continue
        if EXCEPTION.match(lines[j]) and _exception_name(lines[j]):
            return j
        seen += 1
        if seen >= 5:
            break
    return i


def _frame(lines: list[str], at: int) -> list[str]:
    """A frame's `File …` line and its source line (without the ^^^ markers). Lines of the
    other stream that landed between the two are looked past (see `_frames`)."""
    out = [lines[at]]
    for nxt in lines[at + 1 : at + 2 + STRAY_LINES]:
        if FRAME.match(nxt) or CARET.match(nxt) or (EXCEPTION.match(nxt) and _exception_name(nxt)):
            break  # the next frame, or the exception: this frame shows no source line
        if nxt.startswith("    "):
            out.append(nxt)
            break
    return out


def _marked(lines: list[str], pattern: re.Pattern[str]) -> tuple[int, list[str]] | None:
    """The last line matching `pattern`, after up to two lines before it for context."""
    for i in range(len(lines) - 1, -1, -1):
        if pattern.search(lines[i]):
            before = [line for line in lines[max(0, i - 2) : i] if line.strip()]
            return i, [*before, lines[i]]
    return None


def _fit(lines: list[str]) -> str:
    """At most MAX_LINES lines and MAX_CHARS characters; the end is kept (it says most)."""
    lines = lines[-MAX_LINES:]
    text = "\n".join(lines)
    while len(text) > MAX_CHARS and len(lines) > 1:
        lines = lines[1:]
        text = "\n".join(lines)
    if len(text) > MAX_CHARS:
        text = text[: MAX_CHARS - 1] + "…"
    return text


def key_line(text: str | None) -> str | None:
    """The one line of an excerpt that names the error: a traceback's exception, an
    out-of-memory or shell error line, or else the last line."""
    if not text:
        return None
    lines = text.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        if FRAME.match(lines[i]):
            rest = [x for x in lines[i + 1 :] if x.strip() and not x.startswith(" ")]
            if rest:
                return rest[0].strip()
            break
    for pattern in (OOM, SHELL):
        hit = next((x for x in reversed(lines) if pattern.search(x)), None)
        if hit:
            return hit.strip()
    for line in lines:
        if EXCEPTION.match(line.strip()) and _exception_name(line):
            return line.strip()
    return lines[-1].strip()


def _exception_name(line: str) -> bool:
    name = line.split(":", 1)[0].rsplit(".", 1)[-1]
    return name.endswith(("Error", "Exception", "Interrupt", "Exit")) or name == "StopIteration"


def from_command(reason: str | None) -> bool:
    """Whether a failed run's reason leaves the cause to its log (`exit code N`): when Orbit
    ended the run (timed out, killed for memory, lost), the reason is the cause, and the log
    ends with whatever the run happened to be printing."""
    return not reason or reason.startswith("exit code")


def run_excerpt(run: Run) -> str | None:
    """A run's recorded `error_excerpt`; for a failed or lost run settled before Orbit
    recorded it, computed from its log now (the old status.yaml is left as it is)."""
    if "error_excerpt" in run.status:
        value = run.status["error_excerpt"]
        return str(value) if value else None
    if run.status.get("state") in (RunState.FAILED.value, RunState.LOST.value):
        return log_excerpt(run.path(LOG))
    return None

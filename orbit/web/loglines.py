"""Line numbers and search over a whole log, however large: the run page's `#L…` anchors,
`/api/runs/<id>/log?line=N` and `/api/runs/<id>/log/search`.

A LineIndex keeps, for each MiB of a log, how many lines come before it, so the line of a byte
and the byte of a line cost one MiB's read. It is built as the log is asked about and kept per
file (by device and inode) while the server lives: a log that grew is counted from where the
index stopped, one that a shepherd cut back is counted again from the cut. Counting is bounded
in time per request (`budget`): a 1 GB log never counted before answers at once without line
numbers, and has them after a request or two.

Search reads the log in 4 MiB pieces and matches each line as the page shows it (its last
carriage-return state, without escape sequences; case-insensitive), at most SEARCH_SECONDS and
SEARCH_MAX matches a request, and only until another search of the same log begins; the answer
says where to go on (`next_line`).
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orbit.web import logtext, runfiles

BLOCK = 1 << 20  # the index keeps one count per MiB
SEARCH_PIECE = 4 << 20
SEARCH_SECONDS = 2.0
SEARCH_MAX = 200
MATCH_CHARS = 400  # of a matching line's text in the answer
INDEXES = 32  # logs whose index is kept
CONTEXT = 4 << 10  # bytes of lines shown above a line jumped to
HEAD = 256  # bytes that tell one log from another at the same inode


class LineIndex:
    """Line counts of one file at each BLOCK boundary (marks[i]: newlines before block i)."""

    def __init__(self) -> None:
        self.marks = [0]
        self.head = b""  # the file's first bytes when counted: another file at its inode differs
        self.searches = 0  # searches begun: a search stops early once a newer one began
        self.lock = threading.Lock()

    def check(self, fh: Any) -> None:
        """Forget the counts when the file is not the one counted (a new file that got the
        inode of a removed run's log)."""
        fh.seek(0)
        head = fh.read(HEAD)
        with self.lock:
            if not head.startswith(self.head) and not self.head.startswith(head):
                self.marks = [0]
            if len(head) > len(self.head) or not self.head.startswith(head):
                self.head = head

    def _extend(self, fh: Any, upto_block: int, deadline: float) -> bool:
        """Count blocks until marks covers `upto_block`; False when time ran out first."""
        while len(self.marks) <= upto_block:
            if time.monotonic() > deadline:
                return False
            i = len(self.marks) - 1
            fh.seek(i * BLOCK)
            data = fh.read(BLOCK)
            if len(data) < BLOCK:
                return False  # the last, partial block is never a mark
            self.marks.append(self.marks[-1] + data.count(b"\n"))
        return True

    def _fit(self, size: int) -> None:
        # A log cut back (by its shepherd): marks past its end are forgotten.
        del self.marks[size // BLOCK + 1 :]

    def learn(self, pos: int, line: int, data: bytes) -> None:
        """Marks for the block starts within `data`, the bytes at `pos`, where line `line`
        starts (a search reads them anyway)."""
        with self.lock:
            while pos <= len(self.marks) * BLOCK <= pos + len(data):
                cut = len(self.marks) * BLOCK - pos
                self.marks.append(line - 1 + data.count(b"\n", 0, cut))

    def line_of(self, fh: Any, offset: int, size: int, budget: float) -> int | None:
        """The 1-based number of the line that holds byte `offset` (None: not counted yet)."""
        with self.lock:
            self._fit(size)
            block = min(offset, size) // BLOCK
            if not self._extend(fh, block, time.monotonic() + budget) and len(self.marks) <= block:
                return None
            fh.seek(block * BLOCK)
            return self.marks[block] + fh.read(offset - block * BLOCK).count(b"\n") + 1

    def offset_of(self, fh: Any, line: int, size: int, budget: float) -> int | None:
        """The byte where line `line` (1-based) starts; None when it is past the counted part
        (or past the end)."""
        before = max(0, line - 1)
        if before == 0:
            return 0
        with self.lock:
            self._fit(size)
            deadline = time.monotonic() + budget
            while self.marks[-1] < before and len(self.marks) <= size // BLOCK:
                if not self._extend(fh, len(self.marks), deadline):
                    break  # out of time, or the last, partial block
            block = max(0, bisect_left(self.marks, before) - 1)
            pos, need = block * BLOCK, before - self.marks[block]
            fh.seek(pos)
            while need > 0:
                data = fh.read(BLOCK)
                if not data:
                    return None
                n = data.count(b"\n")
                if n < need:
                    need, pos = need - n, pos + len(data)
                    if len(self.marks) * BLOCK <= pos:
                        return None  # past what is counted: not known yet
                    continue
                at = -1
                for _ in range(need):
                    at = data.index(b"\n", at + 1)
                return pos + at + 1
            return pos


_indexes: OrderedDict[tuple[int, int], LineIndex] = OrderedDict()
_lock = threading.Lock()


def index_for(st: os.stat_result, fh: Any = None) -> LineIndex:
    """The index of the file `st` describes (checked against its open file `fh`, if given)."""
    key = (st.st_dev, st.st_ino)
    with _lock:
        found = _indexes.get(key)
        if found is None:
            found = _indexes[key] = LineIndex()
        _indexes.move_to_end(key)
        while len(_indexes) > INDEXES:
            _indexes.popitem(last=False)
    if fh is not None:
        found.check(fh)
    return found


def _ask(path: Path, ask: Any) -> int | None:
    """ask(index, open file, size) on the log's index; None without a readable log."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            found: int | None = ask(index_for(st, fh), fh, st.st_size)
            return found
    except OSError:
        return None


def line_of(path: Path, offset: int, budget: float) -> int | None:
    """The line that holds byte `offset` of the log (None: no log, or not counted yet)."""
    return _ask(path, lambda index, fh, size: index.line_of(fh, offset, size, budget))


def offset_of(path: Path, line: int, budget: float) -> int | None:
    """The byte where line `line` starts (None: no such line, or not counted yet)."""
    return _ask(path, lambda index, fh, size: index.offset_of(fh, line, size, budget))


# --- a window of lines -------------------------------------------------------------------------
def window(
    path: Path, offset: int, limit: int, *, before: int | None = None, budget: float
) -> dict[str, Any]:
    """A range of the log (runfiles.log_range) as the page shows it: `lines`, each one line's
    HTML with its number and anchor (logtext.wrap), numbered from `first_line` (None while the
    log is not counted that far).

    `continued`: the range starts inside a line the page shows already (a line longer than a
    range); `restarts`: that first piece holds a carriage return, so its last state replaces
    the line rather than extending it. `partial`: the log ends inside its last line (a progress
    bar still drawing): `next_offset` is where that line starts, so the next request sends it
    again whole and the page replaces it.
    """
    r = runfiles.log_range(path, offset, limit, before=before)
    continued = r.start > 0 and not _starts_line(path, r.start)
    partial = r.end >= r.size and r.data and not r.data.endswith(b"\n") and b"\n" in r.data
    end = r.start + r.data.rindex(b"\n") + 1 if partial else r.end
    text = r.data.decode("utf-8", errors="replace")
    first = line_of(path, r.start, budget) if r.data else None
    lines = logtext.lines_html(text, first)
    return {
        "start": r.start,
        "next_offset": end,
        "size": r.size,
        "eof": r.end >= r.size,
        "reset": r.reset,
        "first_line": first,
        "continued": continued,
        "restarts": continued and "\r" in text.split("\n", 1)[0],
        "partial": bool(partial),
        "lines": [logtext.wrap(n, html) for n, html in lines],
    }


def around_line(path: Path, line: int, limit: int, budget: float) -> dict[str, Any] | None:
    """The window that shows line `line` a few lines from its top, long enough for the whole
    of that line (up to runfiles.LOG_LIMIT_MAX); None when the log has no such line (or is not
    counted that far yet)."""
    at = offset_of(path, line, budget)
    if at is None:
        return None
    above = runfiles.log_range(path, 0, CONTEXT, before=at) if at > 0 else None
    start = above.start if above is not None and above.data.count(b"\n") > 1 else at
    ahead = runfiles.log_range(path, at, runfiles.LOG_LIMIT_MAX).data
    line_end = at + (ahead.find(b"\n") + 1 or len(ahead))
    return window(path, start, max(limit, line_end - start), budget=budget)


def _starts_line(path: Path, offset: int) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset - 1)
            return fh.read(1) == b"\n"
    except OSError:
        return True


# --- search ------------------------------------------------------------------------------------
def _matches_in(piece: bytes, needle: str, first: int, room: int) -> list[dict[str, Any]]:
    """The lines of `piece` (whole lines, the first numbered `first`) that show `needle`."""
    raw_needle = needle.encode()
    # Without escape sequences a line shows what it holds (less its overwritten parts): a
    # byte search rules most lines out at the speed of bytes.find.
    quick = needle.isascii() and b"\x1b" not in piece
    if quick and raw_needle not in piece.lower():
        return []
    found: list[dict[str, Any]] = []
    for i, raw in enumerate(piece.split(b"\n")):
        if quick and raw_needle not in raw.lower():
            continue
        text = logtext.shown(raw.decode("utf-8", errors="replace"))
        if needle in text.lower():
            found.append({"line": first + i, "text": text[:MATCH_CHARS]})
            if len(found) >= room:
                break
    return found


def search(path: Path, query: str, from_line: int = 1) -> dict[str, Any]:
    """The lines from `from_line` on whose shown text holds `query` (case-insensitive)."""
    needle = query.lower()
    out: dict[str, Any] = {"q": query, "matches": [], "next_line": None, "done": True}
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below; the loop reads it in pieces)
    except OSError:
        return {**out, "size": 0, "scanned_bytes": 0}
    with fh:
        st = os.fstat(fh.fileno())
        index = index_for(st, fh)
        pos = index.offset_of(fh, max(1, from_line), st.st_size, SEARCH_SECONDS / 2)
        out["size"], out["scanned_bytes"] = st.st_size, 0
        if pos is None:  # past the end, or not counted that far yet: try again
            whole = index.line_of(fh, st.st_size, st.st_size, 0) is not None
            out["done"], out["next_line"] = whole, None if whole else from_line
            return out
        with index.lock:
            index.searches += 1
            mine = index.searches
        _scan(fh, index, (pos, max(1, from_line)), needle, out, lambda: index.searches != mine)
    return out


def _scan(
    fh: Any,
    index: LineIndex,
    at: tuple[int, int],
    needle: str,
    out: dict[str, Any],
    superseded: Callable[[], bool],
) -> None:
    """Search from `at` (a byte where a line starts, and that line's number) into `out`,
    until SEARCH_SECONDS pass or another search of this log begins (a person typing: each
    word a new search; the one left behind answers with what it found and where to go on)."""
    deadline = time.monotonic() + SEARCH_SECONDS
    size = out["size"]
    (pos, line), start = at, at[0]
    fh.seek(pos)
    while pos < size:
        piece = fh.read(min(SEARCH_PIECE, size - pos))
        if not piece:
            break
        if pos + len(piece) < size and b"\n" in piece:
            piece = piece[: piece.rindex(b"\n") + 1]  # whole lines; the rest comes next
        fh.seek(pos + len(piece))
        index.learn(pos, line, piece)
        room = SEARCH_MAX - len(out["matches"])
        found = _matches_in(piece.removesuffix(b"\n"), needle, line, room)
        out["matches"] += found
        if len(found) >= room:  # full: go on after the last match
            out["next_line"], out["done"] = found[-1]["line"] + 1, False
            break
        pos, line = pos + len(piece), line + piece.count(b"\n")
        if (time.monotonic() > deadline or superseded()) and pos < size:
            out["next_line"], out["done"] = line, False
            break
    out["scanned_bytes"] = pos - start

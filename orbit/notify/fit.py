"""Cutting a Message down until its rendering fits a platform's limit.

Every cut is of Python strings (whole code points), so a rendering encoded as UTF-8 is always
valid, and a byte limit is met by measuring the encoded bytes, never by cutting them. What is
cut says so: "…" where a log's head was dropped, "… N more" after the lines that were kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from orbit.notify.message import Message

T = TypeVar("T")

TITLE_CHARS = 200  # a title, a field's value and a line longer than this are cut first
VALUE_CHARS = 500
LINE_CHARS = 500
MAX_LINES = 50
MAX_FIELDS = 24


def clean(text: str) -> str:
    """`text` as it can be encoded as UTF-8 (a lone surrogate becomes "?")."""
    return text.encode("utf-8", "replace").decode("utf-8")


def cut(text: str, chars: int) -> str:
    """`text` with at most `chars` characters, ending in "…" when it was cut."""
    return text if len(text) <= chars else text[: max(0, chars - 1)] + "…"


def cut_bytes(text: str, limit: int) -> str:
    """The longest head of `text` whose UTF-8 encoding has at most `limit` bytes; a character
    is never split (the partial bytes of the last one are dropped)."""
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def largest(n: int, make: Callable[[int], T], ok: Callable[[T], bool]) -> T | None:
    """make(k) for the largest k in 0..n with ok(make(k)), assuming that grows with k;
    None when not even make(0) is ok."""
    lo, hi = -1, n  # ok(lo) holds (or lo is -1); the answer is in lo..hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(make(mid)):
            lo = mid
        else:
            hi = mid - 1
    return make(lo) if lo >= 0 else None


def tail(code: str, ok: Callable[[str | None], bool]) -> str | None:
    """The longest tail of `code` that is ok: whole last lines if any fit, else the last
    characters of the last line; None when nothing is ok. A cut tail starts with "…"."""
    if ok(code):
        return code
    lines = code.split("\n")
    kept = largest(len(lines) - 1, lambda k: "…\n" + "\n".join(lines[len(lines) - k :]), ok)
    if kept is not None and kept != "…\n":
        return kept
    last = lines[-1]
    chars = largest(len(last), lambda k: "…" + last[len(last) - k :], ok)
    return chars if chars is not None and chars != "…" else None


def head(lines: list[str], ok: Callable[[list[str]], bool]) -> list[str]:
    """The most leading `lines` that are ok, followed by "… N more" when some were dropped;
    [] when not even that fits."""
    if ok(lines):
        return lines

    def make(k: int) -> list[str]:
        return [*lines[:k], f"… {len(lines) - k} more"]

    return largest(len(lines) - 1, make, ok) or []


def tidy(message: Message) -> Message:
    """`message` with every string encodable and each part within its own cap (TITLE_CHARS,
    VALUE_CHARS, LINE_CHARS, MAX_LINES, MAX_FIELDS): one overlong part cannot crowd out
    the others."""
    lines = [cut(clean(line), LINE_CHARS) for line in message.lines]
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], f"… {len(lines) - MAX_LINES + 1} more"]
    return replace(
        message,
        key=clean(message.key),
        title=cut(clean(message.title).replace("\n", " "), TITLE_CHARS),
        state=clean(message.state),
        fields=[
            (cut(clean(k), 60), cut(clean(v), VALUE_CHARS)) for k, v in message.fields[:MAX_FIELDS]
        ],
        lines=lines,
        code=clean(message.code) if message.code else None,
        link=clean(message.link) if message.link else None,
    )


def fit(message: Message, ok: Callable[[Message], bool]) -> Message:
    """`message` cut until ok: first the code (keeping its tail: a log's last lines say the
    most), then the lines, then the fields, then the title, then the link. Returns the last
    cut even if it is still not ok (a limit smaller than an empty message)."""
    if ok(message):
        return message
    code = None
    if message.code:
        code = tail(message.code, lambda c: ok(replace(message, code=c)))
    message = replace(message, code=code)
    if ok(message):
        return message
    message = replace(message, lines=head(message.lines, lambda ls: ok(replace(message, lines=ls))))
    if ok(message):
        return message
    kept = largest(
        len(message.fields), lambda k: message.fields[:k], lambda f: ok(replace(message, fields=f))
    )
    message = replace(message, fields=kept or [])
    if ok(message):
        return message
    title = largest(
        len(message.title), lambda k: cut(message.title, k), lambda t: ok(replace(message, title=t))
    )
    message = replace(message, title=title if title is not None else "")
    return message if ok(message) else replace(message, link=None)

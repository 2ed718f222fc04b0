"""Timestamps as pages show them: `<time datetime="ISO">ISO</time>`, which static/times.js
turns into the reader's local time and its age ("3 min ago", the exact local time on hover);
without the script the ISO text shows."""

from __future__ import annotations

from datetime import datetime
from html import escape


def when(value: object) -> str:
    """The markup for a timestamp from a run file ("" for none; text that is no ISO time is
    shown escaped, without a <time>)."""
    text = "" if value is None else str(value)
    if not text:
        return ""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return escape(text)
    if parsed.tzinfo is None:
        return escape(text)  # no zone: which local time it is cannot be told
    return f'<time datetime="{escape(parsed.isoformat())}">{escape(text)}</time>'

"""Markdown as the pages show notes and transcripts: one renderer for all of them.

markdown-it-py (CommonMark, with tables and strikethrough) with raw HTML off, so a `<script>`
or `<img onerror=…>` in the text is shown as text; links only to http(s), mailto, or a path on
this server (a `javascript:`, `data:`, `vbscript:` or `file:` link stays text); images are never
loaded (their alt text and address are shown instead); no linkify, no typographer. Links open
without a referrer or an opener.

markdown-it-py reads about 50 KB a second of hostile text (`![` repeated) on a loaded machine,
and a transcript page may hold 2 MiB a container wrote, so a page renders markdown within a
Budget: at most PAGE_SECONDS in all, and no text over MD_MAX characters; beyond either, text is
shown as it is (escaped, its line breaks kept).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence
from html import escape
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

MD_MAX = 32 << 10  # characters of one text rendered as markdown
PAGE_SECONDS = 1.0  # markdown time of one page
SAFE_LINK = re.compile(r"^(?:https?:|mailto:|[/#?.]|[^:/?#\s]+(?:[/?#]|$))", re.IGNORECASE)


def _safe_link(url: str) -> bool:
    return bool(SAFE_LINK.match(url.strip())) and not url.strip().startswith("//")


def _image(_renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    alt = "".join(t.content for t in token.children or [])
    src = str(token.attrGet("src") or "")
    return f'<span class="md-image">[image: {escape(alt)} {escape(src)}]</span>'


def _link_open(_renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    return f'<a href="{escape(href)}" rel="noopener noreferrer nofollow">'


@functools.cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("image", _image)
    md.add_render_rule("link_open", _link_open)
    return md


def render(text: object) -> str:
    """`text` (markdown; None is no text, anything else its str) as safe HTML."""
    return str(_parser().render(_text(text)))


def _text(value: object) -> str:
    return "" if value is None else str(value)


def as_text(text: object) -> str:
    """`text` shown as it is (escaped; orbit.css keeps its line breaks)."""
    return f'<div class="md-plain">{escape(_text(text))}</div>'


class Budget:
    """Markdown for one page: `render` as long as the page's time lasts, then `as_text`."""

    def __init__(self, seconds: float = PAGE_SECONDS) -> None:
        self.left = seconds

    def render(self, text: object) -> str:
        text = _text(text)
        if self.left <= 0 or len(text) > MD_MAX:
            return as_text(text)
        began = time.monotonic()
        try:
            return render(text)
        finally:
            self.left -= time.monotonic() - began

"""The bot's answers to paired users' commands (a stand-in until the commands are built)."""

from __future__ import annotations

from typing import Any

from orbit.notify.lark import card, plain
from orbit.store.home import Home


def answer(home: Home, text: str) -> dict[str, Any]:
    """The card answering `text`."""
    return card("Orbit", "", [{"tag": "div", "text": plain(f"You asked: {text}")}])

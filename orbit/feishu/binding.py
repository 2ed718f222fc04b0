"""Is this app also bound on another machine? Feishu hands each event to one of an app's long
connections, so two machines bound to one app would each answer some messages and never know.
Every message Orbit's bots send carries its binding's tag (notify/lark.py: `HOST:HOME`); a bot
at start (and `check`) reads its paired users' chats and looks for a recent tag not its own.

What this cannot catch: a binding that has sent nothing yet into any chat this one reads (a
new machine, or one whose users are not paired here), one that sent only before WINDOW_S, a
client other than Orbit's bots (they carry no tag), and a chat whose messages the app may not
read (the im:message scope missing: the check is skipped for that chat).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from orbit.notify.lark import Lark, LarkError, bindings_in
from orbit.store.feishu import Users

log = logging.getLogger(__name__)

WINDOW_S = 24 * 3600.0  # tags older than this are history (a home moved, a machine retired)


@dataclass
class Foreign:
    binding: str  # HOST:HOME
    chat_id: str
    at: float  # epoch seconds of the message

    def line(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.at))
        return (
            f"the app is also bound by Orbit at {self.binding} (its message in chat "
            f"{self.chat_id} at {when}): one binding per app; remove the other one"
        )


def foreign_binding(
    lark: Lark, users: Users, mine: str, now: float | None = None
) -> Foreign | None:
    """The newest tag of another binding in the paired users' chats, when it is newer than
    this binding's own newest message there and within WINDOW_S; None when there is none."""
    now = time.time() if now is None else now
    chats = dict.fromkeys(str(w.get("chat_id")) for w in users.paired.values() if w.get("chat_id"))
    found: Foreign | None = None
    for chat_id in chats:
        try:
            items = lark.messages(chat_id)
        except LarkError as exc:
            log.warning("could not read chat %s for other bindings: %s", chat_id, exc)
            continue
        own_at, here = 0.0, None
        for item in items:
            sender = item.get("sender")
            if not isinstance(sender, dict) or sender.get("sender_type") != "app":
                continue
            body = item.get("body")
            content = body.get("content") if isinstance(body, dict) else None
            if not isinstance(content, str):
                continue
            try:
                at = int(str(item.get("create_time"))) / 1000.0
            except ValueError:
                continue
            for tag in bindings_in(content):
                if tag == mine:
                    own_at = max(own_at, at)
                elif now - at < WINDOW_S and (here is None or at > here.at):
                    here = Foreign(tag, chat_id, at)
        # Once this binding has answered in a chat, an older tag there is history.
        if here is not None and here.at > own_at and (found is None or here.at > found.at):
            found = here
    return found

"""Who may read this home through a bot: pairing codes handed to strangers, and the pairing
the owner does with `orbit notify pair NAME CODE` (the files are store/feishu.py's users.json).

A code is 6 characters of an alphabet without look-alikes (no 0/O, 1/I/L), valid CODE_TTL_S;
a user who asks again while theirs is valid gets the same one, so there is one per user.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from orbit.errors import NotFoundError
from orbit.store.feishu import Users, update_users
from orbit.store.home import Home
from orbit.store.model import now_iso

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
CODE_TTL_S = 3600.0


def _expire(users: Users, now: float) -> None:
    for code in [c for c, who in users.codes.items() if not _valid(who, now)]:
        del users.codes[code]


def _valid(who: dict[str, Any], now: float) -> bool:
    issued = who.get("issued_at")
    return isinstance(issued, int | float) and now - issued < CODE_TTL_S


def code_for(home: Home, name: str, open_id: str, chat_id: str = "", who: str = "") -> str:
    """The pairing code of a user not paired yet: theirs if still valid, else a new one."""
    now = time.time()

    def change(users: Users) -> str:
        _expire(users, now)
        for code, entry in users.codes.items():
            if entry.get("open_id") == open_id:
                return code
        while True:
            code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
            if code not in users.codes:
                break
        users.codes[code] = {"open_id": open_id, "chat_id": chat_id, "name": who,
                             "issued_at": now}  # fmt: skip
        return code

    return update_users(home, name, change)


def pair(home: Home, name: str, code: str, by: str) -> dict[str, Any]:
    """Pair the user who was given `code` (case and spaces do not matter); their entry, with
    its `open_id`. NotFoundError for a code never given or expired."""
    wanted = code.strip().upper().replace(" ", "").replace("-", "")
    now = time.time()

    def change(users: Users) -> dict[str, Any]:
        entry = users.codes.get(wanted)
        valid = entry is not None and _valid(entry, now)
        _expire(users, now)
        if entry is None or not valid:
            why = "has expired (codes last an hour)" if entry is not None else "is not known"
            raise NotFoundError(
                f"pairing code {wanted} {why} for the bot {name}: ask them to message the bot "
                "again for a new one"
            )
        del users.codes[wanted]
        open_id = str(entry["open_id"])
        paired = _paired(users, open_id, entry.get("name"), entry.get("chat_id"), by)
        return {"open_id": open_id, **paired}

    return update_users(home, name, change)


def pair_directly(home: Home, name: str, open_id: str, who: str, by: str) -> None:
    """Pair `open_id` without a code (the scanner of `orbit feishu init`); a chat already
    known for them is kept."""

    def change(users: Users) -> None:
        _paired(users, open_id, who, users.paired.get(open_id, {}).get("chat_id"), by)

    update_users(home, name, change)


def _paired(users: Users, open_id: str, who: Any, chat_id: Any, by: str) -> dict[str, Any]:
    """users.json's entry of a paired user, written into `users`."""
    entry = {"name": str(who or ""), "chat_id": chat_id or "", "paired_at": now_iso(), "by": by}
    users.paired[open_id] = entry
    return entry


def unpair(home: Home, name: str, who: str) -> dict[str, Any]:
    """Unpair the user of open id (or name) `who`; their entry. NotFoundError when no paired
    user is that one (or a name names several)."""

    def change(users: Users) -> dict[str, Any]:
        if who in users.paired:
            found = [who]
        else:
            found = [k for k, v in users.paired.items() if v.get("name") == who]
        if len(found) != 1:
            what = "several paired users are" if found else "no paired user is"
            raise NotFoundError(f"{what} {who!r} on the bot {name} (see `orbit notify list`)")
        entry = users.paired.pop(found[0])
        return {"open_id": found[0], **entry}

    return update_users(home, name, change)


def shown(who: dict[str, Any], open_id: str) -> str:
    """A paired user in one phrase: `Alice (ou_…)`, or the open id alone."""
    label = str(who.get("name") or "")
    return f"{label} ({open_id})" if label else open_id

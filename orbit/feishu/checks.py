"""What `orbit feishu init` and `check` do to a bot beyond its app's registration: pair the
scanner, start the bot and wait for its long connection, try the secret, the bot and a test
card, and name the console page to fix for what failed (console.py). Nothing here prints: the
commands render the Report."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import Any

from orbit.feishu import console, control, pairing
from orbit.feishu.console import Fix
from orbit.notify.lark import SECRET_CODES, Lark, LarkError, card, lark_for, plain
from orbit.notify.profiles import Profile
from orbit.store.feishu import Users, bot_dir, bot_worker, load_users, update_users
from orbit.store.home import Home


@dataclass
class Report:
    """Each check in the order made ({"check", "ok", "detail", "fix"}), the pages to fix (each
    once), and how many paired users were sent a card (or tried)."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    paired: int = 0

    @property
    def ok(self) -> bool:
        return all(c["ok"] for c in self.checks)

    def add(self, check: str, ok: bool, detail: str, fixes: list[Fix] | None = None) -> None:
        self.checks.append({"check": check, "ok": ok, "detail": detail,
                            "fix": [f.as_json() for f in fixes or []]})  # fmt: skip
        for fix in fixes or []:
            if fix.page not in {f.page for f in self.fixes}:
                self.fixes.append(fix)


def pair(home: Home, name: str, open_id: str, user_info: dict[str, Any], by: str) -> None:
    """The scanner `open_id` may read this home through bot `name` from now on."""
    person = user_info.get("name") or user_info.get("en_name") or ""
    pairing.pair_directly(home, name, open_id, str(person), by)


def bring_up(home: Home, profile: Profile, open_id: str | None, wait: float) -> Report:
    """Start the bot of a new profile, wait up to `wait` s for its connection, and send the
    scanner (`open_id`) a test card."""
    report = Report()
    since = time.time()
    control.start(home, profile.name)
    connection(home, profile, report, since, wait)
    if open_id:
        report.paired = 1
        send_test_card(home, profile, _lark(home, profile), report, open_id, "you")
    else:
        report.add("card", False, "Feishu did not say who scanned: message the bot to pair")
    return report


def check_bot(home: Home, profile: Profile, wait: float) -> Report:
    """The secret, then (only if Feishu took it) the connection after a restart of the bot,
    the bot's identity and a test card to each paired user. A LarkError other than a refused
    secret (Feishu not reached) is raised."""
    report = Report()
    lark = _lark(home, profile)
    app_id = profile.app_id or ""
    try:
        lark.token()
    except LarkError as exc:
        if exc.code not in SECRET_CODES:
            raise
        report.add("secret", False, str(exc), [console.credentials(profile.url, app_id,
                                                                   profile.name)])  # fmt: skip
        return report
    report.add("secret", True, "Feishu issued a tenant token")
    control.stop(home, profile.name)
    since = time.time()
    control.start(home, profile.name)
    connection(home, profile, report, since, wait)
    try:
        info = lark.bot_info()
    except LarkError as exc:
        report.add("bot", False, str(exc), [console.bot(profile.url, app_id)])
    else:
        report.add("bot", True, f"{info.get('app_name') or '?'} ({info.get('open_id') or '?'})")
    paired = load_users(home, profile.name).paired
    report.paired = len(paired)
    for open_id, who in paired.items():
        name = str(who.get("name") or "a paired user")
        send_test_card(home, profile, lark, report, open_id, name)
    return report


def connection(home: Home, profile: Profile, report: Report, since: float, wait: float) -> None:
    """Whether the bot said "connected" (at or after the epoch time `since`) within `wait` s."""
    record = control.wait_state(home, profile.name, wait, since=since)
    state = record["state"] if record else None
    if state == "connected":
        report.add("connection", True, "the bot's long connection is up")
        return
    if record is None:
        alive = bot_worker(home, profile.name).alive()
        log = bot_dir(home, profile.name) / "bot.log"
        said = "said nothing" if alive else "exited"
        detail = f"the bot {said} within {wait:g} s (its log: {log})"
    else:
        why = f": {record.get('detail')}" if record.get("detail") else ""
        log = bot_dir(home, profile.name) / "bot.log"
        detail = f"the bot's long connection is {state} after {wait:g} s{why} (its log: {log})"
    fixes = console.for_connection(profile.url, profile.app_id or "")
    report.add("connection", False, detail, fixes)


def send_test_card(
    home: Home, profile: Profile, lark: Lark, report: Report, open_id: str, who: str
) -> None:
    """Send `open_id` a card saying the bot works; the chat it went to is remembered."""
    body = card(
        f"Orbit: the bot {profile.name} works",
        "succeeded",
        [
            {
                "tag": "div",
                "text": plain(
                    f"This chat gets Orbit's cards from {socket.gethostname()} "
                    f"(home {home.root}): a run or group finishing, and answers to /gpu, "
                    "/runs and /show ID."
                ),
            }
        ],
    )
    try:
        sent = lark.send(open_id, "interactive", body)
    except LarkError as exc:
        fixes = console.for_send(profile.url, profile.app_id or "", exc.code)
        report.add("card", False, f"the test card to {who} ({open_id}): {exc}", fixes)
        return
    report.add("card", True, f"a test card was sent to {who} ({open_id})")
    chat_id = sent.get("chat_id")
    if isinstance(chat_id, str) and chat_id:

        def change(users: Users) -> None:
            if open_id in users.paired:
                users.paired[open_id]["chat_id"] = chat_id

        update_users(home, profile.name, change)


def _lark(home: Home, profile: Profile) -> Lark:
    return lark_for(profile, str(home.root))  # its cards tagged with this home's binding

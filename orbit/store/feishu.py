"""A Feishu bot's files, as the low layers see them (the bot itself is orbit/feishu/).

    ORBIT_HOME/feishu/<name>/        one per feishu-app profile of notify.yaml
      users.json       (0600) {"format": 1, "paired": {OPEN_ID: {"name", "chat_id",
                       "paired_at", "by"}}, "codes": {CODE: {"open_id", "chat_id", "name",
                       "issued_at"}}}: who may read this home through the bot, and the pairing
                       codes handed to the others (`orbit notify pair NAME CODE`)
      users.lock       held while users.json is read, changed and written
      connection.json  {"format": 1, "state", "since", "at", "pid", "detail", …}: what the bot's
                       long connection is doing (STATES), written by the bot
      bot.lock, bot.log   the bot process's liveness lock and its output (store/worker.py)

Nothing here talks to Feishu; the sender reads the paired users to send cards to them, the
commands and the bot change them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from orbit.errors import CorruptError
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.locks import locked
from orbit.store.model import now_iso
from orbit.store.worker import Worker

FEISHU_DIR = "feishu"  # in ORBIT_HOME
BOT_MODULE = "orbit.feishu.bot"  # the bot process: `python -m` this, with the bot's name
FORMAT = 1
STATES = ("connecting", "connected", "reconnecting", "refused", "failed", "stopped")
APP_KIND = "feishu-app"  # notify.yaml's kind of a bot's profile (notify/profiles.py APP)
RETRY_S = 300.0  # a bot that failed or was refused is started again by a tick after this

T = TypeVar("T")


def bots_dir(home: Home) -> Path:
    return home.root / FEISHU_DIR


def bot_dir(home: Home, name: str) -> Path:
    return bots_dir(home) / name


def bot_worker(home: Home, name: str) -> Worker:
    """The bot of profile `name`: `python -m orbit.feishu.bot NAME`, alive while it holds its
    lock, its output in bot.log."""
    where = bot_dir(home, name)
    return Worker(
        "feishu-bot",
        f"the Feishu bot {name}",
        BOT_MODULE,
        where / "bot.lock",
        where / "bot.log",
        args=(name,),
    )


def app_profiles(home: Home) -> list[str]:
    """The names of notify.yaml's feishu-app profiles, read without the notify layer (the
    tick calls this): a file that does not mention the kind is not parsed."""
    from orbit.store.files import read_regular, read_yaml
    from orbit.store.outbox import PROFILES_FILE

    path = home.root / PROFILES_FILE
    try:
        if APP_KIND.encode() not in read_regular(path):
            return []
        profiles = read_yaml(path).get("profiles")
    except (OSError, CorruptError):
        return []
    if not isinstance(profiles, dict):
        return []
    return [n for n, e in profiles.items() if isinstance(e, dict) and e.get("kind") == APP_KIND]


def wake_bots(home: Home) -> list[str]:
    """Start the bot of every feishu-app profile that has none alive (one that failed or was
    refused, only RETRY_S after it said so); the names started. Called by every tick: a stat
    and a read when no profile is a bot's, a lock check per bot when they live."""
    started = []
    for name in app_profiles(home):
        worker = bot_worker(home, name)
        if worker.alive():
            continue
        record = read_connection(home, name) or {}
        recent = time.time() - float(record.get("at") or 0) < RETRY_S
        if record.get("state") in ("failed", "refused") and recent:
            continue
        if start_bot(home, name):
            started.append(name)
    return started


def start_bot(home: Home, name: str) -> bool:
    """Start the bot of profile `name` unless one lives (its directory made first: its lock
    and log are there); True when one was started."""
    try:
        bot_dir(home, name).mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return False
    return bot_worker(home, name).wake(home)


@dataclass
class Users:
    paired: dict[str, dict[str, Any]] = field(default_factory=dict)  # open_id -> who
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)  # code -> who asked

    def as_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "paired": self.paired, "codes": self.codes}


def users_path(home: Home, name: str) -> Path:
    return bot_dir(home, name) / "users.json"


def load_users(home: Home, name: str) -> Users:
    """The bot's users; none when the file is not there yet. A file that does not parse is
    an error naming it (never overwritten: whoever pairs next would lose everyone)."""
    path = users_path(home, name)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return Users()
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{path} cannot be read ({exc}): fix or remove it") from None
    paired, codes = (data.get(k) if isinstance(data, dict) else None for k in ("paired", "codes"))
    if not isinstance(paired, dict) or not isinstance(codes, dict):
        raise CorruptError(f"{path} is not a users file of Orbit's: fix or remove it")
    return Users(
        {k: v for k, v in paired.items() if isinstance(v, dict)},
        {k: v for k, v in codes.items() if isinstance(v, dict)},
    )


def update_users(home: Home, name: str, change: Callable[[Users], T]) -> T:
    """Read the users, let `change` change them, write them back (0600), all under the bot's
    users.lock; what `change` returned."""
    where = bot_dir(home, name)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    with locked(where / "users.lock"):
        users = load_users(home, name)
        result = change(users)
        data = json.dumps(users.as_json(), ensure_ascii=False, indent=1).encode()
        atomic_write(users_path(home, name), data, mode=0o600)
        return result


def connection_path(home: Home, name: str) -> Path:
    return bot_dir(home, name) / "connection.json"


def read_connection(home: Home, name: str) -> dict[str, Any] | None:
    """What the bot last said of its connection; None when it said nothing (or not readably)."""
    try:
        data = json.loads(connection_path(home, name).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("state") in STATES else None


def write_connection(home: Home, name: str, state: str, detail: str = "", **extra: Any) -> None:
    """The bot's connection is now `state` (one of STATES), with a line saying why."""
    assert state in STATES, state
    body = {
        "format": FORMAT,
        "state": state,
        "since": now_iso(),
        "at": time.time(),
        "pid": os.getpid(),
        "detail": detail,
        **extra,
    }
    where = bot_dir(home, name)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(connection_path(home, name), json.dumps(body).encode(), durable=False, mode=0o600)

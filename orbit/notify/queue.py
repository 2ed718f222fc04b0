"""Per-profile delivery queues: the files between "a message is due" and "it was sent".

    notify/queue/<profile>/<stamp>-<slug>.json   one message for this profile (a delivery)
    notify/queue/<profile>/.batch.json           the batch being sent: one message, or several
                                                 merged, with its attempts and next try
    notify/sent/<profile>.keys                   keys sent (or given up), one a line, bounded
    notify/rate/<profile>.json                   when this endpoint was last posted to

Every file is replaced atomically. A batch is written before the deliveries it takes are
removed, and before its POST: a sender killed at any point leaves either the deliveries or the
batch (or both: a new sender removes the deliveries the batch holds), so nothing is lost, and a
batch once formed is sent again as it is, with the same idempotency key.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbit.notify.message import Message
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.home import Home
from orbit.store.outbox import notify_dir, queue_dir

BATCH = ".batch.json"
SENT_KEEP = 5000  # keys remembered per profile (a key is sent once per event, ever)


def slug(key: str) -> str:
    """A file name for a message key: readable, unique (a hash of the whole key)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:60]
    return f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def profile_dir(home: Home, profile: str) -> Path:
    return queue_dir(home) / profile


def profiles_with_work(home: Home) -> list[str]:
    """The profiles with a queued delivery or a batch in flight."""
    try:
        folders = [p for p in queue_dir(home).iterdir() if p.is_dir()]
    except OSError:
        return []
    return sorted(p.name for p in folders if _deliveries(p) or (p / BATCH).exists())


# --- deliveries ---------------------------------------------------------------------------
def enqueue(home: Home, profile: str, message: Message) -> bool:
    """Queue `message` for `profile` unless it is queued or was sent already; True if queued."""
    if message.key in sent_keys(home, profile) or message.key in _in_flight(home, profile):
        return False
    folder = profile_dir(home, profile)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = slug(message.key)
    if any(p.name.endswith(f"-{name}.json") for p in _deliveries(folder)):
        return False
    body = {"format": 1, "queued_at": time.time(), "message": message.to_json()}
    stamp = f"{time.time_ns():020d}"
    atomic_write(folder / f"{stamp}-{name}.json", json.dumps(body).encode())
    return True


def _in_flight(home: Home, profile: str) -> list[str]:
    try:
        return [str(k) for k in json.loads(batch_path(home, profile).read_text())["parts"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _deliveries(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.name != BATCH)
    except OSError:
        return []


def delivery_files(home: Home, profile: str) -> list[Path]:
    return _deliveries(profile_dir(home, profile))


def pending(home: Home, profile: str) -> list[tuple[Path, Message]]:
    """The queued deliveries, oldest first (a damaged file is dropped)."""
    out = []
    for path in _deliveries(profile_dir(home, profile)):
        try:
            out.append((path, Message.from_json(json.loads(path.read_text())["message"])))
        except (OSError, ValueError, KeyError, TypeError):
            unlink_quiet(path)
    return out


def drop_profile(home: Home, profile: str) -> int:
    """Forget every queued message of a removed profile; how many there were."""
    folder = profile_dir(home, profile)
    paths = [*_deliveries(folder), folder / BATCH]
    n = sum(1 for p in paths if p.exists())
    for p in paths:
        unlink_quiet(p)
    try:
        folder.rmdir()
    except OSError:
        pass
    return n


# --- the batch in flight ------------------------------------------------------------------
@dataclass
class Batch:
    message: Message
    parts: list[str]  # the keys of the messages it carries
    attempts: int = 0
    next_at: float = 0.0  # epoch seconds: not before
    first_at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "message": self.message.to_json(),
            "parts": self.parts,
            "attempts": self.attempts,
            "next_at": self.next_at,
            "first_at": self.first_at,
        }


def batch_path(home: Home, profile: str) -> Path:
    return profile_dir(home, profile) / BATCH


def load_batch(home: Home, profile: str) -> Batch | None:
    path = batch_path(home, profile)
    try:
        data = json.loads(path.read_text())
        batch = Batch(
            Message.from_json(data["message"]),
            [str(k) for k in data["parts"]],
            int(data["attempts"]),
            float(data["next_at"]),
            float(data["first_at"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        unlink_quiet(path)  # cut short before its rename cannot happen; hand-broken: dropped
        return None
    # The batch was written before its deliveries were removed: remove what it holds.
    held = set(batch.parts)
    for path_, message in pending(home, profile):
        if message.key in held:
            unlink_quiet(path_)
    return batch


def save_batch(home: Home, profile: str, batch: Batch) -> None:
    atomic_write(batch_path(home, profile), json.dumps(batch.to_json()).encode())


def take(home: Home, profile: str, batch: Batch, paths: list[Path]) -> None:
    """Make `batch` the one in flight, then remove the deliveries it holds (in this order)."""
    save_batch(home, profile, batch)
    for path in paths:
        unlink_quiet(path)


def finish(home: Home, profile: str, batch: Batch) -> None:
    """The batch was answered for good (sent, or given up): remember its keys, then drop it."""
    remember(home, profile, [*batch.parts, batch.message.key])
    unlink_quiet(batch_path(home, profile))


# --- what was sent ------------------------------------------------------------------------
def sent_path(home: Home, profile: str) -> Path:
    return notify_dir(home) / "sent" / f"{profile}.keys"


def sent_keys(home: Home, profile: str) -> set[str]:
    try:
        return set(sent_path(home, profile).read_text().splitlines())
    except OSError:
        return set()


def remember(home: Home, profile: str, keys: list[str]) -> None:
    path = sent_path(home, profile)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        known = path.read_text().splitlines()
    except OSError:
        known = []
    known = [k for k in known if k not in keys] + list(dict.fromkeys(keys))
    atomic_write(path, ("\n".join(known[-SENT_KEEP:]) + "\n").encode())


# --- the endpoint's pace ------------------------------------------------------------------
def rate_path(home: Home, profile: str) -> Path:
    return notify_dir(home) / "rate" / f"{profile}.json"


def last_post(home: Home, profile: str) -> float:
    try:
        return float(json.loads(rate_path(home, profile).read_text())["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def note_post(home: Home, profile: str, at: float) -> None:
    """Recorded before each POST, so a sender that dies mid-request still keeps the pace."""
    path = rate_path(home, profile)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"at": at, "pid": os.getpid()}).encode(), durable=False)

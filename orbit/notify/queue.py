"""Per-profile delivery queues: the files between "a message is due" and "it was sent".

    notify/queue/<profile>/<stamp>-<slug>.json   one message for this profile (a delivery)
    notify/queue/<profile>/.batch-<slug>.json    a batch being sent: one message, or several
                                                 merged, with its attempts and next try (as
                                                 many as are retrying; `.batch.json`, the one
                                                 name of older versions, is read the same way)
    notify/damaged/<profile>/<name>              a queue file that could not be parsed, set
                                                 aside (never deleted) and named in log.jsonl
    notify/sent/<profile>.keys                   keys sent (or given up), one a line, bounded
    notify/rate/<profile>.json                   when this endpoint was last posted to, and
                                                 until when it said "too fast"

Every file is replaced atomically. A batch is written before the deliveries it takes are
removed, and before its POST: a sender killed at any point leaves either the deliveries or the
batch (or both: a new sender removes the deliveries a batch holds), so nothing is lost, and a
batch once formed is sent again as it is, with the same idempotency key.

A file that cannot be read is never dropped: gone (ENOENT) is gone; any other read error (EIO,
EMFILE, EACCES, a directory in its place) leaves it where it is, to be read on a later look;
one that reads but does not parse is moved to notify/damaged/ with a "given up (damaged)" line
in the delivery log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from orbit.notify import journal
from orbit.notify.message import Message
from orbit.store.files import atomic_write, unlink_quiet
from orbit.store.home import Home
from orbit.store.outbox import notify_dir, queue_dir

BATCH = ".batch"  # the start of a batch file's name
SENT_KEEP = 5000  # keys remembered per profile (a key is sent once per event, ever)
DAMAGED = "given up (damaged)"  # the delivery log's outcome for a file set aside
_T = TypeVar("_T")


def slug(key: str) -> str:
    """A file name for a message key: readable, unique (a hash of the whole key)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:60]
    return f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def profile_dir(home: Home, profile: str) -> Path:
    return queue_dir(home) / profile


def damaged_dir(home: Home) -> Path:
    return notify_dir(home) / "damaged"


def _listing(folder: Path) -> list[Path]:
    """The queue files of one profile: deliveries and batches (no temporary files)."""
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except OSError:
        return []


def is_batch(path: Path) -> bool:
    return path.name.startswith(BATCH)


def _deliveries(folder: Path) -> list[Path]:
    return [p for p in _listing(folder) if not p.name.startswith(".")]


def _batch_files(folder: Path) -> list[Path]:
    return [p for p in _listing(folder) if is_batch(p)]


def profiles_with_work(home: Home) -> list[str]:
    """The profiles with a queued delivery or a batch in flight."""
    try:
        folders = [p for p in queue_dir(home).iterdir() if p.is_dir()]
    except OSError:
        return []
    return sorted(p.name for p in folders if _listing(p))


def delivery_files(home: Home, profile: str) -> list[Path]:
    return _deliveries(profile_dir(home, profile))


def batch_files(home: Home, profile: str) -> list[Path]:
    return _batch_files(profile_dir(home, profile))


# --- deliveries ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Queued:
    path: Path
    message: Message
    queued_at: float


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


def _in_flight(home: Home, profile: str) -> set[str]:
    keys: set[str] = set()
    for path in batch_files(home, profile):
        try:
            keys.update(str(k) for k in json.loads(path.read_bytes())["parts"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return keys


def _parse_delivery(path: Path, data: Any) -> Queued:
    return Queued(path, Message.from_json(data["message"]), float(data["queued_at"]))


# --- the batches in flight ----------------------------------------------------------------
@dataclass
class Batch:
    message: Message
    parts: list[str]  # the keys of the messages it carries
    attempts: int = 0
    next_at: float = 0.0  # epoch seconds: not before
    first_at: float = field(default_factory=time.time)
    file: str = ""  # its name in the profile's folder; by default from its key

    def __post_init__(self) -> None:
        self.file = self.file or f"{BATCH}-{slug(self.message.key)}.json"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "message": self.message.to_json(),
            "parts": self.parts,
            "attempts": self.attempts,
            "next_at": self.next_at,
            "first_at": self.first_at,
        }


def _parse_batch(path: Path, data: Any) -> Batch:
    return Batch(
        Message.from_json(data["message"]),
        [str(k) for k in data["parts"]],
        int(data["attempts"]),
        float(data["next_at"]),
        float(data["first_at"]),
        path.name,
    )


def batch_path(home: Home, profile: str, batch: Batch) -> Path:
    return profile_dir(home, profile) / batch.file


@dataclass
class Look:
    """One profile's queue as read now."""

    fresh: list[Queued] = field(default_factory=list)  # deliveries no batch holds, oldest first
    batches: list[Batch] = field(default_factory=list)  # formed, sent at least once or about to
    unreadable: list[tuple[Path, str]] = field(default_factory=list)  # left in place: retried


def look(home: Home, profile: str) -> Look:
    """What waits for `profile`, read for the sender (who alone may call this: it sets damaged
    files aside and removes the deliveries a batch holds, finishing a take cut short)."""
    folder = profile_dir(home, profile)
    seen = Look()
    for path in _batch_files(folder):
        batch = _read(home, profile, path, _parse_batch, seen)
        if batch is not None:
            seen.batches.append(batch)
    held = {k for b in seen.batches for k in b.parts}
    for path in _deliveries(folder):
        queued = _read(home, profile, path, _parse_delivery, seen)
        if queued is not None and queued.message.key in held:
            unlink_quiet(path)
        elif queued is not None:
            seen.fresh.append(queued)
    return seen


def pending(home: Home, profile: str) -> list[tuple[Path, Message]]:
    """The queued deliveries no batch holds, oldest first (as `look` reads them)."""
    return [(q.path, q.message) for q in look(home, profile).fresh]


def _read(
    home: Home, profile: str, path: Path, parse: Callable[[Path, Any], _T], seen: Look
) -> _T | None:
    """The file, parsed; None when it is gone, unreadable for now (noted in `seen`) or
    damaged (then set aside)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        seen.unreadable.append((path, exc.strerror or str(exc)))
        return None
    try:
        data = json.loads(raw.decode("utf-8")) if raw.strip() else None
    except ValueError as exc:  # a UnicodeDecodeError too
        why = f"not JSON ({exc})"
    else:
        try:
            if data is not None:
                return parse(path, data)
            why = "empty"
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            why = f"not a queue file ({exc.__class__.__name__}: {exc})"
    if not set_aside(home, profile, path, why):
        seen.unreadable.append((path, f"damaged ({why}), and it cannot be moved aside"))
    return None


def set_aside(home: Home, profile: str, path: Path, why: str, key: str | None = None) -> bool:
    """Move a damaged queue file to notify/damaged/<profile>/ and say so in the delivery log
    (under `key`, by default the one its name shows); False when it cannot be moved (it then
    stays where it is). The sender sets damaged outbox events aside here too, as "outbox"."""
    folder = damaged_dir(home) / profile
    name = path.name.lstrip(".")
    if (folder / name).exists() or is_batch(path):  # a batch's name comes again: stamp it
        name = f"{time.time_ns():020d}-{name}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.rename(path, folder / name)
    except FileNotFoundError:
        return True  # gone meanwhile: nothing to keep
    except OSError:
        return False
    kept = (folder / name).relative_to(home.root)
    key = _key_hint(path.name) if key is None else key
    journal.note(home, profile, key, path.name, DAMAGED, 0, f"{why}; kept as {kept}")
    return True


def _key_hint(name: str) -> str:
    """The readable part of a message's key, from its queue file's name ("" for `.batch.json`)."""
    found = re.fullmatch(r"(?:\d+|\.batch)-(.*)-[0-9a-f]{10}\.json", name)
    return found.group(1) if found else ""


def drop_profile(home: Home, profile: str) -> int:
    """Forget every queued message of a removed profile; how many files there were."""
    folder = profile_dir(home, profile)
    paths = _listing(folder)
    for p in paths:
        unlink_quiet(p)
    try:
        folder.rmdir()
    except OSError:
        pass
    return len(paths)


def save_batch(home: Home, profile: str, batch: Batch) -> None:
    atomic_write(batch_path(home, profile, batch), json.dumps(batch.to_json()).encode())


def take(home: Home, profile: str, batch: Batch, paths: list[Path]) -> None:
    """Make `batch` one in flight, then remove the deliveries it holds (in this order)."""
    save_batch(home, profile, batch)
    for path in paths:
        unlink_quiet(path)


def finish(home: Home, profile: str, batch: Batch) -> None:
    """The batch was answered for good (sent, or given up): remember its keys, then drop it."""
    remember(home, profile, [*batch.parts, batch.message.key])
    unlink_quiet(batch_path(home, profile, batch))


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


def _rate(home: Home, profile: str) -> dict[str, float]:
    try:
        data = json.loads(rate_path(home, profile).read_bytes())
        return {"at": float(data["at"]), "held_until": float(data.get("held_until", 0.0))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {"at": 0.0, "held_until": 0.0}


def ready_at(home: Home, profile: str, spacing: float) -> float:
    """When the endpoint may be posted to next: `spacing` after the last post, and not while
    it is held back by a rate-limit answer."""
    rate = _rate(home, profile)
    return max(rate["at"] + spacing, rate["held_until"])


def note_post(home: Home, profile: str, at: float) -> None:
    """Recorded before each POST, so a sender that dies mid-request still keeps the pace."""
    _write_rate(home, profile, {**_rate(home, profile), "at": at})


def hold(home: Home, profile: str, until: float) -> None:
    """The endpoint answered "too fast": nothing is posted to it before `until`."""
    _write_rate(home, profile, {**_rate(home, profile), "held_until": until})


def _write_rate(home: Home, profile: str, rate: dict[str, float]) -> None:
    path = rate_path(home, profile)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, json.dumps({**rate, "pid": os.getpid()}).encode(), durable=False)

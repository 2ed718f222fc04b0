"""What waits to be sent, for `orbit doctor`: the outbox and the queues, without sending."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from orbit.notify import queue
from orbit.notify.fanout import events
from orbit.store.home import Home
from orbit.store.locks import is_locked
from orbit.store.outbox import ready, sender_lock


@dataclass
class Backlog:
    ready_events: int  # settled runs whose messages are not queued yet
    queued: int  # messages queued or in flight, all profiles
    oldest_s: float | None  # age of the oldest of them
    sender_alive: bool
    damaged: int  # queue files set aside in notify/damaged/ (never sent)


def backlog(home: Home) -> Backlog:
    now = time.time()
    ages: list[float] = []
    ready_events = 0
    for path in events(home):
        if ready(home, path):
            ready_events += 1
            ages.append(_age(path.stat().st_mtime, now))
    queued = 0
    for name in queue.profiles_with_work(home):
        for path in queue.batch_files(home, name):
            try:  # read only: the sender alone tidies the queue
                batch = json.loads(path.read_bytes())
                queued += len(batch["parts"])
                ages.append(_age(float(batch["first_at"]), now))
            except (OSError, ValueError, KeyError, TypeError):
                queued += 1  # unreadable for now, or damaged: the sender deals with it
        for path in queue.delivery_files(home, name):
            queued += 1
            try:
                ages.append(_age(path.stat().st_mtime, now))
            except OSError:
                pass
    alive = is_locked(sender_lock(home))
    return Backlog(ready_events, queued, max(ages) if ages else None, alive, _damaged(home))


def _damaged(home: Home) -> int:
    try:
        return sum(1 for p in queue.damaged_dir(home).rglob("*") if p.is_file())
    except OSError:
        return 0


def _age(at: float, now: float) -> float:
    return max(0.0, now - at)

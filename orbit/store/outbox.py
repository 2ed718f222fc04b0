"""The notification outbox, as the low layers see it: a settled run is noted, a sender started.

    ORBIT_HOME/notify.yaml            the profiles (orbit/notify/profiles.py); its presence
                                      alone turns the outbox on: one stat per settle
    ORBIT_HOME/notify/outbox/<id>-<state>.json   {"format": 1, "run": ID, "state": STATE,
                                      "written_at": ...}: run ID is (being) settled as STATE
    ORBIT_HOME/notify/sender.lock     held by the sender for its whole life

The store cannot know about chat tools (orbit.notify sits above it): it only records the fact
and starts `python -m orbit.notify.sender` (a worker of store/worker.py), which turns facts into
messages. The event is
written *before* status.yaml (RunStore.update), so a crash between the two loses nothing: the
event is then "pending" (its run is not finished yet), the sender leaves it alone, and the
process that settles the run later writes it again. The sender acts on an event only once the
run's status.yaml says it is finished, and only in the state the event names (docs/notify.md).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from orbit.record import Frozen
from orbit.store.files import atomic_write, read_yaml
from orbit.store.home import Home
from orbit.store.model import STATUS_YAML
from orbit.store.worker import Worker

PROFILES_FILE = "notify.yaml"  # in ORBIT_HOME
NOTIFY_DIR = "notify"  # in ORBIT_HOME
SENDER_MODULE = "orbit.notify.sender"  # the sender process: `python -m` this
FINISHED = ("succeeded", "failed", "cancelled", "lost")
_EVENT_NAME = re.compile(rf"(\d+)-({'|'.join(FINISHED)})\.json")


def notify_dir(home: Home) -> Path:
    return home.root / NOTIFY_DIR


def outbox_dir(home: Home) -> Path:
    return notify_dir(home) / "outbox"


def queue_dir(home: Home) -> Path:
    """Deliveries: one folder per profile, one file per message (orbit/notify/queue.py)."""
    return notify_dir(home) / "queue"


def sender_lock(home: Home) -> Path:
    return notify_dir(home) / "sender.lock"


def enabled(home: Home) -> bool:
    return (home.root / PROFILES_FILE).exists()


def event_name(run_id: str, state: str) -> str:
    return f"{run_id}-{state}.json"


def record_settled(home: Home, run_id: str, state: str, now: str) -> bool:
    """Note that run `run_id` is being settled as `state`; True when notifications are on.

    Called before status.yaml is replaced. Writing the same event twice is harmless (same
    name, same content but the time)."""
    if not enabled(home):
        return False
    folder = outbox_dir(home)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    body = {"format": 1, "run": run_id, "state": state, "written_at": now}
    atomic_write(folder / event_name(run_id, state), json.dumps(body).encode())
    return True


class Event(Frozen):
    """An outbox event: `run` ("" for a damaged file whose name is not an event's), `state`,
    and `damaged`: why the file did not parse ("" when it did; run and state are then from
    its name)."""

    __slots__ = ("damaged", "run", "state")
    run: str
    state: str
    damaged: str

    def __init__(self, run: str, state: str, damaged: str = "") -> None:
        self._init(run=run, state=state, damaged=damaged)


def read_event(path: Path) -> Event | None:
    """The outbox event in `path`; None when it is gone (ENOENT). Any other read error is
    raised: the file stays where it is, to be read again. A file that reads but does not
    parse (cut short, hand-broken) is rebuilt from its name, which says run and state; the
    sender acts on it only when the run agrees."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw.decode("utf-8")) if raw.strip() else None
        if data is not None:
            return Event(str(data["run"]), str(data["state"]))
        why = "empty"
    except ValueError as exc:  # a UnicodeDecodeError too
        why = f"not JSON ({exc})"
    except (KeyError, TypeError) as exc:
        why = f"not an outbox event ({exc.__class__.__name__}: {exc})"
    named = _EVENT_NAME.fullmatch(path.name)
    run, state = named.groups() if named else ("", "")
    return Event(run, state, why)


def run_state(home: Home, run_id: str) -> str | None:
    """The state status.yaml records, or None when the run is gone or unreadable."""
    try:
        return str(read_yaml(home.runs_dir / run_id / STATUS_YAML).get("state"))
    except Exception:  # a removed or damaged run: the sender drops its event
        return None


def ready(home: Home, path: Path) -> bool:
    """An event the sender can act on now: its run is finished (in any state: a state other
    than the event's makes the event stale, which the sender removes) or gone."""
    try:
        event = read_event(path)
    except OSError:
        return True  # unreadable for now: the sender looks again while it is there
    if event is None:
        return False
    if not event.run:
        return True  # damaged beyond rebuilding: the sender sets it aside
    state = run_state(home, event.run)
    return state is None or state in FINISHED


def _entries(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as it:
            # Everything but the temporary files of atomic writes (`.NAME.RANDOM.tmp`).
            return [Path(e.path) for e in it if not e.name.endswith(".tmp")]
    except OSError:
        return []


def work_waiting(home: Home) -> bool:
    """A delivery is queued, or an outbox event is ready."""
    for profile in _entries(queue_dir(home)):
        if _entries(profile):
            return True
    return any(ready(home, p) for p in _entries(outbox_dir(home)))


def sender_worker(home: Home) -> Worker:
    """The sender, as store/worker.py starts it."""
    log_path = notify_dir(home) / "sender.log"
    return Worker("sender", "the notification sender", SENDER_MODULE, sender_lock(home), log_path)


def wake_sender(home: Home) -> bool:
    """Start the sender when notifications are on, work waits and no sender lives; True when
    one was started. Cheap when there is nothing to do: a stat, then a listing or two.

    Called by whoever settles a run (after status.yaml is written) and by every tick, so a
    sender that died is replaced. A failure to start is logged, never raised: a run's settle
    must not fail for a notification.
    """
    if not enabled(home):
        return False
    return sender_worker(home).wake(home, needed=lambda: work_waiting(home))

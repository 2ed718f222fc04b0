"""The sender: one short-lived process per home that delivers notifications. No daemon.

Started by whoever settles a run (store/outbox.py:wake_sender) and by every tick while work
waits, as a worker of store/worker.py, it holds notify/sender.lock for its whole life (the lock
is its liveness, as the ticker's is), turns ready outbox events into deliveries (fanout.py),
and sends each profile's queue in a thread of its own, so a slow or dead endpoint delays only
its own messages. Each endpoint is posted to no faster than its platform allows (RATES, as a
minimum spacing between requests); run messages that queue up meanwhile are merged into one
(batch_of). A message that failed waits for its retry without holding back the others of its
profile; only a rate-limit answer holds back the whole endpoint. It exits once no event is
ready and no delivery is queued: an event still pending (its run not settled yet) does not keep
it alive, its settle starts a sender again.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import IO

from orbit.detach import exit_from
from orbit.notify import journal, queue
from orbit.notify.fanout import fan_out
from orbit.notify.lark import Lark, lark_for
from orbit.notify.message import Message, merge, web_url_of
from orbit.notify.platforms import RATES, Verdict
from orbit.notify.post import post, request_for
from orbit.notify.profiles import Profile, load, scrub
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.outbox import sender_lock, sender_worker, work_waiting
from orbit.store.worker import worker_main

log = logging.getLogger(__name__)

POLL_S = 0.5  # how often the outbox is looked at while the sender lives
MAX_ATTEMPTS = 10  # then the message is given up (about 25 minutes of backoff)
BACKOFF_S = (2, 5, 15, 30, 60, 120, 300, 300, 600)  # before attempt 2, 3, …


def spacing(kind: str) -> float:
    """The least time between two requests to one endpoint of this kind."""
    rate = RATES.get(kind)
    gaps = [0.0]
    if rate and rate.per_second:
        gaps.append(1.0 / rate.per_second)
    if rate and rate.per_minute:
        gaps.append(60.0 / rate.per_minute)
    return max(gaps)


def backoff(attempts: int) -> float:
    return float(BACKOFF_S[min(attempts, len(BACKOFF_S)) - 1])


def batch_of(deliveries: list[queue.Queued], *, merging: bool) -> list[queue.Queued]:
    """What one request carries, from the queue (oldest first). An endpoint without a rate
    limit (the generic webhook) gets one message per request, so a program receiving it sees
    one event per run. A rate-limited one gets every run message waiting merged into one
    digest; a group summary always goes alone and whole (its best run and failures would not
    survive a digest), in its turn."""
    if not merging or deliveries[0].message.event == "group":
        return deliveries[:1]
    return [d for d in deliveries if d.message.event != "group"]


class Worker(threading.Thread):
    """Sends one profile's queue, one batch at a time, until it is empty."""

    def __init__(self, sender: Sender, name: str) -> None:
        super().__init__(name=f"notify-{name}", daemon=True)
        self.sender = sender
        self.profile_name = name
        self.warned: set[Path] = set()  # unreadable files already named in sender.log
        self.lark: Lark | None = None  # a feishu-app profile's client, its token kept

    def run(self) -> None:
        try:
            while not self.sender.stop.is_set():
                if not self._step():
                    return
        except Exception:  # a bug or a refusing disk: the next sender tries again
            log.exception("delivery to %s stopped", self.profile_name)

    def _step(self) -> bool:
        """Send (or wait for) the next batch; False once the queue is empty."""
        home, name = self.sender.home, self.profile_name
        profile = self.sender.profiles.get(name)
        if profile is None:
            dropped = queue.drop_profile(home, name)
            log.info("profile %s was removed: %d queued message(s) dropped", name, dropped)
            return False
        seen = queue.look(home, name)
        self._warn(seen.unreadable)
        if not (seen.fresh or seen.batches or seen.unreadable):
            return False
        now = time.time()
        ready_at = queue.ready_at(home, name, spacing(profile.kind))
        if now < ready_at:  # the endpoint's pace (what comes meanwhile joins the next batch)
            self.sender.stop.wait(ready_at - now)
            return True
        # A bot's cards are each a run's own (its curves, its log): never merged into a digest.
        merging = spacing(profile.kind) > 0 and not profile.app
        batch = self._next(seen, now, merging=merging)
        if batch is None:  # only retries whose time has not come, or files to read again
            waits = [POLL_S, *(b.next_at - now for b in seen.batches)]
            self.sender.stop.wait(max(0.01, min(waits)))
            return True
        self._attempt(profile, batch)
        return True

    def _next(self, seen: queue.Look, now: float, *, merging: bool) -> queue.Batch | None:
        """What to send now: whichever is due first, a retry or the oldest fresh delivery
        (then made a batch, merged as batch_of says). A retry is never merged again: it keeps
        its key, and a later message never waits behind it."""
        due = [b for b in seen.batches if b.next_at <= now]
        retry = min(due, key=lambda b: b.next_at, default=None)
        # A batch file that cannot be read now may hold fresh deliveries: none is taken.
        blocked = any(queue.is_batch(path) for path, _ in seen.unreadable)
        fresh = seen.fresh if not blocked else []
        if retry is not None and (not fresh or retry.next_at <= fresh[0].queued_at):
            return retry
        if not fresh:
            return None
        chosen = batch_of(fresh, merging=merging)
        messages = [q.message for q in chosen]
        message = messages[0] if len(messages) == 1 else merge(messages)
        batch = queue.Batch(message, [m.key for m in messages])
        queue.take(self.sender.home, self.profile_name, batch, [q.path for q in chosen])
        return batch

    def _to_app(self, profile: Profile, message: Message) -> Verdict:
        from orbit.notify.feishu_app import deliver  # Pillow with it: only for an app's cards

        wanted = (profile.url, profile.app_id or "", profile.secret or "")
        if self.lark is None or (self.lark.base, self.lark.app_id, self.lark.secret) != wanted:
            # the first message, or the profile was replaced; tagged with this home's binding
            self.lark = lark_for(profile, str(self.sender.home.root))
        try:
            return deliver(self.sender.home, profile, message, lark=self.lark,
                           web_url=self.sender.web_url)  # fmt: skip
        except Exception as exc:  # a bug or a refusing disk: tried again, as a timeout is
            log.exception("delivery of %s to %s failed", message.key, profile.name)
            return Verdict(False, True, f"not sent: {exc.__class__.__name__}: {exc}")

    def _warn(self, unreadable: list[tuple[Path, str]]) -> None:
        for path, why in unreadable:
            if path not in self.warned:
                self.warned.add(path)
                log.warning("cannot read %s (%s): left in place, read again later", path, why)

    def _attempt(self, profile: Profile, batch: queue.Batch) -> None:
        home, name = self.sender.home, profile.name
        now = time.time()
        queue.note_post(home, name, now)
        if profile.app:  # a Feishu app's bot: a card to each paired user (feishu_app.py)
            verdict = self._to_app(profile, batch.message)
            ok, retry, detail, limited = verdict.ok, verdict.retry, verdict.detail, verdict.limited
        else:
            try:
                req = request_for(profile.kind, profile.url, profile.secret, batch.message, now)
            except Exception as exc:  # a message the platform cannot carry: never retried
                ok, retry, detail, limited = False, False, f"not rendered: {exc}", False
            else:
                verdict = post(profile.kind, req)
                ok, retry, detail = verdict.ok, verdict.retry, verdict.detail
                limited = verdict.limited
        detail = scrub(detail, profile)
        batch.attempts += 1
        m = batch.message
        if ok:
            queue.finish(home, name, batch)
            outcome = "sent"
        elif retry and batch.attempts < MAX_ATTEMPTS:
            batch.next_at = time.time() + backoff(batch.attempts)
            queue.save_batch(home, name, batch)
            if limited:  # the endpoint is too busy for any message until then
                queue.hold(home, name, batch.next_at)
            outcome = "retrying"
        else:
            queue.finish(home, name, batch)
            outcome = "given up"
        journal.note(home, name, m.key, m.title, outcome, batch.attempts, detail)
        log.info("%s %s to %s (attempt %d): %s", outcome, m.key, name, batch.attempts, detail)


class Sender:
    """The loop, with the lock `handle` already held."""

    def __init__(self, home: Home, handle: IO[str], stop: threading.Event) -> None:
        self.home = home
        self.handle: IO[str] | None = handle
        self.stop = stop
        self.profiles: dict[str, Profile] = {}
        self.workers: dict[str, Worker] = {}
        self.warned: set[Path] = set()  # outbox events that cannot be read, named in the log
        self.web_url: str | None = None

    def run(self) -> str:
        """Deliver until there is nothing to do; why it stopped.

        The exit cannot strand a message: a settle writes its event, then status.yaml, then
        calls wake_sender, which starts a sender unless the lock is held. This sender releases
        its lock first and only then looks once more: an event made ready before the release
        is seen by that look; one made ready after it finds the lock free and starts a sender.
        """
        while True:
            why = self._loop()
            self.close()
            if self.stop.is_set() or not work_waiting(self.home):
                return why
            handle = try_lock(sender_lock(self.home))
            if handle is None:
                return "another sender took over"
            self.handle = handle
            log.info("work came as the sender stopped: sending on")

    def _loop(self) -> str:
        while not self.stop.is_set():
            try:
                self.profiles = load(self.home)
                web_url = self.web_url = web_url_of(self.home)
                fan_out(self.home, self.profiles, web_url, self.warned)
            except Exception as exc:  # a broken notify.yaml: said in the log, tried again
                log.warning("cannot read the notifications to send: %s", exc)
                if not self.profiles:
                    return f"stopped: {exc}"
            for name in queue.profiles_with_work(self.home):
                worker = self.workers.get(name)
                if worker is None or not worker.is_alive():
                    self.workers[name] = Worker(self, name)
                    self.workers[name].start()
            busy = any(w.is_alive() for w in self.workers.values())
            if not busy and not work_waiting(self.home):
                return "nothing left to send"
            self.stop.wait(POLL_S)
        return "stopped by a signal"

    def close(self) -> None:
        for worker in self.workers.values():
            worker.join(timeout=30)
        self.workers = {}
        journal.bound(self.home)
        if self.handle is not None:
            release(self.handle)
            self.handle = None


def _deliver(home: Home, handle: IO[str], stop: threading.Event) -> str:
    sender = Sender(home, handle, stop)
    log.info("sending for %s", home.root)
    try:
        return f"stopped: {sender.run()}"
    finally:
        sender.close()


def main(argv: list[str]) -> int:
    """`python -m orbit.notify.sender`: deliver ORBIT_HOME's notifications, then exit."""
    return worker_main(sender_worker, _deliver)


if __name__ == "__main__":
    exit_from(main)

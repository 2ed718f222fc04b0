"""The tick: reconcile, measure, admit — under the scheduler lock, idempotent, cheap.

It touches only the queue/ and active/ markers and the runs they name, never all runs. A tick
that cannot take the lock quickly leaves a `tick.requested` flag; the holder loops until the
flag stays clear, so a submit that raced a running tick is never left waiting for the next one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from orbit.errors import from_os_error
from orbit.execute.exitrecord import finalize_from_exit, read_exit
from orbit.sched import pool
from orbit.sched.plan import Admit, Request, Wait, plan
from orbit.sched.resources import Amount
from orbit.store.files import atomic_write, touch_exclusive, unlink_quiet
from orbit.store.home import Home, current_boot_id
from orbit.store.locks import is_locked, release, try_lock
from orbit.store.model import LEASED, Run, RunState, now_iso, parse_iso
from orbit.store.runs import Broken, RunStore

log = logging.getLogger(__name__)

Spawner = Callable[[Home, str], None]


@dataclass
class TickReport:
    ran: bool = True
    admitted: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    repaired: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "ran": self.ran,
            "admitted": self.admitted,
            "waiting": self.waiting,
            "repaired": self.repaired,
            "problems": self.problems,
        }


def request_of(run: Run) -> Request:
    res = run.spec.get("resources") or {}
    ids = res.get("gpu_ids")
    return Request(
        run_id=run.id,
        need=Amount(float(res.get("cpus") or 0), float(res.get("mem_gb") or 0)),
        gpus=int(res.get("gpus") or 0),
        gpu_mem_gb=float(res["gpu_mem_gb"]) if res.get("gpu_mem_gb") else None,
        gpu_ids=tuple(int(i) for i in ids) if ids else None,
        group=run.spec.get("group"),
        group_cap=run.spec.get("group_cap"),
        submitted_at=parse_iso(run.status.get("submitted_at")),
        label=run.label,
    )


def request_tick(home: Home) -> None:
    atomic_write(home.runtime_dir / "tick.requested", b"", durable=False)


def tick(
    home: Home,
    *,
    spawn: Spawner,
    actor: str = "tick",
    now: datetime | None = None,
    lock_timeout: float = 0.2,
) -> TickReport:
    home.ensure()
    flag = home.runtime_dir / "tick.requested"
    request_tick(home)
    report = TickReport()
    while True:
        handle = try_lock(home.locks_dir / "scheduler.lock", lock_timeout)
        if handle is None:
            report.ran = False  # the holder sees our flag and ticks again for us
            return report
        try:
            # A full disk (or a file this user may not write) ends this pass, never the tick:
            # it is reported, and the next tick after the repair goes on from the files.
            try:
                while flag.exists():
                    unlink_quiet(flag)
                    _tick_once(home, spawn, actor, now, report)
                atomic_write(home.runtime_dir / "last_tick", now_iso(now).encode(), durable=False)
            except OSError as exc:
                problem = from_os_error(exc, where=str(home.root))
                if problem is None:
                    raise
                report.problems.append(str(problem))
        finally:
            release(handle)
        if not flag.exists():
            return report
        lock_timeout = 0.0  # someone asked while we were releasing: only retry if free


def _tick_once(
    home: Home, spawn: Spawner, actor: str, now: datetime | None, report: TickReport
) -> None:
    store = RunStore(home)
    _check_boot(home, store, spawn, actor, report)
    queued: list[Run] = []
    leased: list[Run] = []
    for item in store.load_many(store.active_ids()):
        if isinstance(item, Broken):
            if not store.settle_unfinished_submit(item.id):
                report.problems.append(item.problem)
            continue
        run = item
        state = run.state
        q_marker = home.queue_dir / run.id
        a_marker = home.active_dir / run.id
        if state is RunState.QUEUED:
            queued.append(run)
            touch_exclusive(q_marker)
            continue
        unlink_quiet(q_marker)
        if state in LEASED:
            touch_exclusive(a_marker)
            leased.append(run)
            if not is_locked(run.path("shepherd.lock")):
                if read_exit(run.dir) is not None:
                    # Its exit is known: release the lease now; the new shepherd only cleans up.
                    finalize_from_exit(store, run.id, actor=actor)
                    leased.pop()
                log.info("run %s has no live shepherd; starting one", run.id)
                spawn(home, run.id)
                report.repaired.append(run.id)
        elif not is_locked(run.path("shepherd.lock")):
            # Finished, but the marker says its container may still exist: a shepherd removes
            # it and then the marker. A finished run holds no lease either way.
            spawn(home, run.id)
            report.repaired.append(run.id)
    if not queued:
        if home.config.get("count_outside_use", True):
            # Keep the CPU baseline fresh, so the next submit is judged on a recent measurement.
            pool.measure_outside(home, leased)
        return
    requests = [request_of(r) for r in queued]
    by_id = {r.id: r for r in queued}
    snap = pool.build(home, leased, with_gpus=any(r.gpus > 0 for r in requests))
    report.problems.extend(snap.problems)
    when = now or datetime.now(UTC)
    decisions = plan(requests, snap.pool, when, float(home.config["reserve_after_s"]))
    for decision in decisions:
        if isinstance(decision, Admit):
            _admit(home, store, decision, actor, spawn, report, now)
        elif isinstance(decision, Wait):
            if by_id[decision.run_id].status.get("reason") != decision.reason:
                _set_reason(store, decision, actor)  # only when it changed: ticks stay cheap
            report.waiting[decision.run_id] = decision.reason


def _admit(
    home: Home,
    store: RunStore,
    d: Admit,
    actor: str,
    spawn: Spawner,
    report: TickReport,
    now: datetime | None,
) -> None:
    # Order matters for crash safety: status first (a crash leaves a starting run whose queue
    # marker the next tick moves to active/), then the markers, then the shepherd.
    try:
        store.transition(
            d.run_id,
            RunState.STARTING,
            actor=actor,
            event="admitted",
            expect=[RunState.QUEUED],
            reason="starting the container",
            lease={
                "cpus": d.lease.cpus,
                "mem_gb": d.lease.mem_gb,
                "gpus": [{"index": g.index, "uuid": g.uuid} for g in d.gpus],
            },
            admitted_at=now_iso(now),
        )
    except Exception as exc:  # cancelled meanwhile, or unreadable: skip it this time
        report.problems.append(f"run {d.run_id}: not admitted ({exc})")
        return
    touch_exclusive(home.active_dir / d.run_id)
    unlink_quiet(home.queue_dir / d.run_id)
    spawn(home, d.run_id)
    report.admitted.append(d.run_id)


def _set_reason(store: RunStore, d: Wait, actor: str) -> None:
    def change(run: Run) -> dict[str, object] | None:
        if run.state is not RunState.QUEUED or run.status.get("reason") == d.reason:
            return None
        return {"reason": d.reason}

    store.update(d.run_id, change, actor=actor)


def _check_boot(
    home: Home, store: RunStore, spawn: Spawner, actor: str, report: TickReport
) -> None:
    """After a reboot, every leased run lost its container and shepherd: settle them at once.

    Each gets a shepherd too, which finds the run finished and only saves what is left of the
    container's log before removing it.
    """
    path = home.runtime_dir / "boot_id"
    boot = current_boot_id()
    try:
        previous = path.read_text().strip()
    except FileNotFoundError:
        previous = boot
    if previous != boot:
        for item in store.load_many(store.leased_ids()):
            if isinstance(item, Broken) or item.state not in LEASED:
                continue
            if read_exit(item.dir) is not None:
                finalize_from_exit(store, item.id, actor=actor)
            else:
                store.transition(
                    item.id,
                    RunState.LOST,
                    actor=actor,
                    event="lost",
                    reason="the machine restarted while the run was active",
                    finished_at=now_iso(),
                )
            spawn(home, item.id)  # removes what is left of the container, then the marker
            report.repaired.append(item.id)
    if previous != boot or not path.exists():
        atomic_write(path, boot.encode())

"""The tick: reconcile, measure, admit — under the scheduler lock, idempotent, cheap.

It touches only the queue/ and active/ markers and the runs they name, never all runs. A tick
that cannot take the lock quickly leaves a `tick.requested` flag; the holder loops until the
flag stays clear, so a submit that raced a running tick is never left waiting for the next one.
A tick that leaves runs queued while nothing ticks this home on a clock starts the short-lived
ticker (sched/clock.py), so the queue moves with nobody typing.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from orbit.errors import OrbitError, from_os_error
from orbit.sched import clock, pool, remote, slurm
from orbit.sched.nodeplace import Place
from orbit.sched.plan import Admit, Wait, plan
from orbit.sched.remote import demand_of
from orbit.sched.resources import machine_totals
from orbit.store import batches, feishu, index, nodes, outbox, runcache, secrets
from orbit.store.creation import next_id, recover
from orbit.store.excerpt import log_excerpt
from orbit.store.exitrecord import finalize_from_exit, read_exit, rebuild_status
from orbit.store.files import atomic_write, touch_exclusive, unlink_quiet
from orbit.store.home import Home, current_boot_id
from orbit.store.locks import (
    SCHEDULER_LOCK,
    note_holder,
    release,
    stuck_scheduler,
    try_lock,
)
from orbit.store.model import LEASED, LOG, Run, RunState, now_iso
from orbit.store.runs import Broken, RunStore, id_key, shepherd_alive

log = logging.getLogger(__name__)

Spawner = Callable[[Home, str], None]

ACTIVE_STATES = frozenset(s.value for s in (RunState.QUEUED, RunState.UNKNOWN, *LEASED))
# Ticks look through every run for one that lost its marker at most this often.
SCAN_EVERY_S = 30.0


def _markers_checked(home: Home) -> Path:
    """The record of the last full scan: {"active": [the ids it found active], "next_id": the
    first id it did not see}."""
    return home.runtime_dir / "markers_checked"


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


def request_tick(home: Home) -> None:
    atomic_write(home.runtime_dir / "tick.requested", b"", durable=False)


def tick(
    home: Home,
    *,
    spawn: Spawner,
    actor: str = "tick",
    now: datetime | None = None,
    lock_timeout: float = 0.2,
    full: bool = False,
    submitted: Sequence[Run] = (),
) -> TickReport:
    """One tick; with `full`, also look through every run for one that lost its marker.

    `submitted`: runs this process has just written (`orbit sweep`). Each is taken as it is
    in memory while its status.yaml is still the one written (the same stamp: every write
    replaces the file), not read again; and such a run that must wait keeps the reason it was
    born with ("waiting for the scheduler") until a later tick gives it the planner's, so that
    a sweep of 1,000 runs does not rewrite 1,000 status files before it returns. That later
    tick is the ticker's, started below when runs are left waiting and no clock ticks.
    """
    home.ensure()
    flag = home.runtime_dir / "tick.requested"
    request_tick(home)
    report = TickReport()
    lock = home.locks_dir / SCHEDULER_LOCK
    while True:
        handle = try_lock(lock, lock_timeout)
        if handle is None:
            report.ran = False  # the holder sees our flag and ticks again for us
            stuck = stuck_scheduler(home.locks_dir)
            if stuck:
                report.problems.append(stuck)
            return report
        try:
            # A full disk (or a file this user may not write) ends this pass, never the tick:
            # it is reported, and the next tick after the repair goes on from the files.
            try:
                note_holder(lock, _command(actor))
                while flag.exists():
                    unlink_quiet(flag)
                    _tick_once(home, spawn, actor, now, report, full, submitted)
                atomic_write(home.runtime_dir / "last_tick", now_iso(now).encode(), durable=False)
            except OSError as exc:
                problem = from_os_error(exc, where=str(home.root))
                if problem is None:
                    raise
                report.problems.append(str(problem))
                return report  # (after the release below) no retry until the next tick
        finally:
            release(handle)
        if not flag.exists():
            # Runs left waiting, and no clock to tick for them: the ticker moves them.
            clock.keep_moving(home)
            # Messages left by a sender that died (or due for a retry) get a new one.
            outbox.wake_sender(home)
            # A Feishu bot that died (a reboot, a crash) is started again.
            feishu.wake_bots(home)
            return report
        lock_timeout = 0.0  # someone asked while we were releasing: only retry if free


def _command(actor: str) -> str:
    """What this process is, for a person reading a stuck lock's holder."""
    if actor.startswith("shepherd:"):
        return f"orbit-shepherd of run {actor.split(':', 1)[1]}"
    if actor.startswith("scheduler:"):
        return "orbit scheduler run"
    words = []
    for arg in sys.argv[1:3]:
        if arg.startswith("-"):
            break
        words.append(arg)
    return " ".join(["orbit", *words])


@dataclass
class _Pass:
    """What one pass has read: the queued runs and the runs that hold a lease."""

    queued: list[Run] = field(default_factory=list)
    leased: list[Run] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    marked: set[str] = field(default_factory=set)  # listed in queue/ by this pass


def _tick_once(
    home: Home,
    spawn: Spawner,
    actor: str,
    now: datetime | None,
    report: TickReport,
    full: bool = False,
    submitted: Sequence[Run] = (),
) -> None:
    store = RunStore(home)
    _check_boot(home, store, spawn, actor, report)
    _recover_submits(home, store, report)
    cache = runcache.RunCache(store)
    try:
        _reconcile_and_admit(home, store, cache, spawn, actor, now, report, full, submitted)
    finally:
        cache.save()


def _recover_submits(home: Home, store: RunStore, report: TickReport) -> None:
    """Finish or undo the batches of killed submits (store/creation.py `recover`), and drop
    the secrets no run will use (`drop_stale_secrets`). Cheap: two folder listings."""
    listed = secrets.listed(home)  # before the batches are read (see drop_stale_secrets)
    recovered = recover(home)
    for what, ids in (("revealed", recovered.revealed), ("cleared", recovered.cleared)):
        if ids:
            log.warning("%s %d runs (%s–%s) of a killed submit", what, len(ids), ids[0], ids[-1])
    report.repaired.extend(recovered.revealed)
    if listed:
        writing = {i for b in batches.pending(home) for i in b.ids}
        store.drop_stale_secrets(listed, writing)


def _reconcile_and_admit(
    home: Home,
    store: RunStore,
    cache: runcache.RunCache,
    spawn: Spawner,
    actor: str,
    now: datetime | None,
    report: TickReport,
    full: bool,
    submitted: Sequence[Run],
) -> None:
    state = _Pass()
    state.marked.update(store.queued_ids())
    ids = sorted({*state.marked, *store.leased_ids()}, key=id_key)
    state.seen.update(ids)
    scanned = full or _scan_due(home)
    if scanned:
        ids = sorted({*ids, *_unmarked(home, store, state.seen, report)}, key=id_key)
    unchanged = _unchanged(submitted)
    for item in _load(cache, ids, unchanged):
        _reconcile(home, store, item, spawn, actor, report, state)
    if slurm.enabled(home):  # Slurm places the runs: nothing of this machine is measured
        slurm.advance(home, store, state.queued, actor, report)
        return
    if not state.queued:
        if home.settings.count_outside_use:
            # Keep the CPU baseline fresh, so the next submit is judged on a recent measurement.
            pool.measure_outside(home, state.leased)
        return
    decisions, problems = _plan(home, state, now)
    if not scanned and any(isinstance(d, Admit) for d in decisions):
        # Before leasing anything, make sure no active run lost its marker: its lease would not
        # be counted, and the machine would be leased twice.
        extra: Sequence[Run | Broken] | None = _unmarked_since_scan(home, cache, state.seen)
        if extra is None:  # no record of the last scan: look through every run
            extra = cache.load_many(_unmarked(home, store, state.seen, report))
        if extra:
            for item in extra:
                _reconcile(home, store, item, spawn, actor, report, state)
            decisions, problems = _plan(home, state, now)
    report.problems.extend(problems)
    by_id = {r.id: r for r in state.queued}
    for decision in decisions:
        if isinstance(decision, Admit):
            _admit(home, store, decision, actor, spawn, report, now)
        elif isinstance(decision, Place):
            _place(home, store, decision, actor, spawn, report, now)
        elif isinstance(decision, Wait):
            changed = by_id[decision.run_id].reason != decision.reason
            if changed and decision.run_id not in unchanged:
                _set_reason(store, decision, actor)  # only when it changed: ticks stay cheap
            report.waiting[decision.run_id] = decision.reason


def _unchanged(submitted: Sequence[Run]) -> dict[str, Run]:
    """The runs of `submitted` whose status.yaml is still the one written, by id."""
    return {
        run.id: run
        for run in submitted
        if run.stamp is not None and index.status_stamp(run.dir) == run.stamp
    }


def _load(cache: runcache.RunCache, ids: list[str], known: dict[str, Run]) -> list[Run | Broken]:
    """`store.load_many(ids)`, taking the runs in `known` as they are (run.yaml never
    changes once written; their status.yaml has not), and the others whose files have not
    changed since a tick parsed them from cache/tick-runs.jsonl (store/runcache.py)."""
    loaded = iter(cache.load_many([i for i in ids if i not in known]))
    return [known[i] if i in known else next(loaded) for i in ids]


def _plan(
    home: Home, state: _Pass, now: datetime | None
) -> tuple[list[Admit | Wait | Place], list[str]]:
    """The decisions for the queued runs, and the problems met measuring. With nodes
    (nodes.yaml), a run that waits here, or names another node, is offered to them
    (sched/remote.py)."""
    with_nodes = nodes.registry_path(home).exists()
    here = nodes.local_name(home)
    local = [r for r in state.queued if remote.pinned(r) in (None, here)]
    lacking = {r.id: remote.not_here(r) for r in local}
    elsewhere = [
        Wait(r.id, f"waiting for a node with dataset {', '.join(sorted(lacking[r.id]))}")
        for r in local
        if lacking[r.id]
    ]
    local = [r for r in local if not lacking[r.id]]
    demands = [demand_of(r) for r in local]
    reading = pool.build(home, state.leased, with_gpus=any(d.gpus > 0 for d in demands))
    when = now or datetime.now(UTC)
    reserve = home.settings.reserve_after_s
    decisions: list[Admit | Wait | Place] = [
        *plan(demands, reading.pool, when, reserve),
        *elsewhere,
    ]
    if not with_nodes:
        decisions += [
            Wait(r.id, f"waiting for node {remote.pinned(r)}: not a node of this home")
            for r in state.queued
            if remote.pinned(r) not in (None, here)
        ]
        return decisions, reading.problems
    local_decisions = [d for d in decisions if isinstance(d, Admit | Wait)]
    offered, problems = remote.offer(
        home, state.queued, local_decisions, state.leased, reading.pool.group_running, when, reserve
    )
    return offered, [*reading.problems, *problems]


def _reconcile(
    home: Home,
    store: RunStore,
    item: Run | Broken,
    spawn: Spawner,
    actor: str,
    report: TickReport,
    state: _Pass,
) -> None:
    """Bring one run's markers and shepherd in line with its status; note its queue or lease."""
    if isinstance(item, Broken):
        if store.settle_unfinished_submit(item.id):
            return
        repaired = None
        # A started run whose shepherd is gone (it could not settle it): its container and
        # lease must not stay in limbo. A damaged queued run is only reported.
        active = (home.active_dir / item.id).exists()
        if active and not shepherd_alive(store.run_dir(item.id)):
            repaired = rebuild_status(store, item.id, actor=actor)
        if repaired is None:
            assumed, problem = unreadable_lease(home, store, item)
            report.problems.append(problem)
            if assumed is not None:
                state.leased.append(assumed)
            return
        log.warning("run %s: status.yaml rebuilt from its history", item.id)
        item = repaired  # its shepherd is gone: it gets a new one below (listed in `repaired`)
    run = item
    q_marker = home.queue_dir / run.id
    a_marker = home.active_dir / run.id
    if run.state is RunState.QUEUED:
        state.queued.append(run)
        if run.id not in state.marked:  # listed: it has one (a submit of 1,000 runs, 1,000 opens)
            touch_exclusive(q_marker)
        return
    unlink_quiet(q_marker)
    if run.state in LEASED or run.state is RunState.UNKNOWN:
        touch_exclusive(a_marker)
        state.leased.append(run)
        if not shepherd_alive(run.dir):
            if read_exit(run.dir) is not None:
                # Its exit is known: release the lease now; the new shepherd only cleans up.
                finalize_from_exit(store, run.id, actor=actor)
                state.leased.pop()
            log.info("run %s has no live shepherd; starting one", run.id)
            spawn(home, run.id)
            report.repaired.append(run.id)
    elif not shepherd_alive(run.dir):
        # Finished, but the marker says its container may still exist: a shepherd removes
        # it and then the marker. A finished run holds no lease either way.
        spawn(home, run.id)
        report.repaired.append(run.id)


def unreadable_lease(home: Home, store: RunStore, item: Broken) -> tuple[Run | None, str]:
    """What an unreadable run is taken to lease, and the problem to report.

    One with an active/ marker may have a container using its lease: it is counted at what it
    asked for (run.yaml, else its listing row), or as the whole machine when neither can be
    read. None without a marker (queued or finished: it holds nothing).
    """
    if not (home.active_dir / item.id).exists():
        return None, item.problem
    counted = "its request is counted as leased"
    if item.spec is not None:  # its run.yaml, read when it was found broken
        resources = item.spec.get("resources") or {}
    else:
        resources = index.read(home.index_path)[0].get(item.id) or {}
    try:
        lease = {"cpus": float(resources["cpus"]), "mem_gb": float(resources["mem_gb"])}
    except (KeyError, TypeError, ValueError):
        totals = machine_totals(home)
        lease = {"cpus": totals.cpus, "mem_gb": totals.mem_gb}
        counted = "the whole machine is counted as leased"
    status = {"state": RunState.RUNNING.value, "lease": {**lease, "gpus": []}}
    problem = f"{item.problem}; {counted} until it is repaired or removed"
    return Run(item.id, store.run_dir(item.id), {}, status), problem


def _unmarked(home: Home, store: RunStore, seen: set[str], report: TickReport) -> list[str]:
    """Ids of queued, starting and running runs that have no marker (lost, or deleted by hand).

    Reads every run's listing row (the index, checked against each status.yaml): done by
    `orbit scheduler tick` and at most every SCAN_EVERY_S otherwise, so that ordinary ticks
    stay O(queued + active); a tick about to admit checks the runs this scan records
    (`_unmarked_since_scan`).
    """
    first_new = next_id(home)  # read first: a run claimed during the listing counts as new
    try:
        rows = store.list_rows()
    except (OrbitError, OSError) as exc:
        report.problems.append(f"cannot list the runs to check their markers: {exc}")
        return []
    active = [
        str(row["id"])
        for row in rows
        if isinstance(row, dict) and row.get("state") in ACTIVE_STATES
    ]
    record = {"active": active, "next_id": first_new}
    atomic_write(_markers_checked(home), json.dumps(record).encode(), durable=False)
    missing = [run_id for run_id in active if run_id not in seen]
    lost = [run_id for run_id in missing if not _has_marker(home, run_id)]
    if lost:
        log.warning("runs %s had lost their queue/ or active/ marker", ", ".join(lost))
    seen.update(missing)
    return missing


def _unmarked_since_scan(home: Home, cache: runcache.RunCache, seen: set[str]) -> list[Run] | None:
    """The active runs without a marker among those the last full scan found active and those
    created since (ids from its `next_id` on): every run that can be active, at the cost of
    reading only those (mostly runs finished since the scan: from the cache, as they do not
    change). None when there is no usable record of the last scan."""
    try:
        record = json.loads(_markers_checked(home).read_text())
        candidates = {str(i) for i in record["active"]}
        first_new = int(record["next_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    last = next_id(home)
    if first_new <= 0 or last <= 0:
        return None
    candidates.update(str(i) for i in range(first_new, last))
    found = [
        item
        for item in cache.load_many(sorted(candidates - seen, key=id_key))
        if isinstance(item, Run) and item.state.active
    ]
    lost = [r.id for r in found if not _has_marker(home, r.id)]
    if lost:
        log.warning("runs %s had lost their marker", ", ".join(lost))
    seen.update(candidates)
    return found


def _has_marker(home: Home, run_id: str) -> bool:
    """A marker on disk now: a run submitted (or moved to active/) after this tick read the
    markers has one, and is no lost marker."""
    return (home.queue_dir / run_id).exists() or (home.active_dir / run_id).exists()


def _scan_due(home: Home) -> bool:
    try:
        age = time.time() - os.stat(_markers_checked(home)).st_mtime
    except OSError:
        return True
    return not 0 <= age < SCAN_EVERY_S


def _admit(
    home: Home,
    store: RunStore,
    d: Admit,
    actor: str,
    spawn: Spawner,
    report: TickReport,
    now: datetime | None,
) -> None:
    _start(
        home,
        store,
        d.run_id,
        actor=actor,
        spawn=spawn,
        report=report,
        event="admitted",
        reason="starting the container",
        lease={
            "cpus": d.lease.cpus,
            "mem_gb": d.lease.mem_gb,
            "gpus": [{"index": g.index, "uuid": g.uuid} for g in d.gpus],
        },
        admitted_at=now_iso(now),
    )


def _place(
    home: Home,
    store: RunStore,
    d: Place,
    actor: str,
    spawn: Spawner,
    report: TickReport,
    now: datetime | None,
) -> None:
    """Hand the run to a node: its shepherd here (a mirror, orbit/nodes/mirror.py) sends it
    there and keeps its record; it holds no lease here."""
    _start(
        home,
        store,
        d.run_id,
        actor=actor,
        spawn=spawn,
        report=report,
        event="placed",
        reason=f"sending it to node {d.node}",
        lease={"cpus": 0, "mem_gb": 0, "gpus": []},  # it holds nothing on this machine
        node=d.node,
        placed_at=now_iso(now),
    )


def _start(
    home: Home,
    store: RunStore,
    run_id: str,
    *,
    actor: str,
    spawn: Spawner,
    report: TickReport,
    event: str,
    **fields: object,
) -> None:
    """queued → starting with `fields`, then the markers, then its shepherd. The order matters
    for crash safety: status first (a crash leaves a starting run whose queue marker the next
    tick moves to active/), then the markers, then the shepherd."""
    try:
        store.transition(
            run_id, RunState.STARTING, actor=actor, event=event, expect=[RunState.QUEUED], **fields
        )
    except Exception as exc:  # cancelled meanwhile, or unreadable: skip it this time
        report.problems.append(f"run {run_id}: not {event} ({exc})")
        return
    touch_exclusive(home.active_dir / run_id)
    unlink_quiet(home.queue_dir / run_id)
    spawn(home, run_id)
    report.admitted.append(run_id)


def _set_reason(store: RunStore, d: Wait, actor: str) -> None:
    def change(run: Run) -> dict[str, object] | None:
        if run.state is not RunState.QUEUED or run.reason == d.reason:
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
    if slurm.enabled(home):
        # The runs' containers live on the compute nodes, and ticks run on the login host
        # and the nodes alike: one machine's boot says nothing about them.
        return
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
            if remote.placed_on(item) is not None:
                spawn(home, item.id)  # it runs on a node, not here: its mirror carries on
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
                    error_excerpt=log_excerpt(item.path(LOG)),
                )
            spawn(home, item.id)  # removes what is left of the container, then the marker
            report.repaired.append(item.id)
    if previous != boot or not path.exists():
        atomic_write(path, boot.encode())

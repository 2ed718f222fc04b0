"""The shepherd: one detached monitor per container (podman's conmon is the model).

It holds `shepherd.lock` in the run directory for as long as it lives — the kernel releases it
when the process dies, which is how the tick knows to start another. It creates the container
(idempotently, by name), streams its output into log.txt, samples peaks, enforces the timeout
and cancel requests, writes exit.json, settles the run, removes the container, and ticks.
"""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from datetime import UTC, datetime

from orbit.detach import release_memory
from orbit.errors import DISK_FULL, DockerError, OrbitError, from_os_error
from orbit.execute import docker_ops
from orbit.execute.engine import Container, Engine, EngineError, NotFound
from orbit.execute.logfollow import LogCopier
from orbit.execute.logvalve import Valve, limit_for
from orbit.execute.troubles import Troubles, poll
from orbit.execute.watching import (
    DISK_RETRY_SECONDS,
    METRICS_BUDGET_BYTES,
    METRICS_COST_FACTOR,
    METRICS_SECONDS,
    POLL_MIN,
    SAMPLE_SECONDS,
    Watching,
    exec_failed,
    normalize_time,
    poll_delay,
    start_error,
)
from orbit.review.series import Follower
from orbit.sched.cgroup import OomEvents, Sampler, locate
from orbit.store import secrets
from orbit.store.excerpt import log_excerpt
from orbit.store.exitrecord import EXIT_HINTS, finalize_from_exit, read_exit, write_exit
from orbit.store.files import atomic_write, read_jsonl, unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.model import (
    DISK_RESERVE,
    EVENTS,
    EXIT_JSON,
    LOG,
    METRICS,
    SHEPHERD_LOCK,
    STATUS_YAML,
    Run,
    RunState,
    now_iso,
    parse_iso,
)
from orbit.store.runs import RunStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any

    from orbit.execute import workspace
    from orbit.execute.spawn import Prespawned, Successor
    from orbit.sched.gpus import GpuPeaks
    from orbit.sched.tick import Spawner

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 10
CANCEL_FILE = "cancel.request"


def run_shepherd(
    home: Home,
    run_id: str,
    *,
    spawner: Spawner,
    admit: Callable[[], bool] | None = None,
    lock: IO[str] | None = None,
    carry_on: bool = False,
    cpu_base: float = 0.0,
) -> Successor | None:
    """Follow the run to its end. `admit`, called once the lock is held, makes the run this
    shepherd's (a Slurm job admits its own run: execute/slurm_job.py); False ends here.
    `lock`: the run's shepherd.lock, already taken by this process (spawn's or a Successor's).
    `cpu_base`: cpu_seconds() when the run became this process's (exit.json's
    `shepherd_cpu_s` is this run's alone in a process that followed others before).

    With `carry_on`, the first run this shepherd's tick admits is not given a new process: it
    is returned, its lock held (spawn.Successor), for the caller to follow next; None when the
    tick admitted nothing for it."""
    if lock is None:
        lock = try_lock(home.runs_dir / run_id / SHEPHERD_LOCK, timeout=5.0)
    if lock is None:
        log.info("another shepherd holds run %s", run_id)
        return None
    try:
        if admit is not None and not admit():
            return None
        # For people and tests only; liveness is the lock, never this pid.
        try:
            atomic_write(home.runs_dir / run_id / "shepherd.pid", f"{os.getpid()}\n".encode())
        except OSError as exc:
            log.warning("run %s: cannot write shepherd.pid: %s", run_id, exc)
        shepherd = Shepherd(home, run_id, spawner, carry_on=carry_on)
        shepherd.cpu_base = cpu_base
        settled = shepherd.run()
    finally:
        release(lock)
    if settled and not shepherd.ticked:
        # The run's lease is free: let the queue move. A shepherd that could not make progress
        # (Docker down) does not tick, or the tick would start it again at once, in a loop.
        shepherd.tick(shepherd.successor())
    return shepherd.next_run


def cpu_seconds() -> float:
    """This process's CPU time so far (user + system, all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Shepherd:
    def __init__(self, home: Home, run_id: str, spawner: Spawner, carry_on: bool = False) -> None:
        self.home = home
        self.store = RunStore(home)
        self.run_id = run_id
        self.actor = f"shepherd:{run_id}"
        self.spawner = spawner
        self.ticked = False
        self.metrics = Follower(home.runs_dir / run_id / METRICS)
        self.metrics_failed = False
        self.ahead: Prespawned | None = None  # the next run's shepherd, started at this one's end
        self.troubles: Troubles | None = None  # while it watches a running container
        self.carry_on = carry_on
        self.next_run: Successor | None = None  # the run this process follows next
        self.cpu_base = 0.0  # cpu_seconds() when this run became this process's

    def successor(self) -> Successor | None:
        """With `carry_on`, the Spawner that keeps the first run its tick admits for this
        process (spawn.Successor); None otherwise, or once a tick has run with it."""
        if not self.carry_on or self.next_run is not None:
            return None
        if self.home.settings.executor == "slurm":
            return None  # queued runs start as Slurm jobs, never through a shepherd of ours
        from orbit.execute.spawn import Successor

        self.next_run = Successor(self.home)
        return self.next_run

    def tick(self, spawner: Spawner | None = None) -> None:
        from orbit.sched.tick import tick

        try:
            tick(self.home, spawn=spawner or self.spawner, actor=self.actor)
        except OSError as exc:  # a full disk: the next tick does it
            log.warning("tick failed: %s", exc)
            return
        self.ticked = True

    def _until_written(self, what: str, write: Any, *args: Any, **kwargs: Any) -> Any:
        """Call `write` until it stops failing for a full disk, every DISK_RETRY_SECONDS:
        the container and Docker's copy of its log wait meanwhile."""
        warned = False
        while True:
            try:
                return write(*args, **kwargs)
            except OSError as exc:
                if exc.errno not in DISK_FULL:
                    raise
                if not warned:
                    log.warning("run %s: %s: %s; retrying", self.run_id, what, exc)
                    warned = True
            time.sleep(DISK_RETRY_SECONDS)

    def run(self) -> bool:
        """Watch the run to its end; True when it is finished (now or before)."""
        run = self.store.load(self.run_id)
        if run.state.finished:
            self._settle_leftovers(run)
            self._summarize(None)
            return True
        if read_exit(run.dir) is not None:
            self._finish(run, None)
            return True
        client = Engine()
        try:  # the first call is the ping
            container = docker_ops.find_container(client, self.home, run.id)
        except DockerError as exc:
            # Docker is down: leave the run as it is; a later tick starts another shepherd.
            log.warning("run %s: %s", run.id, exc)
            return False
        if container is not None and container.status == "created":
            # Never started, perhaps without its code: a predecessor died while preparing it.
            container.remove(force=True)
            container = None
        created = container is None
        if container is None:
            container = self._first_container(client, run)
        if container is not None:
            self._watch(client, run, container, created)
        return True

    def _first_container(self, client: Engine, run: Run) -> Container | None:
        """The run's container when none exists: created, unless the run has ended meanwhile
        (lost, cancelled, or it could not be created; None, and that is recorded)."""
        if run.state is RunState.RUNNING:
            self._lose(run)
            return None
        if run.path(CANCEL_FILE).exists():
            self._record(run, {"cancelled": True, "exit_code": None}, None)
            return None
        try:
            return self._create(client, run)
        except OrbitError as exc:
            self._record(run, {"error": str(exc), "exit_code": None}, None)
            return None

    # --- creating -------------------------------------------------------------------------
    def _create(self, client: Engine, run: Run) -> Container:
        config = docker_ops.container_config(self.home, run, self._secrets(run).env)
        name = docker_ops.container_name(self.home, run.id)
        code = self._snapshot_source(run)
        try:
            container = client.create(config, name=name)
        except NotFound:
            raise DockerError(f"image not found: {run.spec['image']}") from None
        except EngineError as exc:
            if exc.status == 409:  # a create retried after a crash: the name is taken
                found = docker_ops.find_container(client, self.home, run.id)
                if found is None:
                    raise DockerError(f"container name conflict: {name}") from None
                return found
            raise DockerError(f"cannot create the container: {exc.explanation}") from None
        if code is not None:
            try:
                self._copy_code(container, code)
            except OrbitError:
                self._remove(container)
                raise
        return container

    @staticmethod
    def _copy_code(container: Container, code: workspace.Source) -> None:
        """Put the snapshot into /workspace, owned by the submitter's uid:gid as the snapshot
        tar was (the shepherd runs as the user who submitted: its own ids)."""
        stream = code.stream(os.getuid(), os.getgid())
        try:
            container.put_archive("/", stream)
        except OSError as exc:
            where = str(code.tar or code.snapshots_dir)
            problem = from_os_error(exc, where)
            raise problem or DockerError(f"cannot read {where}: {exc.strerror}") from None
        except EngineError as exc:
            raise DockerError(f"cannot copy the code in: {exc.explanation}") from None
        finally:
            stream.close()

    def _snapshot_source(self, run: Run) -> workspace.Source | None:
        """The code snapshot to copy into the container; a missing one fails the run (a run
        that cannot start must end, or every tick would give it a new shepherd)."""
        snapshot = run.project.get("snapshot")
        if run.project.get("mode") != "copy" or not snapshot:
            return None
        from orbit.execute import workspace  # tarfile and the snapshot store: only to copy in

        return workspace.find(self.home, snapshot)

    def _secrets(self, run: Run) -> secrets.Secrets:
        return secrets.read(self.home, run.id)

    # --- watching -------------------------------------------------------------------------
    def _watch(self, client: Engine, run: Run, container: Container, created: bool) -> None:
        started = self._start(client, run, container, created)
        if started is None:
            return
        run, valve = started
        w = self._open_watch(client, run, container, valve)
        release_memory()  # what starting it took: this process may now live for days
        self._follow(run, container, w)
        if not self.carry_on:  # (a shepherd that carries on follows the next run itself)
            self.ahead = self._ahead()  # it imports while this one records the end
        if valve is not None:
            valve.close()  # the container has ended: its streams are closed
        if w.waited.get("gone"):
            w.copier.close()
            self._lose(run)
            if self.ahead is not None:
                self.ahead.close()
                self.ahead = None
            return
        record = self._exit_record(run, container, w)
        record.update(self._commit(run, container))
        self._record(run, record, container)

    @staticmethod
    def _commit(run: Run, container: Container) -> dict[str, Any]:
        """Keep the ended container's file system as the image run.yaml `commit` names (a bench
        trial grades the state its solve left); an exit record field either way."""
        tag = run.spec.get("commit")
        if not isinstance(tag, str) or not tag:
            return {}
        repository, _, version = tag.rpartition(":")
        try:
            container.commit(repository=repository or tag, tag=version if repository else None)
        except Exception as exc:
            log.info("commit failed: %s", exc)
            return {"commit_error": str(getattr(exc, "explanation", None) or exc)[:300]}
        return {"committed_image": tag}

    def _start(
        self, client: Engine, run: Run, container: Container, created: bool
    ) -> tuple[Run, Valve | None] | None:
        """Start the container unless it runs already, and record that it runs: the run as
        it now is and the valve; None when it could not start (that is recorded). `created`:
        this shepherd has just created it (its attrs are that inspection's)."""
        if not created:
            container.reload()
        if container.status == "created":
            # Attached before the start, the valve sees all the output the copier will copy.
            valve = self._attach(client, container, synced=True)
            try:
                container.start()
            except EngineError as exc:
                if valve is not None:
                    valve.close()
                self._record(run, {"error": start_error(exc), "exit_code": None}, container)
                return None
            container.reload()
        else:
            valve = self._attach(client, container, synced=False)
        if run.state is RunState.STARTING:
            started_at = (container.attrs.get("State") or {}).get("StartedAt") or ""
            run = self._until_written(
                STATUS_YAML,
                self.store.transition,
                run.id,
                RunState.RUNNING,
                actor=self.actor,
                event="started",
                reason=None,
                started_at=normalize_time(started_at),
                container=container.name,
                container_id=container.id,
            )
        else:
            self._until_written(
                EVENTS, self.store.append_event, run.id, "shepherd-resumed", actor=self.actor
            )
        return run, valve

    def _open_watch(
        self, client: Engine, run: Run, container: Container, valve: Valve | None
    ) -> Watching:
        """The samplers and the log copier of a running container, and a thread waiting for
        its end."""
        pid = (container.attrs.get("State") or {}).get("Pid") or None
        if valve is not None:
            valve.watch(pid)
        sampler = Sampler(locate(container.id, pid))
        oom_events = OomEvents(sampler.dirs.get("memory"))
        gpus = self._gpu_peaks(run, container.id)
        copier = self._copier(client, run, container, valve)
        self.troubles = Troubles(self.store, run, self.actor)
        waited: dict[str, Any] = {}
        waiter = threading.Thread(target=self._wait, args=(client, container.id, waited))
        waiter.daemon = True
        waiter.start()
        started = parse_iso(run.status.get("started_at")) or datetime.now(UTC)
        timeout_min = run.timeout_min
        deadline = started.timestamp() + timeout_min * 60 if timeout_min else None
        return Watching(sampler, oom_events, gpus, copier, waiter, waited, deadline)

    def _gpu_peaks(self, run: Run, container_id: str) -> GpuPeaks | None:
        """The sampler of the run's leased GPUs; None without GPUs (NVML is then never
        loaded) or when the GPU settings cannot be read (logged)."""
        if not run.lease.gpus:
            return None
        from orbit.sched.gpus import GpuPeaks, open_gpus

        try:
            return GpuPeaks(open_gpus(self.home), run.lease.gpus, container_id)
        except OrbitError as exc:
            log.warning("run %s: GPU peaks not measured: %s", run.id, exc)
            return None

    def _follow(self, run: Run, container: Container, w: Watching) -> None:
        """Until the container ends: sample its peaks, enforce the timeout and a cancel
        request, and copy its log, each on its own clock."""
        next_sample = next_poll = time.monotonic()
        next_metrics = next_sample + METRICS_SECONDS
        idle = POLL_MIN
        while w.waiter.is_alive():
            now = time.monotonic()
            if now >= next_metrics:
                self._summarize(METRICS_BUDGET_BYTES)
                took = time.monotonic() - now
                next_metrics = now + took + max(METRICS_SECONDS, METRICS_COST_FACTOR * took)
            if now >= next_sample:
                next_sample = now + SAMPLE_SECONDS
                w.sample()
                if not (w.timed_out or w.cancelled):
                    self._enforce(run, container, w)
            if now >= next_poll:
                delay, idle = poll_delay(self._poll(w.copier), idle)
                next_poll = time.monotonic() + delay
            w.waiter.join(max(0.0, min(next_sample, next_poll) - time.monotonic()))

    def _enforce(self, run: Run, container: Container, w: Watching) -> None:
        """Stop the container once its deadline passed or a cancel was requested."""
        if w.deadline is not None and time.time() >= w.deadline:
            w.timed_out = True
            self._stop(container)
        elif run.path(CANCEL_FILE).exists():
            w.cancelled = True
            w.stop_sent = time.time()
            self._stop(container)

    def _exit_record(self, run: Run, container: Container, w: Watching) -> dict[str, Any]:
        """exit.json's record of a container that ended (see docs/run-directory.md)."""
        w.sampler.sample()
        kernel_oom = w.oom_events.settle()
        docker_oom = False
        finished_at = now_iso()
        try:
            container.reload()
            state = container.attrs.get("State") or {}
            docker_oom = bool(state.get("OOMKilled"))
            finished_at = state.get("FinishedAt") or finished_at
        except DockerError:
            pass
        # The log is complete in Docker once the wait returns.
        self._drain(w.copier, wait=True)
        mem_gb = run.resources.mem_gb
        peaks = w.peaks()
        if kernel_oom or w.sampler.oom_kills:  # killed at its limit, whatever a sample last saw
            peaks["mem_bytes"] = max(int(peaks["mem_bytes"]), int(mem_gb * 2**30))
        record: dict[str, Any] = {
            "exit_code": w.waited.get("code"),
            "oom_killed": w.sampler.oom_kills > 0 or bool(kernel_oom) or docker_oom,
            "oom_kill_count": w.sampler.oom_kills,
            "kernel_oom_events": kernel_oom,
            "docker_oom_killed": docker_oom,
            "timed_out": w.timed_out,
            "timeout_min": run.timeout_min,
            "cancelled": w.cancelled,
            "mem_limit_gb": mem_gb or None,
            "finished_at": normalize_time(finished_at),
            "peaks": peaks,
        }
        ended = parse_iso(record["finished_at"])
        if w.stop_sent is not None and ended is not None and ended.timestamp() < w.stop_sent:
            # It exited by itself before the stop was sent: its own result, not a cancel.
            record["cancelled"] = False
            record["cancel_late"] = True
        incomplete = w.copier.incomplete()
        if incomplete:
            record["log_incomplete"] = incomplete
        if self.troubles is not None:
            record.update(self.troubles.exit_fields(record))
        if record["exit_code"] in EXIT_HINTS and exec_failed(run.path(LOG)):
            record["exec_failed"] = True
        record["shepherd_cpu_s"] = round(cpu_seconds() - self.cpu_base, 3)
        return record

    def _copier(
        self, client: Engine, run: Run, container: Container, valve: Valve | None
    ) -> LogCopier:
        secrets = self._secrets(run).values
        size = docker_ops.log_file_bytes(container.attrs)
        return LogCopier(client, container.id, run.dir, secrets, valve, size)

    def _attach(self, client: Engine, container: Container, synced: bool) -> Valve | None:
        """The valve on the container's attach stream (see logvalve.Valve); None when Docker
        refuses (the container has ended): the copy then runs unpaced."""
        limit = limit_for(docker_ops.log_file_bytes(container.attrs))
        try:
            return Valve.attach(client, container.id, synced, limit)
        except (OSError, DockerError) as exc:
            log.info(
                "run %s: no attach stream (%s): the log is copied without a valve", self.run_id, exc
            )
            return None

    def _poll(self, copier: LogCopier, final: bool = False) -> int:
        """One poll of Docker's log: frames read, or -1 when the disk is full (troubles.poll)."""
        return poll(copier, final, self.troubles)

    def _wait(self, client: Engine, container_id: str, out: dict[str, Any]) -> None:
        while True:
            try:
                result = client.call("POST", f"/containers/{container_id}/wait", timeout=None)
                out["code"] = int((result or {}).get("StatusCode", -1))
                return
            except NotFound:
                out["gone"] = True
                return
            except DockerError as exc:
                log.info("wait interrupted (%s); retrying", exc)
                time.sleep(1.0)

    def _stop(self, container: Container) -> None:
        def stop() -> None:
            try:
                container.stop(timeout=STOP_GRACE_SECONDS)
            except Exception as exc:
                log.info("stop failed: %s", exc)

        threading.Thread(target=stop, daemon=True).start()

    # --- finishing ------------------------------------------------------------------------
    def _record(self, run: Run, record: dict[str, Any], container: Container | None) -> None:
        record.setdefault("finished_at", now_iso())
        self._until_written(EXIT_JSON, write_exit, run.dir, record)
        self._finish(run, container)

    def _lose(self, run: Run) -> None:
        """A running run whose container vanished with no exit record: LOST, and its secrets
        and active/ marker go (there is no container left to remove)."""
        self._until_written(
            STATUS_YAML,
            self.store.transition,
            run.id,
            RunState.LOST,
            actor=self.actor,
            reason="its container vanished with no exit record",
            finished_at=now_iso(),
            error_excerpt=log_excerpt(run.path(LOG)),
        )
        unlink_quiet(self.home.active_dir / run.id)
        secrets.drop(self.home, run.id)

    def _drain(self, copier: LogCopier, *, wait: bool) -> bool:
        """The last read of Docker's log (held partial lines included), then close the copier.
        On a full disk: with `wait`, read again every DISK_RETRY_SECONDS until there is room;
        without, False (the rest stays in Docker for a later shepherd)."""
        while (got := self._poll(copier, final=True)) < 0 and wait:
            time.sleep(DISK_RETRY_SECONDS)
        copier.close()
        return got >= 0

    def _summarize(self, budget: int | None) -> None:
        """Bring metrics.summary.json up to date (reading at most `budget` new bytes). A
        sidecar that cannot be written is logged once and never stops the run: readers then
        parse metrics.jsonl themselves."""
        try:
            self.metrics.update(budget)
        except Exception as exc:  # the sidecar is a cache: nothing the run depends on
            if not self.metrics_failed:
                log.warning("run %s: metrics.summary.json not written: %s", self.run_id, exc)
                self.metrics_failed = True

    def _remove(self, container: Container) -> bool:
        try:
            container.remove(force=True)
        except Exception as exc:
            log.info("could not remove container: %s", exc)
            return False
        return True

    def _finish(self, run: Run, container: Container | None) -> None:
        secrets.drop(self.home, run.id)
        unlink_quiet(run.path(DISK_RESERVE))  # room to settle; gone before the run is seen done
        successor = self.successor()
        ahead, self.ahead = None if successor else self.ahead or self._ahead(), None
        try:
            settled = self._finalize(run)
            self.tick(successor or ahead)  # the lease is free: refill it before the clean-up
        finally:
            if ahead is not None:
                ahead.close()
        removed = container is not None and self._remove(container)
        if settled:
            self._settle_leftovers(run, removed)  # then the marker goes
        else:  # the result is in exit.json; the marker keeps the run in the tick's view
            log.warning("run %s: not settled (its files are damaged); a tick repairs it", run.id)
        self._summarize(None)  # last: the whole file may have to be read (a fast writer)

    def _ahead(self) -> Prespawned | None:
        """When runs are queued, the next run's shepherd, started now so that it imports
        while this one settles and ticks (the tick hands it the run it admits first)."""
        if self.home.settings.executor == "slurm":
            return None  # queued runs start as Slurm jobs, never through a shepherd of ours
        try:
            with os.scandir(self.home.queue_dir) as entries:
                if not any(entries):
                    return None
            from orbit.execute.spawn import Prespawned

            return Prespawned(self.home)
        except OSError:
            return None

    def _finalize(self, run: Run) -> bool:
        """finalize_from_exit, again every few seconds while the disk is full. If the status
        was written but the full disk refused its event line, the line is appended then.
        False when the run's files are damaged (exit.json keeps the result; a tick repairs)."""
        while True:
            try:
                return finalize_from_exit(self.store, run.id, actor=self.actor)
            except OSError as exc:
                if exc.errno not in DISK_FULL:
                    raise
                log.warning("run %s: settling: %s; retrying", run.id, exc)
            time.sleep(DISK_RETRY_SECONDS)
            try:
                current = self.store.load(run.id)
            except OrbitError:
                continue
            if not current.state.finished:
                continue
            state = current.state.value
            if not any(e.get("event") == state for e in read_jsonl(run.path(EVENTS))):
                fields = {k: current.status.get(k) for k in ("state", "reason", "exit_code")}
                self._until_written(
                    EVENTS,
                    self.store.append_event,
                    run.id,
                    state,
                    actor=self.actor,
                    **fields,
                )
            return True

    def _settle_leftovers(self, run: Run, removed: bool = False) -> None:
        """The last step for a finished run: if its container still exists (e.g. after a
        reboot), save the rest of its log and remove it; then drop the secrets and the active/
        marker. When Docker cannot be reached the marker stays, so a later tick tries again.
        `removed`: this shepherd has just removed the container (Docker is not asked again)."""
        unlink_quiet(run.path(DISK_RESERVE))
        container = None
        if not removed:
            try:
                client = docker_ops.connect()
            except DockerError:
                return
            container = docker_ops.find_container(client, self.home, run.id)
        if container is not None:
            copier = self._copier(client, run, container, None)
            if not self._drain(copier, wait=False):
                return  # the disk is full: a later tick's shepherd copies the rest
            if not self._remove(container):
                return
        secrets.drop(self.home, run.id)
        unlink_quiet(self.home.active_dir / run.id)

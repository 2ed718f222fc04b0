"""The shepherd: one detached monitor per container (podman's conmon is the model).

It holds `shepherd.lock` in the run directory for as long as it lives — the kernel releases it
when the process dies, which is how the tick knows to start another. It creates the container
(idempotently, by name), streams its output into log.txt, samples peaks, enforces the timeout
and cancel requests, writes exit.json, settles the run, removes the container, and ticks.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orbit.errors import DISK_FULL, DockerError, OrbitError
from orbit.execute import docker_ops
from orbit.execute.logfollow import LogCopier
from orbit.execute.logvalve import Valve
from orbit.sched.cgroup import OomEvents, Sampler, locate
from orbit.store.exitrecord import EXIT_HINTS, finalize_from_exit, read_exit, write_exit
from orbit.store.files import atomic_write, read_jsonl, unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.model import Run, RunState, now_iso, parse_iso
from orbit.store.runs import RunStore

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

    from orbit.sched.tick import Spawner

log = logging.getLogger(__name__)

SAMPLE_SECONDS = 0.5
# Docker's log is polled every POLL_MIN s after output, backing off to SAMPLE_SECONDS when idle;
# a poll that brought BUSY_FRAMES frames or more is followed by another after POLL_BUSY s, so
# that Docker cannot rotate away (60 MB) what was not read yet.
POLL_MIN = 0.1
POLL_BUSY = 0.05
BUSY_FRAMES = 2000
DISK_RETRY_SECONDS = 3.0
STOP_GRACE_SECONDS = 10
CANCEL_FILE = "cancel.request"


def run_shepherd(home: Home, run_id: str, *, spawner: Spawner) -> None:
    lock = try_lock(home.runs_dir / run_id / "shepherd.lock", timeout=5.0)
    if lock is None:
        log.info("another shepherd holds run %s", run_id)
        return
    try:
        # For people and tests only; liveness is the lock, never this pid.
        try:
            atomic_write(home.runs_dir / run_id / "shepherd.pid", f"{os.getpid()}\n".encode())
        except OSError as exc:
            log.warning("run %s: cannot write shepherd.pid: %s", run_id, exc)
        shepherd = Shepherd(home, run_id, spawner)
        settled = shepherd.run()
    finally:
        release(lock)
    if settled and not shepherd.ticked:
        # The run's lease is free: let the queue move. A shepherd that could not make progress
        # (Docker down) does not tick, or the tick would start it again at once, in a loop.
        shepherd.tick()


class Shepherd:
    def __init__(self, home: Home, run_id: str, spawner: Spawner) -> None:
        self.home = home
        self.store = RunStore(home)
        self.run_id = run_id
        self.actor = f"shepherd:{run_id}"
        self.spawner = spawner
        self.ticked = False

    def tick(self) -> None:
        from orbit.sched.tick import tick

        try:
            tick(self.home, spawn=self.spawner, actor=self.actor)
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
            return True
        if read_exit(run.dir) is not None:
            self._finish(run, None)
            return True
        try:
            client = docker_ops.connect()
        except DockerError as exc:
            # Docker is down: leave the run as it is; a later tick starts another shepherd.
            log.warning("run %s: %s", run.id, exc)
            return False
        container = docker_ops.find_container(client, self.home, run.id)
        if container is not None and container.status == "created":
            # Never started, perhaps without its code: a predecessor died while preparing it.
            container.remove(force=True)
            container = None
        if container is None:
            if run.state is RunState.RUNNING:
                self.store.transition(
                    run.id,
                    RunState.LOST,
                    actor=self.actor,
                    reason="its container vanished with no exit record",
                    finished_at=now_iso(),
                )
                unlink_quiet(self.home.active_dir / run.id)
                unlink_quiet(self.home.secrets_path(run.id))
                return True
            if run.path(CANCEL_FILE).exists():
                self._record(run, {"cancelled": True, "exit_code": None}, None)
                return True
            try:
                container = self._create(client, run)
            except OrbitError as exc:
                self._record(run, {"error": str(exc), "exit_code": None}, None)
                return True
        self._watch(client, run, container)
        return True

    # --- creating -------------------------------------------------------------------------
    def _create(self, client: docker.DockerClient, run: Run) -> Container:
        import docker.errors

        config = docker_ops.container_config(self.home, run, self._secrets(run))
        try:
            container = client.containers.create(**config)
        except docker.errors.ImageNotFound:
            raise DockerError(f"image not found: {run.spec['image']}") from None
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # a create retried after a crash: the name is taken
                found = docker_ops.find_container(client, self.home, run.id)
                if found is None:
                    raise DockerError(f"container name conflict: {config['name']}") from None
                return found
            raise DockerError(f"cannot create the container: {exc.explanation or exc}") from None
        snapshot = (run.spec.get("project") or {}).get("snapshot")
        if (run.spec.get("project") or {}).get("mode") == "copy" and snapshot:
            tar = self.home.snapshot_path(snapshot)
            with open(tar, "rb") as fh:
                container.put_archive("/", fh)
        return container

    def _secrets(self, run: Run) -> dict[str, str]:
        try:
            data = json.loads(self.home.secrets_path(run.id).read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    # --- watching -------------------------------------------------------------------------
    def _watch(self, client: docker.DockerClient, run: Run, container: Container) -> None:
        import docker.errors

        container.reload()
        if container.status == "created":
            # Attached before the start, the valve sees all the output the copier will copy.
            valve = self._attach(client, container.id, synced=True)
            try:
                container.start()
            except docker.errors.APIError as exc:
                if valve is not None:
                    valve.close()
                reason = _start_error(exc)
                self._record(run, {"error": reason, "exit_code": None}, container)
                return
            container.reload()
        else:
            valve = self._attach(client, container.id, synced=False)
        if run.state is RunState.STARTING:
            started_at = (container.attrs.get("State") or {}).get("StartedAt") or ""
            run = self._until_written(
                "status.yaml",
                self.store.transition,
                run.id,
                RunState.RUNNING,
                actor=self.actor,
                event="started",
                reason=None,
                started_at=_normalize_time(started_at),
                container=container.name,
                container_id=container.id,
            )
        else:
            self._until_written(
                "events.jsonl",
                self.store.append_event,
                run.id,
                "shepherd-resumed",
                actor=self.actor,
            )
        pid = (container.attrs.get("State") or {}).get("Pid") or None
        if valve is not None:
            valve.watch(pid)
        sampler = Sampler(locate(container.id, pid))
        oom_events = OomEvents(sampler.dirs.get("memory"))
        secrets = list(self._secrets(run).values())
        copier = LogCopier(client.api, container.id, run.dir, secrets, valve)
        waited: dict[str, Any] = {}
        waiter = threading.Thread(target=self._wait, args=(client, container.id, waited))
        waiter.daemon = True
        waiter.start()

        started = parse_iso(run.status.get("started_at")) or datetime.now(UTC)
        timeout_min = run.spec.get("timeout_min")
        deadline = started.timestamp() + float(timeout_min) * 60 if timeout_min else None
        flags = {"timed_out": False, "cancelled": False}
        next_sample = next_poll = time.monotonic()
        idle = POLL_MIN
        while waiter.is_alive():
            now = time.monotonic()
            if now >= next_sample:
                next_sample = now + SAMPLE_SECONDS
                sampler.sample()
                oom_events.poll()
                if not any(flags.values()):
                    if deadline is not None and time.time() >= deadline:
                        flags["timed_out"] = True
                        self._stop(container)
                    elif run.path(CANCEL_FILE).exists():
                        flags["cancelled"] = True
                        self._stop(container)
            if now >= next_poll:
                delay, idle = _poll_delay(self._poll(copier), idle)
                next_poll = time.monotonic() + delay
            waiter.join(max(0.0, min(next_sample, next_poll) - time.monotonic()))
        if valve is not None:
            valve.close()  # the container has ended: its streams are closed
        if waited.get("gone"):
            copier.close()
            self._until_written(
                "status.yaml",
                self.store.transition,
                run.id,
                RunState.LOST,
                actor=self.actor,
                reason="its container vanished with no exit record",
                finished_at=now_iso(),
            )
            unlink_quiet(self.home.active_dir / run.id)
            unlink_quiet(self.home.secrets_path(run.id))
            return
        sampler.sample()
        kernel_oom = oom_events.settle()
        docker_oom = False
        finished_at = now_iso()
        try:
            container.reload()
            state = container.attrs.get("State") or {}
            docker_oom = bool(state.get("OOMKilled"))
            finished_at = state.get("FinishedAt") or finished_at
        except docker.errors.APIError:
            pass
        # The log is complete in Docker once the wait returns: one last read, held partial
        # lines included; on a full disk, again every few seconds until there is room.
        while self._poll(copier, final=True) < 0:
            time.sleep(DISK_RETRY_SECONDS)
        copier.close()
        res = run.spec.get("resources") or {}
        peaks = sampler.peaks()
        if kernel_oom or sampler.oom_kills:  # killed at its limit, whatever a sample last saw
            limit_bytes = int(float(res.get("mem_gb") or 0) * 2**30)
            peaks["mem_bytes"] = max(int(peaks["mem_bytes"]), limit_bytes)
        record: dict[str, Any] = {
            "exit_code": waited.get("code"),
            "oom_killed": sampler.oom_kills > 0 or bool(kernel_oom) or docker_oom,
            "oom_kill_count": sampler.oom_kills,
            "kernel_oom_events": kernel_oom,
            "docker_oom_killed": docker_oom,
            "timed_out": flags["timed_out"],
            "timeout_min": timeout_min,
            "cancelled": flags["cancelled"],
            "mem_limit_gb": res.get("mem_gb"),
            "finished_at": _normalize_time(finished_at),
            "peaks": peaks,
        }
        incomplete = copier.incomplete()
        if incomplete:
            record["log_incomplete"] = incomplete
        if record["exit_code"] in EXIT_HINTS and _exec_failed(run.dir / "log.txt"):
            record["exec_failed"] = True
        usage = resource.getrusage(resource.RUSAGE_SELF)
        record["shepherd_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
        self._record(run, record, container)

    def _attach(self, client: docker.DockerClient, container_id: str, synced: bool) -> Valve | None:
        """The valve on the container's attach stream (see logvalve.Valve); None when Docker
        refuses (the container has ended) or is reached over TCP: the copy then runs unpaced."""
        try:
            return Valve.attach(client.api, container_id, synced)
        except (OSError, DockerError) as exc:
            log.info(
                "run %s: no attach stream (%s): the log is copied without a valve", self.run_id, exc
            )
            return None

    def _poll(self, copier: LogCopier, final: bool = False) -> int:
        """One poll of Docker's log: frames read, or -1 when the disk is full."""
        try:
            return copier.poll(final=final)
        except Exception as exc:  # Docker's: the container may be gone; what was written stays
            if isinstance(exc, OSError) and exc.errno in DISK_FULL:
                return -1
            log.info("log copy failed: %s", exc)
        return 0

    def _wait(self, client: docker.DockerClient, container_id: str, out: dict[str, Any]) -> None:
        import docker.errors
        import requests

        while True:
            try:
                result = client.api.wait(container_id, timeout=None)
                out["code"] = int(result.get("StatusCode", -1))
                return
            except docker.errors.NotFound:
                out["gone"] = True
                return
            except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
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
        self._until_written("exit.json", write_exit, run.dir, record)
        self._finish(run, container)

    def _finish(self, run: Run, container: Container | None) -> None:
        unlink_quiet(self.home.secrets_path(run.id))
        settled = self._finalize(run)
        self.tick()  # the lease is free now: refill it before the slower clean-up
        if container is not None:
            try:
                container.remove(force=True)
            except Exception as exc:
                log.info("could not remove container: %s", exc)
        if settled:
            self._settle_leftovers(run)  # then the marker goes
        else:  # the result is in exit.json; the marker keeps the run in the tick's view
            log.warning("run %s: not settled (its files are damaged); a tick repairs it", run.id)

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
            if not any(e.get("event") == state for e in read_jsonl(run.path("events.jsonl"))):
                fields = {k: current.status.get(k) for k in ("state", "reason", "exit_code")}
                self._until_written(
                    "events.jsonl",
                    self.store.append_event,
                    run.id,
                    state,
                    actor=self.actor,
                    **fields,
                )
            return True

    def _settle_leftovers(self, run: Run) -> None:
        """The last step for a finished run: if its container still exists (e.g. after a
        reboot), save the rest of its log and remove it; then drop the secrets and the active/
        marker. When Docker cannot be reached the marker stays, so a later tick tries again."""
        try:
            client = docker_ops.connect()
        except DockerError:
            return
        container = docker_ops.find_container(client, self.home, run.id)
        if container is not None:
            copier = LogCopier(client.api, container.id, run.dir, list(self._secrets(run).values()))
            got = self._poll(copier, final=True)
            copier.close()
            if got < 0:
                return  # the disk is full: a later tick's shepherd copies the rest
            try:
                container.remove(force=True)
            except Exception as exc:
                log.info("could not remove container: %s", exc)
                return
        unlink_quiet(self.home.secrets_path(run.id))
        unlink_quiet(self.home.active_dir / run.id)


def _poll_delay(got: int, idle: float) -> tuple[float, float]:
    """(seconds to the next poll, the idle back-off) after a poll that read `got` frames
    (-1: the disk is full)."""
    if got < 0:
        return DISK_RETRY_SECONDS, idle
    if got >= BUSY_FRAMES:
        return POLL_BUSY, POLL_MIN
    if got > 0:
        return POLL_MIN, POLL_MIN
    idle = min(idle * 2, SAMPLE_SECONDS)
    return idle, idle


# What a shell or the container's init prints when it cannot run a command at all.
_EXEC_FAILURES = (
    b"not found",
    b"No such file",
    b"Permission denied",
    b"cannot execute",
    b"[FATAL tini",
)


def _exec_failed(log_path: Path) -> bool:
    """Whether the end of the log says a command could not be run (exit 126/127 then mean
    that; a program may also choose those codes itself)."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 2048))
            tail = fh.read().splitlines()[-3:]
    except OSError:
        return False
    return any(marker in line for line in tail for marker in _EXEC_FAILURES)


def _start_error(exc: Exception) -> str:
    text = str(getattr(exc, "explanation", None) or exc)
    if "executable file not found" in text or "no such file or directory" in text:
        return "cannot start: command not found in the image"
    return f"cannot start the container: {text.splitlines()[0][:200]}"


def _normalize_time(stamp: str) -> str:
    """Docker's nanosecond RFC 3339 → our ISO form (milliseconds, UTC)."""
    if not stamp or stamp.startswith("0001-"):
        return now_iso()
    try:
        base = stamp.rstrip("Z")
        main, _, frac = base.partition(".")
        dt = datetime.fromisoformat(main).replace(tzinfo=UTC)
        micro = int((frac + "000000")[:6]) if frac else 0
        return now_iso(dt.replace(microsecond=micro))
    except ValueError:
        return now_iso()

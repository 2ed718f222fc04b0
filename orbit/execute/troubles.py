"""What holds a running run back that is not its program, said where people look.

Two troubles: Docker not answering (the daemon stopped or restarted) and a full disk under the
run (the log copy waits for room; the valve holds the container meanwhile). Each is said once
when it begins and once when it ends: a line in shepherd.log, an event, and the run's reason in
status.yaml ("Docker is not answering since 12:03:05", "waiting: disk full under …"), which
`ps`, `show` and `wait` show. The times Docker did not answer stay in `docker_unreachable`, for
the log may lack what the program wrote meanwhile (store/lognote.py says so).

A full disk would refuse those very writes, so the shepherd keeps a small reserve file in the
run directory while it watches, and deletes it to make room for them.
"""

from __future__ import annotations

import logging
import os

from orbit.errors import DISK_FULL, OrbitError
from orbit.execute.engine import Unreachable
from orbit.human import clock_time
from orbit.store.files import unlink_quiet
from orbit.store.lognote import outages
from orbit.store.model import DISK_RESERVE, RunState, now_iso, parse_iso
from orbit.store.runs import RunStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from orbit.execute.logfollow import LogCopier
    from orbit.store.model import Run

log = logging.getLogger(__name__)

RESERVE_BYTES = 64 << 10
# The exit codes of a container its daemon stopped at restart: SIGTERM, then SIGKILL.
STOP_CODES = (137, 143)


class Troubles:
    """The troubles of one running run, as its shepherd sees them (one thread calls it)."""

    def __init__(self, store: RunStore, run: Run, actor: str) -> None:
        self.store = store
        self.run_id = run.id
        self.actor = actor
        self.dir = run.dir
        self.outages = outages(run.status)  # a predecessor's are kept
        self.disk_full = False
        self._make_reserve()

    @property
    def docker_down(self) -> bool:
        return bool(self.outages) and "to" not in self.outages[-1]

    def reason(self) -> str | None:
        if self.disk_full:
            return f"waiting: disk full under {self.dir}"
        if self.docker_down:
            return f"Docker is not answering since {clock_time(self.outages[-1]['from'])}"
        return None

    def docker(self, answering: bool) -> None:
        """Docker answered a call (or did not): said when that changes."""
        if answering == (not self.docker_down):
            return
        if answering:
            self.outages[-1]["to"] = now_iso()
            log.warning("run %s: Docker answers again", self.run_id)
            self._say("docker-back")
        else:
            self.outages.append({"from": now_iso()})
            log.warning("run %s: Docker is not answering; waiting for it", self.run_id)
            self._say("docker-unreachable")

    def disk(self, full: bool) -> None:
        """The log copy found the disk full (or had room): said when that changes."""
        if full == self.disk_full:
            return
        self.disk_full = full
        if full:
            unlink_quiet(self.dir / DISK_RESERVE)  # the room for the lines below
            log.warning(
                "run %s: disk full under %s; the log copy waits for space (the container is "
                "held meanwhile)",
                self.run_id,
                self.dir,
            )
            self._say("disk-full")
        else:
            log.warning("run %s: disk space is back; copying the log again", self.run_id)
            self._say("disk-space-back")
            self._make_reserve()

    def exit_fields(self, record: dict[str, Any]) -> dict[str, Any]:
        """What exit.json adds: the outages, and whether Docker's restart stopped the
        container (a stop code that no stop of Orbit's explains, after Docker went away)."""
        if not self.outages:
            return {}
        fields: dict[str, Any] = {"docker_unreachable": self.outages}
        orbit_stop = record.get("cancelled") or record.get("timed_out") or record.get("oom_killed")
        finished = parse_iso(record.get("finished_at"))
        went = parse_iso(self.outages[-1].get("from"))
        if (
            record.get("exit_code") in STOP_CODES
            and not orbit_stop
            and finished is not None
            and went is not None
            and finished >= went
        ):
            fields["docker_restarted"] = True
        return fields

    def _say(self, event: str) -> None:
        fields = {"reason": self.reason(), "docker_unreachable": self.outages or None}

        def change(run: Run) -> dict[str, Any] | None:
            return fields if run.state is RunState.RUNNING else None

        try:
            self.store.update(self.run_id, change, actor=self.actor, event=event)
        except (OrbitError, OSError) as exc:  # said in shepherd.log; the run goes on
            log.warning("run %s: %s not recorded: %s", self.run_id, event, exc)

    def _make_reserve(self) -> None:
        path = self.dir / DISK_RESERVE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, bytes(RESERVE_BYTES))  # written, not sparse: real blocks
            finally:
                os.close(fd)
        except OSError as exc:
            log.info("run %s: no disk reserve (%s)", self.run_id, exc)
            unlink_quiet(path)


def poll(copier: LogCopier, final: bool, troubles: Troubles | None) -> int:
    """One poll of Docker's log: frames read, or -1 when the disk is full. With `troubles` (while
    the shepherd watches a running container), Docker not answering and a full disk are said."""
    try:
        got = copier.poll(final=final)
    except Exception as exc:  # Docker's: the container may be gone; what was written stays
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            got = -1
        elif isinstance(exc, Unreachable) and troubles is not None:
            troubles.docker(answering=False)
            return 0
        else:
            log.info("log copy failed: %s", exc)
            return 0
    if troubles is not None:
        troubles.docker(answering=True)
        troubles.disk(full=got < 0)
    return got

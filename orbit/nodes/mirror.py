"""The shepherd of a run placed on another node: it sends the run there and keeps its record here.

`python -S -m orbit.nodes.mirror HOME ID` (a shepherd's process execs into it when its run
names a node: execute/shepherd_main.py). Like a shepherd it holds the run's shepherd.lock for
its whole life, so the tick's liveness check and repairs apply unchanged.

1. Send: the code snapshot, unless the node has it (once per content hash: nodes/snapsend.py),
   then the run (`orbit _node submit`, idempotent by the run's origin). The node answers with
   its run id, recorded as `remote.id` in status.yaml. A node that cannot be reached then puts
   the run back in the queue, to be placed again; one that refuses it fails the run.
2. Follow: `orbit _node follow ID LOG_OFFSET METRICS_OFFSET` streams the node's log.txt,
   metrics.jsonl and status.yaml (nodes/agent.py); each log and metrics frame is appended
   here at exactly the offset the node sent it from, so a follow started again after a broken
   connection carries on with no gap and no byte twice. The node's state becomes this run's:
   queued or starting there is `starting` here (with the node's reason), then `running`, then
   how it ended, with its exit code, reason, peaks and error excerpt.
3. While the node cannot be reached the run stays as it was; after `node_unknown_after_s`
   (config.yaml) it becomes `unknown`, and once the node answers again it becomes what the node
   says (the follow resumes from the offsets, so nothing is lost).
A cancel request here (`orbit cancel`) is passed on to the node as soon as it can be.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from orbit.detach import exit_from, logged
from orbit.errors import ExitCode, NodeError, NodeUnreachable, NotFoundError, OrbitError
from orbit.execute.shepherd import CANCEL_FILE
from orbit.execute.spawn import spawn
from orbit.nodes import snapsend, ssh
from orbit.review.series import Follower
from orbit.sched.remote import wake_probe
from orbit.sched.tick import tick
from orbit.store import nodes, secrets
from orbit.store.files import atomic_write, touch_exclusive, unlink_quiet
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.model import CODE_DIFF, LOG, METRICS, SHEPHERD_LOCK, Run, RunState, now_iso
from orbit.store.runs import RunStore

log = logging.getLogger(__name__)

PROCESS_NAME = "orbit-mirror"
STALL_S = 12.0  # no frame (not even a heartbeat) for this long: the connection is dead
RETRY_MAX_S = 5.0
GONE_RECHECK_S = 2.0
CHECK_S = 2.0  # how often a mirror looks whether its run was ended here
# Copied from the node's status.yaml when the run ends there.
FINAL_FIELDS = (
    "reason",
    "exit_code",
    "oom_killed",
    "started_at",
    "finished_at",
    "peaks",
    "error_excerpt",
    "log_incomplete",
)


class Broken(Exception):
    """The follow stream ended or broke before the run's end."""


def run_mirror(home: Home, run_id: str) -> None:
    lock = try_lock(home.runs_dir / run_id / SHEPHERD_LOCK, timeout=5.0)
    if lock is None:
        log.info("another shepherd holds run %s", run_id)
        return
    try:
        try:
            atomic_write(home.runs_dir / run_id / "shepherd.pid", f"{os.getpid()}\n".encode())
        except OSError as exc:
            log.warning("run %s: cannot write shepherd.pid: %s", run_id, exc)
        ended = Mirror(home, run_id).run()
    finally:
        release(lock)
    if ended:
        tick(home, spawn=spawn, actor=f"mirror:{run_id}")


class Mirror:
    def __init__(self, home: Home, run_id: str) -> None:
        self.home = home
        self.run_id = run_id
        self.store = RunStore(home)
        self.actor = f"mirror:{run_id}"
        self.dir = home.runs_dir / run_id
        self.metrics = Follower(self.dir / METRICS)
        self.down_since: float | None = None
        self.down_at: str | None = None
        self.cancel_sent = False
        self.node_ended = False  # the node said the run finished: the end frame follows

    # --- the whole life ---------------------------------------------------------------------
    def run(self) -> bool:
        """True when the run has ended (here, whatever became of it there)."""
        run = self.store.load(self.run_id)
        if run.state.finished:
            self._leave()
            return True
        name = str(run.status.get("node") or "")
        try:
            node = nodes.get(self.home, name)
        except NotFoundError:
            self._end(RunState.FAILED, f"node {name} is no longer a node of this home")
            return True
        except OrbitError as exc:  # nodes.yaml damaged: the run is left as it is, for later
            log.warning("run %s: %s", self.run_id, exc)
            return False
        if not (run.status.get("remote") or {}).get("id") and not self._send(run, node):
            return True
        return self._follow(node)

    # --- sending ----------------------------------------------------------------------------
    def _send(self, run: Run, node: nodes.Node) -> bool:
        """Send the run; False when it did not go (back in the queue, failed or cancelled).

        Until the `submit` request reaches the node, nothing of the run is there: a node that
        cannot be reached (ssh failed before the command ran) puts it back in the queue. Once
        the request may have reached it (the connection broke, or timed out, with an answer
        perhaps lost on the way back), the same request is made again until the node answers:
        keyed by its origin, it gets the same run, never a second."""
        if (self.dir / CANCEL_FILE).exists():
            self._end(RunState.CANCELLED, "cancelled by user")
            return False
        env = self.home.environ
        try:
            snapshot = (run.project or {}).get("snapshot")
            if snapshot and not json.loads(ssh.call(node, env, "has-snapshot", [snapshot]))["has"]:
                data = snapsend.export(self.home, str(snapshot))
                ssh.call(node, env, "put-snapshot", [snapshot], data=data, timeout=600)
        except NodeUnreachable as exc:
            nodes.write_state(self.home, node.name, error=str(exc))
            self._requeue(
                f"node {node.name} could not be reached ({exc}); waiting to be placed again"
            )
            return False
        except (OrbitError, ValueError, KeyError, TypeError) as exc:
            return self._refused(run, node, str(exc))
        request = json.dumps(
            {
                "spec": run.spec,
                "origin": {
                    "node": str(run.spec.get("node") or nodes.local_name(self.home)),
                    "home": nodes.home_id(self.home),
                    "run": run.id,
                },
                "secrets": self._secrets(),
                "files": self._files(run),
            }
        ).encode()
        timeout = self.home.settings.pull_timeout_s + 60
        attempt = 0
        heard = False  # whether the node may have received the request
        while True:
            try:
                answer = json.loads(ssh.call(node, env, "submit", data=request, timeout=timeout))
                remote_id = str(answer["id"])
                break
            except NodeUnreachable as exc:
                heard = heard or not exc.before_command
                if not heard:  # it never reached the node: place it again, perhaps elsewhere
                    nodes.write_state(self.home, node.name, error=str(exc))
                    self._requeue(
                        f"node {node.name} could not be reached ({exc}); waiting to be placed again"
                    )
                    return False
                attempt += 1
                self._down(node, str(exc))
                time.sleep(min(RETRY_MAX_S, 0.5 * 2**attempt))
            except (OrbitError, ValueError, KeyError, TypeError) as exc:
                return self._refused(run, node, str(exc))
        self.down_since = None
        self.store.update(
            self.run_id,
            lambda _run: {
                "remote": {"id": remote_id},
                "reason": f"sent to node {node.name} as run {remote_id}",
            },
            actor=self.actor,
            event="sent",
        )
        log.info("run %s sent to node %s as run %s", self.run_id, node.name, remote_id)
        return True

    def _refused(self, run: Run, node: nodes.Node, why: str) -> bool:
        """The node would not take the run (an image it cannot pull, a dataset it lacks): a run
        that named it fails; one that did not goes back to the queue, never to that node."""
        why = why.removeprefix(f"node {node.name}: ")
        if run.spec.get("pin_node"):
            self._end(RunState.FAILED, f"node {node.name} did not take the run: {why}")
        else:
            refused = sorted({*(run.status.get("refused_by") or []), node.name})
            self._requeue(
                f"node {node.name} did not take the run ({why}); waiting to be placed again",
                refused_by=refused,
            )
        return False

    def _secrets(self) -> dict[str, Any]:
        kept = secrets.read(self.home, self.run_id)
        return {"env": kept.env, "redact": kept.redact}

    @staticmethod
    def _files(run: Run) -> dict[str, str]:
        try:
            return {CODE_DIFF: run.path(CODE_DIFF).read_text(errors="replace")}
        except OSError:
            return {}

    def _requeue(self, reason: str, **fields: Any) -> None:
        if (self.dir / CANCEL_FILE).exists():  # cancelled while it was being sent
            self._end(RunState.CANCELLED, "cancelled by user")
            return
        self.store.transition(
            self.run_id,
            RunState.QUEUED,
            actor=self.actor,
            event="requeued",
            expect=[RunState.STARTING],
            reason=reason,
            node=None,
            placed_at=None,
            **fields,
        )
        touch_exclusive(self.home.queue_dir / self.run_id)
        unlink_quiet(self.home.active_dir / self.run_id)

    # --- following --------------------------------------------------------------------------
    def _follow(self, node: nodes.Node) -> bool:
        attempt = 0
        while True:
            run = self.store.load(self.run_id)
            if run.state.finished:  # ended here meanwhile (`orbit node rm --force`)
                self._leave()
                return True
            self._pass_cancel(node)
            remote_id = str(run.status["remote"]["id"])
            args = [remote_id, str(_size(self.dir / LOG)), str(_size(self.dir / METRICS))]
            with tempfile.TemporaryFile() as errors:
                proc = subprocess.Popen(
                    ssh.argv(node, self.home.environ, "follow", args),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    env=dict(self.home.environ),
                )
                try:
                    assert proc.stdout is not None
                    if self._stream(node, proc.stdout):
                        return True
                    problem: OrbitError = NodeUnreachable(f"node {node.name}: the connection ended")
                except Broken as exc:
                    problem = NodeUnreachable(f"node {node.name}: {exc}")
                finally:
                    proc.kill()
                    code = proc.wait()
                errors.seek(0)
                stderr = errors.read()
            if code not in (0, -9):
                problem = ssh.failure(node, code, stderr)
            if code == ExitCode.NOT_FOUND and self._gone(node, remote_id):
                # Orbit there answered, twice, that it has no such run: gone from the node.
                self._end(RunState.LOST, str(problem))
                return True
            # Unreachable, or Orbit there failed otherwise (perhaps for a moment): try again.
            attempt += 1
            self._down(node, str(problem))
            time.sleep(min(RETRY_MAX_S, 0.5 * 2**attempt))

    def _gone(self, node: nodes.Node, remote_id: str) -> bool:
        """Whether the node still says it has no run `remote_id`, asked again a little later
        (a home that was unmounted for a moment must not make a run lost for good)."""
        time.sleep(GONE_RECHECK_S)
        try:
            ssh.call(node, self.home.environ, "status", [remote_id], timeout=30)
        except NodeError as exc:
            return exc.remote_code == ExitCode.NOT_FOUND
        return False

    def _stream(self, node: nodes.Node, out: IO[bytes]) -> bool:
        """Apply frames until the end frame (True) or the stream ends (False)."""
        frames = _Frames(out.fileno())
        last = checked = time.monotonic()
        while True:
            try:
                frame = frames.next(1.0)
            except EOFError:
                return False
            now = time.monotonic()
            if now - checked > CHECK_S:
                checked = now
                ended = not self.node_ended and self.store.load(self.run_id).state.finished
                if ended:  # here, not by the node (`orbit node rm --force`)
                    self._leave()
                    return True
            if frame is None:
                if now - last > STALL_S:
                    raise Broken(f"no word for {STALL_S:g} s")
                self._pass_cancel(node)
                continue
            last = now
            if self.down_since is not None:
                self.down_since = None
                wake_probe(self.home, node.name)  # a fresh reading, not the one from before
            head, body = frame
            kind = head.get("k")
            try:
                if kind == "log":
                    _append(self.dir / LOG, int(head["o"]), body)
                elif kind == "metrics":
                    _append(self.dir / METRICS, int(head["o"]), body)
                    self._summarize()
                elif kind == "status":
                    self._apply(node, dict(head["status"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise Broken(f"bad frame from the node ({exc!r})") from None
            if kind == "end":
                self._summarize()
                self._leave()
                return True
            self._pass_cancel(node)

    def _summarize(self) -> None:
        try:
            self.metrics.update(None)
        except Exception as exc:  # a cache; readers parse metrics.jsonl without it
            log.warning("run %s: metrics.summary.json not written: %s", self.run_id, exc)

    def _pass_cancel(self, node: nodes.Node) -> None:
        if self.cancel_sent or not (self.dir / CANCEL_FILE).exists():
            return
        remote_id = (self.store.load(self.run_id).status.get("remote") or {}).get("id")
        try:
            ssh.call(node, self.home.environ, "cancel", [str(remote_id)], timeout=30)
        except NodeError as exc:
            log.warning("run %s: cancel not passed on yet: %s", self.run_id, exc)
            return
        self.cancel_sent = True

    # --- the record -------------------------------------------------------------------------
    def _apply(self, node: nodes.Node, theirs: dict[str, Any]) -> None:
        """Make this run's state what the node says its run's is."""
        try:
            there = RunState(str(theirs.get("state")))
        except ValueError:
            return
        self.node_ended = there.finished
        # Queued or starting there is starting here.
        becomes = there if there.finished or there is RunState.RUNNING else RunState.STARTING
        fields: dict[str, Any] = {"state": becomes.value}
        if there.finished:
            fields.update({k: theirs[k] for k in FINAL_FIELDS if k in theirs})
        elif there is RunState.RUNNING:
            fields.update(started_at=theirs.get("started_at"), reason=None)
        else:
            fields["reason"] = f"on node {node.name}: {theirs.get('reason') or there.value}"

        def change(run: Run) -> dict[str, Any] | None:
            remote_id = (run.status.get("remote") or {}).get("id")
            new = {**fields, "remote": {"id": remote_id, "state": there.value,
                                        "lease": theirs.get("lease")}}  # fmt: skip
            if run.state.finished or (run.state is RunState.RUNNING and there is RunState.STARTING):
                return None
            if all(run.status.get(k) == v for k, v in new.items()):
                return None
            return new

        before = self.store.load(self.run_id).state
        if before is RunState.UNKNOWN:
            event: str | None = "reconnected"
        else:
            event = becomes.value if becomes is not before else None
        self.store.update(self.run_id, change, actor=self.actor, event=event)

    def _down(self, node: nodes.Node, problem: str) -> None:
        """The node did not answer: note it, and after node_unknown_after_s say so."""
        now = time.monotonic()
        if self.down_since is None:
            self.down_since, self.down_at = now, now_iso()
        nodes.write_state(self.home, node.name, error=problem)
        wait = self.home.settings.node_unknown_after_s
        run = self.store.load(self.run_id)
        if now - self.down_since < wait or run.state in (RunState.UNKNOWN,) or run.state.finished:
            return
        since = datetime.fromisoformat(self.down_at or now_iso()).astimezone().strftime("%H:%M:%S")
        self.store.transition(
            self.run_id,
            RunState.UNKNOWN,
            actor=self.actor,
            event="unknown",
            reason=f"node {node.name} unreachable since {since} ({problem})",
        )

    def _end(self, state: RunState, reason: str) -> None:
        run = self.store.load(self.run_id)
        if not run.state.finished:
            self.store.transition(
                self.run_id, state, actor=self.actor, reason=reason, finished_at=now_iso()
            )
        self._leave()

    def _leave(self) -> None:
        """The run is finished here: nothing of it stays active."""
        secrets.drop(self.home, self.run_id)
        unlink_quiet(self.home.active_dir / self.run_id)
        unlink_quiet(self.home.queue_dir / self.run_id)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _append(path: Path, offset: int, data: bytes) -> None:
    """Append `data`, which the node read from `offset`: only onto a copy of exactly that
    length, so nothing is ever doubled or skipped."""
    with open(path, "ab") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size != offset:
            raise Broken(f"{path.name}: the node sent from byte {offset}, the copy here has {size}")
        fh.write(data)


class _Frames:
    """Frames from a pipe, read without blocking longer than asked."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def _fill(self, deadline: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            raise EOFError
        self.buf += chunk
        return True

    def next(self, timeout: float) -> tuple[dict[str, Any], bytes] | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if not self._fill(deadline):
                return None
        end = self.buf.index(b"\n")
        try:
            head = json.loads(bytes(self.buf[:end]))
            size = int(head.get("n") or 0)
        except (ValueError, TypeError, AttributeError) as exc:
            raise Broken(f"bad frame from the node ({exc})") from None
        while len(self.buf) < end + 1 + size:
            if not self._fill(time.monotonic() + STALL_S):
                raise Broken("a frame cut short")
        body = bytes(self.buf[end + 1 : end + 1 + size])
        del self.buf[: end + 1 + size]
        return head, body


def main(argv: list[str]) -> int:
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write(PROCESS_NAME)
    except OSError:
        pass
    if len(argv) != 2:
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s mirror %(process)d %(message)s")
    home = Home(Path(argv[0]), os.environ)
    return logged(f"mirror for run {argv[1]}", lambda: run_mirror(home, argv[1]))


if __name__ == "__main__":
    exit_from(main)

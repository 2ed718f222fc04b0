"""The node's side: `orbit _node OP ARGS`, what a primary runs there over SSH.

Each operation reads its input from stdin and writes one JSON object to stdout (`follow`
writes frames, see below; `cat` writes the file). Errors are the usual one line on stderr with a
non-zero exit, which the primary shows as the node's words. The node's own store, tick and
shepherds do the work: a run sent here is an ordinary run of this home that also names its
`origin` (the primary's node name, home tag and run id).

`follow ID LOG_OFFSET METRICS_OFFSET` streams a run until it has finished and all of its log
and metrics have been sent. Each frame is one JSON line, followed by `n` raw bytes when it
has `n`:

    {"k": "log", "o": OFFSET, "n": N}        N bytes of log.txt from OFFSET
    {"k": "metrics", "o": OFFSET, "n": N}    whole lines of metrics.jsonl from OFFSET
    {"k": "status", "status": {...}}         status.yaml, whenever it changed
    {"k": "hb"}                              nothing new for HEARTBEAT_S
    {"k": "end"}                             the run is finished and everything was sent

Offsets are what the primary already holds, so a follow started again after a broken
connection carries on exactly where the primary's copy ends: no gap, no byte twice.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import IO, Any

from orbit import __version__
from orbit.errors import NotFoundError, OrbitError, UsageError
from orbit.execute import docker_ops
from orbit.execute.control import request_cancel
from orbit.execute.spawn import spawn
from orbit.execute.submit import Prepared, submit_many
from orbit.nodes import snapsend
from orbit.sched import pool
from orbit.sched.nodeplace import pool_to_dict
from orbit.sched.tick import tick
from orbit.store import datasets, nodes
from orbit.store.beneath import opened, read_file
from orbit.store.creation import next_id
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.locks import locked
from orbit.store.model import LEASED, LOG, METRICS, OUTPUT, STATUS_YAML, Run
from orbit.store.runs import RunStore, id_key
from orbit.store.secrets import Secrets

PROTOCOL = 1
CHUNK = 256 << 10
POLL_S = 0.2
HEARTBEAT_S = 2.0


def _tick(home: Home) -> None:
    """Reaching a node ticks it: a node nobody ticked since it came back (no supervisor) gets
    its dead shepherds replaced and its queue moved before it answers."""
    tick(home, spawn=spawn, actor="node")


def info(home: Home, *, must_exist: bool = False) -> dict[str, Any]:
    """What the primary places runs by: this home's pool as its own tick would see it. With
    `must_exist` (a home the primary named with --home), a home that is not there is an error
    rather than a new empty one: a mistyped path must not make a node out of nothing."""
    if must_exist and not home.root.is_dir():
        raise NotFoundError(f"no Orbit home at {home.root} on this node (check --home)")
    home.ensure()
    _tick(home)
    store = RunStore(home)
    leased = [r for r in store.load_many(store.leased_ids()) if isinstance(r, Run)]
    leased = [r for r in leased if r.state in LEASED]
    reading = pool.build(home, leased)
    return {
        "protocol": PROTOCOL,
        "version": __version__,
        "node": nodes.local_name(home),
        "home": str(home.root),
        "executor": home.settings.executor,
        "pool": pool_to_dict(reading.pool),
        "gpu_kind": reading.gpu_kind,
        "problems": reading.problems,
        "datasets": _datasets(home),
        "runs": {"queued": len(store.queued_ids()), "active": len(leased)},
    }


def _datasets(home: Home) -> dict[str, str]:
    """The named datasets of this home: name → path."""
    try:
        return {name: str(d.path) for name, d in datasets.load(home).items()}
    except OrbitError:
        return {}


def _own_datasets(home: Home, spec: dict[str, Any]) -> None:
    """Point the run's dataset mounts at this node's copies of them (by name: the primary's
    paths mean nothing here); a dataset this node lacks refuses the run."""
    uses = [d for d in spec.get("datasets") or [] if isinstance(d, dict)]
    if not uses:
        return
    here = datasets.load(home)
    by_target: dict[str, str] = {}
    for use in uses:
        dataset = here.get(str(use.get("name")))
        if dataset is None:
            raise NotFoundError(f"no dataset {use.get('name')!r} on node {nodes.local_name(home)}")
        use["path"] = str(dataset.path)
        by_target[str(use.get("target"))] = str(dataset.path)
    for mount in spec.get("mounts") or []:
        if str(mount.get("target")) in by_target:
            mount["source"] = by_target[str(mount["target"])]


def _origins(home: Home) -> Path:
    return home.root / "nodes" / "origins"


def submit(home: Home, request: dict[str, Any]) -> dict[str, Any]:
    """Write a run sent by a primary (once: the same origin gets the same run) and tick."""
    try:
        spec = dict(request["spec"])
        origin = {k: str(request["origin"][k]) for k in ("node", "home", "run")}
        secrets = request.get("secrets") or {}
        files = {str(k): str(v).encode() for k, v in (request.get("files") or {}).items()}
    except (KeyError, TypeError) as exc:
        raise UsageError(f"bad run request: {exc}") from None
    key = f"{origin['node']}-{origin['home']}-{origin['run']}"
    home.ensure()
    marker = _origins(home) / key
    marker.parent.mkdir(parents=True, exist_ok=True)
    store = RunStore(home)
    with locked(home.locks_dir / "node-submit.lock"):
        found = _sent_before(home, store, marker, origin)
        if found is not None:
            return {"id": found, "new": False}
        snapshot = (spec.get("project") or {}).get("snapshot")
        if snapshot and not snapsend.has(home, snapshot):
            raise UsageError(f"the code snapshot {snapshot} has not been sent here")
        image = spec.get("image")
        if not image:
            raise UsageError("the run names no image")
        docker_ops.ensure_image(docker_ops.connect(), str(image), home.settings.pull_timeout_s)
        _own_datasets(home, spec)
        spec["node"] = nodes.local_name(home)
        spec.pop("pin_node", None)  # it is on its node now
        spec["origin"] = origin
        if spec.get("user"):
            spec["user"] = f"{os.getuid()}:{os.getgid()}"  # this node's user, who owns the code
        atomic_write(marker, f"pending {next_id(home)}".encode())
        prepared = Prepared(
            spec,
            Secrets(env=dict(secrets.get("env") or {}), redact=list(secrets.get("redact") or [])),
            files,
        )
        (run,) = submit_many(home, [prepared], actor=f"node:{origin['node']}")
        atomic_write(marker, run.id.encode())
    tick(home, spawn=spawn, actor=f"node:{origin['node']}")
    return {"id": run.id, "new": True}


def configure_slurm(home: Home, partition: str, account: str) -> dict[str, Any]:
    """Make this home hand its runs to Slurm (`orbit node add NAME slurm://…`): the executor
    and, when given (non-empty), the partition and account."""
    home.ensure()
    home.set_config("executor", "slurm")
    home.set_config("slurm_partition", partition or None)
    home.set_config("slurm_account", account or None)
    return {"executor": "slurm", "partition": partition or None, "account": account or None}


def _sent_before(home: Home, store: RunStore, marker: Path, origin: dict[str, str]) -> str | None:
    """The run an earlier request for this origin wrote, if any. A request cut short between
    writing its run and recording it left `pending N`: the runs from id N on are looked at."""
    try:
        text = marker.read_text().strip()
    except FileNotFoundError:
        return None
    if not text.startswith("pending "):
        return text
    first = int(text.split()[1])
    for run_id in sorted(os.listdir(home.runs_dir), key=id_key):
        if not run_id.isdigit() or int(run_id) < first:
            continue
        try:
            if store.load(run_id).spec.get("origin") == origin:
                atomic_write(marker, run_id.encode())
                return run_id
        except OrbitError:
            continue
    return None


def _run(home: Home, run_id: str) -> Run:
    store = RunStore(home)
    if not store.exists(run_id):
        raise NotFoundError(f"no run {run_id} on node {nodes.local_name(home)}")
    return store.load(run_id)


def status(home: Home, run_id: str) -> dict[str, Any]:
    return {"status": _run(home, run_id).status}


def cancel(home: Home, run_id: str, actor: str) -> dict[str, Any]:
    run = request_cancel(RunStore(home), run_id, actor=actor)
    tick(home, spawn=spawn, actor=actor)
    return {"state": run.state.value}


def outputs(home: Home, run_id: str) -> dict[str, Any]:
    root = _run(home, run_id).path(OUTPUT)
    files = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            try:
                size = path.lstat().st_size
            except OSError:
                continue
            files.append({"path": str(path.relative_to(root)), "size": size})
    return {"files": sorted(files, key=lambda f: f["path"])}


def copy_output(home: Home, run_id: str, name: str, out: IO[bytes]) -> None:
    """Write one file of the run's output/ to `out`. Opened beneath output/ and read through
    that descriptor (store/beneath.py): the run's container may swap a folder for a symlink
    meanwhile, and the primary must never be served a file from outside the run."""
    with opened(_run(home, run_id).dir, OUTPUT, name) as (fd, st):
        if not stat.S_ISREG(st.st_mode):
            raise NotFoundError(f"run {run_id} has no output file {name!r}")
        with read_file(fd) as fh:
            shutil.copyfileobj(fh, out)
    out.flush()


def follow(home: Home, run_id: str, log_at: int, metrics_at: int, out: IO[bytes]) -> None:
    """Stream the run to `out` (see the module's text) until it is finished and sent."""
    run = _run(home, run_id)
    _tick(home)
    status_path = run.path(STATUS_YAML)
    last_stamp: tuple[int, int] | None = None
    quiet_since = time.monotonic()
    while True:
        try:
            st = os.stat(status_path)
            stamp = (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            raise NotFoundError(
                f"run {run_id} was removed on node {nodes.local_name(home)}"
            ) from None
        before = (log_at, metrics_at)
        if stamp != last_stamp:
            run = RunStore(home).load(run_id)
            last_stamp = stamp
            if run.state.finished:
                # The shepherd writes the log before it settles, so all of it is there: send
                # it, and the metrics, before the finished status. A primary that has the
                # status has every byte before it, whatever breaks after.
                log_at = _drain(out, "log", run.path(LOG), log_at)
                metrics_at = _drain(out, "metrics", run.path(METRICS), metrics_at)
                _frame(out, {"k": "status", "status": run.status})
                _frame(out, {"k": "end"})
                return
            _frame(out, {"k": "status", "status": run.status})
            quiet_since = time.monotonic()
        log_at, more = _send(out, "log", run.path(LOG), log_at, whole_lines=False)
        metrics_at, more_m = _send(out, "metrics", run.path(METRICS), metrics_at, whole_lines=True)
        now = time.monotonic()
        if (log_at, metrics_at) != before:
            quiet_since = now
        elif now - quiet_since >= HEARTBEAT_S:
            _frame(out, {"k": "hb"})
            quiet_since = now
        if not more and not more_m:
            time.sleep(POLL_S)


def _drain(out: IO[bytes], kind: str, path: Path, at: int) -> int:
    """Send all that `path` has beyond `at` (a last metrics line without its newline too)."""
    more = True
    while more:
        at, more = _send(out, kind, path, at, whole_lines=False)
    return at


def _send(out: IO[bytes], kind: str, path: Path, at: int, *, whole_lines: bool) -> tuple[int, bool]:
    """Send what `path` has beyond `at` (at most CHUNK bytes); the new offset, and whether
    more may be waiting."""
    try:
        with open(path, "rb") as fh:
            fh.seek(at)
            data = fh.read(CHUNK)
    except FileNotFoundError:
        return at, False
    if whole_lines:
        data = data[: data.rfind(b"\n") + 1]
    if not data:
        return at, False
    _frame(out, {"k": kind, "o": at, "n": len(data)}, data)
    return at + len(data), len(data) == CHUNK or (whole_lines and len(data) > CHUNK // 2)


def _frame(out: IO[bytes], head: dict[str, Any], body: bytes = b"") -> None:
    out.write(json.dumps(head, separators=(",", ":")).encode() + b"\n" + body)
    out.flush()

"""From a request to a run record in two steps.

`prepare` checks everything, takes the code snapshot, makes sure of the image (pulling it or
building the Dockerfile) and builds the run.yaml dict; `submit` writes the run. A sweep prepares
once and submits each of its runs from that (`Prepared.varied`), so its runs share one snapshot,
one image and one Docker connection.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orbit.errors import DockerError, NotFoundError, OrbitError, UsageError
from orbit.execute import docker_ops
from orbit.sched.plan import Demand, GpuSlot, never_fits
from orbit.sched.resources import Amount, machine_totals, one_run_most
from orbit.store import datasets as named_datasets
from orbit.store import secrets as run_secrets
from orbit.store.agent import agent_from_environ, record_session_run
from orbit.store.creation import NewRun, create_runs
from orbit.store.home import Home
from orbit.store.model import BUILD_LOG, CODE_DIFF, Run, RunState, now_iso
from orbit.store.runs import RunStore
from orbit.store.secrets import Secrets

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class Request:
    command: list[str]
    image: str | None = None
    dockerfile: str | None = None
    cpus: float | None = None
    mem_gb: float | None = None
    name: str | None = None
    group: str | None = None
    folder: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    mounts: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)  # `-d NAME[:DST[:rw]]` values
    env: list[str] = field(default_factory=list)
    pass_env: list[str] = field(default_factory=list)
    project: str | None = None
    no_project: bool = False
    no_snapshot: bool = False
    network: str = "bridge"
    timeout_min: float | None = None
    root: bool = False
    params: dict[str, str] = field(default_factory=dict)
    group_cap: int | None = None  # at most this many runs of the group hold a lease at once
    gpus: int = 0
    gpu_mem_gb: float | None = None  # minimum free memory on each leased GPU
    gpu_ids: list[int] | None = None  # pin these host GPU indices
    in_container: InContainer | None = None  # an agent CLI run inside (orbit.agents.incontainer)
    # For runs made by Orbit itself (orbit bench) rather than typed:
    user: str | None = None  # the container's user, in place of yours (or the image's: --root)
    workdir: str | None = "/workspace"  # None: the image's WORKDIR
    run_mounts: list[dict[str, Any]] = field(default_factory=list)  # run.yaml `mounts` entries
    run_dirs: list[str] = field(default_factory=list)  # folders of the run directory to create
    commit: str | None = None  # keep the ended container's file system as this image
    record: dict[str, Any] = field(default_factory=dict)  # more run.yaml keys (e.g. `bench`)
    node: str | None = None  # run only on this node (docs/nodes.md): run.yaml `pin_node`


@dataclass
class InContainer:
    """What an agent CLI inside the container needs beyond the request (`orbit run --auth`):
    built above this layer (orbit/agents/incontainer.py), applied here."""

    record: dict[str, Any]  # run.yaml `auth`: profile, harness, kind, cli; never a secret
    env: dict[str, str]  # stored with the run (the user's -e wins)
    secrets: Secrets  # never stored with the run: runtime/secrets/
    mounts: list[dict[str, Any]]  # run.yaml `mounts` entries (docker_ops._mount)
    path: list[str]  # put before the image's PATH
    run_dirs: list[str]  # folders of the run directory its mounts need
    host_network: bool = False


def parse_env(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not ENV_NAME.match(key):
            raise UsageError(f"-e expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def parse_mount(item: str, cwd: Path) -> dict[str, Any]:
    parts = item.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise UsageError(f"-m expects SRC:DST[:rw], got {item!r}")
    src = (cwd / parts[0]).resolve()
    dst = parts[1]
    mode = parts[2] if len(parts) == 3 else "ro"
    if mode not in ("ro", "rw"):
        raise UsageError(f"-m mode must be ro or rw, got {mode!r} in {item!r}")
    if not dst.startswith("/"):
        raise UsageError(f"-m destination must be an absolute path, got {dst!r}")
    if not src.exists():
        raise UsageError(f"mount source does not exist: {src}")
    return {"source": str(src), "target": dst, "rw": mode == "rw"}


def _elsewhere(home: Home, req: Request) -> bool:
    """The run names another node: checked against that node, never this machine."""
    if req.node is None:
        return False
    from orbit.store import nodes

    if req.node == nodes.local_name(home):
        return False
    nodes.get(home, req.node)  # an unknown name is an error
    return True


def _node_slots(home: Home, names: list[str] | None) -> list[tuple[Amount, tuple[GpuSlot, ...]]]:
    """The totals and GPUs of the nodes named (all when None), as last read."""
    from orbit.sched.nodeplace import pool_from_dict
    from orbit.store import nodes

    if names is None:
        try:
            names = list(nodes.load(home)) if nodes.registry_path(home).exists() else []
        except OrbitError:
            return []
    found = []
    for name in names:
        state = nodes.read_state(home, name)
        if state is not None and state.info.get("executor") == "slurm":
            continue
        try:
            pool = pool_from_dict((state.info if state else {}).get("pool") or {})
        except ValueError:
            continue
        found.append((pool.totals, pool.gpus))
    return found


def _resources(home: Home, req: Request) -> Amount:
    if home.settings.executor == "slurm":
        return _slurm_resources(home, req)
    totals = one_run_most(machine_totals(home))
    settings = home.settings
    cpus = req.cpus if req.cpus is not None else min(settings.default_cpus, totals.cpus)
    mem = req.mem_gb if req.mem_gb is not None else min(settings.default_mem_gb, totals.mem_gb)
    need = Amount(float(cpus), float(mem))
    if req.gpus < 0:
        raise UsageError("--gpus must be 0 or more")
    if req.gpu_ids and not req.gpus:
        req.gpus = len(set(req.gpu_ids))
    if (req.gpu_mem_gb or req.gpu_ids) and not req.gpus:
        raise UsageError("--gpu-mem and --gpu-ids need --gpus")
    slots: tuple[GpuSlot, ...] = ()
    if req.gpus:
        from orbit.sched.gpus import allowed_indices
        from orbit.sched.pool import gpu_slots, read_gpus

        gpus, _ = read_gpus(home)
        slots = gpu_slots(gpus, allowed_indices(home), [], float("inf"))
    probe = Demand(
        run_id="",
        need=need,
        gpus=req.gpus,
        gpu_mem_gb=req.gpu_mem_gb,
        gpu_ids=tuple(req.gpu_ids) if req.gpu_ids else None,
    )
    if _elsewhere(home, req):
        # Only what that node was last seen to have can refuse it (none yet: its tick says).
        seen = _node_slots(home, [str(req.node)])  # none for a Slurm node: sbatch decides
        why = never_fits(probe, *seen[0]) if seen else None
        if why:
            why = why.replace("this machine", f"node {req.node}")
    else:
        why = never_fits(probe, totals, slots)
        if why and any(never_fits(probe, *node) is None for node in _node_slots(home, None)):
            why = None  # a node can take it
    if why:
        subject = "it " if why.startswith("needs ") else ""  # "pinned GPU 7 does not exist"
        raise UsageError(f"this run can never start: {subject}{why}")
    return need


def _slurm_resources(home: Home, req: Request) -> Amount:
    """A Slurm home's request: this machine is not where the run goes, so nothing is checked
    against it (Slurm refuses at sbatch what no node can hold, and the run fails with its
    message); defaults as configured. Slurm chooses the GPUs: no --gpu-ids or --gpu-mem."""
    settings = home.settings
    cpus = req.cpus if req.cpus is not None else settings.default_cpus
    mem = req.mem_gb if req.mem_gb is not None else settings.default_mem_gb
    if req.gpus < 0:
        raise UsageError("--gpus must be 0 or more")
    if req.gpu_ids or req.gpu_mem_gb:
        raise UsageError(
            "--gpu-ids and --gpu-mem are not available in a Slurm home (Slurm picks the GPUs)"
        )
    if cpus <= 0 or mem <= 0:
        raise UsageError("--cpus and --mem must be positive")
    return Amount(float(cpus), float(mem))


@dataclass
class Prepared:
    """A checked request, ready to be written: its run.yaml dict and the files beside it.

    `build_error` is set when its Dockerfile failed to build: `submit` then records a failed
    run with the build log, so the failure can be reviewed like any other, and raises.
    """

    spec: dict[str, Any]
    secrets: Secrets = field(default_factory=Secrets)  # never in spec (--pass-env, --auth)
    files: dict[str, bytes] = field(default_factory=dict)  # code.diff, build.log
    build_error: str | None = None

    def varied(self, *, command: list[str], name: str | None, params: dict[str, str]) -> Prepared:
        """The same preparation for a run that differs only in command, name and params.

        The other values are shared with this one, not copied (a sweep makes a thousand):
        nothing changes a prepared spec once `prepare` has returned it."""
        spec = {**self.spec, "command": list(command), "name": name, "params": dict(params)}
        return replace(self, spec=spec)


def _check(
    home: Home, req: Request, cwd: Path, environ: Mapping[str, str]
) -> tuple[Amount, dict[str, str], dict[str, str], list[dict[str, Any]], list[named_datasets.Use]]:
    """The request's checks, in the order a person fixes them: (resources, env, secrets,
    mounts, datasets)."""
    if not req.command:
        raise UsageError("no command given: put it after `--`, e.g. orbit run -- python train.py")
    if req.image and req.dockerfile:
        raise UsageError("give --image or --dockerfile, not both")
    need = _resources(home, req)
    env = parse_env(req.env)
    secrets = {}
    for var in req.pass_env:
        if not ENV_NAME.match(var):
            raise UsageError(f"--pass-env expects a variable name, got {var!r}")
        if var not in environ:
            raise UsageError(f"--pass-env {var}: not set in this environment")
        secrets[var] = environ[var]
    mounts = [parse_mount(m, cwd) for m in req.mounts]
    uses = _datasets(home, req)
    _check_targets([*mounts, *(u.mount() for u in uses)])
    if req.timeout_min is not None and req.timeout_min <= 0:
        raise UsageError("--timeout must be a positive number of minutes")
    if not (req.image or home.settings.default_image) and not req.dockerfile:
        raise UsageError("no image: give --image or --dockerfile (or set default_image)")
    return need, env, secrets, mounts, uses


def _datasets(home: Home, req: Request) -> list[named_datasets.Use]:
    """The datasets of `-d`, from this home's registry, or, for one this machine lacks (or a
    run for another node), from the nodes' last readings: such a run goes only to a node that
    has them all (its path here is None; the node mounts its own, docs/nodes.md)."""
    if not req.datasets:
        return []
    elsewhere = _elsewhere(home, req)
    here = {} if elsewhere else named_datasets.load(home)
    uses = []
    for text in req.datasets:
        name, target, rw = named_datasets.parse_use(text)
        if name in here:
            uses += named_datasets.resolve(home, [text])
            continue
        having = _nodes_with(home, name, [str(req.node)] if elsewhere else None)
        if not having and elsewhere:
            raise NotFoundError(
                f"-d {text}: no dataset {name!r} on node {req.node} "
                f"(`orbit data ls --node {req.node}`)"
            )
        if not having:
            named_datasets.resolve(home, [text])  # raises, naming the ones there are
        uses.append(named_datasets.Use(name, None, target or f"/data/{name}", rw))
    return uses


def _nodes_with(home: Home, name: str, among: list[str] | None) -> list[str]:
    """The nodes last seen to have dataset `name`."""
    from orbit.store import nodes

    try:
        names = among if among is not None else list(nodes.load(home))
    except OrbitError:
        return []
    found = []
    for node in names:
        state = nodes.read_state(home, node)
        if state is not None and name in (state.info.get("datasets") or {}):
            found.append(node)
    return found


def _check_targets(mounts: list[dict[str, Any]]) -> None:
    """Two of `-m` and `-d` at one mount point: refused here, where Docker would refuse the
    container when the run starts."""
    seen: set[str] = set()
    for mount in mounts:
        target = os.path.normpath(mount["target"])
        if target in seen:
            raise UsageError(f"two mounts at {target} (-m and -d): give each its own destination")
        seen.add(target)


def _project(home: Home, req: Request, cwd: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The run's `project` entry, and its code.diff when a snapshot is taken."""
    if req.no_project:
        return {"mode": "none"}, {}
    path = (cwd / req.project).resolve() if req.project else cwd
    from orbit.execute import snapshot  # Git and the snapshot store: only with a project

    if req.no_snapshot:
        return snapshot.describe_mount(path), {}
    snap = snapshot.take(
        path,
        home.snapshots_dir,
        max_mb=home.settings.snapshot_max_mb,
        cache_dir=home.snapshot_cache_dir,
    )
    project = {
        "mode": "copy",
        "path": str(snap.root),
        "commit": snap.commit,
        "dirty": snap.dirty,
        "snapshot": snap.hash,
        "files": snap.files,
        "bytes": snap.bytes,
    }
    return project, {CODE_DIFF: snap.diff.encode()}


def _image(
    home: Home,
    req: Request,
    prepared: Prepared,
    *,
    cwd: Path,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
) -> None:
    """Make sure of the image: pull it when missing, or build (or reuse) the Dockerfile's."""
    spec = prepared.spec
    if not req.dockerfile and _elsewhere(home, req):
        return  # the node makes sure of the image when the run is sent there
    client = docker_ops.connect()
    if not req.dockerfile:
        docker_ops.ensure_image(client, str(spec["image"]), home.settings.pull_timeout_s)
        return
    dockerfile = (cwd / req.dockerfile).resolve()
    spec["dockerfile"] = str(dockerfile)
    try:
        from orbit.execute import build  # BuildKit through the docker CLI: only for a Dockerfile

        built = build.build_image(client, home, dockerfile, environ, progress)
    except build.BuildFailed as exc:
        spec["image"] = None
        prepared.build_error = str(exc)
        prepared.files[BUILD_LOG] = exc.log.encode()
        return
    spec["image"] = built.tag
    spec["build"] = {"tag": built.tag, "reused": built.reused}
    if built.log:
        prepared.files[BUILD_LOG] = built.log.encode()


def prepare(
    home: Home,
    req: Request,
    *,
    cwd: Path,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
) -> Prepared:
    """Check everything, take the snapshot, make sure of the image; writes no run.

    Raises on any bad input. A Dockerfile that fails to build is the one exception: the result
    carries `build_error` and the log, for `submit` to record as a failed run.
    """
    need, env, secrets, mounts, uses = _check(home, req, cwd, environ)
    if _elsewhere(home, req):
        why = _only_here(req, mounts)
        if why:
            raise UsageError(f"--node {req.node}: {why}")
    project, files = _project(home, req, cwd)
    spec: dict[str, Any] = {
        "name": req.name,
        "group": req.group,
        "group_cap": req.group_cap,
        "folder": req.folder,
        "tags": req.tags,
        "params": req.params,
        "image": req.image or home.settings.default_image,
        "dockerfile": None,
        "command": req.command,
        "resources": {
            "cpus": need.cpus,
            "mem_gb": need.mem_gb,
            "gpus": req.gpus,
            "gpu_mem_gb": req.gpu_mem_gb,
            "gpu_ids": sorted(set(req.gpu_ids)) if req.gpu_ids else None,
        },
        "env": env,
        "pass_env": sorted(secrets),
        "mounts": [*mounts, *(u.mount() for u in uses), *req.run_mounts],
        # Which datasets the run read (the mounts say only where from); only when it used any.
        **({"datasets": [u.record() for u in uses]} if uses else {}),
        "network": req.network,
        "timeout_min": req.timeout_min,
        "user": req.user or (None if req.root else f"{os.getuid()}:{os.getgid()}"),
        "project": project,
        "node": _here(home),
        "submitted_by": {"user": environ.get("USER") or str(os.getuid()), "pid": os.getpid()},
    }
    if req.node is not None:
        spec["pin_node"] = req.node
    if req.workdir != "/workspace":
        spec["workdir"] = req.workdir
    if req.run_dirs:
        spec["run_dirs"] = list(req.run_dirs)
    if req.commit:
        spec["commit"] = req.commit
    spec.update(req.record)
    agent = agent_from_environ(environ)
    if agent is not None:  # launched from an agent session (Orbit's SessionStart hook)
        spec["agent"] = agent
    prepared = Prepared(spec, Secrets(env=secrets), files)
    if req.in_container is not None:
        _with_agent(spec, prepared.secrets, req.in_container, network_given=req.network)
    _image(home, req, prepared, cwd=cwd, environ=environ, progress=progress)
    if req.in_container is not None and "PATH" not in env:
        image_path = docker_ops.image_path(docker_ops.connect(), str(spec["image"]))
        spec["env"]["PATH"] = ":".join([*req.in_container.path, image_path])
    return prepared


def _only_here(req: Request, mounts: list[dict[str, Any]]) -> str | None:
    """Why the request cannot run on another node, or None."""
    if mounts:
        return "-m mounts a path of this machine (register the data on the node instead)"
    if req.dockerfile:
        return "--dockerfile builds the image on this machine (build it on the node, give --image)"
    if req.no_snapshot:
        return "--no-snapshot mounts the repository of this machine"
    if req.in_container is not None:
        return "--auth uses an agent login of this machine"
    return None


def _here(home: Home) -> str:
    from orbit.store.nodes import local_name

    return local_name(home)


def _with_agent(
    spec: dict[str, Any], secrets: Secrets, agent: InContainer, network_given: str
) -> None:
    """Add an in-container agent to the run: its record, environment, mounts and secrets."""
    if agent.host_network:
        if network_given == "none":
            raise UsageError(
                f"auth profile {agent.record.get('profile')!r} uses the host network: "
                "drop --no-network"
            )
        spec["network"] = "host"
    spec["auth"] = agent.record
    spec["env"] = {**agent.env, **spec["env"]}
    spec["mounts"] = [*spec["mounts"], *agent.mounts]
    spec["run_dirs"] = sorted({*spec.get("run_dirs", []), *agent.run_dirs})
    secrets.env.update(agent.secrets.env)
    secrets.redact.extend(agent.secrets.redact)
    secrets.files.update(agent.secrets.files)


def submit(
    home: Home, prepared: Prepared, *, actor: str, recorded: Callable[[str], None] | None = None
) -> Run:
    """Write the prepared run (queued for the scheduler), or, when its Dockerfile failed to
    build, record it as failed with its build log and raise DockerError naming both.
    `recorded`: see submit_many."""
    if prepared.build_error is not None:
        run = RunStore(home).create(
            prepared.spec,
            state=RunState.FAILED,
            reason=prepared.build_error,
            actor=actor,
            extra_files=prepared.files,
            status_fields={"finished_at": now_iso()},
            recorded=recorded,
        )
        raise DockerError(
            f"{prepared.build_error} (run {run.id}; build log: {run.path(BUILD_LOG)})"
        )
    (run,) = submit_many(home, [prepared], actor=actor, recorded=recorded)
    return run


def submit_many(
    home: Home,
    batch: Sequence[Prepared],
    *,
    actor: str,
    revealed: Callable[[Run], None] | None = None,
    recorded: Callable[[str], None] | None = None,
) -> list[Run]:
    """Write prepared runs (none with a build error), queued for the scheduler, as one batch:
    one id lock, one sync, one index append (orbit/store/creation.py). Each run is whole
    when it appears; `revealed(run)` is called as each does, and on an error the runs that
    appeared stay and the others are removed. `recorded(created_at)` is called once the
    batch is recorded, before its runs are written (the group's launch is noted there)."""
    written: list[Run] = []

    def note(run: Run) -> None:
        written.append(run)
        if revealed:
            revealed(run)

    news = [NewRun(p.spec, p.files, _keeper(home, p)) for p in batch]
    try:
        return create_runs(
            home,
            news,
            reason="waiting for the scheduler",
            actor=actor,
            revealed=note,
            recorded=recorded,
        )
    finally:
        _record_sessions(home, written)


def _keeper(home: Home, prepared: Prepared) -> Callable[[str, Path], None] | None:
    """What a run needs beside its files before it appears: its secrets, its mount points."""
    secrets = prepared.secrets
    run_dirs = prepared.spec.get("run_dirs") or []
    if not secrets and not run_dirs:
        return None

    def keep(run_id: str, staging: Path) -> None:
        # Written before the run appears, so no tick can start it without them. Kept outside
        # the run directory, mode 0600, and deleted when the run finishes.
        if secrets:
            run_secrets.write(home, run_id, secrets)
        for folder in run_dirs:  # mount points of the run directory
            (staging / folder).mkdir(parents=True, exist_ok=True)
            # Writable by the container's user, which may be neither you nor root (a bench
            # task's [agent].user), as Harbor makes its /logs folders.
            (staging / folder).chmod(0o777)

    return keep


def _record_sessions(home: Home, runs: list[Run]) -> None:
    """Name the runs in the index of the agent session that launched them, if any."""
    by_session: dict[str, tuple[Mapping[str, Any], list[str]]] = {}
    for run in runs:
        agent = run.spec.get("agent")
        if agent:
            key = str(agent.get("session_id"))
            by_session.setdefault(key, (agent, []))[1].append(run.id)
    for agent, ids in by_session.values():
        try:
            record_session_run(home, agent, *ids)
        except (OSError, OrbitError):
            pass  # the run exists and names its session in run.yaml; the index is a convenience

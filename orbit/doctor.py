"""Health checks behind `orbit doctor` (and the web view's settings page)."""

from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from orbit.agents import auth, plugin
from orbit.agents.incontainer import locate
from orbit.agents.skill_copy import package_docs
from orbit.errors import DockerError, OrbitError, from_os_error
from orbit.execute.docker_ops import cdi_spec, connect, gpu_mode
from orbit.execute.engine import NotFound
from orbit.human import fmt_num
from orbit.notify import profiles
from orbit.notify.queue import damaged_dir
from orbit.notify.status import Backlog, backlog
from orbit.sched import machine
from orbit.sched.gpus import open_gpus
from orbit.sched.resources import GIB
from orbit.store import datasets, nodes
from orbit.store.home import Home
from orbit.store.locks import stuck_scheduler

OK, WARN, FAIL = "OK", "WARN", "FAIL"
MIN_FREE_GB = 10.0
DISTRIBUTION = "orbit-exp"  # pyproject.toml's name: its requirements are what doctor checks
EXTRA = re.compile(r"\bextra\s*==")  # a requirement of an extra (dev), not of Orbit


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


def _device(path: Path) -> int | None:
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def check_docker() -> tuple[list[Check], dict[str, Any], Any]:
    """The engine's checks, its `info` and a client (None when it cannot be reached)."""
    sock = Path("/var/run/docker.sock")
    checks = []
    try:
        client = connect(timeout=10)
    except DockerError as exc:
        fix = str(exc).split("; ", 1)[-1]
        checks.append(Check("docker", FAIL, str(exc).split(";")[0], fix))
        return checks, {}, None
    info = client.info()
    version = client.version().get("Version", "?")
    cgroup = f"cgroup v{info.get('CgroupVersion', '?')}, {info.get('CgroupDriver', '?')} driver"
    checks.append(Check("docker", OK, f"engine {version} reachable ({cgroup})"))
    if sock.exists() and not os.access(sock, os.R_OK | os.W_OK):
        checks.append(
            Check(
                "docker access",
                WARN,
                f"no read/write access to {sock}",
                "add your user to the docker group",
            )
        )
    else:
        checks.append(Check("docker access", OK, f"user {os.getuid()} can use the engine"))
    return checks, info, client


PATHS_FIX = (
    "run Orbit where the Docker engine runs, in the same file system view: not with DOCKER_HOST "
    "pointing at another machine, nor against an engine inside a container"
)


def check_paths(home: Home, client: Any) -> Check:
    """Whether the engine sees Orbit's runs directory where Orbit does (runs bind-mount their
    output/ and metrics.jsonl from there): a nonce written under it must read back the same
    through a container that bind-mounts it. The container is created, never started, and
    removed; the probe directory is removed too."""
    runs = home.runs_dir
    try:
        home.ensure()
        probe = Path(tempfile.mkdtemp(prefix=".doctor-", dir=runs))  # dot: no run listing sees it
    except OSError as exc:
        problem = from_os_error(exc, where=str(runs)) or exc.strerror
        return Check("docker paths", WARN, f"cannot write a probe under {runs}: {problem}", "")
    try:
        nonce = secrets.token_hex(16)
        (probe / "nonce").write_text(nonce)
        seen, problem = _read_through_docker(client, probe)
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if seen == nonce:
        return Check("docker paths", OK, f"the engine sees {runs} as Orbit does")
    where = _engine_place()
    if problem is None:
        problem = f"the engine{where} sees another {runs} (a file written there is not in it)"
    elif "does not exist" in problem:
        problem = f"the engine{where} does not see {runs} (bind mounts of it fail: no such path)"
    else:
        problem = f"the engine{where} cannot bind-mount {runs}: {problem}"
    return Check("docker paths", WARN, problem, PATHS_FIX)


def _engine_place() -> str:
    host = os.environ.get("DOCKER_HOST", "")
    return f" at {host}" if host and not host.startswith("unix://") else ""


def _read_through_docker(client: Any, probe: Path) -> tuple[str | None, str | None]:
    """The nonce as a container bind-mounting `probe` sees it, or None and why not."""
    created = None
    try:
        mount = {"Target": "/probe", "Source": str(probe), "Type": "bind", "ReadOnly": True}
        created = client.create(
            {
                "Image": _probe_image(client),
                "Cmd": ["/orbit-doctor-probe"],  # never started
                "HostConfig": {"Mounts": [mount]},
                "Labels": {"orbit.doctor": "paths"},
            }
        )
        data = created.get_archive("/probe/nonce").read()
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            extracted = tar.extractfile(member) if member else None
            return (extracted.read().decode() if extracted else None), None
    except NotFound:
        return None, None  # mounted, but not the directory Orbit wrote to
    except DockerError as exc:
        return None, str(getattr(exc, "explanation", None) or exc)
    finally:
        if created is not None:
            try:
                created.engine.request(
                    "DELETE", f"/containers/{created.id}", query={"force": 1, "v": 1}
                ).read()
            except DockerError:
                pass


PROBE_IMAGE = "orbit-doctor/empty:1"  # an image without files, for an engine that has none


def _probe_image(client: Any) -> str:
    """Any local image (a container that is never started needs no particular one), else an
    empty one imported from an empty tar (no network)."""
    images = client.call("GET", "/images/json") or []
    if images:
        return str(images[0]["Id"])
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()
    repository, tag = PROBE_IMAGE.split(":")
    client.request(
        "POST",
        "/images/create",
        query={"fromSrc": "-", "repo": repository, "tag": tag},
        data=empty.getvalue(),
        content_type="application/x-tar",
        timeout=None,
    ).read()
    return PROBE_IMAGE


# How to get a runnable image without a registry; scripts/build-test-images.sh does the same
# (with trimming and a cache) in Orbit's source, and the orbit skill's recipes.md explains it.
IMAGE_RECIPE = (
    "without a registry, build one (as root): `debootstrap --variant=minbase --include=python3 "
    "bookworm DIR && tar -C DIR -c . | docker import - local/python3:bookworm`, then `orbit "
    "config set default_image local/python3:bookworm` (python3-minimal alone lacks json; "
    "Orbit's source: scripts/build-test-images.sh)"
)


BUILT_PREFIX = "orbit-build/"  # what `--dockerfile` builds (execute/build.py): not to pick


def check_image(home: Home, client: Any) -> Check:
    """Whether runs have an image without pulling: the configured `default_image` is local, or,
    with none configured, which images are. Nothing is pulled."""
    wanted = home.settings.default_image
    if wanted:
        if client.image(wanted) is not None:
            return Check("image", OK, f"default image {wanted} is local")
        detail = f"default image {wanted} is not local: a run without --image pulls it first"
        return Check("image", WARN, detail, f"`docker pull {wanted}`; {IMAGE_RECIPE}")
    images = sorted(client.call("GET", "/images/json") or [], key=lambda i: -i.get("Created", 0))
    tags = [
        t
        for i in images
        for t in i.get("RepoTags") or []
        if t not in ("<none>:<none>", PROBE_IMAGE) and not t.startswith(BUILT_PREFIX)
    ]
    if not tags:
        return Check("image", WARN, "no image is local, and no default_image set", IMAGE_RECIPE)
    shown = ", ".join(tags[:6]) + (f" and {len(tags) - 6} more" if len(tags) > 6 else "")
    return Check("image", OK, f"no default_image (runs need --image); local, newest first: {shown}")


def doc(name: str) -> str:
    """Where docs/NAME is on this machine: the package ships Orbit's docs."""
    path = package_docs() / name
    return str(path) if path.is_file() else f"docs/{name}"


def check_disk(label: str, path: Path) -> Check:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    free_gb = usage.free / 1024**3
    on_root = _device(path) == _device(Path("/"))
    where = " (on the system disk)" if on_root else ""
    detail = f"{path}: {free_gb:.1f} GiB free of {usage.total / 1024**3:.0f} GiB{where}"
    if free_gb < MIN_FREE_GB:
        return Check(label, FAIL, detail, "free some space or move it to a larger disk")
    if on_root and label == "data directory":
        return Check(label, WARN, detail, "for large outputs: `orbit config data /big/disk/orbit`")
    return Check(label, OK, detail)


def check_gpus(home: Home, runtimes: list[str]) -> list[Check]:
    """The GPU source (stand-in or NVML) and how GPUs would reach containers (CDI or runtime)."""
    try:
        reader = open_gpus(home)
        gpus = reader.read()
    except OrbitError as exc:
        return [Check("gpus", FAIL, str(exc), f"fix the stand-in file ({doc('gpus.md')})")]
    if reader.kind == "fake":
        names = ", ".join(f"{g.index}: {g.name}" for g in gpus) or "none listed"
        return [Check("gpus", OK, f"stand-in GPUs from ORBIT_FAKE_GPUS/fake_gpus ({names})")]
    if reader.kind == "none":
        return [
            Check(
                "gpus",
                WARN,
                "no GPU usable through NVML; CPU runs work",
                "for GPU runs install the NVIDIA driver; to try Orbit's GPU scheduling without "
                f"one, see {doc('gpus.md')} (ORBIT_FAKE_GPUS)",
            )
        ]
    checks = [
        Check("gpus", OK, f"{len(gpus)} GPU(s) through NVML: " + ", ".join(g.name for g in gpus))
    ]
    spec = cdi_spec()
    if gpu_mode(home) == "cdi" and spec is not None:
        checks.append(Check("gpu access", OK, f"CDI spec {spec}: GPUs are passed by CDI name"))
    elif "nvidia" in runtimes:
        checks.append(
            Check(
                "gpu access",
                OK,
                "NVIDIA runtime registered with Docker: GPUs are passed as device requests by UUID",
                "",
            )
        )
    else:
        checks.append(
            Check(
                "gpu access",
                FAIL,
                "neither a CDI spec for nvidia.com/gpu nor the NVIDIA runtime in Docker",
                "install the NVIDIA Container Toolkit, then either "
                "`nvidia-ctk runtime configure --runtime=docker` or a CDI spec: "
                "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`",
            )
        )
    return checks


def runtime_requirements() -> list[str]:
    """The distributions Orbit needs to run, as the installed orbit-exp declares them (the
    `dev` extra's left out). Raises PackageNotFoundError when orbit-exp is not installed."""
    declared = metadata.requires(DISTRIBUTION) or []
    return [
        re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0] for req in declared if "extra" not in req
    ]


def check_packages(required: list[str]) -> Check:
    """OK with the version of each distribution in `required`, or FAIL naming the missing."""
    versions, missing = [], []
    for name in required:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        return Check("packages", FAIL, "missing: " + ", ".join(missing), "pip install -e .")
    return Check("packages", OK, ", ".join(versions))


def check_python() -> list[Check]:
    checks = [Check("python", OK if sys.version_info >= (3, 11) else FAIL, sys.version.split()[0])]
    try:
        checks.append(check_packages(runtime_requirements()))
    except metadata.PackageNotFoundError:
        detail = f"{DISTRIBUTION} is not installed: its requirements are unknown"
        checks.append(Check("packages", FAIL, detail, "pip install -e ."))
    return checks


def check_privacy(home: Home) -> list[Check]:
    """Whether other users can read the runs (logs, notes, outputs): only on purpose."""
    checks = []
    places = [("home", home.root)]
    if home.data_dir != home.root:
        places.append(("data directory", home.data_dir))
    for label, path in places:
        try:
            mode = os.stat(path).st_mode & 0o777
        except OSError:
            continue  # not created yet: it will be, 0700
        name = f"{label} access"
        if mode & 0o007:
            fix = (
                f"`chmod -R go-rwx {path}` to make it private, or `chmod -R g+rX,o-rwx {path}` "
                f"to share it with your group only ({doc('configuration.md')})"
            )
            detail = f"{path} is readable by every user (mode {mode:04o}): logs, notes, outputs"
            checks.append(Check(name, WARN, detail, fix))
        elif mode & 0o070:
            checks.append(Check(name, OK, f"{path} is shared with its group (mode {mode:04o})"))
        else:
            checks.append(Check(name, OK, f"{path} is private (mode {mode:04o})"))
    return checks


def check_scheduler_lock(home: Home) -> Check:
    stuck = stuck_scheduler(home.locks_dir)
    if stuck:
        detail, _, fix = stuck.partition(": ")
        return Check("scheduler lock", FAIL, detail, fix)
    return Check("scheduler lock", OK, "not stuck (ticks can run)")


def check_agents(home: Home, environ: Mapping[str, str]) -> list[Check]:
    """Which agents have Orbit's skills, hooks and MCP server (`orbit plugin`), and which copy
    is stale. An agent without them is information, not a problem."""
    try:
        rows = plugin.status(home, environ)["agents"]
    except OrbitError as exc:
        return [Check("agent plugin", WARN, str(exc), "`orbit plugin update`")]
    installed = [r for r in rows if r["installed"]]
    if not installed:
        names = "|".join(plugin.agent_names())
        detail = f"no agent has Orbit's skills (`orbit plugin install {names}`)"
        return [Check("agent plugin", OK, detail)]
    checks = []
    for row in installed:
        hooks = {None: "", True: " and hooks", False: ", hooks missing"}[row["hooks"]]
        detail = f"{row['agent']}: skills{hooks} {row['version']} in {row['skills_dir']}"
        if row["mcp"] is not None:
            detail += ", MCP server" if row["mcp"]["registered"] else ", MCP server missing"
        if row["stale"]:
            checks.append(Check("agent plugin", WARN, detail + " (stale)", "`orbit plugin update`"))
        else:
            checks.append(Check("agent plugin", OK, detail))
    missing = [r["agent"] for r in rows if not r["installed"]]
    if missing:
        checks.append(Check("agent plugin", OK, "not installed for " + ", ".join(missing)))
    return checks


def check_auth(home: Home, environ: Mapping[str, str]) -> list[Check]:
    """Auth profiles (`orbit auth`): a private auth.json, and the CLI each profile's runs mount
    installed on this machine. Without profiles: nothing to say."""
    path = auth.auth_path(home)
    try:
        profiles = auth.load(home)
    except OrbitError as exc:
        return [Check("auth profiles", FAIL, str(exc), f"fix or remove {path}")]
    if not profiles:
        return []
    checks = []
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        checks.append(Check("auth profiles", FAIL, f"{path} is mode {mode:o}", f"chmod 600 {path}"))
    for harness in sorted({p.harness for p in profiles.values()}):
        names = ", ".join(sorted(n for n, p in profiles.items() if p.harness == harness))
        try:
            cli = locate(harness, environ)
        except OrbitError as exc:
            checks.append(Check("auth profiles", WARN, f"{names}: {exc}"))
            continue
        checks.append(Check("auth profiles", OK, f"{names}: {harness} from {cli.exe}"))
    return checks


def check_notify(home: Home) -> list[Check]:
    """The notification profiles and what waits to be sent (only once there are profiles)."""
    path = profiles.path_of(home)
    try:
        found = profiles.load(home)
    except OrbitError as exc:
        return [Check("notify", FAIL, str(exc), f"fix or remove {path}")]
    if not found:
        return []
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        return [Check("notify", FAIL, f"{path} is mode {mode:o}", f"chmod 600 {path}")]
    names = ", ".join(f"{n} ({p.kind})" for n, p in sorted(found.items()))
    waiting = backlog(home)
    check = _backlog_check(names, waiting)
    if not waiting.damaged:
        return [check]
    folder = damaged_dir(home)
    detail = f"{check.detail}; {waiting.damaged} damaged file(s) kept aside in {folder}, never sent"
    fix = (
        f"`orbit notify log` names each one and why; look with `ls -R {folder}`, then remove "
        f"the folder (`rm -r {folder}`)"
    )
    return [Check("notify", WARN, detail, fix)]


def _backlog_check(names: str, waiting: Backlog) -> Check:
    if not waiting.queued and not waiting.ready_events:
        return Check("notify", OK, f"{names}; nothing waiting")
    detail = (
        f"{names}; {waiting.queued} message(s) queued, {waiting.ready_events} run(s) not yet "
        f"turned into messages, oldest {waiting.oldest_s or 0:.0f} s; sender "
        f"{'running' if waiting.sender_alive else 'not running'}"
    )
    stuck = not waiting.sender_alive or (waiting.oldest_s or 0) > 3600
    fix = "`orbit scheduler tick` starts a sender; `orbit notify log` shows the answers"
    return Check("notify", WARN if stuck else OK, detail, fix if stuck else "")


def check_datasets(home: Home) -> list[Check]:
    """The named datasets (only once there are some): each path must still exist. One stat
    each, never a walk of the data."""
    path = datasets.path_of(home)
    try:
        found = datasets.load(home)
    except OrbitError as exc:
        return [Check("datasets", FAIL, str(exc), f"fix or remove {path}")]
    if not found:
        return []
    gone = [d for _, d in sorted(found.items()) if d.kind() is None]
    if not gone:
        return [Check("datasets", OK, f"{len(found)} named, every path present")]
    detail = "paths gone: " + ", ".join(f"{d.name} ({d.path})" for d in gone)
    fix = "`orbit data add NAME NEWPATH --replace`, or `orbit data rm NAME`"
    return [Check("datasets", WARN, f"{detail}; `-d` of them is refused", fix)]


def check_config(home: Home) -> tuple[list[Check], Home]:
    """config.yaml's check, and the home to check the rest with: with the defaults when the
    file is damaged, so that one bad file hides nothing else."""
    problem = home.config_problem()
    if problem is not None:
        detail, _, fix = problem.partition("; ")
        return [Check("config", FAIL, detail, fix)], home.with_defaults()
    checks = [Check("config", OK, f"{home.config_path}: readable")]
    checks.extend(check_capacity(home))
    return checks, home


def check_capacity(home: Home) -> list[Check]:
    """A total_cpus or total_mem_gb above the machine: leases add up to more than it has, and
    no run gets more CPUs than it has (`orbit config set KEY null` uses what it has)."""
    checks = []
    settings = home.settings
    totals = (
        ("total_cpus", settings.total_cpus, float(machine.cpu_count()), "CPUs"),
        ("total_mem_gb", settings.total_mem_gb, machine.memory()[0] / GIB, "GiB"),
    )
    for key, value, real, unit in totals:
        if value is not None and value > real + 1e-9:
            detail = (
                f"{key} {fmt_num(value)} is more than this machine's {fmt_num(real)} "
                f"{unit}: runs lease more than it has"
                + (f", each at most {fmt_num(real)}" if key == "total_cpus" else "")
            )
            checks.append(Check(key, WARN, detail, f"`orbit config set {key} null`"))
    return checks


def check_nodes(home: Home) -> list[Check]:
    """The registered nodes' file (only once there are nodes): it must be readable. Nodes are
    not reached from here (`orbit node ls` does that)."""
    path = nodes.registry_path(home)
    try:
        found = nodes.load(home)
    except OrbitError as exc:
        fix = f"fix or remove {path} (then `orbit node add` the nodes again)"
        return [Check("nodes", FAIL, str(exc), fix)]
    if not found:
        return []
    return [Check("nodes", OK, f"{len(found)} registered: {', '.join(sorted(found))}")]


def run_checks(home: Home, environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    checks, home = check_config(home)
    docker_checks, info, client = check_docker()
    checks.extend(docker_checks)
    if client is not None:
        checks.append(check_paths(home, client))
        checks.append(check_image(home, client))
    checks.append(check_disk("data directory", home.data_dir))
    checks.extend(check_privacy(home))
    checks.append(check_scheduler_lock(home))
    if info.get("DockerRootDir"):
        checks.append(check_disk("docker data root", Path(info["DockerRootDir"])))
    checks.extend(check_gpus(home, list(info.get("Runtimes") or {})))
    checks.extend(check_python())
    checks.extend(check_agents(home, os.environ if environ is None else environ))
    checks.extend(check_auth(home, os.environ if environ is None else environ))
    checks.extend(check_notify(home))
    checks.extend(check_datasets(home))
    checks.extend(check_nodes(home))
    return [asdict(c) for c in checks]

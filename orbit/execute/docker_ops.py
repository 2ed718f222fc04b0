"""Docker through engine.py: images and container creation (builds: build.py).

Containers get a deterministic name (`orbit-<home tag>-<run id>`) so a retried create hits a
409 instead of making a duplicate, immutable labels tying them to their run and ORBIT_HOME,
`init=True` to reap zombies, and a size-capped json-file log so /var/lib/docker cannot fill.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from orbit.errors import CorruptError, DockerError
from orbit.execute.engine import START_HINT, Container, Engine, EngineError, NotFound
from orbit.sched.resources import GIB
from orbit.store import secrets
from orbit.store.home import Home
from orbit.store.model import METRICS, OUTPUT, Run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["START_HINT", "Container", "Engine"]


def connect(timeout: float = 60) -> Engine:
    """The engine DOCKER_HOST names, once it has answered a ping (DockerError if not)."""
    engine = Engine(timeout=timeout)
    engine.ping()
    return engine


def container_name(home: Home, run_id: str) -> str:
    return f"orbit-{home.tag}-{run_id}"


def labels(home: Home, run_id: str) -> dict[str, str]:
    return {"orbit.run": run_id, "orbit.home": str(home.root), "orbit.home-tag": home.tag}


def find_container(engine: Engine, home: Home, run_id: str) -> Container | None:
    container = engine.container(container_name(home, run_id))
    # A container of this name from another home cannot exist (the tag differs); the label check
    # guards against a hand-made container that happens to share the name.
    if container is None or container.labels.get("orbit.home") != str(home.root):
        return None
    return container


def ensure_image(engine: Engine, image: str, pull_timeout: float) -> str:
    """The image's id, pulling it when it is not local; a clear error when neither works."""
    try:
        found = engine.image(image)
    except EngineError as exc:
        raise DockerError(f"image {image!r}: {exc.explanation}") from None
    if found is not None:
        return str(found.get("Id"))
    # A pull that keeps sending progress never hits an HTTP timeout: give it a real deadline.
    outcome: dict[str, Any] = {}

    def pull() -> None:
        try:
            engine.pull(image)
            outcome["id"] = str((engine.image(image) or {}).get("Id"))
        except Exception as exc:
            outcome["error"] = str(getattr(exc, "explanation", None) or exc).splitlines()[0][:200]

    worker = threading.Thread(target=pull, daemon=True)
    worker.start()
    worker.join(pull_timeout)
    if "id" in outcome:
        return str(outcome["id"])
    detail = outcome.get("error") or f"no result within {pull_timeout:g} s"
    raise DockerError(f"image not found: {image} (not local, and pull failed: {detail})")


DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def image_path(engine: Engine, image: str) -> str:
    """The PATH an image sets for its containers (Docker's default when it sets none)."""
    try:
        env = ((engine.image(image) or {}).get("Config") or {}).get("Env") or []
    except DockerError:
        return DEFAULT_PATH
    for item in env:
        if isinstance(item, str) and item.startswith("PATH="):
            return item[len("PATH=") :]
    return DEFAULT_PATH


CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


def cdi_spec() -> Path | None:
    """A CDI spec that defines NVIDIA GPUs (`nvidia-ctk cdi generate`), if there is one."""
    for folder in CDI_DIRS:
        try:
            for path in sorted(folder.iterdir()):
                if path.suffix in (".yaml", ".yml", ".json") and "nvidia.com/gpu" in path.read_text(
                    errors="replace"
                ):
                    return path
        except OSError:
            continue
    return None


def gpu_mode(home: Home) -> str:
    """How leased GPUs reach a container: "fake" (the stand-in: environment only), "cdi"
    (CDI device names) or "nvidia" (device requests for the NVIDIA runtime)."""
    if home.environ.get("ORBIT_FAKE_GPUS") or home.settings.fake_gpus:
        return "fake"
    return "cdi" if cdi_spec() is not None else "nvidia"


def gpu_access(mode: str, gpus: list[dict[str, Any]]) -> tuple[list[Any], dict[str, str]]:
    """Docker device requests and environment that make exactly `gpus` visible."""
    uuids = [str(g["uuid"]) for g in gpus]
    if not uuids:
        # Images such as nvidia/cuda default to every GPU under the NVIDIA runtime: none here.
        return [], {"NVIDIA_VISIBLE_DEVICES": "none"}
    env = {
        "NVIDIA_VISIBLE_DEVICES": ",".join(uuids),
        "CUDA_VISIBLE_DEVICES": ",".join(uuids),  # CUDA accepts UUIDs: no index mismatch
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "ORBIT_GPU_HOST_INDICES": ",".join(str(g.get("index")) for g in gpus),
    }
    if mode == "fake":
        return [], env
    if mode == "cdi":
        ids = [f"nvidia.com/gpu={u}" for u in uuids]
        return [{"Driver": "cdi", "Count": 0, "DeviceIDs": ids, "Options": {}}], env
    # Count 0 with DeviceIDs: these devices (Count -1 would be every GPU).
    request = {
        "Driver": "nvidia",
        "Count": 0,
        "DeviceIDs": uuids,
        "Capabilities": [["gpu"]],
        "Options": {},
    }
    return [request], env


def container_config(home: Home, run: Run, secrets: dict[str, str]) -> dict[str, Any]:
    """The Engine API's create document for the run's container (its name: container_name)."""
    spec = run.spec
    if run.resources.mem_gb <= 0 or run.resources.cpus <= 0:  # a hand-edited run.yaml
        raise CorruptError(f"run {run.id}: run.yaml lacks resources.cpus or resources.mem_gb")
    mem_bytes = int(run.resources.mem_gb * GIB)
    gpus = list(run.lease.gpus)
    device_requests, gpu_env = gpu_access(gpu_mode(home), gpus)
    env = {
        **gpu_env,
        "ORBIT_RUN_ID": run.id,
        "ORBIT_OUTPUT": "/orbit/output",
        "ORBIT_METRICS": "/orbit/metrics.jsonl",
        **(spec.get("env") or {}),
        **secrets,
    }
    mounts = [
        _bind("/orbit/output", run.path(OUTPUT), read_only=False),
        _bind("/orbit/metrics.jsonl", run.path(METRICS), read_only=False),
        *(_mount(home, run, m) for m in spec.get("mounts") or []),
    ]
    project = run.project
    if project.get("mode") == "mount":
        mounts.append(_bind("/workspace", project["path"], read_only=True))
    network = {"bridge": "bridge", "none": "none", "host": "host"}[spec.get("network", "bridge")]
    config: dict[str, Any] = {
        "Image": spec["image"],
        "Cmd": [str(part) for part in spec["command"]],
        "Labels": labels(home, run.id),
        "Env": [f"{key}={value}" for key, value in env.items()],
        "HostConfig": {
            "Mounts": mounts,
            "NanoCpus": int(run.resources.cpus * 1e9),
            "Memory": mem_bytes,
            "MemorySwap": mem_bytes,
            # A fork bomb would otherwise stop every user of the machine from forking.
            "PidsLimit": home.settings.pids_limit,
            "NetworkMode": network,
            "Init": True,
            "DeviceRequests": device_requests or None,
            "LogConfig": {"Type": "json-file", "Config": log_config(home)},
        },
    }
    workdir = spec.get("workdir", "/workspace")  # null: the image's WORKDIR
    if workdir:
        config["WorkingDir"] = workdir
    if spec.get("user"):
        config["User"] = str(spec["user"])
    return config


LOG_FILES = 3
DEFAULT_LOG_FILE = 20 << 20  # a container made before docker_log_mb (or without max-size)


def log_config(home: Home) -> dict[str, str]:
    """Docker's json-file options for a run's container: `docker_log_mb` in LOG_FILES files.
    What Docker keeps is what a new shepherd can still copy after its predecessor died."""
    size = max(1, home.settings.docker_log_mb // LOG_FILES)
    return {"max-size": f"{size}m", "max-file": str(LOG_FILES)}


def log_file_bytes(attrs: dict[str, Any]) -> int:
    """The size of one of Docker's log files for this container (its `max-size`), in bytes."""
    options = ((attrs.get("HostConfig") or {}).get("LogConfig") or {}).get("Config") or {}
    text = str(options.get("max-size") or "").strip().lower()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    try:
        if text[-1:] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text) if text else DEFAULT_LOG_FILE
    except ValueError:
        return DEFAULT_LOG_FILE


def _bind(target: str, source: Any, *, read_only: bool) -> dict[str, Any]:
    return {"Target": target, "Source": str(source), "Type": "bind", "ReadOnly": read_only}


def _mount(home: Home, run: Run, entry: Any) -> dict[str, Any]:
    """One `mounts` entry of run.yaml: a host path (`source`), a folder of the run directory
    (`run_dir`), the run's secret files (`secrets`), or a private tmpfs (`tmpfs`)."""
    if not isinstance(entry, dict) or not str(entry.get("target") or "").startswith("/"):
        raise CorruptError(f"run {run.id}: run.yaml has a bad mounts entry: {entry!r}")
    target = str(entry["target"])
    if entry.get("tmpfs"):  # writable by whichever uid the container runs as
        return {"Target": target, "Type": "tmpfs", "TmpfsOptions": {"Mode": 0o1777}}
    if entry.get("run_dir"):
        source = run.path(str(entry["run_dir"]))
    elif entry.get("secrets"):
        source = secrets.files_dir(home, run.id)
    elif entry.get("source"):
        source = Path(str(entry["source"]))
    else:
        raise CorruptError(f"run {run.id}: run.yaml has a mounts entry without a source: {entry!r}")
    return _bind(target, source, read_only=not entry.get("rw"))


def remove_container(home: Home, run_id: str) -> bool:
    """Remove the run's container if it still exists (force: it may be running); True when one
    was removed. Raises DockerError when Docker cannot be reached."""
    container = find_container(connect(), home, run_id)
    if container is None:
        return False
    try:
        container.remove(force=True)
    except NotFound:
        return False
    except EngineError as exc:
        # Its shepherd removes it at the same moment: done once it is gone.
        if exc.status == 409 and "already in progress" in exc.explanation:
            return _gone(container)
        raise DockerError(f"cannot remove container {container.name}: {exc.explanation}") from None
    return True


def _gone(container: Container, timeout: float = 30.0) -> bool:
    """True once a container that another process is removing no longer exists."""
    deadline = time.monotonic() + timeout
    while container.engine.container(container.id) is not None:
        if time.monotonic() > deadline:
            raise DockerError(f"container {container.name} is still being removed")
        time.sleep(0.05)
    return True

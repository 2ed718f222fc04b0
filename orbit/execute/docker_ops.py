"""Docker through the Docker SDK: client, images and container creation (builds: build.py).

Containers get a deterministic name (`orbit-<home tag>-<run id>`) so a retried create hits a
409 instead of making a duplicate, immutable labels tying them to their run and ORBIT_HOME,
`init=True` to reap zombies, and a size-capped json-file log so /var/lib/docker cannot fill.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orbit.errors import CorruptError, DockerError
from orbit.sched.resources import GIB
from orbit.store import secrets
from orbit.store.home import Home
from orbit.store.model import Run

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

START_HINT = "start it with `sudo systemctl start docker` (or `sudo dockerd &` without systemd)"


def connect(timeout: int = 60) -> docker.DockerClient:
    import docker
    import docker.errors
    import requests.exceptions

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        text = str(exc)
        if "Permission denied" in text:
            raise DockerError(
                "Docker refused access: add your user to the `docker` group "
                "(`sudo usermod -aG docker $USER`, then log in again)"
            ) from None
        if _timed_out(exc):
            raise DockerError(
                f"Docker did not answer within {timeout} s: the daemon accepts connections but "
                "hangs; see `sudo systemctl status docker` (or restart it)"
            ) from None
        raise DockerError(f"Docker is not reachable; {START_HINT}") from None
    return client


def _timed_out(exc: BaseException) -> bool:
    """True when a read timeout is behind `exc` (docker-py wraps it in a DockerException)."""
    import requests.exceptions

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, requests.exceptions.Timeout | TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def container_name(home: Home, run_id: str) -> str:
    return f"orbit-{home.tag}-{run_id}"


def labels(home: Home, run_id: str) -> dict[str, str]:
    return {"orbit.run": run_id, "orbit.home": str(home.root), "orbit.home-tag": home.tag}


def find_container(client: docker.DockerClient, home: Home, run_id: str) -> Container | None:
    import docker.errors

    try:
        container = client.containers.get(container_name(home, run_id))
    except docker.errors.NotFound:
        return None
    # A container of this name from another home cannot exist (the tag differs); the label check
    # guards against a hand-made container that happens to share the name.
    if (container.labels or {}).get("orbit.home") != str(home.root):
        return None
    return container


def ensure_image(client: docker.DockerClient, image: str, pull_timeout: float) -> str:
    """The image's id, pulling it when it is not local; a clear error when neither works."""
    import docker.errors

    try:
        return str(client.images.get(image).id)
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as exc:
        raise DockerError(f"image {image!r}: {exc.explanation or exc}") from None
    # A pull that keeps sending progress never hits an HTTP timeout: give it a real deadline.
    outcome: dict[str, Any] = {}

    def pull() -> None:
        try:
            repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
            outcome["id"] = str(client.images.pull(repo, tag=tag or "latest").id)
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


def image_path(client: docker.DockerClient, image: str) -> str:
    """The PATH an image sets for its containers (Docker's default when it sets none)."""
    import docker.errors

    try:
        env = client.images.get(image).attrs.get("Config", {}).get("Env") or []
    except docker.errors.DockerException:
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
    if home.environ.get("ORBIT_FAKE_GPUS") or home.config.get("fake_gpus"):
        return "fake"
    return "cdi" if cdi_spec() is not None else "nvidia"


def gpu_access(mode: str, gpus: list[dict[str, Any]]) -> tuple[list[Any], dict[str, str]]:
    """Docker device requests and environment that make exactly `gpus` visible."""
    import docker.types

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
        return [docker.types.DeviceRequest(driver="cdi", device_ids=ids)], env
    request = docker.types.DeviceRequest(driver="nvidia", device_ids=uuids, capabilities=[["gpu"]])
    return [request], env


def container_config(home: Home, run: Run, secrets: dict[str, str]) -> dict[str, Any]:
    """Keyword arguments for `containers.create` from the run's request."""
    import docker.types

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
        docker.types.Mount("/orbit/output", str(run.path("output")), type="bind"),
        docker.types.Mount("/orbit/metrics.jsonl", str(run.path("metrics.jsonl")), type="bind"),
        *(_mount(home, run, m) for m in spec.get("mounts") or []),
    ]
    project = run.project
    if project.get("mode") == "mount":
        mounts.append(
            docker.types.Mount("/workspace", project["path"], type="bind", read_only=True)
        )
    network = {"bridge": "bridge", "none": "none", "host": "host"}[spec.get("network", "bridge")]
    return {
        "image": spec["image"],
        "command": list(spec["command"]),
        "name": container_name(home, run.id),
        "labels": labels(home, run.id),
        "environment": env,
        "working_dir": spec.get("workdir", "/workspace"),  # null: the image's WORKDIR
        "user": spec.get("user") or None,
        "mounts": mounts,
        "nano_cpus": int(run.resources.cpus * 1e9),
        "mem_limit": mem_bytes,
        "memswap_limit": mem_bytes,
        # A fork bomb would otherwise stop every user of the machine from forking.
        "pids_limit": int(home.config["pids_limit"]),
        "network_mode": network,
        "init": True,
        "device_requests": device_requests or None,
        "detach": True,
        "log_config": docker.types.LogConfig(
            type="json-file", config={"max-size": "20m", "max-file": "3"}
        ),
    }


def _mount(home: Home, run: Run, entry: Any) -> Any:
    """One `mounts` entry of run.yaml: a host path (`source`), a folder of the run directory
    (`run_dir`), the run's secret files (`secrets`), or a private tmpfs (`tmpfs`)."""
    import docker.types

    if not isinstance(entry, dict) or not str(entry.get("target") or "").startswith("/"):
        raise CorruptError(f"run {run.id}: run.yaml has a bad mounts entry: {entry!r}")
    target = str(entry["target"])
    if entry.get("tmpfs"):  # writable by whichever uid the container runs as
        return docker.types.Mount(target, None, type="tmpfs", tmpfs_mode=0o1777)
    if entry.get("run_dir"):
        source = run.path(str(entry["run_dir"]))
    elif entry.get("secrets"):
        source = secrets.files_dir(home, run.id)
    elif entry.get("source"):
        source = Path(str(entry["source"]))
    else:
        raise CorruptError(f"run {run.id}: run.yaml has a mounts entry without a source: {entry!r}")
    return docker.types.Mount(target, str(source), type="bind", read_only=not entry.get("rw"))


def remove_container(home: Home, run_id: str) -> bool:
    """Remove the run's container if it still exists (force: it may be running); True when one
    was removed. Raises DockerError when Docker cannot be reached."""
    import docker.errors

    container = find_container(connect(), home, run_id)
    if container is None:
        return False
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        raise DockerError(f"cannot remove container {container.name}: {exc.explanation}") from None
    return True

"""What a trial keeps of its solve, in its own folder, for the verify run (and any regrade):

    trials/<trial>/artifacts/<path>      each declared artifact, copied out of the solved image
                                         (a container created from it, never started)
    trials/<trial>/artifacts.json        {"collected": [path…], "missing": [path…]}
    trials/<trial>/logs/artifacts/       a copy of the solve run's /logs/artifacts

An adapter mounts these read-only at the same absolute paths in a separate verifier.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from orbit.errors import DockerError
from orbit.store.files import atomic_write

ARTIFACTS = "artifacts"
MANIFEST = "artifacts.json"
LOG_ARTIFACTS = "logs/artifacts"


def artifact_path(trial_dir: Path, container_path: str) -> Path:
    """Where the artifact at `container_path` is kept in the trial folder."""
    return trial_dir / ARTIFACTS / PurePosixPath(container_path).relative_to("/").as_posix()


def collect(
    trial_dir: Path, image: str | None, paths: list[str], solve_dir: Path
) -> dict[str, Any]:
    """Copy the declared artifacts out of `image` and the solve run's logs/artifacts into the
    trial folder (what was there before is replaced, so a repeat after a crash is harmless);
    the manifest. Raises DockerError when the image cannot be read."""
    dest = trial_dir / ARTIFACTS
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    collected: list[str] = []
    missing: list[str] = []
    if paths and image:
        _from_image(image, paths, trial_dir, collected, missing)
    else:
        missing.extend(paths)
    logs = trial_dir / LOG_ARTIFACTS
    shutil.rmtree(logs, ignore_errors=True)
    source = solve_dir / LOG_ARTIFACTS
    if source.is_dir():
        shutil.copytree(source, logs, symlinks=True)
    else:
        logs.mkdir(parents=True)
    manifest = {"collected": collected, "missing": missing}
    atomic_write(trial_dir / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())
    return manifest


def _from_image(
    image: str, paths: list[str], trial_dir: Path, collected: list[str], missing: list[str]
) -> None:
    from orbit.execute import docker_ops
    from orbit.execute.engine import NotFound

    client = docker_ops.connect()
    try:
        container = client.create({"Image": image, "Cmd": ["true"], "Entrypoint": []})
    except DockerError as exc:
        raise DockerError(f"cannot read the solved image {image}: {_why(exc)}") from None
    try:
        for path in paths:
            if not path.startswith("/"):
                missing.append(path)
                continue
            try:
                stream = container.get_archive(path)
            except NotFound:
                missing.append(path)
                continue
            except DockerError as exc:
                raise DockerError(f"cannot copy {path} out of {image}: {_why(exc)}") from None
            try:
                _extract(stream.chunks(), artifact_path(trial_dir, path).parent)
            finally:
                stream.close()
            collected.append(path)
    finally:
        try:
            container.remove(force=True)
        except DockerError:
            pass


def _extract(stream: Any, into: Path) -> None:
    """Unpack a `get_archive` stream (its top entry is the path's last part) under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as buf:
        for chunk in stream:
            buf.write(chunk)
        buf.seek(0)
        try:
            with tarfile.open(fileobj=buf) as tar:
                tar.extractall(into, filter="data")
        except tarfile.TarError as exc:
            raise DockerError(f"cannot unpack an artifact into {into}: {exc}") from None


def _why(exc: Exception) -> str:
    return str(getattr(exc, "explanation", None) or exc).splitlines()[0][:200]

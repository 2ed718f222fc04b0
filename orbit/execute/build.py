"""Images built from a Dockerfile (`--dockerfile`), with BuildKit through the docker CLI.

Real Dockerfiles use BuildKit syntax (`COPY --chmod=…`, `RUN --mount=type=cache,…`), which the
Engine API's legacy builder (`POST /build` without BuildKit) refuses, so the build runs
`docker build` with DOCKER_BUILDKIT=1. The CLI is the first `docker` on PATH that can build
with BuildKit: a CLI older than 23 has the BuildKit client built in; from 23 on it needs the
buildx plugin, which a separately installed CLI may lack. The CLI is pointed at the engine
Orbit's client uses (DOCKER_HOST or the default socket), never at a CLI context. The image is
tagged by a digest of the build context, so an unchanged context is built once and reused.
There is no build timeout: a build runs until it ends or the command is interrupted (the
docker process is then stopped too).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orbit.errors import DockerError, UsageError
from orbit.execute.engine import DEFAULT_HOST
from orbit.store.childenv import child_environ
from orbit.store.home import Home

if TYPE_CHECKING:
    from orbit.execute.engine import Engine

# The docker CLI from this major version on builds with BuildKit only through buildx.
BUILDX_FROM_MAJOR = 23
PROBE_TIMEOUT_S = 20


class BuildFailed(DockerError):
    """`docker build` ran and failed; `log` is its whole output."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class Built:
    tag: str
    reused: bool  # the image of this context existed already: nothing was built
    log: str  # the build output ("" when reused)


def build_context_hash(dockerfile: Path) -> str:
    """A digest of the Dockerfile and every file of its context directory."""
    context = dockerfile.parent
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(context):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            path = Path(root, name)
            rel = path.relative_to(context).as_posix()
            digest.update(rel.encode() + b"\0")
            try:
                digest.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                continue
    digest.update(b"dockerfile:" + dockerfile.name.encode())
    return digest.hexdigest()


def image_tag(dockerfile: Path) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", dockerfile.parent.name.lower()).strip("-.") or "root"
    return f"orbit-build/{name}:{build_context_hash(dockerfile)[:16]}"


def cli_environ(home: Home, environ: Mapping[str, str]) -> dict[str, str]:
    """The docker CLI's environment: BuildKit on, and the engine Orbit talks to.

    Orbit's engine client (engine.py) reads DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH
    from this process's environment and ignores CLI contexts; the CLI gets exactly those, and an
    explicit DOCKER_HOST (which overrides any context) when Orbit uses the default socket.
    """
    env = child_environ(home, environ)
    for name in ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        env.pop(name, None)
    env["DOCKER_HOST"] = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    env["DOCKER_BUILDKIT"] = "1"
    return env


def _major_version(cli: str, env: Mapping[str, str]) -> int | None:
    """The major version `docker --version` reports ("Docker version 20.10.24+dfsg1, …")."""
    try:
        proc = subprocess.run(
            [cli, "--version"], capture_output=True, text=True, env=env, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"version (\d+)\.", proc.stdout)
    return int(found.group(1)) if proc.returncode == 0 and found else None


def can_buildkit(cli: str, env: Mapping[str, str]) -> bool:
    major = _major_version(cli, env)
    if major is None:
        return False
    if major < BUILDX_FROM_MAJOR:
        return True
    try:
        proc = subprocess.run(
            [cli, "buildx", "version"], capture_output=True, env=env, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def find_cli(env: Mapping[str, str]) -> str:
    """The first `docker` on env's PATH that builds with BuildKit; DockerError when none does."""
    seen: dict[str, str] = {}
    for folder in env.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder, "docker")
        if not folder or not os.path.isfile(path) or not os.access(path, os.X_OK):
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen[real] = path
        if can_buildkit(path, env):
            return path
    if not seen:
        raise DockerError(
            "--dockerfile needs the docker CLI (`docker build`), and there is none on PATH: "
            "install it (Debian: apt install docker.io), or build the image yourself and use "
            "--image"
        )
    raise DockerError(
        f"no docker CLI on PATH can build with BuildKit ({', '.join(seen.values())}: the buildx "
        "plugin is missing): install it (Debian: apt install docker-buildx), or put a docker "
        "CLI older than 23 first on PATH"
    )


def build_image(
    client: Engine,
    home: Home,
    dockerfile: Path,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
) -> Built:
    """Build (or reuse) the image for `dockerfile`.

    Raises BuildFailed (with the log) when the build fails, and DockerError when no docker CLI
    can build with BuildKit.
    """
    if not dockerfile.is_file():
        raise UsageError(f"no Dockerfile at {dockerfile}")
    tag = image_tag(dockerfile)
    if client.image(tag) is not None:
        return Built(tag, True, "")
    env = cli_environ(home, environ)
    cli = find_cli(env)
    argv = [cli, "build", "--progress=plain", "--tag", tag, "--file", str(dockerfile)]
    argv.append(str(dockerfile.parent))
    return _run_build(argv, env, tag, progress)


def _run_build(
    argv: list[str], env: Mapping[str, str], tag: str, progress: Callable[[str], None]
) -> Built:
    header = f"$ DOCKER_BUILDKIT=1 {' '.join(argv)}\n"
    lines = [header]
    progress(header)
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    try:
        for raw in proc.stdout or ():
            text = raw.decode("utf-8", "replace")
            lines.append(text)
            progress(text)
        code = proc.wait()
    finally:
        if proc.poll() is None:  # interrupted: the build stops with the command
            proc.kill()
            proc.wait()
    log = "".join(lines)
    if code != 0:
        last = next((t.strip() for t in reversed(lines[1:]) if t.strip()), f"exit code {code}")
        last = re.sub(r"^(error|ERROR):\s*", "", last)
        raise BuildFailed(f"image build failed: {last[:200]}", log)
    return Built(tag, False, log)

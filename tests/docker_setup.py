"""Helpers that make sure Docker and the local test images are available.

Importable without pytest. Docker Hub is not reachable from CI, so the test
images are built locally by ``scripts/build-test-images.sh``:

* :data:`BUSYBOX_IMAGE` - a FROM-scratch image with a static busybox
  (``sh``, ``sleep``, ``dd``, ``cat`` ... on ``PATH``), ~2 MB.
* :data:`PYTHON_IMAGE` - a debootstrapped minimal Debian with ``python3``
  (also tagged :data:`PYTHON_ALIAS_IMAGE`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = REPO_ROOT / "scripts"
ENSURE_DOCKER_SCRIPT = SCRIPTS_DIR / "ensure-docker.sh"
BUILD_IMAGES_SCRIPT = SCRIPTS_DIR / "build-test-images.sh"

BUSYBOX_IMAGE = "orbit-test/busybox:1"
PYTHON_IMAGE = "orbit-test/python:3"
PYTHON_ALIAS_IMAGE = "orbit/python:local"

__all__ = [
    "BUSYBOX_IMAGE",
    "PYTHON_ALIAS_IMAGE",
    "PYTHON_IMAGE",
    "REPO_ROOT",
    "docker_available",
    "ensure_docker",
    "ensure_test_images",
]


def _run_script(script: Path, timeout: float) -> str:
    """Run a bash script from the repository root; return its combined output.

    Raises RuntimeError (with the script's output) when it fails or times out.
    """
    if not script.is_file():
        raise RuntimeError(f"{script} not found")
    try:
        proc = subprocess.run(
            ["bash", str(script)],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.output or ""
        if isinstance(output, bytes):
            output = output.decode(errors="replace")
        raise RuntimeError(f"{script.name} timed out after {timeout:.0f}s:\n{output}") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"{script.name} failed with exit code {proc.returncode}:\n{proc.stdout}")
    return proc.stdout


def ensure_docker(timeout: float = 900.0) -> None:
    """Install (if needed) and start the Docker engine; RuntimeError on failure."""
    _run_script(ENSURE_DOCKER_SCRIPT, timeout)


def ensure_test_images(timeout: float = 1800.0) -> str:
    """Build the local test images that are missing; return the script's summary."""
    return _run_script(BUILD_IMAGES_SCRIPT, timeout)


def docker_available() -> bool:
    """True if ``docker info`` succeeds right now (no install/start attempted)."""
    try:
        proc = subprocess.run(
            ["docker", "info"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0

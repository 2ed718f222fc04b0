"""Base images for the Harbor fixtures in tests/bench_tasks/ (importable without pytest).

The fixtures' Dockerfiles say `FROM debian:bookworm-slim`, as real Harbor tasks do. Nothing is
pulled: the locally built orbit-test/python:3 (a debootstrapped Debian bookworm with bash and
python3, scripts/build-test-images.sh) is tagged with that name when the name is absent.
"""

from __future__ import annotations

from pathlib import Path

from docker_setup import PYTHON_IMAGE, REPO_ROOT

BENCH_TASKS = REPO_ROOT / "tests" / "bench_tasks"
BASIC = BENCH_TASKS / "harbor-basic"
UNSUPPORTED = BENCH_TASKS / "harbor-unsupported"
DEBIAN_IMAGE = "debian:bookworm-slim"

__all__ = ["BASIC", "BENCH_TASKS", "DEBIAN_IMAGE", "UNSUPPORTED", "ensure_debian_image"]


def ensure_debian_image() -> str:
    """Tag PYTHON_IMAGE as debian:bookworm-slim unless that tag exists; the tag."""
    import docker
    import docker.errors

    client = docker.from_env()
    try:
        client.images.get(DEBIAN_IMAGE)
    except docker.errors.ImageNotFound:
        repository, _, tag = DEBIAN_IMAGE.partition(":")
        client.images.get(PYTHON_IMAGE).tag(repository, tag)
    return DEBIAN_IMAGE


def task_dir(benchmark: Path, name: str) -> Path:
    return benchmark / name

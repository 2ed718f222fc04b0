"""`--dockerfile` builds with BuildKit through the docker CLI, against the real Docker engine.

Every build context carries a fresh nonce file, so its image tag is new and the build really
runs (an existing tag is reused without building); the images are removed afterwards.
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SMALL, Orbit

from orbit.cli import main
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.execute.build import can_buildkit
from orbit.store.files import read_yaml

SCRIPT = "#!/bin/sh\necho hello from the chmod-ed script\n"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def context(tmp_path: Path, busybox: str) -> Iterator[Path]:
    """A build context using BuildKit-only syntax; its image is removed after the test."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "nonce").write_text(uuid.uuid4().hex)
    (ctx / "hello.sh").write_text(SCRIPT)
    (ctx / "hello.sh").chmod(0o644)  # only COPY --chmod makes it executable
    (ctx / "Dockerfile").write_text(
        f"FROM {busybox}\n"
        "COPY --chmod=0755 hello.sh /opt/hello.sh\n"
        "RUN --mount=type=cache,target=/root/.cache touch /root/.cache/seen && echo cache-ok\n"
    )
    yield ctx
    import docker

    client = docker.from_env()
    for image in client.images.list(name="orbit-build/ctx"):
        for tag in image.tags:
            client.images.remove(tag, force=True)


def no_runs(orbit: Orbit) -> bool:
    runs = orbit.home / "runs"
    return not runs.exists() or not os.listdir(runs)


def test_buildkit_dockerfile_builds_and_the_run_sees_the_chmod(orbit: Orbit, context: Path) -> None:
    res = orbit(
        "run",
        "--dockerfile",
        str(context / "Dockerfile"),
        *SMALL,
        "-w",
        "--",
        "sh",
        "-c",
        "stat -c %a /opt/hello.sh && /opt/hello.sh",
    )
    assert res.code == 0, res.err
    assert res.out.splitlines()[:2] == ["755", "hello from the chmod-ed script"]
    assert "cache-ok" not in res.err  # stderr is not a terminal: no build output there
    spec = read_yaml(orbit.run_dir("1") / "run.yaml")
    assert spec["image"].startswith("orbit-build/ctx:")
    assert spec["build"] == {"tag": spec["image"], "reused": False}
    log = (orbit.run_dir("1") / "build.log").read_text()
    assert "DOCKER_BUILDKIT=1" in log.splitlines()[0] and " build " in log.splitlines()[0]
    assert "COPY --chmod=0755 hello.sh" in log and "cache-ok" in log
    # Built once: the second run reuses the image and has no build.log of its own.
    again = orbit("run", "--dockerfile", str(context / "Dockerfile"), *SMALL, "--", "true")
    assert again.code == 0, again.err
    assert read_yaml(orbit.run_dir("2") / "run.yaml")["build"]["reused"] is True
    assert not (orbit.run_dir("2") / "build.log").exists()


def test_build_output_goes_to_a_terminal(orbit: Orbit, context: Path) -> None:
    err = Tty()
    env = Env(environ=dict(orbit.environ), stdout=io.StringIO(), stderr=err, cwd=orbit.cwd)
    code = main(["run", "--dockerfile", str(context / "Dockerfile"), *SMALL, "--", "true"], env)
    assert code == 0, err.getvalue()
    assert "cache-ok" in err.getvalue()


def test_failed_build_is_a_failed_run_with_its_log(orbit: Orbit, context: Path) -> None:
    with (context / "Dockerfile").open("a") as fh:
        fh.write("RUN echo about-to-fail && exit 3\n")
    res = orbit("run", "--dockerfile", str(context / "Dockerfile"), *SMALL, "--", "true")
    assert res.code == ExitCode.DOCKER
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("orbit: image build failed: ")
    build_log = orbit.run_dir("1") / "build.log"
    assert str(build_log) in lines[0]
    assert "about-to-fail" in build_log.read_text()
    status = orbit.status("1")
    assert status["state"] == "failed" and status["reason"].startswith("image build failed")
    assert read_yaml(orbit.run_dir("1") / "run.yaml")["image"] is None


def test_the_cli_talks_to_orbits_engine_not_a_cli_context(
    orbit: Orbit, context: Path, tmp_path: Path
) -> None:
    config = tmp_path / "docker-config"
    config.mkdir()
    (config / "config.json").write_text('{"currentContext": "elsewhere"}')
    orbit.environ["DOCKER_CONFIG"] = str(config)
    orbit.environ["DOCKER_CONTEXT"] = "elsewhere"
    res = orbit("run", "--dockerfile", str(context / "Dockerfile"), *SMALL, "--", "true")
    assert res.code == 0, res.err


def test_no_docker_cli_is_one_line_and_writes_no_run(
    orbit: Orbit, context: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "no-docker-here"
    empty.mkdir()
    orbit.environ["PATH"] = str(empty)
    res = orbit("run", "--dockerfile", str(context / "Dockerfile"), *SMALL, "--", "true")
    assert res.code == ExitCode.DOCKER
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "needs the docker CLI" in lines[0]
    assert no_runs(orbit)


def _docker_clis() -> list[str]:
    found = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder, "docker")
        if folder and os.access(path, os.X_OK) and os.path.realpath(path) not in found:
            found.append(os.path.realpath(path))
    return found


def test_a_cli_without_buildkit_is_passed_over(orbit: Orbit, context: Path, tmp_path: Path) -> None:
    clis = _docker_clis()
    lacking = [c for c in clis if not can_buildkit(c, os.environ)]
    able = [c for c in clis if can_buildkit(c, os.environ)]
    if not lacking or not able:
        pytest.skip("needs one docker CLI without BuildKit (no buildx) and one with it")
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, cli in ((first, lacking[0]), (second, able[0])):
        folder.mkdir()
        (folder / "docker").symlink_to(cli)
    orbit.environ["PATH"] = str(first)
    res = orbit("run", "--dockerfile", str(context / "Dockerfile"), *SMALL, "--", "true")
    assert res.code == ExitCode.DOCKER
    assert "no docker CLI on PATH can build with BuildKit" in res.err
    assert no_runs(orbit)
    orbit.environ["PATH"] = f"{first}{os.pathsep}{second}"
    res = orbit("run", "--dockerfile", str(context / "Dockerfile"), *SMALL, "--", "true")
    assert res.code == 0, res.err
    assert f"{second / 'docker'} build" in (orbit.run_dir("1") / "build.log").read_text()

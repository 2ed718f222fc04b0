"""What a trial reads from its runs: how the solve ended (execution, and whether it is graded),
whether a verify run can be scored, the solved image's name, an image's own defaults.

    execution            graded?  reason when not
    succeeded            yes
    failed (exit N)      yes
    timed out            yes
    out of memory        no       the solve was killed for memory (…)
    lost                 no       the solve run was lost (…)
    cancelled            no       the solve was cancelled
    not started (why)    no       the solve never ran: why
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from orbit.bench.model import Phase
from orbit.execute.submit import Request
from orbit.store.exitrecord import read_exit
from orbit.store.home import Home
from orbit.store.model import Run, RunState

MAX_REPOSITORY = 120


def phase_request(phase: Phase, name: str, **extra: Any) -> Request:
    """The Orbit run of one phase as the adapter asked for it (`extra`: the Request's other
    fields, e.g. group, tags, in_container, commit, record)."""
    return Request(
        command=list(phase.command),
        image=phase.image,
        dockerfile=phase.dockerfile,
        cpus=phase.cpus,
        mem_gb=phase.mem_gb,
        name=name,
        env=[f"{k}={v}" for k, v in phase.env.items()],
        pass_env=list(phase.pass_env),
        no_project=True,
        network=phase.network,
        timeout_min=phase.timeout_min,
        root=phase.user is None,
        gpus=phase.gpus,
        user=phase.user,
        workdir=phase.workdir,
        run_mounts=list(phase.mounts),
        run_dirs=list(phase.run_dirs),
        **extra,
    )


def solved_tag(home: Home, job_id: str, trial: str) -> str:
    """`orbit-bench/<job>-<trial>-<home tag>:solved`, lower-cased and safe for Docker; the home's
    tag keeps two homes on one Docker engine apart."""
    name = re.sub(r"[^a-z0-9]+", "-", f"{job_id}-{trial}".lower()).strip("-")
    if len(name) > MAX_REPOSITORY:
        digest = hashlib.sha256(name.encode()).hexdigest()[:10]
        name = f"{name[: MAX_REPOSITORY - 11].rstrip('-')}-{digest}"
    return f"orbit-bench/{name}-{home.tag}:solved"


def execution_of(run: Run) -> tuple[str, bool, str | None, str | None]:
    """(execution, graded, reason when not graded, the committed image) of a finished solve."""
    record = read_exit(run.dir) or {}
    image = record.get("committed_image")
    image = str(image) if image else None
    state = run.state
    if state is RunState.SUCCEEDED:
        return "succeeded", True, None, image
    if state is RunState.CANCELLED:
        return "cancelled", False, "the solve was cancelled", image
    if state is RunState.LOST:
        return "lost", False, f"the solve run was lost ({run.reason or 'no reason'})", image
    if not record or record.get("error"):
        why = run.reason or "no reason recorded"
        return f"not started ({why})", False, f"the solve never ran: {why}", image
    if record.get("timed_out"):
        return "timed out", _kept(record), _commit_problem(record), image
    if record.get("oom_killed") and record.get("exit_code") != 0:
        return "out of memory", False, f"the solve was {run.reason or 'killed for memory'}", image
    code = record.get("exit_code")
    return f"failed (exit {code})", _kept(record), _commit_problem(record), image


def _kept(record: dict) -> bool:
    return not record.get("commit_error")


def _commit_problem(record: dict) -> str | None:
    error = record.get("commit_error")
    return f"the solved state could not be kept: {error}" if error else None


def verify_problem(run: Run) -> str | None:
    """Why a finished verify run cannot be scored, or None (its exit code does not matter)."""
    record = read_exit(run.dir) or {}
    state = run.state
    if state is RunState.CANCELLED:
        return "the verify run was cancelled"
    if state is RunState.LOST:
        return f"the verify run was lost ({run.reason or 'no reason'})"
    if state is RunState.SUCCEEDED:
        return None
    if not record or record.get("error"):
        return f"the verifier never ran: {run.reason or 'no reason recorded'}"
    if record.get("timed_out"):
        return f"the verifier {run.reason or 'timed out'}"
    if record.get("oom_killed") and record.get("exit_code") != 0:
        return f"the verifier was {run.reason or 'killed for memory'}"
    return None


def image_defaults(home: Home, phase: Phase) -> tuple[str, str]:
    """(WORKDIR, USER) of the phase's image, building its Dockerfile first when it has one (the
    build is cached by content, so the submit reuses it)."""
    from pathlib import Path

    from orbit.execute import build, docker_ops

    client = docker_ops.connect()
    if phase.dockerfile:
        tag = build.build_image(client, home, Path(phase.dockerfile), home.environ, _quiet).tag
    else:
        tag = str(phase.image)
        docker_ops.ensure_image(client, tag, home.settings.pull_timeout_s)
    config = (client.image(tag) or {}).get("Config") or {}
    return str(config.get("WorkingDir") or ""), str(config.get("User") or "")


def _quiet(_: str) -> None:
    pass

"""Whether Orbit can run a Harbor task faithfully on this machine, and if not, why (one line).

A task that needs what Orbit does not do (sidecars, multi-step, allowlists, healthchecks, MCP
servers, collect commands, TPUs, Windows) or more than the machine has (CPUs, memory, GPUs of a
type) is listed as unsupported and never run half-way.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path

from orbit.bench.harbor_toml import Environment, TaskConfig, missing_variables
from orbit.human import fmt_num
from orbit.sched.gpus import Gpu
from orbit.sched.resources import Amount, machine_totals
from orbit.store.home import Home

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")


class Machine:
    """What this machine has, read once per listing and only when a task asks."""

    def __init__(self, home: Home) -> None:
        self.home = home

    @cached_property
    def totals(self) -> Amount:
        return machine_totals(self.home)

    @cached_property
    def gpus(self) -> list[Gpu]:
        from orbit.sched.gpus import allowed_indices, open_gpus

        try:
            return open_gpus(self.home).read(allowed_indices(self.home))
        except Exception:  # an unreadable GPU stand-in or driver: no GPUs to offer
            return []


def unsupported_reason(
    folder: Path, cfg: TaskConfig, machine: Machine, environ: Mapping[str, str]
) -> str | None:
    """Why the task cannot run here ("needs 2 GPUs, this machine has 0"), or None."""
    reasons = _layout(folder, cfg) + _features(cfg)
    reasons += _resources(cfg.environment, machine, "")
    if cfg.verifier_mode == "separate" and cfg.verifier_environment is not None:
        reasons += _resources(cfg.verifier_environment, machine, "the verifier ")
    for table, where in (
        (cfg.environment.env, "[environment].env"),
        (cfg.solution_env, "[solution].env"),
        (cfg.verifier_env, "[verifier].env"),
    ):
        missing = missing_variables(table, environ)
        if missing:
            names = ", ".join(f"${name}" for name in missing)
            reasons.append(f"{where} needs {names}, not set in this environment")
    unique = list(dict.fromkeys(reasons))
    return "; ".join(unique) if unique else None


def _layout(folder: Path, cfg: TaskConfig) -> list[str]:
    env_dir = folder / "environment"
    tests = folder / "tests"
    out = []
    if cfg.environment.os != "linux":
        out.append(
            "needs Windows" if cfg.environment.os == "windows" else "needs " + cfg.environment.os
        )
    if cfg.steps:
        out.append("multi-step tasks (steps) not supported")
    elif not (folder / "instruction.md").is_file():
        out.append("no instruction.md")
    if not env_dir.is_dir():
        out.append("no environment/ folder")
    elif any((env_dir / name).exists() for name in COMPOSE_FILES):
        out.append("docker-compose sidecars not supported")
    elif not cfg.environment.docker_image and not (env_dir / "Dockerfile").is_file():
        out.append("no environment/Dockerfile or [environment].docker_image")
    if cfg.verifier_mode == "separate":
        venv = cfg.verifier_environment or Environment()
        if not venv.docker_image and not (tests / "Dockerfile").is_file():
            out.append(
                "a separate verifier needs tests/Dockerfile or [verifier.environment].docker_image"
            )
        elif any((tests / name).exists() for name in COMPOSE_FILES):
            out.append("docker-compose sidecars not supported")
    elif not (tests / "test.sh").is_file():
        out.append("no tests/test.sh")
    return out


def _features(cfg: TaskConfig) -> list[str]:
    envs = [cfg.environment] + ([cfg.verifier_environment] if cfg.verifier_environment else [])
    modes = [e.network_mode for e in envs] + [cfg.agent_network_mode, cfg.verifier_network_mode]
    out = []
    if "allowlist" in modes:
        out.append("allowlist networking not supported")
    if any(e.healthcheck for e in envs):
        out.append("healthchecks not supported")
    if any(e.mcp_servers for e in envs):
        out.append("MCP servers not supported")
    if any(e.skills_dir for e in envs):
        out.append("agent skills (skills_dir) not supported")
    if any(e.tpu for e in envs):
        out.append("needs TPUs")
    if cfg.verifier_collect:
        out.append("[[verifier.collect]] commands not supported")
    for artifact in cfg.artifacts:
        if not artifact.source.startswith("/"):
            out.append(f"artifact {artifact.source!r} is not an absolute path")
        if artifact.exclude:
            out.append("artifact excludes not supported")
        if artifact.service and artifact.service != "main":
            out.append("artifacts of sidecar services not supported")
    return out


def _resources(env: Environment, machine: Machine, who: str) -> list[str]:
    out = []
    if env.gpus:
        gpus = machine.gpus
        if env.gpu_types:
            wanted = [t.lower() for t in env.gpu_types]
            gpus = [g for g in gpus if any(t in g.name.lower() for t in wanted)]
        if len(gpus) < env.gpus:
            kind = f" ({' or '.join(env.gpu_types)})" if env.gpu_types else ""
            plural = "" if env.gpus == 1 else "s"
            out.append(
                f"{who}needs {env.gpus} GPU{plural}{kind}, this machine has {len(gpus)}".lstrip()
            )
    if env.cpus and env.cpus > machine.totals.cpus:
        out.append(
            f"{who}needs {fmt_num(env.cpus)} CPUs, this machine has {fmt_num(machine.totals.cpus)}"
        )
    if env.memory_mb and env.memory_mb / 1024 > machine.totals.mem_gb:
        out.append(
            f"{who}needs {fmt_num(env.memory_mb / 1024)} GiB of memory, this machine has "
            f"{fmt_num(machine.totals.mem_gb)} GiB"
        )
    return out

"""A Harbor task.toml, read into plain records (docs/bench.md, "Harbor tasks").

Every field Harbor reads is kept, whether Orbit honours it or only reports it as the reason a
task is unsupported; the legacy spellings Harbor still accepts are converted the way it does:
top-level `version` → `schema_version`, `memory = "2G"` / `storage = "10G"` → `*_mb` (a G, M or
K suffix is required), `allow_internet` → `network_mode`. A value of the wrong type raises
TaskTomlError with a line fit to show as the task's reason.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NETWORK_MODES = ("public", "no-network", "allowlist")
ENVIRONMENT_MODES = ("shared", "separate")
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0
DEFAULT_BUILD_TIMEOUT_SEC = 600.0
DEFAULT_SCHEMA_VERSION = "1.4"
# ${VAR} and ${VAR:-default}, as Harbor resolves them from the host's environment.
TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class TaskTomlError(ValueError):
    """task.toml cannot be read or has a value of the wrong type; the message says which."""


@dataclass
class Environment:
    """[environment] (and [verifier.environment], which has the same fields)."""

    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None  # recorded, not enforced (Docker has no portable limit)
    gpus: int | None = None
    gpu_types: list[str] | None = None
    tpu: dict[str, Any] | None = None
    docker_image: str | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    network_mode: str = "public"
    build_timeout_sec: float = DEFAULT_BUILD_TIMEOUT_SEC
    os: str = "linux"
    healthcheck: dict[str, Any] | None = None
    mcp_servers: list[Any] = field(default_factory=list)
    skills_dir: str | None = None


@dataclass
class Artifact:
    source: str
    destination: str | None = None
    exclude: list[str] = field(default_factory=list)
    service: str | None = None


@dataclass
class TaskConfig:
    name: str | None = None  # [task].name ("org/name")
    schema_version: str = DEFAULT_SCHEMA_VERSION
    environment: Environment = field(default_factory=Environment)
    agent_user: str | None = None
    agent_timeout_sec: float | None = None
    agent_network_mode: str | None = None
    verifier_timeout_sec: float = DEFAULT_VERIFIER_TIMEOUT_SEC
    verifier_env: dict[str, str] = field(default_factory=dict)
    verifier_user: str | None = None
    verifier_network_mode: str | None = None
    verifier_mode: str = "shared"  # shared | separate
    verifier_environment: Environment | None = None
    verifier_collect: list[Any] = field(default_factory=list)
    solution_env: dict[str, str] = field(default_factory=dict)
    artifacts: list[Artifact] = field(default_factory=list)
    steps: list[Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def read_task_toml(path: Path) -> TaskConfig:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskTomlError(f"task.toml cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TaskTomlError("task.toml is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskTomlError(f"task.toml does not parse: {exc}") from None
    return parse_config(raw)


def parse_config(raw: dict[str, Any]) -> TaskConfig:
    task = _table(raw, "task")
    agent = _table(raw, "agent")
    verifier = _table(raw, "verifier")
    solution = _table(raw, "solution")
    version = raw.get("schema_version", raw.get("version", DEFAULT_SCHEMA_VERSION))
    venv_raw = verifier.get("environment")
    venv = _environment(_table(verifier, "environment", "verifier.environment"), "verifier.")
    mode = _choice(verifier, "environment_mode", ENVIRONMENT_MODES, "verifier.", None)
    if mode is None:  # omitted: shared, unless a verifier environment implies separate
        mode = "separate" if venv_raw is not None else "shared"
    steps = raw.get("steps")
    if steps is not None and not isinstance(steps, list):
        raise TaskTomlError("steps must be an array of tables")
    collect = verifier.get("collect") or []
    if not isinstance(collect, list):
        raise TaskTomlError("[[verifier.collect]] must be an array of tables")
    metadata = raw.get("metadata")
    return TaskConfig(
        name=_opt_str(task, "name", "task."),
        schema_version=str(version),
        environment=_environment(_table(raw, "environment"), ""),
        agent_user=_user(agent, "agent."),
        agent_timeout_sec=_opt_float(agent, "timeout_sec", "agent."),
        agent_network_mode=_choice(agent, "network_mode", NETWORK_MODES, "agent.", None),
        verifier_timeout_sec=_opt_float(verifier, "timeout_sec", "verifier.")
        or DEFAULT_VERIFIER_TIMEOUT_SEC,
        verifier_env=_env_table(verifier, "verifier."),
        verifier_user=_user(verifier, "verifier."),
        verifier_network_mode=_choice(verifier, "network_mode", NETWORK_MODES, "verifier.", None),
        verifier_mode=mode,
        verifier_environment=venv if venv_raw is not None else None,
        verifier_collect=collect,
        solution_env=_env_table(solution, "solution."),
        artifacts=[_artifact(item) for item in _list(raw, "artifacts", "")],
        steps=steps,
        metadata=metadata if isinstance(metadata, dict) else {},
    )


def _environment(table: dict[str, Any], prefix: str) -> Environment:
    where = f"{prefix}environment."
    memory_mb = _opt_int(table, "memory_mb", where)
    if memory_mb is None and "memory" in table:
        memory_mb = size_to_mb(table["memory"], f"{where}memory")
    storage_mb = _opt_int(table, "storage_mb", where)
    if storage_mb is None and "storage" in table:
        storage_mb = size_to_mb(table["storage"], f"{where}storage")
    network = _choice(table, "network_mode", NETWORK_MODES, where, None)
    if network is None and "allow_internet" in table:
        allow = table["allow_internet"]
        if not isinstance(allow, bool):
            raise TaskTomlError(f"{where}allow_internet must be true or false")
        network = "public" if allow else "no-network"
    gpu_types = table.get("gpu_types")
    if gpu_types is not None and not (
        isinstance(gpu_types, list) and all(isinstance(g, str) for g in gpu_types)
    ):
        raise TaskTomlError(f"{where}gpu_types must be an array of strings")
    tpu = table.get("tpu")
    if tpu is not None and not isinstance(tpu, dict):
        raise TaskTomlError(f"{where}tpu must be a table")
    health = table.get("healthcheck")
    if health is not None and not isinstance(health, dict):
        raise TaskTomlError(f"{where}healthcheck must be a table")
    return Environment(
        cpus=_opt_float(table, "cpus", where),
        memory_mb=memory_mb,
        storage_mb=storage_mb,
        gpus=_opt_int(table, "gpus", where),
        gpu_types=gpu_types,
        tpu=tpu,
        docker_image=_opt_str(table, "docker_image", where),
        workdir=_opt_str(table, "workdir", where),
        env=_env_table(table, where),
        network_mode=network or "public",
        build_timeout_sec=_opt_float(table, "build_timeout_sec", where)
        or DEFAULT_BUILD_TIMEOUT_SEC,
        os=(_opt_str(table, "os", where) or "linux").lower(),
        healthcheck=health,
        mcp_servers=_list(table, "mcp_servers", where),
        skills_dir=_opt_str(table, "skills_dir", where),
    )


def _artifact(item: Any) -> Artifact:
    if isinstance(item, str):
        return Artifact(source=item)
    if not isinstance(item, dict) or not isinstance(item.get("source"), str):
        raise TaskTomlError("artifacts entries must be paths or tables with a `source` path")
    exclude = item.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
        raise TaskTomlError("artifacts exclude must be an array of strings")
    return Artifact(
        source=item["source"],
        destination=_opt_str(item, "destination", "artifacts."),
        exclude=exclude,
        service=_opt_str(item, "service", "artifacts."),
    )


def size_to_mb(value: Any, where: str) -> int:
    """Harbor's legacy sizes: "2G" → 2048, "512M" → 512, "1048576K" → 1024."""
    text = str(value).strip().upper()
    factors = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    try:
        if text[-1:] not in factors:
            raise ValueError
        return int(float(text[:-1]) * factors[text[-1]])
    except ValueError:
        raise TaskTomlError(
            f"{where} = {value!r}: a size needs a number and a G, M or K suffix"
        ) from None


def references(value: str) -> list[tuple[str, str | None]]:
    """The ${VAR} / ${VAR:-default} references in `value`: (name, default or None)."""
    return [(m.group(1), m.group(2)) for m in TEMPLATE.finditer(value)]


def missing_variables(table: dict[str, str], environ: Mapping[str, str]) -> list[str]:
    """Variables `table` needs from the environment that are unset there (and have no default)."""
    out = []
    for value in table.values():
        for name, default in references(value):
            if default is None and name not in environ and name not in out:
                out.append(name)
    return out


def resolve(value: str, environ: Mapping[str, str]) -> str:
    """`value` with ${VAR} / ${VAR:-default} replaced from `environ` (unset → the default or "")."""

    def one(match: re.Match[str]) -> str:
        found = environ.get(match.group(1))
        if found:
            return str(found)
        if match.group(2) is not None:
            return match.group(2)
        return "" if found is None else str(found)

    return TEMPLATE.sub(one, value)


# --- typed reads ----------------------------------------------------------------------------------
def _table(raw: dict[str, Any], key: str, where: str | None = None) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TaskTomlError(f"[{where or key}] must be a table")
    return value


def _list(raw: dict[str, Any], key: str, where: str) -> list[Any]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise TaskTomlError(f"{where}{key} must be an array")
    return value


def _opt_str(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TaskTomlError(f"{where}{key} must be a string")
    return value


def _opt_float(raw: dict[str, Any], key: str, where: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TaskTomlError(f"{where}{key} must be a non-negative number")
    return float(value)


def _opt_int(raw: dict[str, Any], key: str, where: str) -> int | None:
    value = _opt_float(raw, key, where)
    if value is None:
        return None
    if value != int(value):
        raise TaskTomlError(f"{where}{key} must be a whole number")
    return int(value)


def _user(raw: dict[str, Any], where: str) -> str | None:
    value = raw.get("user")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TaskTomlError(f"{where}user must be a user name or a uid")
    return str(value)


def _choice(
    raw: dict[str, Any], key: str, allowed: tuple[str, ...], where: str, default: str | None
) -> str | None:
    value = raw.get(key)
    if value is None:
        return default
    if value not in allowed:
        raise TaskTomlError(f"{where}{key} must be one of {', '.join(allowed)} (got {value!r})")
    return str(value)


def _env_table(raw: dict[str, Any], where: str) -> dict[str, str]:
    value = raw.get("env")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TaskTomlError(f"[{where}env] must be a table")
    out = {}
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise TaskTomlError(f"[{where}env] {key} must be a string")
        out[str(key)] = str(item)
    return out

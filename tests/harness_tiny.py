"""A harness Orbit does not ship: "Tiny Agent" (`tiny`), registered by tests/test_harnesses.py
through orbit.harnesses.adding to prove that a new harness is one module. It is also its own
transcript parser (its lines: `{"tiny": 1, "role": …, "text": …}`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orbit.harnesses.base import (
    AGENT,
    SESSION,
    Access,
    Cli,
    Found,
    Harness,
    Plan,
    Skills,
    Transcript,
    first_set,
    home_of,
)
from orbit.review.items import Builder

CONFIG_DIR = f"{AGENT}/tiny"


def command(
    prompt: str, *, model: str | None = None, effort: str | None = None, probe: bool = False
) -> list[str]:
    argv = ["tiny", "run", "--quiet" if probe else "--yes"]
    return [*argv, *(["--model", model] if model else []), prompt]


def container(access: Access, root: bool, workdir: str) -> Plan:
    plan = Plan(env={"TINY_HOME": CONFIG_DIR})
    plan.secret_env["TINY_API_KEY"] = access.key or ""
    plan.mounts.append({"tmpfs": True, "target": CONFIG_DIR})
    plan.mounts.append({"run_dir": SESSION, "target": f"{CONFIG_DIR}/log", "rw": True})
    return plan


def from_environment(kind: str, environ: Mapping[str, str]) -> Found:
    return first_set(("TINY_API_KEY",), environ, Found(base_url=environ.get("TINY_URL")))


def skills(environ: Mapping[str, str], profile: str | None) -> Skills:
    return Skills(home_of(environ) / ".tiny" / "skills")


def parse_line(b: Builder, obj: dict[str, Any], line: str) -> None:
    if obj.get("role") in ("user", "assistant"):
        b.conv.messages += 1
        b.add(str(obj["role"]), str(obj.get("text", "")))
    else:
        b.raw(line)


def is_message(obj: dict[str, Any]) -> bool:
    return obj.get("role") in ("user", "assistant")


HARNESS = Harness(
    id="tiny",
    display="Tiny Agent",
    plugin="tiny",
    skills=skills,
    markers=("TINY_AGENT",),
    cli=Cli(
        name="tiny",
        package="@example/tiny",
        config_home="TINY_HOME",
        host_config=".tiny",
        command=command,
        container=container,
        from_environment=from_environment,
        login=None,
    ),
    transcript=Transcript(
        "tiny", "harness_tiny", lambda obj: obj.get("tiny") == 1, lambda kind, cut: False
    ),
)

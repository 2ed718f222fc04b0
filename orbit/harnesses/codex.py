"""Codex (`codex`): everything Orbit knows of it.

Inside a run's container: CODEX_HOME=/orbit/agent/codex, the run's private secrets folder, so
that a login's auth.json (which Codex may rewrite on a refresh) goes when the run finishes; the
run's session/ mounted at its sessions/ (rollouts `YYYY/MM/DD/rollout-….jsonl`). Its config
keeps variables named *KEY*, *SECRET* and *TOKEN* out of the shell commands the agent runs and
names a relay: Codex reads the address from its config only (not from OPENAI_BASE_URL). On the
host: skills in ~/.agents/skills, no hooks (Codex's are behind a feature flag and a trust check,
and `notify` has no session start).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orbit.errors import UsageError
from orbit.harnesses.base import (
    AGENT,
    SESSION,
    Access,
    Cli,
    Found,
    Harness,
    Plan,
    Transcript,
    first_set,
    shared_skills,
)

CONFIG_DIR = f"{AGENT}/codex"
CONFIG = """\
# Written by Orbit for this run (docs/agents.md): the agent's shell commands do not inherit
# variables named *KEY*, *SECRET* or *TOKEN* (its credentials among them).
[shell_environment_policy]
ignore_default_excludes = false
"""
FROM_ENV_KEYS = ("CODEX_API_KEY", "OPENAI_API_KEY")
TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}


def command(
    prompt: str, *, model: str | None = None, effort: str | None = None, probe: bool = False
) -> list[str]:
    """`codex exec`: unattended with every tool (bench), or one answer, nothing kept (auth
    test)."""
    argv = ["codex", "exec", "--skip-git-repo-check"]
    argv += ["--ephemeral"] if probe else ["--dangerously-bypass-approvals-and-sandbox"]
    argv += ["-m", model] if model else []
    argv += ["-c", f"model_reasoning_effort={effort}"] if effort else []
    return [*argv, prompt]


def container(access: Access, root: bool, workdir: str) -> Plan:
    plan = Plan(env={"CODEX_HOME": CONFIG_DIR})
    config = CONFIG
    if access.base_url:
        config = f"openai_base_url = {json.dumps(access.base_url)}\n\n{config}"
    plan.secret_files["config.toml"] = config.encode()
    if access.files:  # a login: its auth.json
        plan.secret_files.update({k: v.encode() for k, v in access.files.items()})
    else:  # `codex exec` sends CODEX_API_KEY (not OPENAI_API_KEY)
        plan.secret_env["CODEX_API_KEY"] = access.key or ""
    plan.mounts.append({"secrets": True, "target": CONFIG_DIR, "rw": True})
    plan.mounts.append({"run_dir": SESSION, "target": f"{CONFIG_DIR}/sessions", "rw": True})
    return plan


def from_environment(kind: str, environ: Mapping[str, str]) -> Found:
    """Key and URL from `environ`; for a login, the auth.json of the host's Codex login."""
    found = {k: v for k, v in environ.items() if v}
    out = Found(base_url=found.get("OPENAI_BASE_URL"))
    if kind == "login":
        out.files = {"auth.json": _login_file(environ)}
        return out
    return first_set(FROM_ENV_KEYS, found, out)


def _login_file(environ: Mapping[str, str]) -> str:
    path = CLI.config_dir(environ) / "auth.json"
    try:
        text = path.read_text()
        json.loads(text)
    except (OSError, ValueError):
        raise UsageError(
            f"--from-env: no Codex login at {path}; log in with `codex login` first, or "
            "let `orbit auth add` run the device login"
        ) from None
    return text


def mcp_config(environ: Mapping[str, str]) -> Path:
    """$CODEX_HOME/config.toml (~/.codex), whose `[mcp_servers.NAME]` tables Codex starts."""
    return CLI.config_dir(environ) / "config.toml"


def claims(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("payload"), dict) and obj.get("type") in TYPES


def claims_cut(kind: str, cut: str) -> bool:
    return kind in TYPES and cut.startswith('{"timestamp"')


CLI = Cli(
    name="codex",
    package="@openai/codex",
    config_home="CODEX_HOME",
    host_config=".codex",
    command=command,
    container=container,
    from_environment=from_environment,
    login="auth-json",
    effort=True,
    asi_adapter="codex_cli",
)
HARNESS = Harness(
    id="codex",
    display="Codex",
    plugin="codex",
    skills=shared_skills,
    markers=("CODEX_THREAD_ID", "CODEX_SANDBOX", "CODEX_SANDBOX_NETWORK_DISABLED", "CODEX_CI"),
    cli=CLI,
    transcript=Transcript("codex", "orbit.review.rollout", claims, claims_cut),
    mcp_config=mcp_config,
)

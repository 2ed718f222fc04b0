"""Claude Code (`claude`): everything Orbit knows of it.

Inside a run's container: CLAUDE_CONFIG_DIR=/orbit/agent/claude (a tmpfs), the run's session/
mounted at its projects/<workdir, non-alphanumerics as "-"> so its transcript lands in the run
directory, credentials in the variable of the profile's kind, and no credentials passed on to
the commands it runs (CLAUDE_CODE_SUBPROCESS_ENV_SCRUB). As root it is told it is in a sandbox
(IS_SANDBOX=1), which it requires before skipping permissions. On the host: skills in
$CLAUDE_CONFIG_DIR/skills (~/.claude/skills) and Orbit's hooks in its settings.json.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
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

CONFIG_DIR = f"{AGENT}/claude"
SECRET_VARS = {
    "api-key": "ANTHROPIC_API_KEY",
    "login": "CLAUDE_CODE_OAUTH_TOKEN",
    "relay": "ANTHROPIC_AUTH_TOKEN",
}
FROM_ENV_KEYS = {
    "login": ("CLAUDE_CODE_OAUTH_TOKEN",),
    "api-key": ("ANTHROPIC_API_KEY",),
    "relay": ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"),
}
MODEL_VARS = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
)
SKIP = {"file-history-snapshot", "last-prompt", "progress", "queue-operation"}  # its bookkeeping
TYPES = {"user", "assistant", "system", "summary", "result", *SKIP}


def command(
    prompt: str, *, model: str | None = None, effort: str | None = None, probe: bool = False
) -> list[str]:
    """`claude -p`: unattended with every tool (bench), or a plain-text answer (auth test)."""
    argv = ["claude", "-p"]
    argv += ["--output-format", "text"] if probe else ["--dangerously-skip-permissions"]
    argv += ["--model", model] if model else []
    return [*argv, prompt]


def project_folder(workdir: str) -> str:
    """The folder Claude Code keeps the transcripts of an agent working in `workdir` under: the
    path with every character that is not a letter or digit replaced by "-" (/workspace →
    -workspace)."""
    return re.sub(r"[^A-Za-z0-9]", "-", workdir)


def container(access: Access, root: bool, workdir: str) -> Plan:
    plan = Plan()
    plan.env.update(
        CLAUDE_CONFIG_DIR=CONFIG_DIR,
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # The agent's Bash commands, hooks and MCP servers do not get its credentials.
        CLAUDE_CODE_SUBPROCESS_ENV_SCRUB="1",
    )
    if root:
        plan.env["IS_SANDBOX"] = "1"
    if access.base_url:
        plan.env["ANTHROPIC_BASE_URL"] = access.base_url
    plan.secret_env[SECRET_VARS[access.kind]] = access.key or ""
    plan.mounts.append({"tmpfs": True, "target": CONFIG_DIR})
    target = f"{CONFIG_DIR}/projects/{project_folder(workdir)}"
    plan.mounts.append({"run_dir": SESSION, "target": target, "rw": True})
    return plan


def from_environment(kind: str, environ: Mapping[str, str]) -> Found:
    """Key, URL and models from `environ` and the `env` block of the user's settings, which
    is where a relay is usually configured."""
    found = dict(_settings_env(environ))
    found.update({k: v for k, v in environ.items() if v})
    out = Found(base_url=found.get("ANTHROPIC_BASE_URL"))
    out.env = {v: found[v] for v in MODEL_VARS if found.get(v)}
    return first_set(FROM_ENV_KEYS[kind], found, out)


def _settings_env(environ: Mapping[str, str]) -> dict[str, str]:
    try:
        data = json.loads((CLI.config_dir(environ) / "settings.json").read_text())
    except (OSError, ValueError):
        return {}
    env = data.get("env") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def skills(environ: Mapping[str, str], profile: str | None) -> Skills:
    config = CLI.config_dir(environ)
    return Skills(config / "skills", config / "settings.json")


def mcp_config(environ: Mapping[str, str]) -> Path:
    """Claude Code's user configuration, whose `mcpServers` are its user-scope MCP servers
    (`claude mcp add --scope user`): ~/.claude.json, or .claude.json in $CLAUDE_CONFIG_DIR."""
    config = environ.get(CLI.config_home)
    return Path(config) / ".claude.json" if config else home_of(environ) / ".claude.json"


def claims(obj: dict[str, Any]) -> bool:
    return obj.get("type") in TYPES or "sessionId" in obj or "message" in obj


def claims_cut(kind: str, cut: str) -> bool:
    return kind in TYPES


CLI = Cli(
    name="claude",
    package="@anthropic-ai/claude-code",
    config_home="CLAUDE_CONFIG_DIR",
    host_config=".claude",
    command=command,
    container=container,
    from_environment=from_environment,
    login="setup-token",
    model_vars=MODEL_VARS,
    asi_adapter="claude_code_cli",
)
HARNESS = Harness(
    id="claude-code",
    display="Claude Code",
    plugin="claude",
    skills=skills,
    markers=("CLAUDECODE",),
    hook_fragment="claude-code.json",
    mcp_config=mcp_config,
    cli=CLI,
    transcript=Transcript(
        "claude", "orbit.review.claude_code", claims, claims_cut, reads_unknown=True
    ),
)

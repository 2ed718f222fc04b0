"""Methods: what solves a task. `oracle` and `empty` need nothing; an agent method runs an
in-container harness (orbit/harnesses/: Codex, Claude Code) inside the solve run through an auth
profile (orbit/agents/auth.py).

    -m oracle | -m empty | -m NAME=AGENT[,auth=P,model=M,effort=E,bundle=DIR]

The agent's command is built from the task's instruction by its harness's `command`, the one
builder `orbit auth test` uses too (Claude Code: `claude -p --dangerously-skip-permissions
[--model M] INSTRUCTION`; Codex: `codex exec --skip-git-repo-check
--dangerously-bypass-approvals-and-sandbox [-m M] [-c model_reasoning_effort=E] INSTRUCTION`).

`bundle=DIR`: DIR is mounted read-only at /orbit/bench/bundle and its files are copied over the
agent's config home (its harness's `config_home`: $CLAUDE_CONFIG_DIR, $CODEX_HOME) right before
the agent starts.
"""

from __future__ import annotations

from pathlib import Path

from orbit import harnesses
from orbit.bench.model import BUILT_IN_METHODS, NAME, Method
from orbit.errors import UsageError
from orbit.harnesses.base import spoken
from orbit.store.home import Home

OPTIONS = ("auth", "model", "effort", "bundle")
BUNDLE_TARGET = "/orbit/bench/bundle"


def parse_method(text: str, cwd: Path) -> Method:
    """One `-m` value; raises UsageError naming what is wrong."""
    if text in BUILT_IN_METHODS:
        return Method(name=text, agent=text)
    head, _, rest = text.partition(",")
    name, sep, agent = head.partition("=")
    if not sep:
        raise UsageError(
            f"-m expects oracle, empty or NAME=AGENT[,auth=P,model=M,effort=E,bundle=DIR], "
            f"got {text!r}"
        )
    if not NAME.match(name):
        raise UsageError(f"-m {text!r}: method name {name!r} must be letters, digits, . _ -")
    known = (*BUILT_IN_METHODS, *harnesses.ids())
    if agent not in known:
        raise UsageError(f"-m {text!r}: unknown agent {agent!r} (one of {', '.join(known)})")
    method = Method(name=name, agent=agent)
    for item in [x for x in rest.split(",") if x] if rest else []:
        key, eq, value = item.partition("=")
        if not eq or key not in OPTIONS or not value:
            raise UsageError(f"-m {text!r}: bad option {item!r} (auth=, model=, effort=, bundle=)")
        if key == "bundle":
            folder = (cwd / value).resolve()
            if not folder.is_dir():
                raise UsageError(f"-m {text!r}: bundle {value!r} is not a directory")
            value = str(folder)
        setattr(method, key, value)
    if agent not in harnesses.ids() and any(getattr(method, k) for k in OPTIONS):
        raise UsageError(f"-m {text!r}: {agent} takes no options")
    if method.effort and not harnesses.cli_of(agent).effort:
        takers = [h.id for h in harnesses.in_container() if h.cli and h.cli.effort]
        raise UsageError(f"-m {text!r}: effort= applies to {spoken(takers)} only")
    return method


def check_method(home: Home, method: Method) -> None:
    """An agent method needs an auth profile of its harness."""
    if method.agent not in harnesses.ids():
        return
    from orbit.agents import auth

    if not method.auth:
        raise UsageError(
            f"method {method.name!r} ({method.agent}) needs auth=PROFILE (orbit auth list)"
        )
    profile = auth.get(home, method.auth)
    if profile.harness != method.agent:
        raise UsageError(
            f"method {method.name!r}: auth profile {method.auth!r} is for {profile.harness}, "
            f"not {method.agent}"
        )


def agent_command(method: Method, instruction: str) -> list[str]:
    """The agent CLI's command line for `instruction` (with the bundle step when given)."""
    cli = harnesses.cli_of(method.agent)
    argv = cli.command(instruction, model=method.model, effort=method.effort)
    if not method.bundle:
        return argv
    var = cli.config_home
    script = f'mkdir -p "${var}" && cp -R {BUNDLE_TARGET}/. "${var}/" && exec "$@"'
    return ["sh", "-c", script, "orbit-bench-agent", *argv]

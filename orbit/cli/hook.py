"""orbit hook session-start|session-end: the Claude Code hooks (called by the agent, with the
hook's JSON payload on stdin; hidden from the command list). They never fail the session:
on any error they print nothing, log one line to ORBIT_HOME/runtime/hooks.log and exit 0."""

from __future__ import annotations

import argparse

from orbit.env import Env
from orbit.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(  # hidden: no help text in the command list (agents call it, not people)
        "hook",
        description="Hooks for coding agents (docs/agents.md#sessions). session-start: "
        "SessionStart (exports ORBIT_AGENT_SESSION… through CLAUDE_ENV_FILE, prints the lessons "
        "digest of the repository); session-end: Stop/SessionEnd (copies the transcript into "
        "session/ of the runs the session launched). Payload: JSON on stdin.",
    )
    p.add_argument("event", choices=["session-start", "session-end"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import hooks

    try:
        home = env.home
    except Exception:
        return ExitCode.OK  # no usable ORBIT_HOME: nowhere to record, nothing to say
    try:
        payload = hooks.parse_payload(env.stdin.read())
        if args.event == "session-start":
            out = hooks.session_start(home, payload, env.environ.get("CLAUDE_ENV_FILE"))
            if out:
                env.stdout.write(out + "\n")
        else:
            report = hooks.session_end(home, payload)
            if report:  # Stop fires after every turn: a session without runs logs nothing
                hooks.log(home, f"session-end {payload['session_id']}: {'; '.join(report)}")
    except Exception as exc:  # a hook never fails the agent's session
        hooks.log(home, f"{args.event} failed: {exc.__class__.__name__}: {exc}")
    return ExitCode.OK

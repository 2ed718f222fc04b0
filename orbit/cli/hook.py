"""orbit hook session-start|session-end [--home PATH]: the Claude Code hooks (called by the
agent, with the hook's JSON payload on stdin; hidden from the command list). They never fail
the session: they exit 0; an error is logged as one line to ORBIT_HOME/runtime/hooks.log and
nothing is printed, except that a home they cannot use is said in one line of their output."""

from __future__ import annotations

import argparse
from pathlib import Path

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
    p.add_argument(
        "--home",
        help="the ORBIT_HOME to report to, whatever the environment holds (`orbit plugin "
        "install` writes the home it ran in); default: $ORBIT_HOME, else ~/.orbit",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import hooks

    try:
        home, problem = hooks.open_home(args.home, env.environ)
        if problem is None:
            home.apply_umask()
    except Exception:
        return ExitCode.OK  # no usable ORBIT_HOME: nowhere to record, nothing to say
    if problem is not None:
        env.stdout.write(hooks.unusable(args.event, problem) + "\n")
        return ExitCode.OK
    try:
        payload = hooks.parse_payload(env.stdin.read())
        if args.event == "session-start":
            theirs = env.environ.get("ORBIT_HOME")
            out = hooks.session_start(
                home,
                payload,
                env.environ.get("CLAUDE_ENV_FILE"),
                bound=bool(args.home),
                their_home=Path(theirs).expanduser().resolve() if theirs else None,
            )
            if out:
                env.stdout.write(out + "\n")
        else:
            report = hooks.session_end(home, payload)
            if report:  # Stop fires after every turn: a session without runs logs nothing
                hooks.log(home, f"session-end {payload['session_id']}: {'; '.join(report)}")
    except Exception as exc:  # a hook never fails the agent's session
        hooks.log(home, f"{args.event} failed: {exc.__class__.__name__}: {exc}")
    return ExitCode.OK

"""orbit mcp: serve Orbit's tools and run records to a coding agent over MCP (stdio)."""

from __future__ import annotations

import argparse
from pathlib import Path

from orbit.env import Env
from orbit.errors import ExitCode, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve Orbit to a coding agent as an MCP server over stdio",
        description="A Model Context Protocol server on stdin/stdout: the tools resources, "
        "run, sweep, wait, ps, show, logs, failures, best, compare, lessons, note, cancel and "
        "bench_tasks/bench_run/bench_show, and each run as resources (orbit://runs/ID/…). "
        "An agent starts it; see docs/agents.md#mcp-server.",
    )
    p.add_argument(
        "--home", metavar="PATH", help="the ORBIT_HOME to serve (default: $ORBIT_HOME, ~/.orbit)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    environ = dict(env.environ)
    if args.home is not None:
        home = Path(args.home).expanduser()
        if home.exists() and not home.is_dir():
            raise UsageError(f"--home {args.home}: not a directory")
        environ["ORBIT_HOME"] = str(home.resolve())
    from orbit.mcp.wire import guard_stdout

    guard_stdout()  # before the SDK is imported: nothing but the protocol reaches stdout
    from orbit.mcp.server import serve

    serve(environ, env.cwd)
    return ExitCode.OK

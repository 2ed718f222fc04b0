"""Build the MCP server for one home and serve it over stdio.

The SDK's stdio transport owns the protocol's descriptors while it serves: it moves the wire
to a private close-on-exec descriptor and points fd 0 at /dev/null and fd 1 at stderr, so
nothing Orbit prints, and no process it starts (shepherds, the ticker, Docker builds), can
write into the protocol. `serve` does the same before the SDK is even imported, so an import's
stray output cannot either; the SDK then claims the pipe from where `serve` put it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from orbit import __version__
from orbit.mcp.bridge import Orbit

INSTRUCTIONS = (
    "Orbit runs experiments in Docker containers with fair shares of this machine's GPUs, "
    "CPUs and memory, and keeps a complete record of each run. The loop: lessons (what was "
    "tried) → resources (what is free) → run or sweep (submit; the runs queue) → wait → "
    "failures, best, compare → note (what you concluded, on the group). Never start GPU work "
    "outside Orbit."
)


def build(environ: Mapping[str, str], cwd: Path) -> object:
    """The server (an MCPServer) with every tool and resource, running commands in `environ`
    (its ORBIT_HOME) and, unless a tool is given another, in `cwd`."""
    from mcp.server.mcpserver import MCPServer

    from orbit.mcp import resources, tools

    server = MCPServer("orbit", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    orbit = Orbit(environ=dict(environ), cwd=cwd)
    tools.register(server, orbit)
    resources.register(server, orbit)
    return server


def serve(environ: Mapping[str, str], cwd: Path) -> None:
    """Serve over stdio until the client closes stdin."""
    _guard_stdout()
    server = build(environ, cwd)
    server.run("stdio")  # type: ignore[attr-defined]


def _guard_stdout() -> None:
    """Keep fd 1 (the protocol) out of reach of whatever runs before the SDK claims it: the
    wire moves to a close-on-exec descriptor that sys.stdout writes to, and fd 1 becomes
    stderr, which is what every child then inherits."""
    sys.stdout.flush()
    wire = os.dup(1)  # os.dup's copy is not inheritable
    os.dup2(2, 1)
    sys.stdout = os.fdopen(wire, "w", encoding="utf-8", closefd=False)

"""The server's resources: a run's record, read through the same commands as the tools
(`show`, `logs`, `ps`), as JSON an agent can attach without calling a tool.

`orbit://runs/recent` lists the newest runs; `orbit://runs/{id}/status` is `orbit show ID`,
`…/metrics` its metrics summary, `…/outputs` its output files, `…/log` the last lines of its
log. A refusal (an unknown run) is the resource error `orbit: …`.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError

from orbit.mcp.bridge import Orbit

RECENT = 50
LOG_LINES = 100
JSON = "application/json"


def register(server: MCPServer, orbit: Orbit) -> None:
    def read(*argv: str) -> Any:
        answer = orbit.call(*argv)
        if answer.failed:
            raise ResourceError(answer.error)
        return answer.data

    def dump(data: Any) -> str:
        return json.dumps(data, ensure_ascii=False, indent=1, default=str)

    @server.resource("orbit://runs/recent", name="recent runs", mime_type=JSON)
    def recent() -> str:
        """The newest runs of the home, newest last (`orbit ps -a --json`, its last 50)."""
        runs = read("ps", "--all")["runs"]
        return dump({"runs": runs[-RECENT:], "total": len(runs)})

    @server.resource("orbit://runs/{id}/status", name="run status", mime_type=JSON)
    def status(id: str) -> str:
        """A run's whole record: request, state, reason, peaks, metrics, output, notes."""
        return dump(read("show", id))

    @server.resource("orbit://runs/{id}/metrics", name="run metrics", mime_type=JSON)
    def metrics(id: str) -> str:
        """A run's metrics summary: per key its latest, min, max and their steps."""
        shown = read("show", id)
        return dump({"id": shown["id"], "state": shown["state"], **shown["metrics"]})

    @server.resource("orbit://runs/{id}/outputs", name="run outputs", mime_type=JSON)
    def outputs(id: str) -> str:
        """The files a run wrote to its output/ folder."""
        shown = read("show", id)
        return dump({"id": shown["id"], "dir": shown["dir"], "output": shown["output"]})

    @server.resource("orbit://runs/{id}/log", name="run log", mime_type="text/plain")
    def log(id: str) -> str:
        """The last 100 lines of a run's log.txt."""
        return str(read("logs", id, f"--lines={LOG_LINES}")["log"])

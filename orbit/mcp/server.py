"""Build the MCP server for one home and serve it over stdio.

Tools and resources are registered by `tools.py` and `resources.py`; a refusal of the call
itself (an unknown tool, an argument of the wrong type) is one line here, like a command's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from orbit import __version__
from orbit.mcp import resources, tools
from orbit.mcp.bridge import Orbit

INSTRUCTIONS = (
    "Orbit runs experiments in Docker containers with fair shares of this machine's GPUs, "
    "CPUs and memory, and keeps a complete record of each run. The loop: lessons (what was "
    "tried) → resources (what is free) → run or sweep (submit; the runs queue) → wait → "
    "failures, best, compare → note (what you concluded, on the group). Never start GPU work "
    "outside Orbit."
)


class Server(MCPServer[Any]):
    """The SDK's server, whose refusals of a call read like the commands': one line, and
    whose tool schemas say what an agent needs and no more (`compact`)."""

    async def list_tools(self) -> list[Any]:
        listed = await super().list_tools()
        return [t.model_copy(update={"input_schema": compact(t.input_schema)}) for t in listed]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        if self._tool_manager.get_tool(name) is None:
            known = ", ".join(sorted(t.name for t in self._tool_manager.list_tools()))
            raise ToolError(f"orbit: no tool {name!r} (tools: {known})")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(bad_arguments(name, exc.__cause__)) from exc.__cause__
            raise


def compact(schema: Any) -> Any:
    """A tool's JSON schema as pydantic makes it, less what tells an agent nothing: each
    property's `title` (its name again) and, for an optional argument, the `null` alternative
    and the default of null (`anyOf: [{type: string}, {type: null}]` becomes `type: string`).
    A tools/list shrinks by a quarter; the arguments are still checked by the full model."""
    if isinstance(schema, list):
        return [compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: compact(v) for k, v in schema.items() if k not in ("title", "properties")}
    if isinstance(schema.get("properties"), dict):
        props = schema["properties"].items()
        out["properties"] = {name: _required_or_not(compact(p)) for name, p in props}
    return out


def _required_or_not(prop: Any) -> Any:
    options = prop.get("anyOf") if isinstance(prop, dict) else None
    if not options or prop.get("default", 0) is not None:
        return prop
    kept = [o for o in options if o != {"type": "null"}]
    if len(kept) != 1:
        return prop
    rest = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
    return {**kept[0], **rest}


def bad_arguments(tool: str, error: ValidationError) -> str:
    """`orbit: show: run: Input should be a valid string (got 5)`, each problem once."""
    problems = []
    for e in error.errors():
        where = ".".join(str(part) for part in e["loc"]) or "arguments"
        got = f" (got {e['input']!r})" if e["type"] != "missing" else ""
        problems.append(f"{where}: {e['msg']}{got}")
    return f"orbit: {tool}: {'; '.join(problems)} (the schema: tools/list)"


def build(environ: Mapping[str, str], cwd: Path) -> Server:
    """The server with every tool and resource, running commands in `environ` (its
    ORBIT_HOME) and, unless a tool is given another directory, in `cwd`."""
    server = Server("orbit", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    orbit = Orbit(environ=dict(environ), cwd=cwd)
    tools.register(server, orbit)
    resources.register(server, orbit)
    return server


def serve(environ: Mapping[str, str], cwd: Path) -> None:
    """Serve over stdio until the client closes stdin."""
    server = build(environ, cwd)
    server.run("stdio")

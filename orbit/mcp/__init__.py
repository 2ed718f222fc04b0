"""`orbit mcp`: Orbit as a Model Context Protocol server over stdio (docs/agents.md#mcp-server).

Built on the official SDK (`mcp`): the SDK speaks the protocol; each tool builds the argv of
an `orbit` command, runs it in-process through the CLI's own `main` with `--json`
(`bridge.py`), and answers with that JSON. Only `orbit mcp` imports this package and the SDK.
"""

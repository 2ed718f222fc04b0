"""Keep the protocol's pipe (the process's stdout) to the protocol.

Imports nothing of the SDK: `orbit mcp` calls `guard_stdout` first, before the SDK or any
command is imported. The SDK's stdio transport then serves from the descriptor this leaves
in sys.stdout and points fd 0 at /dev/null while it serves, so neither the commands' output
nor any process Orbit starts (shepherds, the ticker, Docker builds: they inherit fd 1) can
write into the protocol, and no child reads its requests.
"""

from __future__ import annotations

import os
import sys


def guard_stdout() -> None:
    """Move the wire to a descriptor children do not inherit, make sys.stdout write there,
    and point fd 1 at stderr."""
    sys.stdout.flush()
    wire = os.dup(1)  # os.dup's copy is not inheritable
    os.dup2(2, 1)
    sys.stdout = os.fdopen(wire, "w", encoding="utf-8", closefd=False)

"""Reaching a node: the user's own `ssh`, one shared connection per node, and `orbit _node` there.

Every call is `ssh [options] [-p PORT] [-l USER] HOST -- env ORBIT_HOME=H <orbit> _node OP ARGS`:
the user's keys, agent and ~/.ssh/config apply as for any ssh. `ORBIT_SSH` replaces the `ssh`
command (a command line, e.g. `ssh -F ~/.ssh/lab_config`). Calls to one node share a master
connection (ControlMaster, kept 60 s after the last call) whose socket lives in a private
directory under /tmp (a socket path must stay short), so after the first call one costs a few
milliseconds, not a new handshake.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from orbit.errors import NodeError
from orbit.errors import NodeUnreachable as Unreachable
from orbit.store.nodes import Node

CONNECT_TIMEOUT_S = 10
# ssh's own exit status when it could not reach the node (or lost the connection).
SSH_FAILED = 255
# How ssh's errors begin when it failed before the remote command started.
BEFORE_COMMAND = (
    "ssh: connect to host ",
    "ssh: Could not resolve hostname ",
    "Permission denied",
    "Host key verification failed",
    "kex_exchange_identification:",
    "Connection closed by UNKNOWN",
)


def control_dir() -> Path:
    """Where the shared connections' sockets live: a directory of this user's alone. Anyone
    else's directory at that path (made first, on a shared /tmp) is refused: a socket planted
    there would see everything sent to the node, secrets and code included."""
    path = Path(tempfile.gettempdir()) / f"orbit-ssh-{os.getuid()}"
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise NodeError(
            f"{path} is not a private directory of yours (owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):o}); remove it, then try again"
        )
    return path


def ssh_base(node: Node, environ: Mapping[str, str]) -> list[str]:
    """The ssh command line up to the remote command."""
    command = shlex.split(environ.get("ORBIT_SSH") or "ssh")
    options = [
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=3",
        "-o", "ControlMaster=auto",
        "-o", f"ControlPath={control_dir()}/%C",
        "-o", "ControlPersist=60",
        "-T",
    ]  # fmt: skip
    if node.port:
        options += ["-p", str(node.port)]
    if node.user:
        options += ["-l", node.user]
    return [*command, *options, node.host, "--"]


def remote_command(node: Node, op: str, args: Sequence[str]) -> str:
    """What the node's shell runs: its Orbit, on the node's home, doing `op`."""
    words = ["env"]
    if node.home:
        words.append(shlex.quote(f"ORBIT_HOME={node.home}"))
    return " ".join([*words, node.orbit, "_node", op, *(shlex.quote(a) for a in args)])


def argv(node: Node, environ: Mapping[str, str], op: str, args: Sequence[str] = ()) -> list[str]:
    return [*ssh_base(node, environ), remote_command(node, op, args)]


def call(
    node: Node,
    environ: Mapping[str, str],
    op: str,
    args: Sequence[str] = (),
    *,
    data: bytes = b"",
    timeout: float = 60.0,
) -> bytes:
    """Run `orbit _node op args` on the node with `data` on its stdin; its stdout.

    Unreachable when ssh could not connect, timed out or lost the connection; NodeError with
    the node's message when Orbit there refused.
    """
    try:
        proc = subprocess.run(
            argv(node, environ, op, args),
            input=data,
            capture_output=True,
            timeout=timeout,
            env=dict(environ),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise Unreachable(f"node {node.name}: no answer within {timeout:g} s") from None
    except OSError as exc:
        raise Unreachable(f"node {node.name}: cannot run ssh: {exc.strerror or exc}") from None
    if proc.returncode == 0:
        return proc.stdout
    raise failure(node, proc.returncode, proc.stderr)


def failure(node: Node, code: int, stderr: bytes) -> NodeError:
    """The error for an ssh that exited with `code`: the last line it or Orbit there wrote."""
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Warning: Permanently added")]
    text = lines[-1] if lines else f"exit status {code}"
    if code == SSH_FAILED:
        unreachable = Unreachable(f"node {node.name}: {text}")
        unreachable.before_command = text.startswith(BEFORE_COMMAND)
        return unreachable
    if code == 127 or ("_node" in text and "invalid choice" in text):
        error = NodeError(
            f"node {node.name}: Orbit not found there ({text}); see `orbit node add --orbit`"
        )
    else:
        error = NodeError(f"node {node.name}: {text.removeprefix('orbit: ')}")
    error.remote_code = code
    return error

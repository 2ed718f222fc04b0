"""A stand-in for the SSH transport to a node, for tests of what runs over it.

Orbit reaches a node with `ssh [options] HOST -- REMOTE_COMMAND` (orbit/nodes/ssh.py), and
`ORBIT_SSH` replaces the `ssh` command. `Transport` writes a small shell script to use as
`ORBIT_SSH`: it drops ssh's options and host, and runs everything after `--` with `sh -c` on
this machine, as sshd would on the node. The node is then a second ORBIT_HOME here, and each
call runs the real `orbit _node` there through a real shell: only the network hop is missing.

It is a stand-in for the transport only; sshd itself is exercised by the tests of real nodes.

The script records every remote command it runs (one line each, after its process id: the
command is exec'd, so that id is the remote Orbit's own) and refuses all calls while the
transport is `down`, the way ssh fails to connect: exit status 255 and
`ssh: connect to host x port 22: Connection refused` on stderr.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

REFUSED = "ssh: connect to host x port 22: Connection refused"

SCRIPT = """#!/bin/sh
# ORBIT_SSH stand-in (tests/node_transport.py): ssh [options] HOST -- COMMAND, run here.
while [ $# -gt 0 ]; do
  arg=$1; shift
  [ "$arg" = "--" ] && break
done
if [ -e {down} ]; then
  echo "{refused}" >&2
  exit 255
fi
printf '%s %s\\n' "$$" "$*" >> {calls}
exec sh -c "exec $*"
"""


class Transport:
    """`ssh` for a node on this machine; `command` is the value for ORBIT_SSH."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.command = str(folder / "ssh")
        self.calls_file = folder / "calls"
        self.down_file = folder / "down"
        self.calls_file.touch()
        script = SCRIPT.format(down=self.down_file, calls=self.calls_file, refused=REFUSED)
        Path(self.command).write_text(script)
        os.chmod(self.command, 0o755)

    def calls(self) -> list[str]:
        """The remote commands run so far, oldest first."""
        lines = self.calls_file.read_text().splitlines()
        return [line.split(" ", 1)[1] for line in lines if " " in line]

    def down(self) -> None:
        """From now on every call fails as an unreachable host does."""
        self.down_file.touch()

    def up(self) -> None:
        self.down_file.unlink(missing_ok=True)

    def cut(self, op: str) -> int:
        """Kill the remote Orbit of every call of `op` (e.g. `follow`) made so far, as a
        broken connection would end it; how many were still running."""
        killed = 0
        for line in self.calls_file.read_text().splitlines():
            pid, _, command = line.partition(" ")
            if f" _node {op} " in f"{command} " and _is_call(int(pid), op):
                try:
                    os.kill(int(pid), signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
        return killed


def _is_call(pid: int, op: str) -> bool:
    """Whether `pid` is still that remote Orbit (and not a process that reused its id)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"_node" in argv and op.encode() in argv

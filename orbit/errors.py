"""One family of errors, each message fit to show a person, and the exit codes they map to."""

from __future__ import annotations

import errno
import os
import re
from enum import IntEnum


class ExitCode(IntEnum):
    """Documented in docs/cli.md. `orbit wait` and `orbit sweep -w` use RUN_FAILED; `orbit run -w`
    passes the command's own exit code through, and uses the codes from 124 on for a run whose
    command did not end by itself (their shell and Docker meanings: see docs/cli.md)."""

    OK = 0
    RUN_FAILED = 1  # a waited-for run did not succeed
    USAGE = 2  # bad option, value or argument
    NOT_FOUND = 3  # unknown or ambiguous run
    DOCKER = 4  # Docker not reachable, image missing, build failed
    CONFLICT = 5  # the request contradicts the run's state (rm of a running run, …)
    CORRUPT = 6  # a file under ORBIT_HOME cannot be read
    ENVIRONMENT = 7  # the machine refused: disk full, permission denied, read-only file system
    NODE = 8  # a node (docs/nodes.md) could not be reached, or Orbit there refused
    INTERNAL = 70  # a bug in Orbit: one line, and the traceback with ORBIT_DEBUG=1
    INTERRUPTED = 130  # Ctrl-C: only the waiting stops, the run goes on
    # `orbit run -w` only: the run ended without an exit code of the command's own choosing.
    TIMED_OUT = 124  # stopped at its --timeout (GNU timeout's code); `orbit wait --timeout` too
    NO_RESULT = 125  # never ran (image gone, mount refused…) or lost (docker run's engine code)
    OOM_KILLED = 137  # killed for memory (128 + SIGKILL, what a shell reports)
    CANCELLED = 143  # cancelled (128 + SIGTERM, the signal `orbit cancel` stops it with)


class OrbitError(Exception):
    """An error whose message is one line fit for a person; the CLI prints it and exits."""

    exit_code = ExitCode.USAGE


class UsageError(OrbitError):
    exit_code = ExitCode.USAGE


class NotFoundError(OrbitError):
    exit_code = ExitCode.NOT_FOUND


class DockerError(OrbitError):
    exit_code = ExitCode.DOCKER


class ConflictError(OrbitError):
    exit_code = ExitCode.CONFLICT


class CorruptError(OrbitError):
    exit_code = ExitCode.CORRUPT


class NodeError(OrbitError):
    """A node answered with an error: the message is the node's own one line."""

    exit_code = ExitCode.NODE
    remote_code: int | None = None  # the exit status of Orbit there, when it answered


class NodeUnreachable(NodeError):
    """A node could not be reached, or the connection to it broke."""

    # ssh failed before the command ran there (no connection, name, key or host key): the node
    # heard nothing of it. False when that is not known (a connection that broke, a timeout).
    before_command: bool = False


class SlurmError(OrbitError):
    """Slurm's commands could not be run or did not answer (not a refusal of one job)."""

    exit_code = ExitCode.ENVIRONMENT


class EnvironmentProblem(OrbitError):
    """The machine, not Orbit or its input, refused a file operation (see `from_os_error`)."""

    exit_code = ExitCode.ENVIRONMENT


# A full disk or quota: writers that can wait (the shepherd) retry; commands report it.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

# The errno values that name a problem of the machine, with what a person should read.
ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
}


# The temporary file of an atomic write (store/files.py), `.NAME.RANDOM.tmp`, beside NAME.
_TEMP_FILE = re.compile(r"(?<=/)\.([^/]+)\.[^./]+\.tmp$")


def from_os_error(exc: OSError, where: str | None = None) -> EnvironmentProblem | None:
    """The one-line error for an OSError the machine caused, or None for any other errno.

    The message names the path (the exception's, else "under `where`") and the errno's
    meaning; for a permission problem also who owns the nearest part of the path that can be
    examined.
    """
    meaning = ENVIRONMENT_ERRNOS.get(exc.errno or 0)
    if meaning is None:
        return None
    path = exc.filename
    if path is not None:
        path = _TEMP_FILE.sub(r"\1", os.fsdecode(path))  # name the file being replaced
        text = f"{path}: {meaning}"
    elif where is not None:
        text = f"{meaning} under {where}"
    else:
        text = meaning
    if exc.errno in DISK_FULL:
        text += "; free some space, then try again"
    elif exc.errno == errno.EROFS:
        text += "; ORBIT_HOME must be on a writable file system"
    elif path is not None:
        text += _owner_note(path)
    return EnvironmentProblem(text)


def _owner_note(path: str) -> str:
    """` (/x/home belongs to root, mode 0700; you are alice)` for the first part of `path`,
    from the end, that can be examined; empty when none can."""
    import pwd

    def user(uid: int) -> str:
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid {uid}"

    here = os.path.abspath(path)
    while True:
        try:
            st = os.stat(here)
        except OSError:
            parent = os.path.dirname(here)
            if parent == here:
                return ""
            here = parent
            continue
        mode = f"{st.st_mode & 0o7777:04o}"
        return f" ({here} belongs to {user(st.st_uid)}, mode {mode}; you are {user(os.getuid())})"

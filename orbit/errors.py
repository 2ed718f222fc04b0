"""One family of errors, each message fit to show a person, and the exit codes they map to."""

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented in docs/cli.md; `orbit run -w` and `orbit wait` use RUN_FAILED."""

    OK = 0
    RUN_FAILED = 1  # a waited-for run did not succeed
    USAGE = 2  # bad option, value or argument
    NOT_FOUND = 3  # unknown or ambiguous run
    DOCKER = 4  # Docker not reachable, image missing, build failed
    CONFLICT = 5  # the request contradicts the run's state (rm of a running run, …)
    CORRUPT = 6  # a file under ORBIT_HOME cannot be read
    INTERNAL = 70  # a bug in Orbit: one line, and the traceback with ORBIT_DEBUG=1
    INTERRUPTED = 130


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

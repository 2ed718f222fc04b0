"""The command line: collects one module per command; the only layer that prints."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module

from orbit import __version__
from orbit.env import Env
from orbit.errors import ExitCode, OrbitError, UsageError

# Each module has add_parser(subparsers) and run(args, env) -> int. Imported at startup, so
# they keep their heavy imports (docker, psutil) inside functions.
COMMANDS = (
    "run",
    "ps",
    "show",
    "logs",
    "wait",
    "cancel",
    "rm",
    "note",
    "doctor",
    "config",
    "scheduler",
    "completion",
    "shepherd",
)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: a UsageError instead of usage text and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # main() adds the "orbit: " prefix; repeating the prog here would say it twice.
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="orbit",
        description="Run experiments in Docker with fair leases and a complete record.",
        epilog="Orbit options go before `--`; the experiment's command goes after it.",
    )
    parser.add_argument("--version", action="version", version=f"orbit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        import_module(f"orbit.cli.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, env: Env | None = None) -> int:
    env = env or Env()
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # only a completing shell pays for argcomplete
        import argcomplete

        argcomplete.autocomplete(parser)
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            args = parser.parse_args(args_list)
        except SystemExit as exc:  # --help and --version
            return int(exc.code or 0)
        if not getattr(args, "func", None):
            parser.print_help(env.stdout)
            return int(ExitCode.USAGE)
        return int(args.func(args, env))
    except OrbitError as exc:
        print(f"orbit: {exc}", file=env.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("orbit: interrupted", file=env.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return int(ExitCode.OK)
    except Exception as exc:
        if os.environ.get("ORBIT_DEBUG"):
            raise
        kind = exc.__class__.__name__
        print(
            f"orbit: internal error ({kind}: {exc}); ORBIT_DEBUG=1 shows details", file=env.stderr
        )
        return int(ExitCode.INTERNAL)

"""The command line: collects one module per command; the only layer that prints."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from importlib import import_module

from orbit import __version__
from orbit.env import Env
from orbit.errors import ExitCode, OrbitError, UsageError, from_os_error

# Command name → module. Each module has add_parser(subparsers) and run(args, env) -> int and
# keeps its heavy imports (psutil, the Docker engine client) inside functions. Only the invoked
# command's module is imported; help and tab completion import them all.
COMMANDS = {
    "run": "run",
    "sweep": "sweep",
    "ps": "ps",
    "resources": "resources",
    "show": "show",
    "compare": "compare",
    "logs": "logs",
    "wait": "wait",
    "failures": "failures",
    "cancel": "cancel",
    "rm": "rm",
    "mv": "mv",
    "folders": "folders",
    "data": "data",
    "export": "export",
    "note": "note",
    "best": "best",
    "group": "group",
    "lessons": "lessons",
    "session": "session",
    "doctor": "doctor",
    "plugin": "plugin",
    "auth": "auth",
    "notify": "notify",
    "feishu": "feishu",
    "bench": "bench",
    "config": "config",
    "web": "web",
    "scheduler": "scheduler",
    "completion": "completion",
    "hook": "hook",
    "node": "node",
    "mcp": "mcp",
    "_node": "node_agent",
}


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: a UsageError instead of usage text and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # main() adds the "orbit: " prefix; repeating the prog here would say it twice.
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = Parser(
        prog="orbit",
        description="Run experiments in Docker with fair leases and a complete record.",
        epilog="Orbit options go before `--`; the experiment's command goes after it.",
    )
    parser.add_argument("--version", action="version", version=f"orbit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        if only is None or name == only:
            import_module(f"orbit.cli.{module}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, env: Env | None = None) -> int:
    env = env or Env()
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = args_list[0] if args_list else None
    completing = "_ARGCOMPLETE" in os.environ
    if args_list == ["--version"]:  # without building every command's parser
        print(f"orbit {__version__}", file=env.stdout)
        return int(ExitCode.OK)
    if first in ("run", "sweep") and not completing and env.prespawned is None:
        _prespawn(env)
    parser = build_parser(first if first in COMMANDS and not completing else None)
    # Imports are done: keep the collector from scanning them again while rows are loaded.
    gc.freeze()
    if completing:  # only a completing shell pays for argcomplete
        import argcomplete

        argcomplete.autocomplete(parser)
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
    except OSError as exc:
        # Disk full, permission denied, read-only: the machine's problem, named as such.
        problem = from_os_error(exc, where=_home_root(env))
        if problem is None:
            return _internal(exc, env)
        print(f"orbit: {problem}", file=env.stderr)
        return int(problem.exit_code)
    except Exception as exc:
        return _internal(exc, env)
    finally:
        if env.prespawned is not None:
            env.prespawned.close()


def _prespawn(env: Env) -> None:
    """Start the shepherd's interpreter of the run(s) about to be submitted, first thing: it
    imports while this process parses, prepares and writes (execute/spawn.Prespawned)."""
    from orbit.execute.spawn import Prespawned

    try:
        env.prespawned = Prespawned(env.home)
    except (OSError, OrbitError):  # no fork, no pipe, a bad home: the tick spawns as usual
        pass


def _internal(exc: Exception, env: Env) -> int:
    if os.environ.get("ORBIT_DEBUG"):
        raise exc
    kind = exc.__class__.__name__
    print(f"orbit: internal error ({kind}: {exc}); ORBIT_DEBUG=1 shows details", file=env.stderr)
    return int(ExitCode.INTERNAL)


def _home_root(env: Env) -> str | None:
    """ORBIT_HOME, for an error without a path of its own (a write to a full disk)."""
    try:
        return str(env.home.root)
    except Exception:
        return None

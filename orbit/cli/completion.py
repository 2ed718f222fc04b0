"""orbit completion [bash|zsh|fish]: print the shell code for tab completion (argcomplete)."""

from __future__ import annotations

import argparse

from orbit.env import Env
from orbit.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("completion", help="print shell code for tab completion")
    p.add_argument("shell", nargs="?", default="bash", choices=["bash", "zsh", "fish", "tcsh"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    import argcomplete

    env.stdout.write(argcomplete.shellcode(["orbit"], shell=args.shell))
    return ExitCode.OK

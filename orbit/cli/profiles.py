"""The one shape of the commands over a home's named records (store/profiles.py): `orbit auth`,
`orbit notify`, `orbit node` and `orbit data` each have `add NAME … [--replace]`, `ls` (also
`list`), `rm NAME` and, where a record can be tried, `test NAME`; each takes `--json`. A secret
is read from `--X-env VAR`, `--X-stdin` or (where the kind allows) `--X-file FILE`, never from
an argument. This module builds those parsers and renders what the four have in common."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orbit.cli.common import add_json, complete_names, print_json, table
from orbit.env import Env
from orbit.errors import UsageError

if TYPE_CHECKING:
    from orbit.store.profiles import ProfileStore

Handler = Callable[[argparse.Namespace, Env], int]


class Commands:
    """`orbit COMMAND ACTION …` for the records that `module`'s STORE holds."""

    def __init__(self, sub: argparse._SubParsersAction, command: str, module: str, **kw: Any):
        self.command = command
        self.complete = complete_names(module)
        self.parser = sub.add_parser(command, **kw)
        self.parser.set_defaults(func=self._no_action)
        self.actions = self.parser.add_subparsers(dest="action", metavar="ACTION")

    def _no_action(self, args: argparse.Namespace, env: Env) -> int:
        names = list(dict.fromkeys(self.actions.choices.values()))
        verbs = [p.prog.rsplit(" ", 1)[-1] for p in names]
        listed = ", ".join(verbs[:-1]) + f" or {verbs[-1]}"
        raise UsageError(f"choose an action: {listed} (see `orbit {self.command} --help`)")

    def add(self, help: str, func: Handler, name_help: str) -> argparse.ArgumentParser:
        """`add NAME … [--replace] [--json]`; the caller adds the kind's own options."""
        p = self.actions.add_parser("add", help=help)
        p.add_argument("name", help=name_help)
        p.add_argument("--replace", action="store_true", help="replace the one of this name")
        add_json(p)
        p.set_defaults(func=func)
        return p

    def ls(self, help: str, func: Handler) -> argparse.ArgumentParser:
        p = self.actions.add_parser("ls", aliases=["list"], help=help)
        add_json(p)
        p.set_defaults(func=func)
        return p

    def named(
        self, action: str, help: str, func: Handler, aliases: Sequence[str] = ()
    ) -> argparse.ArgumentParser:
        """`ACTION NAME [--json]`: rm, test, or another action on one record."""
        p = self.actions.add_parser(action, aliases=list(aliases), help=help)
        name = p.add_argument("name")
        name.completer = self.complete
        add_json(p)
        p.set_defaults(func=func)
        return p


def secret_options(
    parser: argparse.ArgumentParser,
    flag: str,
    what: str,
    *,
    file: bool = False,
    required: bool = False,
    stdin_note: str = "",
) -> argparse._MutuallyExclusiveGroup:
    """`--FLAG-env VAR`, `--FLAG-stdin` and (with `file`) `--FLAG-file FILE`, one at most."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(f"--{flag}-env", metavar="VAR", help=f"take the {what} from this variable")
    stdin_help = f"read the {what} from stdin{stdin_note}"
    group.add_argument(f"--{flag}-stdin", action="store_true", help=stdin_help)
    if file:
        group.add_argument(f"--{flag}-file", metavar="FILE", help=f"read the {what} from FILE")
    return group


def read_secret(
    args: argparse.Namespace, flag: str, environ: Mapping[str, str], stdin_text: str | None
) -> tuple[str | None, str]:
    """The secret from the one source `secret_options` took, and where it came from
    ("env:VAR", "stdin", "file"); (None, "") when none was given. `stdin_text` is what stdin
    holds for it."""
    attr = flag.replace("-", "_")
    env_var = getattr(args, f"{attr}_env", None)
    path = getattr(args, f"{attr}_file", None)
    if env_var:
        value, source, where = environ.get(env_var) or "", f"env:{env_var}", f"-env {env_var}"
        empty = "not set in this environment"
    elif getattr(args, f"{attr}_stdin", False):
        value, source, where, empty = stdin_text or "", "stdin", "-stdin", "nothing on stdin"
    elif path:
        try:
            value = Path(path).expanduser().read_text()
        except OSError as exc:
            raise UsageError(f"--{flag}-file {path}: {exc.strerror or exc}") from None
        source, where, empty = "file", f"-file {path}", "the file is empty"
    else:
        return None, ""
    if not value.strip():
        raise UsageError(f"--{flag}{where}: {empty}")
    return value.strip(), source


def show(env: Env, args: argparse.Namespace, body: Any, line: str) -> None:
    """What an action did: `body` as JSON with --json, else `line` for a person."""
    if args.json:
        print_json(env, body)
    else:
        print(line, file=env.stdout)


def show_list(
    env: Env,
    args: argparse.Namespace,
    store: ProfileStore[Any],
    body: Any,
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
) -> None:
    """`ls`: `body` as JSON with --json, else a table of `rows`, or one line saying there are
    none and how to add one."""
    rows = list(rows)
    if args.json:
        print_json(env, body)
    elif rows:
        table(env.stdout, headers, rows)
    else:
        print(f"no {store.kind}s; add one with `{store.add_usage}`", file=env.stdout)


def show_removed(
    env: Env,
    args: argparse.Namespace,
    store: ProfileStore[Any],
    body: dict[str, Any],
    name: str,
    detail: str = "",
) -> None:
    """`rm`: `body` as JSON with --json, else `removed KIND NAME DETAIL`."""
    show(env, args, body, f"removed {store.kind} {name}{detail}")

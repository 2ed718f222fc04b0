"""Shared CLI pieces: argument types, completers, rendering (tables for people, JSON for agents)."""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any, TextIO

from orbit.env import Env
from orbit.errors import NotFoundError, OrbitError, UsageError, from_os_error
from orbit.store.home import Home

if TYPE_CHECKING:
    from orbit.store.model import Run
    from orbit.store.runs import Broken, RunStore


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number ≥ 0, got {text!r}")
    return value


def index_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,2, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,2, got {text!r}")
    return values


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def side_tick(env: Env, *, warn: bool = True, submitted: Sequence[Run] = ()) -> Any:
    """A tick run on the side of a command (to start or repair runs): its report. A machine
    that refuses it (disk full, permission denied, read-only) does not fail the command: with
    `warn`, one line `orbit: warning: …` says so, and the result is None. `submitted`: the
    runs the command has just written (see orbit.sched.tick.tick)."""
    try:
        return env.tick(submitted)
    except OSError as exc:
        problem = from_os_error(exc, where=str(env.home.root))
        if problem is None:
            raise
        if warn:
            print(f"orbit: warning: the scheduler tick failed: {problem}", file=env.stderr)
        return None


def build_progress(env: Env) -> Callable[[str], None]:
    """Where image build output goes while `run` or `sweep` submits: to stderr when it is a
    terminal, for a person watching. A script or agent gets the one-line error instead; the
    log is kept either way as the run's build.log."""

    def progress(text: str) -> None:
        if env.stderr.isatty():
            env.stderr.write(text)
            env.stderr.flush()

    return progress


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts and agents")


def print_json(env: Env, data: Any) -> None:
    json.dump(data, env.stdout, indent=2, ensure_ascii=False, default=str)
    env.stdout.write("\n")


def table(out: TextIO, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    rows = [list(r) for r in rows]
    fmt = row_format(column_widths(headers, rows))
    lines = [fmt.format(*headers).rstrip()]
    lines.extend(fmt.format(*row).rstrip() for row in rows)
    out.write("\n".join(lines) + "\n")


def column_widths(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    """The width `table` pads each column to (the last is not padded)."""
    widths = [len(h) for h in headers]
    if all(len(row) == len(headers) for row in rows):  # by column: 10,000 rows in a few ms
        for i, column in enumerate(list(zip(*rows, strict=True))[:-1]):
            widths[i] = max(widths[i], *map(len, column))
    else:
        for row in rows:
            for i, cell in enumerate(row[:-1]):
                widths[i] = max(widths[i], len(cell))
    return widths


def row_format(widths: Sequence[int]) -> str:
    """The format of one line of `table` (rstrip the result)."""
    return "  ".join([f"{{:<{w}}}" for w in widths[:-1]] + ["{}"])


# --- tab completion ---------------------------------------------------------------------------
def _rows(parsed_args: argparse.Namespace) -> list[dict[str, Any]]:
    from orbit.store.runs import RunStore

    rows = RunStore(Home.from_environ(os.environ)).list_rows()
    return [r for r in rows if isinstance(r, dict)]


def complete_runs(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    out = []
    for row in _rows(parsed_args):
        out.append(row["id"])
        if row.get("name"):
            out.append(str(row["name"]))
    return sorted({o for o in out if o.startswith(prefix)})


def complete_groups(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    groups = {str(r["group"]) for r in _rows(parsed_args) if r.get("group")}
    return sorted(g for g in groups if g.startswith(prefix))


def complete_names(module: str) -> Callable[..., list[str]]:
    """A completer of the names `module`'s STORE (a store.profiles.ProfileStore) holds; none
    when its file cannot be read. The module is imported only when a shell completes."""

    def complete(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
        import os

        from orbit.store.home import Home

        try:
            names = import_module(module).STORE.load(Home.from_environ(os.environ))
        except OrbitError:
            return []
        return sorted(n for n in names if n.startswith(prefix))

    return complete


complete_datasets = complete_names("orbit.store.datasets")  # `-d` and `orbit data rm`


def runs_argument(parser: argparse.ArgumentParser, nargs: str = "+", help: str = "run id") -> None:
    action = parser.add_argument("runs", nargs=nargs, metavar="ID", help=help)
    action.completer = complete_runs  # type: ignore[attr-defined]


def metric_options(parser: argparse.ArgumentParser, help: str) -> None:
    """`--metric NAME[:max|min]` and `--max`/`--min` (dest `maximize`), which
    review/objective.parse_metric_option turns into a metric and a direction."""
    parser.add_argument("--metric", metavar="NAME[:max|min]", help=help)
    way = parser.add_mutually_exclusive_group()
    way.add_argument(
        "--max", dest="maximize", action="store_const", const=True, help="higher is better"
    )
    way.add_argument(
        "--min",
        dest="maximize",
        action="store_const",
        const=False,
        help="lower is better (default: the declared direction, else the name's)",
    )


def group_option(parser: argparse.ArgumentParser, help: str) -> None:
    action = parser.add_argument("-g", "--group", help=help)
    action.completer = complete_groups  # type: ignore[attr-defined]


# --- run ids or -g GROUP (rm, wait) -------------------------------------------------------------
def runs_or_group_arguments(parser: argparse.ArgumentParser, group_help: str) -> None:
    """`ID …` or `-g GROUP`, one of the two (`check_runs_or_group` enforces it)."""
    runs_argument(parser, nargs="*")
    group_option(parser, group_help)


def check_runs_or_group(args: argparse.Namespace) -> None:
    if bool(args.runs) == bool(args.group):
        raise UsageError("give run ids or -g GROUP")


def group_members(
    store: RunStore, group: str, *, unknown_group_too: bool
) -> tuple[list[str], list[Broken]]:
    """The ids of the readable runs of `group`, and its unreadable runs: those whose run.yaml
    names the group and, with `unknown_group_too`, those whose group cannot be read at all.
    NotFoundError when no run names the group."""
    from orbit.store.runs import Broken

    ids: list[str] = []
    broken: list[Broken] = []
    for row in store.list_rows():
        if isinstance(row, Broken):
            if row.may_be_in(group) if unknown_group_too else row.group == group:
                broken.append(row)
        elif row.get("group") == group:
            ids.append(row["id"])
    if not ids and not any(b.group == group for b in broken):
        raise NotFoundError(f"no runs in group {group!r}")
    return ids, broken

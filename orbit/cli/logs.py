"""orbit logs ID [-f] [--lines N | --tail BYTES]: the run's combined output (log.txt)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from orbit.cli.common import add_json, non_negative_int, print_json, runs_argument
from orbit.cli.run import binary_stdout
from orbit.cli.watch import copy_new, follow_until_done
from orbit.env import Env
from orbit.errors import CorruptError, ExitCode, UsageError
from orbit.store.files import open_regular
from orbit.store.model import LOG

TYPE_CHECKING = False
if TYPE_CHECKING:
    from orbit.store.model import Run

LINE_BLOCK = 64 * 1024


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("logs", help="show a run's output")
    runs_argument(p, nargs=None)  # type: ignore[arg-type]
    p.add_argument("-f", "--follow", action="store_true", help="follow until the run ends")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "-n", "--lines", type=non_negative_int, metavar="N", help="start N lines from the end"
    )
    where.add_argument(
        "--tail", type=int, metavar="BYTES", help="start this many bytes from the end"
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore

    if args.tail is not None and args.tail < 0:
        raise UsageError("--tail expects a number of bytes ≥ 0")
    store = RunStore(env.home)
    try:
        run = store.resolve(args.runs)
    except CorruptError as exc:
        # The log does not depend on status.yaml: show it as it is (it cannot be followed,
        # since the run's state is unknown).
        run_id = store.resolve_id(args.runs)
        if args.follow:
            raise CorruptError(f"{exc}; without -f, `orbit logs {run_id}` shows its log") from None
        path = store.run_dir(run_id) / LOG
        readable_log(path)  # a log that cannot be read either is the one error to show
        print(f"orbit: warning: {exc}; showing its log.txt as it is", file=env.stderr)
        offset = start(path, args.tail, args.lines)
        return show(env, args.json, run_id, "unreadable", path, offset)
    path = run.path(LOG)
    readable_log(path)
    offset = start(path, args.tail, args.lines)
    if args.follow:
        if not args.json:
            run = follow_until_done(env, store, run, offset=offset, out=binary_stdout(env))
            warn_missing(env, run)
            return ExitCode.OK
        run = follow_until_done(env, store, run)
    code = show(env, args.json, run.id, run.state.value, path, offset)
    warn_missing(env, run)
    return code


def readable_log(path: Path) -> None:
    """Raise the one-line error of a log.txt that cannot be read, or is not a regular file (a
    FIFO or a file on a hung mount would hold `orbit logs` forever); a missing one is empty."""
    try:
        open_regular(path).close()
    except FileNotFoundError:
        pass


def warn_missing(env: Env, run: Run) -> None:
    """A warning on stderr, after the log, when lines of it may be missing (store/lognote.py)."""
    from orbit.store.lognote import log_note

    note = log_note(run.status)
    if note:
        env.stdout.flush()
        print(f"orbit: warning: run {run.label}: {note}", file=env.stderr)


def start(path: Path, tail: int | None, lines: int | None = None) -> int:
    """The offset to start from: 0, `tail` bytes before the end, or the start of the last
    `lines` lines (a last line without its newline counts as one)."""
    if tail is None and lines is None:
        return 0
    try:
        size = os.path.getsize(path)
    except OSError:
        return 0
    if lines is None:
        return max(0, size - (tail or 0))
    return _line_start(path, size, lines)


def _line_start(path: Path, size: int, lines: int) -> int:
    """The offset of the last `lines` lines, read backwards a block at a time."""
    if lines == 0 or size == 0:
        return size
    try:
        with open(path, "rb") as fh:
            fh.seek(size - 1)
            # The newline ending the last line starts no line; a last line without one counts.
            seen = 0 if fh.read(1) != b"\n" else -1
            pos = size
            while pos > 0:
                block = min(LINE_BLOCK, pos)
                fh.seek(pos - block)
                data = fh.read(block)
                end = len(data)
                while (cut := data.rfind(b"\n", 0, end)) >= 0:
                    seen += 1
                    if seen == lines:
                        return pos - block + cut + 1
                    end = cut
                pos -= block
    except OSError:
        return 0  # the read that follows says what is wrong
    return 0


def show(env: Env, as_json: bool, run_id: str, state: str, path: Path, offset: int) -> int:
    if not as_json:
        copy_new(path, offset, binary_stdout(env))
        return ExitCode.OK
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        text = ""
    print_json(env, {"id": run_id, "state": state, "offset": offset, "log": text})
    return ExitCode.OK

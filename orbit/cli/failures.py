"""orbit failures [-g G] [--folder F] [--since T]: failed runs grouped by cause, most frequent
first, with the params every run of a cause shares and what came of its settings."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from orbit.cli.common import add_json, group_option, print_json
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.human import ago
from orbit.store.model import parse_iso

if TYPE_CHECKING:
    from orbit.review.signatures import Failure

SPAN = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_time(text: str) -> datetime:
    """`2h`, `30m`, `1d`, `1w` before now, or an ISO time (UTC when it names no zone)."""
    m = SPAN.match(text.strip())
    if m:
        return datetime.now(UTC) - timedelta(seconds=float(m.group(1)) * UNITS[m.group(2)])
    when = parse_iso(text.strip())
    if when is None:
        raise argparse.ArgumentTypeError(
            f"expected a span like 2h, 30m, 1d or an ISO time, got {text!r}"
        )
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "failures",
        help="failed runs grouped by cause",
        description="Failed and lost runs grouped by the cause their logs name (the error "
        "signature), most frequent first, with the params all runs of a cause share.",
    )
    group_option(p, "only runs of this group")
    p.add_argument("--folder", help="only runs filed under this folder (or below it)")
    p.add_argument(
        "--since", type=since_time, metavar="T", help="only runs that ended since T (2h, 1d, ISO)"
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.review.signatures import failed_in_scope, failures
    from orbit.store.runs import RunStore

    runs, considered = failed_in_scope(RunStore(env.home), args.group, args.folder, args.since)
    found = failures(runs, considered)
    if args.json:
        print_json(env, {"failures": [f.to_json() for f in found]})
        return ExitCode.OK
    if not found:
        print("no failed runs" + _scope_text(args), file=env.stdout)
        return ExitCode.OK
    now = datetime.now(UTC)
    env.stdout.write("\n".join(_text(f, now) for f in found))
    return ExitCode.OK


def _scope_text(args: argparse.Namespace) -> str:
    parts = []
    if args.group:
        parts.append(f"in group {args.group}")
    if args.folder:
        parts.append(f"under {args.folder}")
    if args.since is not None:
        parts.append(f"since {args.since.isoformat(timespec='seconds')}")
    return (" " + " ".join(parts)) if parts else ""


def _text(f: Failure, now: datetime) -> str:
    """One cause: its signature, count and runs, shared params, what came of its settings,
    when, and an example."""
    runs = ", ".join(f.run_ids) + (", …" if f.count > len(f.run_ids) else "")
    head = f"{f.count} run{'s' if f.count != 1 else ''} ({runs})"
    if f.shared_params:
        head += ", all " + ", ".join(f"{k}={v}" for k, v in f.shared_params.items())
    when = f"first {ago(f.first_seen, now)}, last {ago(f.last_seen, now)}"
    lines = [f.signature, f"  {head}", *(f"  {line}" for line in f.outcome.lines)]
    lines += [f"  {when}", f"  example: run {f.example_id}: {f.reason}"]
    lines.extend(f"    | {line}" for line in (f.excerpt or "").split("\n") if line)
    return "\n".join(lines) + "\n"

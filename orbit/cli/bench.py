"""orbit bench …: benchmarks (docs/bench.md). This registration holds only `compare` and
`usage` (cli/bench_review.py) until the engine's commands join it."""

from __future__ import annotations

import argparse

from orbit.env import Env
from orbit.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    from orbit.cli.bench_review import add_compare_parser, add_usage_parser

    p = sub.add_parser(
        "bench",
        help="benchmarks: jobs of trials (task × method × seed), their scores and validity",
        description="Benchmarks: every solve and every verify is an Orbit run (docs/bench.md).",
    )
    bench_sub = p.add_subparsers(dest="bench_command", metavar="COMMAND")
    for add in (add_compare_parser, add_usage_parser):
        add(bench_sub)
    p.set_defaults(func=_help(p))


def _help(parser: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    def show(args: argparse.Namespace, env: Env) -> int:
        parser.print_help(env.stdout)
        return ExitCode.USAGE

    return show

"""orbit doctor: is this machine ready? Each line OK/WARN/FAIL, with the fix."""

from __future__ import annotations

import argparse

from orbit.cli.common import add_json, print_json
from orbit.env import Env
from orbit.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check Docker, disks, GPUs and packages")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.doctor import run_checks

    checks = run_checks(env.home, env.environ)
    ok = all(c["status"] != "FAIL" for c in checks)
    if args.json:
        print_json(env, {"ok": ok, "checks": checks})
    else:
        for c in checks:
            fix = f"  → {c['fix']}" if c["fix"] and c["status"] != "OK" else ""
            print(f"{c['status']:<4}  {c['name']:<17} {c['detail']}{fix}", file=env.stdout)
    return ExitCode.OK if ok else ExitCode.ENVIRONMENT

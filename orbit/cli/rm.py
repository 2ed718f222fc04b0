"""orbit rm ID… | -g GROUP: delete finished runs for good, after a typed confirmation."""

from __future__ import annotations

import argparse

from orbit.cli.common import add_json, group_option, print_json, runs_argument
from orbit.env import Env
from orbit.errors import ConflictError, NotFoundError, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rm", help="delete finished runs (asks you to type the id or group)")
    runs_argument(p, nargs="*")
    group_option(p, "delete every run of this group")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask (for scripts)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    if bool(args.runs) == bool(args.group):
        raise UsageError("give run ids or -g GROUP")
    if args.group:
        ids = [
            r["id"]
            for r in store.list_rows()
            if isinstance(r, dict) and r.get("group") == args.group
        ]
        if not ids:
            raise NotFoundError(f"no runs in group {args.group!r}")
        runs = [store.load(i) for i in ids]
        expected = args.group
    else:
        runs = [store.resolve(ref) for ref in args.runs]
        runs = list({r.id: r for r in runs}.values())
        expected = " ".join(r.id for r in runs)
    active = [r for r in runs if r.state.active]
    if active:
        names = ", ".join(f"{r.label} is {r.state.value}" for r in active[:5])
        raise ConflictError(f"cannot delete active runs ({names}); cancel them first")
    if not args.yes:
        if not env.stdin.isatty():
            raise UsageError("refusing to delete without confirmation: pass --yes")
        what = f"group {args.group!r} ({len(runs)} runs)" if args.group else f"{len(runs)} run(s)"
        env.stderr.write(f"Delete {what} permanently? Type {expected!r} to confirm: ")
        env.stderr.flush()
        if env.stdin.readline().strip() != expected:
            raise UsageError("not confirmed; nothing deleted")
    for r in runs:
        if (env.home.active_dir / r.id).exists():
            _remove_container(env, r.id, r.label)
        store.remove(r)
    if args.json:
        print_json(env, {"removed": [r.id for r in runs]})
    else:
        print(f"deleted {len(runs)} run(s): {' '.join(r.id for r in runs)}", file=env.stdout)
    return 0


def _remove_container(env: Env, run_id: str, label: str) -> None:
    """A finished run keeps its active/ marker until its container is gone; its shepherd may
    have died first. Deleting the run drops the marker, so remove the container here."""
    from orbit.errors import DockerError
    from orbit.execute.docker_ops import remove_container

    try:
        remove_container(env.home, run_id)
    except DockerError as exc:
        raise DockerError(f"run {label} may still have a container, and {exc}") from None

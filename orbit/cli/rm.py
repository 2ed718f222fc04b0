"""orbit rm ID… | -g GROUP: delete finished runs for good, after a typed confirmation."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from orbit.cli.common import (
    add_json,
    check_runs_or_group,
    group_members,
    print_json,
    runs_or_group_arguments,
)
from orbit.env import Env
from orbit.errors import (
    ConflictError,
    CorruptError,
    DockerError,
    ExitCode,
    UsageError,
)

if TYPE_CHECKING:
    from orbit.store.model import Run
    from orbit.store.runs import Broken, RunStore


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rm", help="delete finished runs (asks you to type the id or group)")
    runs_or_group_arguments(p, "delete every run of this group")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask (for scripts)")
    p.add_argument(
        "--force",
        action="store_true",
        help="also delete runs that cannot be read (their container, if any, is removed first)",
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    check_runs_or_group(args)
    if args.group:
        runs, broken = _group(store, args.group, args.force)
        expected = args.group
    else:
        runs, broken = _named(store, args.runs, args.force)
        expected = " ".join([*(r.id for r in runs), *(b.id for b in broken)])
    active = [r for r in runs if r.state.active]
    if active:
        names = ", ".join(f"{r.label} is {r.state.value}" for r in active[:5])
        raise ConflictError(f"cannot delete active runs ({names}); cancel them first")
    count = len(runs) + len(broken)
    if not args.yes:
        if not env.stdin.isatty():
            raise UsageError("refusing to delete without confirmation: pass --yes")
        what = f"group {args.group!r} ({count} runs)" if args.group else f"{count} run(s)"
        env.stderr.write(f"Delete {what} permanently? Type {expected!r} to confirm: ")
        env.stderr.flush()
        if env.stdin.readline().strip() != expected:
            raise UsageError("not confirmed; nothing deleted")
    if broken:
        _remove_containers(env, broken)
    for r in runs:
        if (env.home.active_dir / r.id).exists():
            _remove_container(env, r.id, r.label)
        store.remove(r)
    for b in broken:
        store.remove_dir(b.id)
    ids = [*(r.id for r in runs), *(b.id for b in broken)]
    if args.json:
        print_json(env, {"removed": ids})
    else:
        print(f"deleted {count} run(s): {' '.join(ids)}", file=env.stdout)
    return ExitCode.OK


def _named(store: RunStore, refs: list[str], force: bool) -> tuple[list[Run], list[Broken]]:
    runs: dict[str, Run] = {}
    broken: dict[str, Broken] = {}
    for ref in refs:
        try:
            run = store.resolve(ref)
        except CorruptError as exc:
            run_id = store.resolve_id(ref)
            if not force:
                raise CorruptError(f"{exc}; `orbit rm --force {run_id}` deletes it") from None
            broken[run_id] = store.broken(run_id, str(exc))
            continue
        runs[run.id] = run
    return list(runs.values()), list(broken.values())


def _group(store: RunStore, group: str, force: bool) -> tuple[list[Run], list[Broken]]:
    """The group's runs; with `force` also its unreadable runs whose run.yaml names the group
    (one whose group cannot be read at all is never deleted with a group)."""
    ids, broken = group_members(store, group, unknown_group_too=False)
    if broken and not force:
        shown = " ".join(b.id for b in broken)
        raise CorruptError(
            f"runs {shown} of group {group!r} cannot be read ({broken[0].problem}); "
            "`orbit rm --force` deletes them too"
        )
    return [store.load(i) for i in ids], broken


def _remove_containers(env: Env, broken: list[Broken]) -> None:
    """Remove the containers of runs about to be deleted, so none is left without its run.

    Without Docker, a run whose active/ marker says its container may exist is not deleted.
    """
    from orbit.execute import docker_ops

    try:
        docker_ops.connect()  # reachable at all? (remove_container reconnects per run)
    except DockerError as exc:
        marked = [b.id for b in broken if (env.home.active_dir / b.id).exists()]
        if marked:
            raise DockerError(
                f"{exc}; run(s) {' '.join(marked)} may still have a container, so nothing "
                "was deleted"
            ) from None
        return
    for b in broken:
        try:
            docker_ops.remove_container(env.home, b.id)
        except DockerError as exc:
            raise DockerError(f"run {b.id}: {exc}; nothing of it was deleted") from None


def _remove_container(env: Env, run_id: str, label: str) -> None:
    """A finished run keeps its active/ marker until its container is gone; its shepherd may
    have died first. Deleting the run drops the marker, so remove the container here."""
    from orbit.execute.docker_ops import remove_container

    try:
        remove_container(env.home, run_id)
    except DockerError as exc:
        raise DockerError(f"run {label} may still have a container, and {exc}") from None

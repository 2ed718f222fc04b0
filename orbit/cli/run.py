"""orbit run [options] -- COMMAND…: submit one experiment (and with -w, wait for it)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, BinaryIO, TextIO

from orbit.cli.common import (
    add_json,
    build_progress,
    print_json,
    side_tick,
)
from orbit.cli.runopts import add_run_options
from orbit.cli.watch import QueueNotes, follow_until_done
from orbit.env import Env
from orbit.errors import ExitCode, UsageError
from orbit.store.model import RunState

if TYPE_CHECKING:
    from collections.abc import Callable

    from orbit.execute.submit import InContainer, Prepared, Request
    from orbit.store.model import Run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run an experiment in a container",
        description="Submit an experiment. Options go before `--`, the command after.",
    )
    add_run_options(p)
    p.add_argument(
        "-w",
        "--wait",
        action="store_true",
        help="wait for the result, showing the log; exit status = the command's (docs/cli.md)",
    )
    add_json(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND")
    p.set_defaults(func=run)


def request_from(args: argparse.Namespace, env: Env) -> Request:
    from orbit.execute.submit import Request
    from orbit.store.folders import normalize

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if cmd and cmd[0].startswith("-"):
        raise UsageError(f"unknown option {cmd[0]!r} (the command goes after `--`)")
    return Request(
        command=cmd,
        image=args.image,
        dockerfile=args.dockerfile,
        cpus=args.cpus,
        mem_gb=args.mem,
        name=args.name,
        group=args.group,
        folder=normalize(args.folder),
        tags=dict(args.tag),
        mounts=args.mount,
        datasets=args.data,
        env=args.env,
        pass_env=args.pass_env,
        project=args.project,
        no_project=args.no_project,
        no_snapshot=args.no_snapshot,
        network="none" if args.no_network else "host" if args.host_network else "bridge",
        timeout_min=args.timeout,
        root=args.root,
        gpus=args.gpus,
        gpu_mem_gb=args.gpu_mem,
        gpu_ids=args.gpu_ids,
        in_container=_in_container(args, env),
        node=args.node,
    )


def _in_container(args: argparse.Namespace, env: Env) -> InContainer | None:
    """The agent CLI of `--auth PROFILE` (orbit/agents/incontainer.py), or None."""
    if not args.auth:
        return None

    from orbit.agents import auth
    from orbit.agents.incontainer import setup

    profile = auth.get(env.home, args.auth)
    return setup(env.home, profile, env.environ, container_root=args.root or os.getuid() == 0)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.execute.submit import prepare, submit
    from orbit.store.runs import RunStore

    req = request_from(args, env)
    declare = objective_option(args, env)
    progress = build_progress(env)
    prepared = prepare(env.home, req, cwd=env.cwd, environ=env.environ, progress=progress)
    launch = launching(env, args, prepared, "run", {}, req.command, 1) if args.group else None
    declare()
    run = submit(env.home, prepared, actor=env.actor, recorded=launch)
    side_tick(env)
    store = RunStore(env.home)
    run = store.load(run.id)
    if args.wait:
        out = None if args.json else binary_stdout(env)
        run = follow_until_done(
            env, store, run, out=out, queued=QueueNotes(env.stderr, clock=env.monotonic)
        )
    if args.json:
        # Only here: the metric readers and the record's describer are a fifth of the imports
        # of `orbit run -w`, and only --json shows what they read.
        from orbit.review.metrics import metrics_json
        from orbit.store.describe import describe

        print_json(env, describe(store, run, metrics=metrics_json(run)))
    elif args.wait:
        from orbit.cli.wait import result_line
        from orbit.store.lognote import log_note

        line = result_line(run.label, run.state.value, run.reason, log_note(run.status))
        print(f"orbit: {line}", file=env.stderr)
    else:
        reason = f" ({run.reason})" if run.reason else ""
        print(f"run {run.label} {run.state.value}{reason}", file=env.stdout)
    return exit_code_of(run) if args.wait else int(ExitCode.OK)


def objective_option(args: argparse.Namespace, env: Env) -> Callable[[], None]:
    """Check `--objective` now (before anything is written); the returned call declares it
    for the group (a direction that goes against the name is declared, with a warning)."""
    if not args.objective:
        return lambda: None
    from orbit.review.objective import direction_by_name, way_text
    from orbit.store.groups import parse_objective, set_objective

    if not args.group:
        raise UsageError("--objective is a group's: give -g GROUP too")
    metric, way = parse_objective(args.objective)
    by_name = direction_by_name(metric)
    if way is None and by_name is None:
        raise UsageError(
            f"--objective {metric}: its name does not say which way is better: "
            f"{metric}:max or {metric}:min"
        )
    direction = way or by_name
    if way and by_name and way != by_name:
        print(
            f"orbit: warning: --objective {metric}:{way} goes against its name "
            f"({way_text(by_name)} by the name); declared as given",
            file=env.stderr,
        )
    group = str(args.group)

    def declare() -> None:
        set_objective(env.home, group, metric, direction, env.actor)

    return declare


def launching(
    env: Env,
    args: argparse.Namespace,
    prepared: Prepared,
    kind: str,
    params: dict[str, list[str]],
    command: list[str],
    count: int,
) -> Callable[[str], None]:
    """What notes the launch in the group's launches.jsonl: called by the submit once the
    batch is recorded, with its time (a submit killed before leaves no launch line)."""
    from orbit.cli.launch import record

    spec = prepared.spec
    project = (spec.get("project") or {}).get("path")
    request = {
        "image": spec.get("image"),
        "dockerfile": spec.get("dockerfile"),
        "resources": {k: v for k, v in (spec.get("resources") or {}).items() if v},
        "timeout_min": spec.get("timeout_min"),
        "network": spec.get("network"),
    }

    def note(at: str) -> None:
        record(
            env,
            str(args.group),
            kind,
            args,
            project=str(project) if project else None,
            params=params,
            command=command,
            count=count,
            max_running=getattr(args, "max_running", None),
            request=request,
            at=at,
        )

    return note


def exit_code_of(run: Run) -> int:
    """What `orbit run -w` exits with for a finished run: the command's own exit code (a signal's
    128+n included), or Orbit's code for a run whose command did not end by itself. The order
    is that of the run's reason (store/exitrecord.outcome), so the code and the reason agree."""
    from orbit.store.exitrecord import read_exit

    if run.state is RunState.SUCCEEDED:
        return int(ExitCode.OK)
    if run.state is RunState.CANCELLED:
        return int(ExitCode.CANCELLED)
    if run.state is not RunState.FAILED:
        return int(ExitCode.NO_RESULT)  # lost: its result is unknown
    record = read_exit(run.dir) or {}
    code = run.exit_code
    if record.get("error"):
        return int(ExitCode.NO_RESULT)
    if record.get("timed_out"):
        return int(ExitCode.TIMED_OUT)
    if run.status.get("oom_killed") and code != 0:
        return int(ExitCode.OOM_KILLED)
    if record.get("docker_restarted"):
        return int(ExitCode.NO_RESULT)  # Docker stopped it: the command did not end by itself
    if code is not None and 0 < code < 256:
        return code
    return int(ExitCode.NO_RESULT)  # failed without a code of the command's (a build, …)


class _TextSink:
    """Bytes in, text out: lets the log copier write to a text stream (tests, pipes)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, data: bytes) -> int:
        self.out.write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        self.out.flush()


def binary_stdout(env: Env) -> BinaryIO:
    env.stdout.flush()
    buffer = getattr(env.stdout, "buffer", None)
    return buffer if buffer is not None else _TextSink(env.stdout)  # type: ignore[return-value]

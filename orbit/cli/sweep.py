"""orbit sweep [run options] -g GROUP -p KEY=V1,V2 … -- COMMAND {KEY} …: one run per
combination of the parameters (the cartesian product), each recording its `params`."""

from __future__ import annotations

import argparse
import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from orbit.cli.common import add_json, build_progress, print_json, side_tick, table
from orbit.cli.run import request_from
from orbit.cli.runopts import add_run_options, parse_params
from orbit.env import Env
from orbit.errors import CorruptError, ExitCode, NotFoundError, OrbitError, UsageError

if TYPE_CHECKING:
    from orbit.execute.submit import Prepared, Request
    from orbit.store.model import Run
    from orbit.store.runs import RunStore

# `{{` and `}}` are literal braces; any other `{…}` is a placeholder and must name a parameter.
TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="submit one run per combination of parameters",
        description="Submit the cartesian product of the -p values as runs of one group. "
        "{KEY} in the command and in -n is replaced by the run's value ({{ and }} are literal "
        "braces). Options go before `--`, the command after.",
    )
    add_run_options(p)
    p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a parameter and its values, comma-separated (repeatable; one -p per key)",
    )
    p.add_argument(
        "--max-running",
        type=positive_int,
        metavar="N",
        help="at most N runs of the group hold resources at once",
    )
    p.add_argument(
        "--like",
        metavar="GROUP",
        help="repeat GROUP's newest launch: its options, params and command, each replaced by "
        "what this command line gives (-p KEY=… replaces that key's values); the runs join "
        "GROUP unless -g names another",
    )
    p.add_argument(
        "-w",
        "--wait",
        action="store_true",
        help="wait until every run of the sweep has finished; exit 1 if any did not succeed",
    )
    add_json(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND")
    p.set_defaults(func=run)


def check_placeholders(text: str, keys: list[str], where: str) -> None:
    for m in TOKEN.finditer(text):
        name = m.group(1)
        if name is not None and name not in keys:
            raise UsageError(
                f"unknown placeholder {{{name}}} in {where}: the parameters are "
                f"{', '.join(keys)} (write {{{{ and }}}} for literal braces)"
            )


def expand(text: str, values: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return values[m.group(1)]

    return TOKEN.sub(sub, text)


def plan(base: Request, params: dict[str, list[str]], cap: int | None) -> list[Request]:
    """One request per combination (the last -p varies fastest); raises before any is sent."""
    keys = list(params)
    for arg in base.command:
        check_placeholders(arg, keys, "the command")
    if base.name:
        check_placeholders(base.name, keys, "the name (-n)")
    requests = []
    for combo in itertools.product(*params.values()):
        values = dict(zip(keys, combo, strict=True))
        requests.append(
            replace(
                base,
                command=[expand(arg, values) for arg in base.command],
                name=expand(base.name, values) if base.name else None,
                params=values,
                group_cap=cap,
            )
        )
    names = [r.name for r in requests if r.name]
    if len(set(names)) < len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise UsageError(
            f"-n {base.name!r} gives several runs the name {dup!r}: use a placeholder for each "
            f"parameter, e.g. -n {'-'.join(f'{k}{{{k}}}' for k in keys)}"
        )
    return requests


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.cli.launch import apply_like
    from orbit.cli.run import launching, objective_option
    from orbit.execute.submit import prepare
    from orbit.store.runs import RunStore

    if args.like:
        params, command = apply_like(args, env)
        args.cmd = ["--", *command]
    if not args.group:
        raise UsageError("a sweep needs a group: -g GROUP (then `orbit wait -g GROUP`)")
    base = request_from(args, env)
    if not base.command:
        raise UsageError("no command given: put it after `--`, e.g. -- python train.py --lr {lr}")
    if not args.like:
        params = parse_params(args.param)
    requests = plan(base, params, args.max_running)
    declare = objective_option(args, env)
    # What the runs share (checks, resources, snapshot, image or build, the Docker connection)
    # is prepared once; the runs differ only in command, name and params.
    shared = prepare(
        env.home, requests[0], cwd=env.cwd, environ=env.environ, progress=build_progress(env)
    )
    launch = launching(env, args, shared, "sweep", params, base.command, len(requests))
    declare()
    submitted = submit_all(env, shared, requests, args.group, launch)
    side_tick(env, submitted=submitted)
    store = RunStore(env.home)
    runs = current(store, submitted)
    if not args.json:
        print_submitted(env, runs, args.group, args.max_running)
    if args.wait:
        return wait_all(env, store, runs, args)
    if args.json:
        print_json(env, {"group": args.group, "runs": [entry(r) for r in runs]})
    return int(ExitCode.OK)


def submit_all(
    env: Env,
    shared: Prepared,
    requests: list[Request],
    group: str,
    launch: Callable[[str], None] | None = None,
) -> list[Run]:
    """Write one run per request, in one batch; when it fails, the error says which runs
    were written (each whole: see orbit/store/creation.py). `launch(created_at)` notes the
    launch once the batch is recorded."""
    from orbit.execute.submit import submit, submit_many

    if shared.build_error is not None:  # recorded as one failed run, with the build log
        first = requests[0]
        submit(
            env.home,
            shared.varied(command=first.command, name=first.name, params=first.params),
            actor=env.actor,
            recorded=launch,
        )
    batch = [
        shared.varied(command=req.command, name=req.name, params=req.params) for req in requests
    ]
    submitted: list[Run] = []
    try:
        return submit_many(
            env.home, batch, actor=env.actor, revealed=submitted.append, recorded=launch
        )
    except BaseException as exc:
        if submitted:
            ids = " ".join(r.id for r in submitted)
            note = (
                f"the sweep stopped after {len(submitted)} of {len(requests)} runs ({ids}), "
                f"which stay in group {group!r}"
            )
            if isinstance(exc, OrbitError):
                exc.args = (f"{exc}; {note}",)
            else:
                print(f"orbit: {note}", file=env.stderr)
        raise


def current(store: RunStore, runs: list[Run]) -> list[Run]:
    """The runs as they are now: only those whose status.yaml changed since they were
    written (admitted by the tick, say) are read again."""
    from orbit.store.index import status_stamp

    out = []
    for run in runs:
        if run.stamp is None or status_stamp(run.dir) != run.stamp:
            try:
                run = store.load(run.id)
            except (CorruptError, NotFoundError):
                pass  # removed or damaged since: shown as it was written
        out.append(run)
    return out


def entry(r: Run) -> dict[str, Any]:
    return {"id": r.id, "name": r.name or None, "params": r.spec.get("params") or {}}


def print_submitted(env: Env, runs: list[Run], group: str, cap: int | None) -> None:
    at_most = f" (at most {cap} running at once)" if cap else ""
    print(f"submitted {len(runs)} runs to group {group}{at_most}", file=env.stdout)
    body = [
        [r.id, r.name, r.state.value, " ".join(f"{k}={v}" for k, v in entry(r)["params"].items())]
        for r in runs
    ]
    table(env.stdout, ["ID", "NAME", "STATE", "PARAMS"], body)
    env.stdout.flush()


def wait_all(env: Env, store: RunStore, runs: list[Run], args: argparse.Namespace) -> int:
    from orbit.cli.wait import Progress, exit_code, print_results, result, wait_for

    live = None if args.json else Progress(env.stderr, args.group)
    entries = {r.id: entry(r) for r in runs}
    results = [result(r) for r in wait_for(env, store, list(entries), live)]
    ok = all(r["state"] == "succeeded" for r in results)
    if args.json:
        print_json(
            env,
            {"group": args.group, "ok": ok, "runs": [{**entries[r["id"]], **r} for r in results]},
        )
    else:
        print_results(env, results)
    return int(exit_code(results))

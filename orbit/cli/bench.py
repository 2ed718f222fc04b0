"""orbit bench …: benchmarks, jobs of trials (task × method × seed), their results.

One sub-parser set-up function per sub-command (`_add_<name>`), each setting its handler;
listing and rendering of jobs is in cli/bench_show.py. Every sub-command but `_drive` first
restarts the driver of any unfinished job whose driver has died.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from orbit.cli.bench_review import add_compare_parser, add_usage_parser
from orbit.cli.common import add_json, key_value, non_negative_int, print_json, side_tick, table
from orbit.cli.mv import complete_folders
from orbit.env import Env
from orbit.errors import ConflictError, ExitCode, UsageError

if TYPE_CHECKING:
    from orbit.bench.model import Benchmark
    from orbit.cli.watch import QueueNotes

WAIT_POLL_S = 0.5
CANCEL_WAIT_S = 90.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmarks: jobs of trials (task × method × seed), their scores and validity",
        description="Run benchmarks: every solve and every verify is an Orbit run (docs/bench.md).",
    )
    bench_sub = p.add_subparsers(dest="bench_command", metavar="COMMAND")
    for add in (
        _add_add,
        _add_ls,
        _add_tasks,
        _add_run,
        _add_jobs,
        _add_show,
        add_compare_parser,
        add_usage_parser,
        _add_cancel,
        _add_rm_job,
        _add_regrade,
        _add_drive,
    ):
        add(bench_sub)
    p.set_defaults(func=_help(p))


def _help(parser: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    def show(args: argparse.Namespace, env: Env) -> int:
        parser.print_help(env.stdout)
        return ExitCode.USAGE

    return show


def revive(env: Env) -> None:
    """Restart the driver of every unfinished job whose driver died."""
    from orbit.bench.jobs import revive as revive_jobs

    revive_jobs(env.home, env.environ)


# --- add, ls, tasks ---------------------------------------------------------------------------
def _add_add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("add", help="register a benchmark directory with its adapter")
    p.add_argument("name")
    p.add_argument("dir")
    p.add_argument("--adapter", required=True, help="harbor, asi, or an adapter executable's path")
    p.add_argument(
        "-c",
        dest="config",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="an adapter setting (repeatable)",
    )
    p.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="VAR",
        help="a variable for the verify runs only, from `bench run`'s environment",
    )
    p.add_argument(
        "--resources",
        type=Path,
        metavar="FILE.json",
        help="per-task solve resources: {TASK: {cpus, mem_gb, gpus, timeout_min}}",
    )
    add_json(p)
    p.set_defaults(func=run_add)


def run_add(args: argparse.Namespace, env: Env) -> int:
    from dataclasses import asdict

    from orbit.bench.benchmarks import add_benchmark

    revive(env)
    bench, tasks = add_benchmark(
        env.home,
        args.name,
        args.dir,
        args.adapter,
        cwd=env.cwd,
        config=dict(args.config),
        pass_env=args.pass_env,
        resources=args.resources,
    )
    supported = sum(t.supported for t in tasks)
    if args.json:
        print_json(env, {**asdict(bench), "tasks": len(tasks), "supported": supported})
    else:
        print(f"benchmark {bench.name}: {len(tasks)} tasks, {supported} supported", file=env.stdout)
    return ExitCode.OK


def _add_ls(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ls", help="list registered benchmarks")
    add_json(p)
    p.set_defaults(func=run_ls)


def run_ls(args: argparse.Namespace, env: Env) -> int:
    from dataclasses import asdict

    from orbit.bench.benchmarks import list_benchmarks

    revive(env)
    benches = list_benchmarks(env.home)
    if args.json:
        print_json(env, {"benchmarks": [asdict(b) for b in benches]})
        return ExitCode.OK
    rows = [[b.name, _adapter_label(b.adapter), b.dir] for b in benches]
    table(env.stdout, ["NAME", "ADAPTER", "DIR"], rows)
    return ExitCode.OK


def _adapter_label(adapter: str) -> str:
    return adapter if "/" not in adapter else f"external {adapter}"


def _add_tasks(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="a benchmark's tasks, and why unsupported ones cannot run")
    p.add_argument("name")
    add_json(p)
    p.set_defaults(func=run_tasks)


def run_tasks(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.adapters import load_adapter
    from orbit.bench.benchmarks import with_resources
    from orbit.bench.model import load_benchmark
    from orbit.human import fmt_num

    revive(env)
    bench = load_benchmark(env.home, args.name)
    shown = [with_resources(bench, t) for t in load_adapter(env.home, bench).tasks()]
    if args.json:
        keys = ("name", "supported", "reason", "cpus", "mem_gb", "gpus", "timeout_min")
        tasks = [{**{k: getattr(t, k) for k in keys}, "resources_from": src} for t, src in shown]
        print_json(env, {"tasks": tasks})
        return ExitCode.OK

    def num(value: float | None) -> str:
        return "-" if value is None else fmt_num(value)

    def source(src: dict | None) -> str:
        if src is None:
            return "task"
        return f'{src["file"] or "--resources"} ["{src["entry"]}"]: {" ".join(src["keys"])}'

    rows = [
        [t.name, "yes" if t.supported else "no", num(t.cpus), num(t.mem_gb), str(t.gpus),
         num(t.timeout_min), source(src), t.reason or ""]
        for t, src in shown
    ]  # fmt: skip
    headers = ["TASK", "SUPPORTED", "CPUS", "MEM_GB", "GPUS", "TIMEOUT_MIN", "FROM", "WHY NOT"]
    table(env.stdout, headers, rows)
    return ExitCode.OK


# --- run, jobs, show --------------------------------------------------------------------------
def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="start a job: every task × method × seed is a trial")
    p.add_argument("name", help="the benchmark")
    p.add_argument(
        "-t",
        "--task",
        dest="tasks",
        action="append",
        default=[],
        metavar="TASK",
        help="a task to run (repeatable; default: every supported task)",
    )
    p.add_argument(
        "-m",
        "--method",
        dest="methods",
        action="append",
        default=[],
        metavar="METHOD",
        help="oracle, empty or NAME=AGENT[,auth=P,model=M,effort=E,bundle=DIR]",
    )
    p.add_argument("--seeds", type=non_negative_int, default=1, help="trials per task and method")
    p.add_argument("-n", "--name", dest="job_name", help="a name for the job")
    folder = p.add_argument(
        "--folder", metavar="PATH", help="file the job under this folder (as `orbit run --folder`)"
    )
    folder.completer = complete_folders
    p.add_argument(
        "--max-running",
        type=non_negative_int,
        metavar="N",
        help="at most N trials in flight at once",
    )
    p.add_argument("-w", "--wait", action="store_true", help="wait until every trial is done")
    add_json(p)
    p.set_defaults(func=run_run)


def run_run(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.adapters import load_adapter
    from orbit.bench.benchmarks import select_tasks
    from orbit.bench.jobs import JobRequest, create_job, start_driver
    from orbit.bench.methods import check_method, parse_method
    from orbit.bench.model import load_benchmark
    from orbit.store.folders import normalize

    folder = normalize(args.folder)
    revive(env)
    bench = load_benchmark(env.home, args.name)
    methods = [parse_method(m, env.cwd) for m in args.methods]
    for method in methods:
        check_method(env.home, method)
    secrets = verifier_secrets(env, bench)
    tasks, left_out = select_tasks(load_adapter(env.home, bench).tasks(), args.tasks)
    if not tasks and left_out:
        first = left_out[0]
        raise UsageError(
            f"no task of {bench.name} can run here ({len(left_out)} unsupported; "
            f"{first.name}: {first.reason})"
        )
    req = JobRequest(
        benchmark=bench.name,
        tasks=tasks,
        methods=methods,
        seeds=args.seeds,
        name=args.job_name,
        max_running=args.max_running,
        secrets=secrets,
        folder=folder,
    )
    job = create_job(env.home, req)
    start_driver(env.home, job.id, env.environ)
    for task in left_out:
        print(f"orbit: left out task {task.name}: {task.reason}", file=env.stderr)
    if args.wait:
        return _wait_and_report(args, env, job.id)
    if args.json:
        from orbit.cli.bench_show import job_json

        print_json(env, job_json(env.home, job.id))
    else:
        count = len(tasks) * len(methods) * args.seeds
        print(f"job {job.id}: {count} trials started (orbit bench show {job.id})", file=env.stdout)
    return ExitCode.OK


def verifier_secrets(env: Env, bench: Benchmark) -> dict[str, str]:
    """The values of the benchmark's --pass-env variables, which must be set here."""
    missing = [v for v in bench.pass_env if v not in env.environ]
    if missing:
        raise UsageError(
            f"benchmark {bench.name} passes {missing[0]} to its verifier: not set here"
        )
    return {v: env.environ[v] for v in bench.pass_env}


def _wait_and_report(args: argparse.Namespace, env: Env, job_id: str) -> int:
    """Wait until the job is no longer running; show it; exit 0 when every trial is valid,
    1 (RUN_FAILED) otherwise."""
    from orbit.bench.jobs import driver_alive, start_driver
    from orbit.bench.model import load_job, load_trials
    from orbit.bench.records import counted
    from orbit.cli.bench_show import job_json, print_job
    from orbit.cli.watch import QueueNotes

    last_tick = time.monotonic()
    queued = QueueNotes(env.stderr, clock=env.monotonic)
    while load_job(env.home, job_id).state == "running":
        say_why_runs_wait(env, job_id, queued)
        if not driver_alive(env.home, job_id):
            time.sleep(WAIT_POLL_S)  # a driver just started takes its lock in a moment
            if not driver_alive(env.home, job_id) and load_job(env.home, job_id).state == "running":
                start_driver(env.home, job_id, env.environ)
        if time.monotonic() - last_tick > 5:
            side_tick(env, warn=False)
            last_tick = time.monotonic()
        time.sleep(WAIT_POLL_S)
    if args.json:
        print_json(env, job_json(env.home, job_id))
    else:
        print_job(env, job_id)
    valid = all(counted(t) for t in load_trials(env.home, job_id))
    return ExitCode.OK if valid else ExitCode.RUN_FAILED


def say_why_runs_wait(env: Env, job_id: str, queued: QueueNotes) -> None:
    """Say (as `orbit run -w` does) why the job's runs in flight wait in the queue."""
    from orbit.bench.model import load_trials
    from orbit.errors import OrbitError
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    for trial in load_trials(env.home, job_id):
        run_id = trial.solve_run if trial.phase == "solving" else None
        if trial.phase == "verifying" and len(trial.verify_runs) == trial.verifies:
            run_id = trial.verify_runs[-1]
        if run_id:
            try:
                queued.show(store.load(run_id))
            except OrbitError:
                continue  # a run being written or damaged: the driver deals with it


def _add_jobs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list jobs")
    add_json(p)
    p.set_defaults(func=run_jobs)


def run_jobs(args: argparse.Namespace, env: Env) -> int:
    from orbit.cli.bench_show import print_jobs

    revive(env)
    print_jobs(env, args.json)
    return ExitCode.OK


def _add_show(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="a job's trials: execution, evaluation, score, runs")
    p.add_argument("job", help="job id (j3) or name")
    add_json(p)
    p.set_defaults(func=run_show)


def run_show(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.jobs import resolve_job
    from orbit.cli.bench_show import job_json, print_job

    revive(env)
    job = resolve_job(env.home, args.job)
    if args.json:
        print_json(env, job_json(env.home, job.id))
    else:
        print_job(env, job.id)
    return ExitCode.OK


# --- cancel, rm-job, regrade, _drive ----------------------------------------------------------
def _add_cancel(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cancel", help="cancel a job: its runs are cancelled, its trials marked")
    p.add_argument("job")
    add_json(p)
    p.set_defaults(func=run_cancel)


def run_cancel(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.jobs import (
        driver_alive,
        regrades_only,
        request_cancel,
        resolve_job,
        start_driver,
    )
    from orbit.bench.model import load_job, load_trials

    job = resolve_job(env.home, args.job)
    regrades = regrades_only(load_trials(env.home, job.id)) if job.state == "running" else 0
    job = request_cancel(env.home, job.id)
    if job.state != "cancelled":  # it finished first: nothing was cancelled
        regrades = 0
    revive(env)  # the other unfinished jobs
    if job.state == "cancelled" and not driver_alive(env.home, job.id):
        start_driver(env.home, job.id, env.environ)  # it cancels the runs and marks the trials
        time.sleep(WAIT_POLL_S)
    deadline = time.monotonic() + CANCEL_WAIT_S
    while driver_alive(env.home, job.id) and time.monotonic() < deadline:
        time.sleep(WAIT_POLL_S / 5)
    side_tick(env, warn=False)
    job = load_job(env.home, job.id)
    if args.json:
        from orbit.cli.bench_show import job_json

        print_json(env, job_json(env.home, job.id))
    elif regrades and job.state == "finished":
        print(f"job {job.id}: cancelled the regrade of {regrades} trial(s); the job keeps its "
              "earlier grading", file=env.stdout)  # fmt: skip
    else:
        print(f"job {job.id} {job.state}", file=env.stdout)
    return ExitCode.OK


def _add_rm_job(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rm-job", help="delete a finished job: its trials, runs and solved images")
    p.add_argument("job")
    p.add_argument("--yes", metavar="JOB", help="confirm without asking: repeat the job id")
    add_json(p)
    p.set_defaults(func=run_rm_job)


def run_rm_job(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.jobs import check_removable, remove_job, resolve_job

    revive(env)
    job = resolve_job(env.home, args.job)
    check_removable(env.home, job)
    if args.yes is not None:
        if args.yes != job.id:
            raise UsageError(f"--yes must repeat the job id ({job.id}); nothing deleted")
    else:
        env.stderr.write(
            f"Delete job {job.id} with its runs and solved images? Type {job.id!r} to confirm: "
        )
        env.stderr.flush()
        if env.stdin.readline().strip() != job.id:
            raise UsageError("not confirmed; nothing deleted")
    removed = remove_job(env.home, job.id)
    if args.json:
        print_json(env, {"job": job.id, "removed_runs": removed})
    else:
        print(f"deleted job {job.id} and {len(removed)} run(s)", file=env.stdout)
    return ExitCode.OK


def _add_regrade(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("regrade", help="verify a finished job's trials again (no new solve)")
    p.add_argument("job")
    p.add_argument("-w", "--wait", action="store_true", help="wait until every trial is graded")
    add_json(p)
    p.set_defaults(func=run_regrade)


def run_regrade(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.jobs import request_regrade, resolve_job, start_driver
    from orbit.bench.model import load_benchmark

    revive(env)
    job = resolve_job(env.home, args.job)
    secrets = verifier_secrets(env, load_benchmark(env.home, job.benchmark))
    chosen = request_regrade(env.home, job.id, secrets)
    if not chosen:
        raise ConflictError(f"job {job.id} has no trial with a solve to grade again")
    start_driver(env.home, job.id, env.environ)
    if args.wait:
        return _wait_and_report(args, env, job.id)
    if args.json:
        print_json(env, {"job": job.id, "trials": chosen})
    else:
        print(f"job {job.id}: {len(chosen)} trial(s) being graded again", file=env.stdout)
    return ExitCode.OK


def _add_drive(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("_drive")  # hidden: started detached by the commands above
    p.add_argument("job")
    p.set_defaults(func=run_drive)


def run_drive(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.driver import drive_job

    return drive_job(args.job, env.home)

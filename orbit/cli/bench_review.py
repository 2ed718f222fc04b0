"""orbit bench compare JOB… and orbit bench usage JOB…: scores side by side (orbit/bench/
compare.py) and measured usage turned into a --resources file (orbit/bench/usage.py). The
`orbit bench` sub-parser set-up calls add_compare_parser and add_usage_parser."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orbit.cli.common import add_json, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode, UsageError, from_os_error
from orbit.human import fmt_metric, human_bytes, human_seconds

if TYPE_CHECKING:
    from orbit.bench.compare import Comparison
    from orbit.bench.usage import TaskUsage


def add_compare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="jobs side by side: score per task × method, validity, paired means",
        description="Per task × method: the mean score over seeds ± its sample standard "
        "deviation (n valid trials); invalid trials are listed with their reason and never "
        "counted. The paired mean of each method is taken over the tasks valid for every "
        "method compared. A method name found in several jobs is shown as JOB:NAME.",
    )
    p.add_argument("jobs", nargs="+", metavar="JOB", help="a job id (j3) or its unique name")
    add_json(p)
    p.set_defaults(func=run_compare)


def add_usage_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "usage",
        help="the measured peaks of each task's solve runs, and the resources they suggest",
        description="Per task: peak memory, CPU cores, CPU seconds, GPU memory and the longest "
        "of its solve runs, and suggested resources (memory × 1.25 rounded up to 0.5 GiB, CPUs "
        "rounded up, GPUs as used, the longest solve × 1.5); -o writes them as the --resources "
        "file of `orbit bench add` (docs/bench.md).",
    )
    p.add_argument("jobs", nargs="+", metavar="JOB", help="a job id (j3) or its unique name")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the --resources JSON")
    add_json(p)
    p.set_defaults(func=run_usage)


# --- compare ----------------------------------------------------------------------------------
def run_compare(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.compare import compare_jobs
    from orbit.bench.jobs import revive

    revive(env.home, env.environ)
    cmp = compare_jobs(env.home, args.jobs)
    if args.json:
        print_json(env, cmp.to_json())
        return ExitCode.OK
    _print_comparison(env, cmp)
    return ExitCode.OK


def _print_comparison(env: Env, cmp: Comparison) -> None:
    from orbit.bench.compare import cell_text, paired_text

    out = env.stdout
    for rec in cmp.jobs:
        s = rec.summary()
        name = f" ({s['name']})" if s["name"] else ""
        out.write(
            f"job {s['id']}{name}: {s['benchmark']}, {s['state']}; {s['valid']} valid, "
            f"{s['invalid']} invalid, {s['unknown']} not graded of {s['trials']} trials\n"
        )
        for u in rec.unreadable:
            out.write(f"  unreadable trial file {u.file}: {u.problem}\n")
    labels = [c.label for c in cmp.columns]
    rows = [[t, *(cell_text(cmp.cell(t, c)) for c in labels)] for t in cmp.tasks]
    out.write("\n")
    table(out, ["TASK", *labels], rows)
    n, total = len(cmp.paired_tasks), len(cmp.tasks)
    out.write(
        f"\npaired over {n} of {total} task{'s' if total != 1 else ''} valid for every method"
    )
    out.write(":\n" if n else " (none: no paired mean)\n")
    if n:
        for c in labels:
            out.write(f"  {c}: {paired_text(cmp, c)}\n")
    for task, why in cmp.left_out:
        out.write(f"  left out {task}: {why}\n")
    invalid = [
        (t, c, trial)
        for t in cmp.tasks
        for c in labels
        for trial in cmp.cell(t, c).trials
        if trial.evaluation == "invalid"
    ]
    if invalid:
        out.write("\ninvalid trials (not counted):\n")
    for task, label, trial in invalid:
        runs = " ".join(r for r in [trial.solve_run, *trial.verify_runs] if r)
        where = f"runs {runs}" if runs else "no runs"
        why = trial.reason or "no reason given"
        out.write(f"  {task} × {label} seed {trial.seed}: {why} ({where})\n")


# --- usage ------------------------------------------------------------------------------------
def run_usage(args: argparse.Namespace, env: Env) -> int:
    from orbit.bench.jobs import revive
    from orbit.bench.records import read_job, resolve_job
    from orbit.bench.usage import measure, resources_file
    from orbit.store.runs import RunStore

    revive(env.home, env.environ)
    ids = list(dict.fromkeys(resolve_job(env.home, r).id for r in args.jobs))
    usage = measure(RunStore(env.home), [read_job(env.home, i) for i in ids])
    document = resources_file(usage)
    if args.output is not None:
        _write(env.cwd / args.output, document)
    if args.json:
        print_json(env, {"tasks": [u.to_json() for u in usage], "resources": document})
        return ExitCode.OK
    _print_usage(env, usage)
    if args.output is not None:
        print(f"wrote {args.output} ({len(document)} entries)", file=env.stdout)
    return ExitCode.OK


def _write(path: Path, document: dict[str, Any]) -> None:
    try:
        path.write_text(json.dumps(document, indent=2) + "\n")
    except OSError as exc:
        problem = from_os_error(exc, where=str(path))
        raise problem or UsageError(f"-o {path}: {exc.strerror or exc}") from None


def _print_usage(env: Env, usage: list[TaskUsage]) -> None:
    rows = []
    for u in usage:
        s = u.suggestion()
        rows.append(
            [
                u.task,
                str(len(u.runs)),
                human_bytes(u.mem_bytes) if u.runs else "-",
                fmt_metric(u.cpu_cores) if u.runs else "-",
                fmt_metric(u.cpu_seconds) if u.runs else "-",
                human_bytes(u.gpu_mem_bytes),
                human_seconds(u.longest_s) if u.runs else "-",
                "-"
                if s is None
                else f"{s['cpus']} CPU, {fmt_metric(s['mem_gb'])} GiB, "
                f"{s['gpus']} GPU, {s['timeout_min']} min",
            ]
        )
    headers = ["TASK", "RUNS", "PEAK MEM", "PEAK CPU", "CPU-S", "GPU MEM", "LONGEST"]
    table(env.stdout, [*headers, "SUGGESTED"], rows)
    for u in usage:
        for note in u.notes():
            print(f"  {u.task}: {note}", file=env.stdout)

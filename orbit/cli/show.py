"""orbit show ID: request, state and reason, resources, peaks, latest metrics, notes."""

from __future__ import annotations

import argparse
import json

from orbit.cli.common import add_json, print_json, runs_argument, side_tick
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.human import gpu_phrase, human_bytes, human_seconds


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="details of a run")
    runs_argument(p, nargs=None, help="run id, unique id prefix or unique name")  # type: ignore[arg-type]
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.cli.watch import needs_repair
    from orbit.store.describe import describe
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    run = store.resolve(args.runs)
    if needs_repair(run):
        side_tick(env)  # its shepherd died: settle or restart it first
        run = store.load(run.id)
    d = describe(store, run)
    if args.json:
        print_json(env, d)
        return ExitCode.OK
    out = env.stdout
    w = out.write
    w(f"run {run.label}\n")
    state = d["state"] + (f": {d['reason']}" if d.get("reason") else "")
    w(f"  state      {state}\n")
    if d.get("group"):
        w(f"  group      {d['group']}\n")
    if d.get("folder"):
        w(f"  folder     {d['folder']}\n")
    if d.get("tags"):
        w("  tags       " + ", ".join(f"{k}={v}" for k, v in d["tags"].items()) + "\n")
    if d.get("params"):
        w("  params     " + ", ".join(f"{k}={v}" for k, v in d["params"].items()) + "\n")
    w(f"  image      {d.get('image')}\n")
    w(f"  command    {' '.join(d['command'])}\n")
    res = d.get("resources") or {}
    gpu_txt = ""
    if res.get("gpus"):
        gpu_txt = ", " + gpu_phrase(res["gpus"], res.get("gpu_ids"), res.get("gpu_mem_gb"))
    w(f"  resources  {res.get('cpus')} CPUs, {res.get('mem_gb')} GiB memory{gpu_txt}")
    w(f", timeout {d['timeout_min']} min\n" if d.get("timeout_min") else "\n")
    lease_gpus = (d.get("lease") or {}).get("gpus") or []
    if lease_gpus:
        w("  gpus       " + ", ".join(f"GPU {g['index']} ({g['uuid']})" for g in lease_gpus) + "\n")
    peaks = d.get("peaks") or {}
    if peaks:
        w(
            f"  peaks      memory {human_bytes(peaks.get('mem_bytes'))}, "
            f"CPU {peaks.get('cpu_cores', 0)} cores, {peaks.get('cpu_seconds', 0)} CPU-s\n"
        )
    if d.get("exit_code") is not None:
        w(
            f"  exit code  {d['exit_code']}"
            + (" (killed for memory)" if d["oom_killed"] else "")
            + "\n"
        )
    gaps = run.status.get("log_incomplete")
    if isinstance(gaps, dict):
        count = gaps.get("gaps")
        w(
            f"  log        log incomplete: {count} gap{'s' if count != 1 else ''} "
            "(Docker discarded output before it was copied; see log.pos)\n"
        )
    w(f"  submitted  {d.get('submitted_at')}\n")
    if d.get("started_at"):
        w(f"  started    {d['started_at']}\n")
    if d.get("finished_at"):
        w(f"  finished   {d['finished_at']} (ran {human_seconds(d.get('duration_s'))})\n")
    proj = d.get("project") or {}
    if proj.get("mode") == "copy":
        dirty = ", dirty" if proj.get("dirty") else ""
        commit = (proj.get("commit") or "no commit")[:12]
        w(f"  code       {proj.get('path')} @ {commit}{dirty}, snapshot {proj.get('snapshot')}\n")
    elif proj.get("mode") == "mount":
        w(f"  code       {proj.get('path')} (mounted read-only)\n")
    latest = (d.get("metrics") or {}).get("latest") or {}
    if latest:
        w("  metrics    " + json.dumps(latest, ensure_ascii=False)[:300] + "\n")
    w(f"  directory  {d['dir']}\n")
    for note in d.get("notes") or []:
        w(f"  note       [{note.get('time', '')[:19]}] {note.get('text', '')}\n")
    return ExitCode.OK

"""orbit ps: active runs (queued ones say why they wait); -a for all; -g for a group."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from textwrap import shorten
from typing import Any

from orbit.cli.common import add_json, ago, group_option, print_json, side_tick, table
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.store.excerpt import from_command


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ps", help="list runs", description="List active runs (-a: all runs).")
    p.add_argument("-a", "--all", action="store_true", help="all runs, not only active ones")
    group_option(p, "only runs of this group")
    add_json(p)
    p.set_defaults(func=run)


def rows(env: Env, all_runs: bool, group: str | None) -> list[dict[str, Any]]:
    """Index-shaped rows (with the cache's `st` key); an unreadable run has `error` set."""
    from orbit.cli.watch import needs_repair
    from orbit.store import index
    from orbit.store.model import Run
    from orbit.store.runs import Broken, RunStore

    store = RunStore(env.home)
    items: list[Any]
    if all_runs or group:
        items = store.list_rows()
    else:
        loaded = store.load_many(store.active_ids())
        if any(isinstance(r, Run) and needs_repair(r) for r in loaded):
            side_tick(env)  # a shepherd died: settle or restart it before showing anything
            loaded = store.load_many(store.active_ids())
        items = []
        for run in loaded:
            if isinstance(run, Broken):
                if not store.settle_unfinished_submit(run.id):
                    items.append(run)
            elif run.state.active:
                items.append(index.row_for(run, None))
    out = []
    for entry in items:
        if isinstance(entry, Broken):
            # Listed under its own group, or under every group when not even its run.yaml
            # can be read (it may be a member: leaving it out would hide it).
            if not group or entry.may_be_in(group):
                out.append({"id": entry.id, "state": "unreadable", "error": entry.problem})
            continue
        item: dict[str, Any] = entry
        if group and item.get("group") != group:
            continue
        if not all_runs and item.get("state") not in ("queued", "starting", "running"):
            continue
        out.append(item)
    return out


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.locks import stuck_scheduler

    found = rows(env, args.all, args.group)
    stuck = stuck_scheduler(env.home.locks_dir)
    if stuck:  # queued runs do not move meanwhile: say why
        print(f"orbit: warning: {stuck}", file=env.stderr)
    if args.json:
        print_json(env, {"runs": [_json_row(r) for r in found]})
        return ExitCode.OK
    if not found:
        if args.all:
            text = f"no runs in group {args.group}" if args.group else "no runs"
        elif args.group:
            text = f"no active runs in group {args.group} (orbit ps -a -g {args.group} lists all)"
        else:
            text = "no active runs (orbit ps -a lists all)"
        print(text, file=env.stdout)
        return ExitCode.OK
    body = []
    now = datetime.now(UTC)
    for r in found:
        if "error" in r:
            body.append([r["id"], "", "unreadable", "", "", "", r["error"]])
            continue
        state = str(r.get("state"))
        note = r.get("reason") or ""
        if state == "succeeded":
            note = ""
        elif r.get("error_line") and from_command(r.get("reason")):
            note = f"{note} — {shorten(r['error_line'], 80, placeholder=' …')}"
        res = f"{_num(r.get('cpus'))}c/{_num(r.get('mem_gb'))}G"
        body.append(
            [
                str(r["id"]),
                str(r.get("name") or ""),
                state,
                str(r.get("group") or ""),
                ago(r.get("submitted_at"), now),
                res,
                str(note),
            ]
        )
    table(env.stdout, ["ID", "NAME", "STATE", "GROUP", "SUBMITTED", "RES", "REASON"], body)
    return ExitCode.OK


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row as --json shows it: without the cache's stamp; `error_line` also in rows cached
    before Orbit recorded it (an unreadable run's row has `error` instead)."""
    out = {k: v for k, v in row.items() if k != "st"}
    if "error" not in out:
        out.setdefault("error_line", None)
    return out


def _num(value: Any) -> str:
    if value is None:
        return "?"
    f = float(value)
    return str(int(f)) if f == int(f) else f"{f:g}"

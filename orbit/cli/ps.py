"""orbit ps: active runs (queued ones say why they wait); -a for all; -g for a group;
--state, --name and --sort to pick and order the rows."""

from __future__ import annotations

import argparse
import fnmatch
import functools
import math
import os
import time
from collections.abc import Callable
from typing import Any

from orbit.cli.common import add_json, group_option, print_json, side_tick
from orbit.cli.ps_table import cells_of, fill, is_template, render, template
from orbit.env import Env
from orbit.errors import ExitCode, UsageError
from orbit.store.locks import stuck_scheduler
from orbit.store.model import STATUS_YAML, Run, stamp_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from orbit.review.where import Where
    from orbit.store.listing import Signal, Snapshot

STATES = (
    "queued", "starting", "running", "unknown", "succeeded", "failed", "cancelled", "lost"
)  # fmt: skip
STATE_ALIASES = {
    "active": ("queued", "starting", "running", "unknown"),
    "finished": ("succeeded", "failed", "cancelled", "lost"),
    "unreadable": ("unreadable",),
}
# --sort KEY: a field of the row, `param:KEY`, `metric:NAME`, or any other word is a metric.
TEXT_FIELDS = ("name", "state", "group", "folder", "image")
NUMBER_FIELDS = ("exit_code", "cpus", "mem_gb", "gpus")
TIME_FIELDS = {"submitted": "submitted_at", "started": "started_at", "finished": "finished_at"}
SORT_FIELDS = ("id", *TEXT_FIELDS, *NUMBER_FIELDS, *TIME_FIELDS, "duration")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ps", help="list runs", description="List active runs (-a: all runs).")
    p.add_argument("-a", "--all", action="store_true", help="all runs, not only active ones")
    group_option(p, "only runs of this group")
    p.add_argument(
        "--state",
        action="append",
        metavar="STATE",
        help="only runs in these states (repeat or comma list; active, finished); implies -a",
    )
    p.add_argument("--name", metavar="PATTERN", help="only runs whose name contains it (or a glob)")
    p.add_argument(
        "--sort",
        metavar="KEY",
        help="order by a field (id, name, state, submitted, duration, …), param:KEY, a metric's "
        "latest value, best first (metric:NAME[:max|min] or NAME; the direction defaults to "
        "the group's objective, else the name's), or `best`: the -g group's objective; "
        "--sort=-KEY reverses",
    )
    p.add_argument(
        "--desc", action="store_true", help="reverse the order (descending, worst first)"
    )
    p.add_argument(
        "--where",
        metavar="EXPR",
        help="only runs for which the filter expression holds, as in the web's runs list: "
        "terms on params, metrics, fields and tags, e.g. 'lr<1e-3 loss<0.3 state=failed "
        "tag:baseline opt=sgd'; implies -a",
    )
    add_json(p)
    p.set_defaults(func=run)


def rows(env: Env, all_runs: bool, group: str | None) -> list[dict[str, Any]]:
    """Index-shaped rows (with the cache's `st` key); an unreadable run has `error` set."""
    from orbit.cli.watch import needs_repair
    from orbit.store import index
    from orbit.store.creation import recover
    from orbit.store.runs import Broken, RunStore

    store = RunStore(env.home)
    recover(env.home)  # a killed submit's runs: revealed (or cleared) before they are listed
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
        if not all_runs and item.get("state") not in STATE_ALIASES["active"]:
            continue
        out.append(item)
    return out


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.review.where import parse as parse_where
    from orbit.store.groups import interrupted, interrupted_text

    states = parse_states(args.state)
    sort = parse_sort(args.sort, args.desc)
    expr = parse_where(args.where) if args.where else None
    found: list[dict[str, Any]] = []
    metric = None
    tpl = None
    if args.all and not (states or args.name or sort or args.json or args.group or expr):
        tpl, cells = plain_listing(env)
    else:
        every = args.all or bool(states) or expr is not None
        found = select(rows(env, every, args.group), states, args.name)
        if expr is not None:
            found = matching(env, found, expr)
        sort = directed(env, found, sort, args.group, quiet=args.json)
        metric = sort_rows(env, found, sort)
        cells = cells_of(found)
    stuck = stuck_scheduler(env.home.locks_dir)
    if stuck:  # queued runs do not move meanwhile: say why
        print(f"orbit: warning: {stuck}", file=env.stderr)
    gone = interrupted(env.home, args.group) if args.group else []
    if gone and not args.json:
        print(f"orbit: warning: {interrupted_text(args.group, gone)}", file=env.stderr)
    if args.json:
        noted = {"interrupted": gone} if args.group else {}
        print_json(env, {"runs": [json_row(r, metric) for r in found], **noted})
        return ExitCode.OK
    if not (tpl["submitted"] if tpl is not None else cells):
        if states or args.name or expr:
            print("no runs match", file=env.stdout)
        elif args.all:
            text = f"no runs in group {args.group}" if args.group else "no runs"
        elif args.group:
            text = f"no active runs in group {args.group} (orbit ps -a -g {args.group} lists all)"
        else:
            text = "no active runs (orbit ps -a lists all)"
        print(text, file=env.stdout)
        return ExitCode.OK
    now_us = time.time_ns() // 1000
    if tpl is not None:
        fill(env.stdout, tpl, now_us)
        return ExitCode.OK
    extra = None
    if metric is not None:
        name, values = metric
        got = [values.get(str(r.get("id"))) for r in found]
        extra = (name.upper(), ["-" if v is None else f"{v:.6g}" for v in got])
    render(env.stdout, cells, now_us, extra)
    if not args.all and env.home.settings.executor == "slurm":
        partition = env.home.settings.slurm_partition
        where = f"partition {partition}" if partition else "the default partition"
        print(f"executor: Slurm ({where}); queued runs wait with Slurm's reason", file=env.stdout)
    return ExitCode.OK


def plain_listing(env: Env) -> tuple[dict[str, Any] | None, list[list[Any]]]:
    """The table of every run (`orbit ps -a`) as a template (cli/ps_table.py): the listing
    snapshot's (store/listing.py) while its signal says nothing changed; else the snapshot's
    with only the runs that changed since read again (`changed`), or made from every run's
    row; either is saved as the new snapshot. (None, the cells) when no template can be made."""
    from orbit.store import listing

    snapshot = listing.load(env.home)
    if snapshot is not None and snapshot.fresh:
        tpl = snapshot.section("ps")
        if is_template(tpl):
            return tpl, []
    before = listing.Signal(env.home, str(env.home.runs_dir))
    found = changed(env, snapshot, before) if snapshot is not None else None
    if found is not None:
        cells, stamps, tpl, watch = found
    else:
        rows_now = rows(env, True, None)
        cells = cells_of(rows_now)
        stamps = [r.get("st") for r in rows_now]
        tpl = template(cells)
        watch = {}
        for r in rows_now:
            watch.update(_watched(before.runs_dir, r))
    if tpl is None:
        return None, cells
    listing.save(env.home, before, watch, {"ps": tpl, "cells": cells, "stamps": stamps})
    return tpl, []


def _moved(runs_dir: str, cells: list[list[Any]], stamps: list[Any]) -> set[str]:
    """The ids of the runs whose status.yaml is not the one their row was made from (`st`),
    and of the unreadable ones."""
    ids = set()
    stat = os.stat
    try:
        fd = os.open(runs_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return {c[0] for c in cells}
    try:
        for c, old in zip(cells, stamps, strict=True):
            try:  # relative to runs/: a shorter walk than the whole path
                st = stat(f"{c[0]}/{STATUS_YAML}", dir_fd=fd)
                now: list[int] | None = stamp_of(st)
            except OSError:
                now = None
            if now != old or now is None or c[2] == "unreadable":
                ids.add(c[0])
    finally:
        os.close(fd)
    return ids


def _merged(
    cells: list[list[Any]], stamps: list[Any], ids: set[str], new: dict[str, tuple[list[Any], Any]]
) -> tuple[list[list[Any]], list[Any]]:
    """`cells` and `stamps` with the runs of `ids` replaced by their `new` (cells, stamp),
    or gone when they have none; runs not there before are added in id order."""
    from orbit.store.runs import id_key

    out, out_stamps = [], []
    for c, old in zip(cells, stamps, strict=True):
        if c[0] not in ids:
            out.append(c)
            out_stamps.append(old)
        elif c[0] in new:
            cell, stamp = new.pop(c[0])
            out.append(cell)
            out_stamps.append(stamp)
    if new:  # runs that were not listed before, usually all after the last one listed
        added = sorted(new, key=id_key)
        late = not out or id_key(out[-1][0]) < id_key(added[0])
        out.extend(new[i][0] for i in added)
        out_stamps.extend(new[i][1] for i in added)
        if not late:
            order = sorted(range(len(out)), key=lambda i: id_key(out[i][0]))
            out, out_stamps = [out[i] for i in order], [out_stamps[i] for i in order]
    return out, out_stamps


def _watched(runs_dir: str, row: dict[str, Any]) -> dict[str, list[int] | None]:
    """The runs whose status.yaml changes most are checked on every read of a snapshot: the
    active ones (against the stamp their row was made from) and the unreadable ones (a
    repair may come)."""
    from orbit.store import listing

    if "error" in row:
        return {row["id"]: listing.status_stamp(f"{runs_dir}/{row['id']}/{STATUS_YAML}")}
    if row.get("state") in STATE_ALIASES["active"]:
        return {str(row["id"]): row.get("st")}
    return {}


def changed(
    env: Env, snapshot: Snapshot, before: Signal
) -> tuple[list[list[Any]], list[Any], dict[str, Any] | None, dict[str, Any]] | None:
    """The cells, stamps, template and watched runs of `ps -a` made from an older snapshot:
    every run's status.yaml is checked against the stamp its row was made from (as `rows`
    does), but only the runs whose file moved, the unreadable ones and the runs/ entries that
    came or went are read again, from the index lines appended since or else from disk.
    None when the snapshot cannot tell what changed."""
    from orbit.cli.ps_table import Reuse
    from orbit.store import index
    from orbit.store.creation import recover
    from orbit.store.runs import Broken, RunStore

    since = snapshot.since(env.home, before)
    old_tpl, old_cells = snapshot.section("ps"), snapshot.section("cells")
    old_stamps = snapshot.section("stamps")
    if since is None or not is_template(old_tpl) or not isinstance(old_cells, list):
        return None
    if not (isinstance(old_stamps, list) and len(old_cells) == len(old_stamps)):
        return None
    if len(old_cells) != len(old_tpl["lines"]) - 1:
        return None
    done = recover(env.home)  # a killed submit's runs: revealed (or cleared) first
    if done.revealed or done.cleared:
        return None
    runs_dir = before.runs_dir
    ids = _moved(runs_dir, old_cells, old_stamps)
    if since.names is not None:
        ids.update(set(since.names).difference(c[0] for c in old_cells))
    index_rows = index.apply_lines(since.appended)[0] if ids else {}
    store = RunStore(env.home)
    new: dict[str, tuple[list[Any], Any]] = {}
    read: dict[str, dict[str, Any]] = {}
    for run_id in ids:
        item = store.row_of(run_id, index_rows.get(run_id), runs_dir)
        if item is None:
            continue
        row: dict[str, Any]
        if isinstance(item, Broken):
            row = {"id": item.id, "state": "unreadable", "error": item.problem}
        else:
            row = item
        new[run_id] = (cells_of([row])[0], row.get("st"))
        read[run_id] = row
    cells, stamps = _merged(old_cells, old_stamps, ids, new)
    watch = {k: v for k, v in snapshot.watch.items() if k not in ids}
    for row in read.values():
        watch.update(_watched(runs_dir, row))
    return cells, stamps, template(cells, Reuse(old_tpl, old_cells, ids)), watch


# --- --state, --name, --sort and the params/metric columns --------------------------------
def parse_states(values: list[str] | None) -> set[str]:
    """The states --state names (repeated or comma lists; `active`, `finished` expand)."""
    wanted: set[str] = set()
    for value in values or []:
        for word in (w.strip().lower() for w in value.split(",")):
            if word in STATES:
                wanted.add(word)
            elif word in STATE_ALIASES:
                wanted.update(STATE_ALIASES[word])
            else:
                known = ", ".join((*STATES, *STATE_ALIASES))
                raise UsageError(f"--state: unknown state {word!r} (one of {known})")
    return wanted


def unreadable(row: dict[str, Any]) -> bool:
    return row.get("state") == "unreadable"


def name_matches(name: str | None, pattern: str) -> bool:
    """Case-insensitive: a substring of the name, or a glob of the whole name with * ? [."""
    if not name:
        return False
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name.lower(), pattern.lower())
    return pattern.lower() in name.lower()


def select(found: list[dict[str, Any]], states: set[str], name: str | None) -> list[dict[str, Any]]:
    """The rows in `states` (all when empty) whose name matches; an unreadable run only when
    `unreadable` is asked for (its name, from its run.yaml, is not in its row)."""
    if not states and name is None:
        return found
    return [
        r
        for r in found
        if (not states or r.get("state") in states)
        and (name is None or (not unreadable(r) and name_matches(r.get("name"), name)))
    ]


def parse_sort(key: str | None, desc: bool) -> tuple[str, str, bool] | None:
    """(kind, key, descending): kind is `field`, `param` or `metric`."""
    if key is None:
        return ("field", "id", True) if desc else None
    if key.startswith("-"):
        key, desc = key[1:], True
    kind, sep, rest = key.partition(":")
    if sep and kind in ("param", "metric") and rest:
        return kind, rest, desc
    if not key or sep:
        raise UsageError(f"--sort: expected a field, param:KEY or metric:NAME, got {key!r}")
    return ("field" if key in SORT_FIELDS else "metric"), key, desc


def directed(
    env: Env,
    found: list[dict[str, Any]],
    sort: tuple[str, str, bool] | None,
    group: str | None,
    *,
    quiet: bool,
) -> tuple[str, str, bool] | None:
    """A metric sort made best first (review/objective.py says which way is better; a
    reversed sort is worst first): (kind, metric, descending). `best` is the group's
    objective. Unless `quiet`, one line on stderr names the metric, the direction and why."""
    if sort is None or sort[0] != "metric":
        return sort
    from orbit.review.objective import declared_of, resolve, way_text
    from orbit.store.groups import parse_objective

    _, key, reverse = sort
    declared, damaged = declared_of(env.home, group)
    if damaged and not quiet:
        print(f"orbit: warning: {damaged}", file=env.stderr)
    if key in ("best", "objective"):
        if not group:
            raise UsageError("--sort best ranks by a group's objective: give -g GROUP")
        succeeded = [r for r in found if r.get("state") == "succeeded"]
        o = resolve(latest_of(env, succeeded), declared=declared, group=group)
        o.require()
    else:
        metric, way = parse_objective(key, "--sort")
        o = resolve([], metric=metric, direction=way, declared=declared, group=group)
    if o.direction is None:
        if not quiet:
            print(
                f"orbit: {o.metric}: its name does not say which way is better; sorted lowest "
                f"first (--sort {o.metric}:max or :min says)",
                file=env.stderr,
            )
        return "metric", str(o.metric), reverse
    if not quiet:
        first = "worst" if reverse else "best"
        print(
            f"orbit: sorted {first} first by {o.metric}, {way_text(o.direction)} ({o.why})",
            file=env.stderr,
        )
    return "metric", str(o.metric), o.maximize != reverse


def sort_rows(
    env: Env, found: list[dict[str, Any]], sort: tuple[str, str, bool] | None
) -> tuple[str, dict[str, float]] | None:
    """Order `found` in place (rows without a value last, ties by id); for a metric, its
    name and latest value per run id, read from the tail of each listed run's metrics.jsonl."""
    if sort is None:
        return None
    kind, key, desc = sort
    values: dict[str, float] = {}
    value: Callable[[dict[str, Any]], Any]
    if kind == "metric":
        values = latest_values(env, found, key)
        value = lambda r: values.get(str(r["id"]))  # noqa: E731
    elif kind == "param":
        value = lambda r: (r.get("params") or {}).get(key)  # noqa: E731
    else:
        value = field_value(key)
    keyed = [(None if unreadable(r) else _orderable(value(r)), r) for r in found]
    present = [(k, r) for k, r in keyed if k is not None]
    present.sort(key=lambda kr: kr[0], reverse=desc)  # stable: ties stay in id order
    found[:] = [r for _, r in present] + [r for k, r in keyed if k is None]
    return (key, values) if kind == "metric" else None


def field_value(key: str) -> Callable[[dict[str, Any]], Any]:
    from orbit.store.describe import duration_s
    from orbit.store.runs import id_key

    if key == "id":
        return lambda r: id_key(str(r["id"]))[0]
    if key == "duration":
        return duration_s
    return lambda r: r.get(TIME_FIELDS.get(key, key))


def _orderable(value: Any) -> tuple[int, float, str] | None:
    """Numbers before text, each in its own order; None (and NaN, lists…) for no value."""
    if isinstance(value, bool) or value is None:
        return None if value is None else (0, float(value), "")
    if isinstance(value, int | float):
        return None if math.isnan(value) else (0, float(value), "")
    if isinstance(value, str):
        return (1, 0.0, value.lower())
    return None


def matching(env: Env, found: list[dict[str, Any]], expr: Where) -> list[dict[str, Any]]:
    """The readable runs for which `expr` holds; a metric term reads the run's summaries
    (orbit/review/metrics.py `glance`: the shepherd's metrics.summary.json)."""
    from orbit.review.metrics import glance

    runs_dir = env.home.runs_dir

    def summaries(rid: str) -> dict[str, Any]:
        return glance(Run(rid, runs_dir / rid))[0]

    return [
        r
        for r in found
        if not unreadable(r) and expr.matches(r, functools.partial(summaries, str(r["id"])))
    ]


def latest_of(env: Env, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest metrics of each listed run that can be read."""
    from orbit.store.describe import latest_metrics

    runs_dir = env.home.runs_dir
    rids = [str(r["id"]) for r in found if not unreadable(r)]
    return [latest_metrics(Run(rid, runs_dir / rid))[0] for rid in rids]


def latest_values(env: Env, found: list[dict[str, Any]], metric: str) -> dict[str, float]:
    """The latest numeric value of `metric` of each listed run (never the whole home)."""
    from orbit.store.describe import latest_metrics

    runs_dir = env.home.runs_dir
    out: dict[str, float] = {}
    for r in found:
        if unreadable(r):
            continue
        rid = str(r["id"])
        latest, _ = latest_metrics(Run(rid, runs_dir / rid))
        v = latest.get(metric)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            out[rid] = v
    return out


def json_row(row: dict[str, Any], metric: tuple[str, dict[str, float]] | None) -> dict[str, Any]:
    """A listing row for --json: the index row without its stamp, with `duration_s`, and the
    sort metric's latest value under `metrics`; an unreadable run keeps its three keys."""
    if unreadable(row):
        return row
    from orbit.store.describe import duration_s

    out = {k: v for k, v in row.items() if k != "st"}
    out["params"] = row.get("params") or {}
    out["duration_s"] = duration_s(row)
    if metric is not None:
        name, values = metric
        out["metrics"] = {name: values.get(str(row["id"]))}
    return out

"""orbit best -g GROUP --metric NAME [--max] [--by-params]: the best run, or the best setting
of the params averaged over seeds (orbit/review/best.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from orbit.cli.common import (
    add_json,
    group_members,
    group_option,
    metric_options,
    print_json,
    table,
)
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, UsageError
from orbit.human import fmt_metric

if TYPE_CHECKING:
    from orbit.review.objective import Objective


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "best",
        help="the best run or parameter setting of a group",
        description="Rank by each run's final (last logged) value of the group's objective: "
        "the metric given, else the one the group declared (--objective on sweep or run, "
        "orbit group objective), else one picked from what the runs logged whose name says "
        "which way is better. Only succeeded runs are scored. --by-params averages the runs of "
        "each setting (params without seed-like keys) and counts their failures.",
    )
    group_option(p, "the group to rank (required)")
    metric_options(p, "the metrics.jsonl key to rank by (default: the group's objective)")
    p.add_argument(
        "--by-params", action="store_true", help="rank settings: mean ± std over their seeds"
    )
    p.add_argument(
        "--seed-key",
        action="append",
        default=[],
        metavar="KEY",
        help="another param that only repeats a setting (besides seed, seeds, rep, repeat, "
        "trial, run); repeatable",
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.review.best import SEED_KEYS, best_run, by_params, objective_of, settings_json
    from orbit.review.objective import declared_of, parse_metric_option
    from orbit.store.model import Run
    from orbit.store.runs import RunStore

    if not args.group:
        raise UsageError("give the group: orbit best -g GROUP [--metric NAME]")
    metric, direction = parse_metric_option(args.metric, args.maximize)
    store = RunStore(env.home)
    ids, _ = group_members(store, args.group, unknown_group_too=False)
    runs = [r for r in store.load_many(ids) if isinstance(r, Run)]
    declared, damaged = declared_of(env.home, args.group)
    if damaged:
        print(f"orbit: warning: {damaged}", file=env.stderr)
    o, values = objective_of(
        runs, metric=metric, direction=direction, declared=declared, group=args.group
    )
    o.require()
    if o.warning:
        print(f"orbit: warning: {o.warning}", file=env.stderr)
    assert o.metric is not None
    if args.by_params:
        seed_keys = (*SEED_KEYS, *args.seed_key)
        settings = by_params(runs, o.metric, o.maximize, seed_keys=seed_keys, values=values)
        if args.json:
            print_json(env, settings_json(args.group, o, settings, seed_keys))
            return ExitCode.OK
        _print_settings(env, args, o, settings)
        return ExitCode.OK if settings and settings[0].best else ExitCode.NOT_FOUND
    best = best_run(runs, o.metric, o.maximize, values=values)
    if best is None:
        raise NotFoundError(
            f"no succeeded run of group {args.group!r} logged {o.metric!r} "
            f"({len(runs)} runs; see `orbit failures -g {args.group}`)"
        )
    if args.json:
        print_json(
            env,
            {
                "group": args.group,
                "metric": o.metric,
                "maximize": o.maximize,
                "objective": o.to_json(),
                "best": best.to_json(),
            },
        )
        return ExitCode.OK
    label = f"{best.id} ({best.name})" if best.name else best.id
    print(f"ranked by {o.text()}", file=env.stdout)
    print(
        f"best run {label}: {o.metric} {fmt_metric(best.value)} (final value; "
        f"{'highest' if o.maximize else 'lowest'} of {best.scored} succeeded "
        f"run{'s' if best.scored != 1 else ''}, {best.runs} in the group)",
        file=env.stdout,
    )
    if best.params:
        print("  params " + ", ".join(f"{k}={v}" for k, v in best.params.items()), file=env.stdout)
    return ExitCode.OK


def _print_settings(env: Env, args: argparse.Namespace, o: Objective, settings: list[Any]) -> None:
    from orbit.review.best import params_text

    out = env.stdout
    print(
        f"settings of group {args.group} by the final {o.text()}; "
        f"{'highest' if o.maximize else 'lowest'} mean first, ± is the sample std over a "
        "setting's succeeded runs:",
        file=out,
    )
    rows = []
    for i, s in enumerate(settings, 1):
        spread = f" ± {fmt_metric(s.std)}" if s.std is not None else ""
        mean = f"{fmt_metric(s.mean)}{spread}" if s.mean is not None else "-"
        rows.append(
            [
                "*" if s.best else "",
                str(i) if s.mean is not None else "-",
                params_text(s.params),
                mean,
                f"{s.n}/{len(s.run_ids)}",
                str(s.failed),
                s.best_run or "-",
            ]
        )
    table(out, ["", "rank", "setting", f"mean {o.metric}", "n", "failed", "best run"], rows)
    top = settings[0] if settings else None
    if top is None or not top.best:
        print(f"no setting has a succeeded run that logged {o.metric!r}", file=out)
        return
    spread = f" ± {fmt_metric(top.std)}" if top.std is not None else ""
    fewer = f", only {top.n} of {len(top.run_ids)} runs scored" if top.n < len(top.run_ids) else ""
    print(
        f"best setting: {params_text(top.params)} (mean {fmt_metric(top.mean)}{spread}, "
        f"n={top.n}{fewer})",
        file=out,
    )

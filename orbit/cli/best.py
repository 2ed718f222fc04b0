"""orbit best -g GROUP --metric NAME [--max] [--by-params]: the best run, or the best setting
of the params averaged over seeds (orbit/review/best.py)."""

from __future__ import annotations

import argparse
from typing import Any

from orbit.cli.common import add_json, group_option, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, UsageError
from orbit.human import fmt_metric


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "best",
        help="the best run or parameter setting of a group",
        description="Rank by each run's final (last logged) value of the metric; only "
        "succeeded runs are scored. --by-params averages the runs of each setting (params "
        "without seed-like keys) and counts their failures.",
    )
    group_option(p, "the group to rank (required)")
    p.add_argument("--metric", required=True, help="the metrics.jsonl key to rank by")
    p.add_argument("--max", action="store_true", help="larger is better (default: smaller)")
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
    from orbit.cli.common import group_members
    from orbit.review.best import SEED_KEYS, best_run, by_params, metric_values
    from orbit.store.model import Run
    from orbit.store.runs import RunStore

    if not args.group:
        raise UsageError("give the group: orbit best -g GROUP --metric NAME")
    store = RunStore(env.home)
    ids, _ = group_members(store, args.group, unknown_group_too=False)
    runs = [r for r in store.load_many(ids) if isinstance(r, Run)]
    values = metric_values(runs, args.metric)
    direction = "highest" if args.max else "lowest"
    if args.by_params:
        seed_keys = (*SEED_KEYS, *args.seed_key)
        settings = by_params(runs, args.metric, args.max, seed_keys=seed_keys, values=values)
        if args.json:
            print_json(env, _settings_json(args, settings, seed_keys))
            return ExitCode.OK
        _print_settings(env, args, settings, direction)
        return ExitCode.OK if settings and settings[0].best else ExitCode.NOT_FOUND
    best = best_run(runs, args.metric, args.max, values=values)
    if best is None:
        raise NotFoundError(
            f"no succeeded run of group {args.group!r} logged {args.metric!r} "
            f"({len(runs)} runs; see `orbit failures -g {args.group}`)"
        )
    if args.json:
        print_json(
            env,
            {
                "group": args.group,
                "metric": args.metric,
                "maximize": args.max,
                "best": best.to_json(),
            },
        )
        return ExitCode.OK
    label = f"{best.id} ({best.name})" if best.name else best.id
    print(
        f"best run {label}: {args.metric} {fmt_metric(best.value)} (final value; {direction} of "
        f"{best.scored} succeeded run{'s' if best.scored != 1 else ''}, {best.runs} in the group)",
        file=env.stdout,
    )
    if best.params:
        print("  params " + ", ".join(f"{k}={v}" for k, v in best.params.items()), file=env.stdout)
    return ExitCode.OK


def _settings_json(args: argparse.Namespace, settings: list[Any], seed_keys: Any) -> Any:
    return {
        "group": args.group,
        "metric": args.metric,
        "maximize": args.max,
        "seed_keys": list(seed_keys),
        "settings": [s.to_json() for s in settings],
    }


def _print_settings(
    env: Env, args: argparse.Namespace, settings: list[Any], direction: str
) -> None:
    from orbit.review.best import params_text

    out = env.stdout
    print(
        f"settings of group {args.group} by the final {args.metric} ({direction} mean first; "
        "± is the sample std over a setting's succeeded runs):",
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
    table(out, ["", "rank", "setting", f"mean {args.metric}", "n", "failed", "best run"], rows)
    top = settings[0] if settings else None
    if top is None or not top.best:
        print(f"no setting has a succeeded run that logged {args.metric!r}", file=out)
        return
    spread = f" ± {fmt_metric(top.std)}" if top.std is not None else ""
    fewer = f", only {top.n} of {len(top.run_ids)} runs scored" if top.n < len(top.run_ids) else ""
    print(
        f"best setting: {params_text(top.params)} (mean {fmt_metric(top.mean)}{spread}, "
        f"n={top.n}{fewer})",
        file=out,
    )

"""orbit scheduler: run one tick, tick in the foreground, or install what ticks on a clock.

`tick` once; `run` ticks in the foreground (APScheduler); `install`/`uninstall` a systemd user
timer or a cron line; `status` says which is installed and when the last tick ran
(docs/supervisor.md).
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from orbit.cli.common import add_json, positive_float, print_json
from orbit.env import Env
from orbit.errors import ExitCode, OrbitError
from orbit.human import human_seconds


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scheduler", help="the scheduler tick and what runs it on a clock")
    ssub = p.add_subparsers(dest="action", metavar="ACTION")

    t = ssub.add_parser("tick", help="reconcile runs and admit queued ones, once")
    t.add_argument(
        "--spawn",
        choices=("fork", "exec"),
        default="exec",
        help=argparse.SUPPRESS,  # obsolete: every shepherd is a fresh process (kept for old units)
    )
    # The timer's and the cron line's tick: "a clock ticks this home every S seconds".
    t.add_argument("--clock", type=positive_float, metavar="S", help=argparse.SUPPRESS)
    add_json(t)
    t.set_defaults(func=tick)

    r = ssub.add_parser("run", help="tick every few seconds in the foreground until stopped")
    r.add_argument(
        "--interval",
        type=positive_float,
        metavar="S",
        help="seconds between ticks (default: the scheduler_interval_s setting, 30)",
    )
    add_json(r)  # one JSON object a line per tick that did something
    r.set_defaults(func=run_loop)

    i = ssub.add_parser("install", help="tick on a clock: a systemd user timer or a cron line")
    _kind_options(
        i,
        "a systemd user timer (the default when a user systemd is reachable or no crontab)",
        "a line in your crontab (every minute)",
    )
    i.add_argument(
        "--interval",
        type=positive_float,
        metavar="S",
        help="seconds between ticks for the timer (default: scheduler_interval_s; cron: 60)",
    )
    add_json(i)
    i.set_defaults(func=install)

    u = ssub.add_parser("uninstall", help="remove what `install` added for this home")
    _kind_options(u, "only the systemd units (default: both)", "only the crontab line")
    add_json(u)
    u.set_defaults(func=uninstall)

    s = ssub.add_parser("status", help="what ticks this home, and when the last tick ran")
    add_json(s)
    s.set_defaults(func=status)


def _kind_options(parser: argparse.ArgumentParser, systemd: str, cron: str) -> None:
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--systemd", dest="kind", action="store_const", const="systemd", help=systemd)
    kind.add_argument("--cron", dest="kind", action="store_const", const="cron", help=cron)


def tick(args: argparse.Namespace, env: Env) -> int:
    from orbit.sched.clock import note_clock_tick
    from orbit.sched.tick import tick as run_tick

    if args.clock is not None:  # before the tick, whose end starts a ticker unless a clock ticks
        env.home.ensure()
        note_clock_tick(env.home, args.clock)
    # The explicit tick (also what the timer and cron run) looks through every run for one that
    # lost its queue/ or active/ marker.
    report = run_tick(env.home, spawn=env.spawner, actor=env.actor, full=True)
    if args.json:
        print_json(env, report.as_dict())
        return ExitCode.OK
    if not report.ran:
        for problem in report.problems:  # a stuck holder: the queue does not move meanwhile
            print(f"problem: {problem}", file=env.stdout)
        if not report.problems:
            print("another tick is running; it will include this one", file=env.stdout)
        return ExitCode.OK
    print(
        f"admitted {len(report.admitted)}, waiting {len(report.waiting)}, "
        f"repaired {len(report.repaired)}",
        file=env.stdout,
    )
    for problem in report.problems:
        print(f"problem: {problem}", file=env.stdout)
    return ExitCode.OK


def run_loop(args: argparse.Namespace, env: Env) -> int:
    from orbit.sched.tick import TickReport
    from orbit.service import supervisor
    from orbit.service.foreground import run_foreground
    from orbit.store.model import now_iso

    interval = supervisor.interval_of(env.home, args.interval)
    logging.basicConfig(stream=env.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
    # APScheduler says "running job…" twice a tick at INFO; its warnings (a skipped tick) stay.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)

    def on_tick(report: TickReport) -> None:
        if not (report.admitted or report.repaired or report.problems):
            return
        if args.json:
            line = json.dumps({"time": now_iso(), **report.as_dict()}, ensure_ascii=False)
        else:
            parts = [
                f"{label} {len(ids)} ({', '.join(ids)})"
                for label, ids in (("admitted", report.admitted), ("repaired", report.repaired))
                if ids
            ]
            parts += [f"problem: {p}" for p in report.problems]
            parts.append(f"{len(report.waiting)} waiting")
            line = f"{now_iso()} " + "; ".join(parts)
        print(line, file=env.stdout, flush=True)

    def on_error(exc: Exception) -> None:
        why = str(exc) if isinstance(exc, OrbitError) else f"{exc.__class__.__name__}: {exc}"
        print(f"{now_iso()} orbit: tick failed ({why}); retrying", file=env.stderr, flush=True)

    print(
        f"orbit scheduler: ticking {env.home.root} every {interval:g} s; Ctrl-C or SIGTERM stops",
        file=env.stderr,
        flush=True,
    )
    run_foreground(env.home, interval, on_tick, on_error)
    print("orbit scheduler: stopped", file=env.stderr, flush=True)
    return ExitCode.OK


def install(args: argparse.Namespace, env: Env) -> int:
    from orbit.service import supervisor

    kind = args.kind or _default_kind(env)
    if kind == "systemd":
        interval = supervisor.interval_of(env.home, args.interval)
        result = supervisor.install_systemd(env.home, env.environ, interval)
    else:
        result = supervisor.install_cron(env.home, env.environ)
    if args.json:
        print_json(env, result.as_dict())
        return ExitCode.OK
    out = env.stdout
    if kind == "systemd":
        verb = "wrote" if result.changed else "unchanged"
        for path in result.files:
            print(f"{verb} {path}", file=out)
        if result.started:
            print(f"systemd: {supervisor.TIMER} ticks every {result.interval_s:g} s", file=out)
            if supervisor.systemd_status(env.home, env.environ).linger is False:
                print(
                    "note: the timer stops when you log out unless lingering is on: "
                    "loginctl enable-linger $USER",
                    file=out,
                )
        elif result.enabled:
            print(
                f"enabled {supervisor.TIMER} (it starts with your user manager) but NOT started: "
                f"{result.problem}",
                file=out,
            )
        else:
            print(f"written but NOT enabled: {result.problem}", file=out)
    else:
        print(f"{'added' if result.changed else 'already in the crontab'}: {result.line}", file=out)
        if not result.started:
            print(f"note: {result.problem}: nothing ticks until it runs", file=out)
    if result.todo:
        print(f"to finish: {result.todo}", file=out)
    return ExitCode.OK


def _default_kind(env: Env) -> str:
    from orbit.service import cron, supervisor

    if supervisor.systemd_reachable(env.environ):
        return "systemd"
    try:
        cron.crontab_program(env.environ)
    except OrbitError:
        return "systemd"  # written and enabled for the user manager, with what to run
    return "cron"


def uninstall(args: argparse.Namespace, env: Env) -> int:
    from orbit.service import supervisor

    results = []
    if args.kind in (None, "systemd"):
        results.append(supervisor.uninstall_systemd(env.home, env.environ))
    if args.kind in (None, "cron"):
        try:
            results.append(supervisor.uninstall_cron(env.home, env.environ))
        except OrbitError as exc:
            if args.kind == "cron":
                raise
            results.append(supervisor.Removed("cron", note=f"not checked: {exc}"))
    if args.json:
        print_json(env, {"uninstalled": [r.as_dict() for r in results]})
        return ExitCode.OK
    for result in results:
        for item in result.removed:
            print(f"{result.kind}: removed {item}", file=env.stdout)
        if result.note:
            print(f"{result.kind}: {result.note}", file=env.stdout)
    return ExitCode.OK


def _web_state(env: Env) -> str:
    """Whether orbit-web.service is installed (and running) for this home."""
    from orbit.service import web_unit
    from orbit.web import server

    live = server.running(env.home)
    try:
        return web_unit.unit_state(env.home, env.environ, live.port if live else None)[1]
    except OrbitError as exc:  # the web view is an extra here: never fail the status over it
        return f"unknown ({exc})"


def status(args: argparse.Namespace, env: Env) -> int:
    from orbit.service import supervisor
    from orbit.store.locks import stuck_scheduler

    report = supervisor.status(env.home, env.environ)
    data: dict[str, Any] = report.as_dict()
    if args.json:
        print_json(env, data)
        return ExitCode.OK
    out = env.stdout
    age = human_seconds(report.last_tick_age_s) + " ago" if report.last_tick else "never"
    rows = [
        ("home", report.home),
        ("last tick", f"{report.last_tick} ({age})" if report.last_tick else "never"),
        ("runs", f"{report.queued} queued, {report.active} active"),
        ("systemd", report.systemd.state),
        ("cron", report.cron.state),
        ("foreground", report.foreground.state),
        ("ticker", report.ticker.state),
        ("web", _web_state(env)),
    ]
    if report.systemd.installed:
        rows.insert(4, ("", f"units in {report.systemd.unit_dir}"))
    stuck = stuck_scheduler(env.home.locks_dir)
    if stuck:
        rows.insert(2, ("lock", stuck))
    for label, value in rows:
        print(f"{label:<11} {value}", file=out)
    if not report.supervised:
        print(
            "nothing ticks this home on a clock: orbit commands and ending runs tick it, and "
            "while runs wait the ticker does (see `orbit scheduler install`)",
            file=out,
        )
    return ExitCode.OK

"""orbit notify add|ls|test|rm|log: messages to chat tools when runs and groups finish."""

from __future__ import annotations

import argparse
import socket
import time

from orbit.cli.common import add_json, metric_options, non_negative_int, print_json, table
from orbit.cli.notify_bot import (
    bot_line,
    bot_status,
    install,
    pair,
    remove_bot,
    start_bot,
    uninstall,
    unpair,
)
from orbit.cli.profiles import Commands, read_secret, secret_options, show, show_list, show_removed
from orbit.env import Env
from orbit.errors import ExitCode, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from orbit.notify.profiles import Profile

KINDS = ("feishu", "dingtalk", "wecom", "slack", "webhook", "feishu-app")
APP = "feishu-app"  # a Feishu app's bot (docs/notify.md#the-feishu-bot)


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmds = Commands(
        sub,
        "notify",
        "orbit.notify.profiles",
        help="messages to Feishu, DingTalk, WeCom, Slack or a webhook when runs finish",
        description="Notification profiles: a message when a run succeeds or fails, and one "
        "summary when a group has finished. URLs and secrets are read from an environment "
        "variable or stdin and kept in ORBIT_HOME/notify.yaml (mode 0600). See docs/notify.md.",
    )
    a = cmds.add("add a profile", add, "profile name")
    a.add_argument("--kind", required=True, choices=KINDS)
    note = " (first line; the secret on the second with --secret-stdin)"
    url = secret_options(a, "url", "webhook URL", stdin_note=note)
    url.add_argument("--url", help="the URL itself (warns: process arguments are visible)")
    secret_options(a, "secret", "signing secret (for feishu-app: the app secret)", file=True)
    a.add_argument("--app-id", metavar="cli_…", help="feishu-app: the app's id")
    a.add_argument(
        "--domain",
        metavar="feishu|lark|URL",
        help="feishu-app: Feishu (default), Lark, or the Open API's origin",
    )
    a.add_argument(
        "--on",
        default="failed,group",
        metavar="EVENTS",
        help="comma-separated: succeeded, failed, group (default failed,group)",
    )
    a.add_argument(
        "-g", "--group", action="append", default=[], metavar="GROUP",
        help="only runs and summaries of this group (repeatable; default all)",
    )  # fmt: skip
    metric_options(a, "the group summary's best run by this metric (default: its objective)")
    cmds.ls("the profiles, URLs and secrets masked", list_profiles)
    cmds.named("test", "send a real sample message and show the endpoint's answer", test)
    cmds.named(
        "rm", "remove a profile (and the messages queued for it; a bot's process and files)", rm
    )
    pr = cmds.named(
        "pair", "feishu-app: let the user who got CODE from the bot read this home", pair
    )
    pr.add_argument("code", help="the code the bot gave them (valid an hour)")
    up = cmds.named("unpair", "feishu-app: a paired user may no longer use the bot", unpair)
    up.add_argument("who", metavar="OPEN_ID|NAME", help="their open id (ou_…) or name")
    cmds.named("install", "feishu-app: keep its bot up from boot (a systemd user unit)", install)
    cmds.named("uninstall", "feishu-app: remove its bot's systemd user unit", uninstall)
    lg = cmds.actions.add_parser("log", help="recent deliveries: sent, retrying, given up")
    lg.add_argument("name", nargs="?", help="only this profile's")
    lg.add_argument("-n", type=non_negative_int, default=20, metavar="N", help="default 20")
    add_json(lg)
    lg.set_defaults(func=show_log)


def add(args: argparse.Namespace, env: Env) -> int:
    from orbit.notify import profiles as pf

    if args.kind == APP:
        return add_app(args, env)
    if args.app_id or args.domain:
        raise UsageError("--app-id and --domain go with --kind feishu-app")
    if not (args.url_env or args.url_stdin or args.url is not None):
        raise UsageError(f"--kind {args.kind} needs its URL: --url-env VAR or --url-stdin")
    stdin_lines: list[str] = []
    if args.url_stdin or args.secret_stdin:
        stdin_lines = [line.strip() for line in env.stdin.read().splitlines() if line.strip()]
    if args.url_stdin and args.secret_stdin and len(stdin_lines) < 2:
        raise UsageError(
            "--url-stdin with --secret-stdin: give the URL, then the secret, one a line"
        )
    url_text = stdin_lines[0] if args.url_stdin and stdin_lines else None
    secret_lines = stdin_lines[1:] if args.url_stdin else stdin_lines
    if args.url is not None:
        print(
            "orbit: warning: --url puts the webhook URL (a credential) in process arguments, "
            "which other users can see; prefer --url-env VAR or --url-stdin",
            file=env.stderr,
        )
        url, source = args.url.strip(), "argument"
    else:
        url_value, source = read_secret(args, "url", env.environ, url_text)
        url = url_value or ""
    secret_text = secret_lines[0] if secret_lines else None
    secret, _ = read_secret(args, "secret", env.environ, secret_text)
    metric, direction = _metric_of(args)
    profile = pf.Profile(
        name=args.name,
        kind=args.kind,
        url=url,
        secret=secret,
        on=pf.parse_on(args.on),
        groups=list(dict.fromkeys(args.group)),
        metric=metric,
        metric_direction=direction,
        source=source,
    )
    pf.add(env.home, profile, replace=args.replace)
    shown = pf.describe(profile)
    scope = f" of group {', '.join(profile.groups)}" if profile.groups else ""
    line = (
        f"notify profile {profile.name}: {profile.kind} {shown['url']}, on "
        f"{','.join(profile.on)}{scope}; try it with `orbit notify test {profile.name}`"
    )
    show(env, args, shown, line)
    return ExitCode.OK


def add_app(args: argparse.Namespace, env: Env) -> int:
    """A Feishu app's bot: its id, its secret (checked by fetching a tenant token)."""
    from orbit.notify import profiles as pf
    from orbit.notify.lark import Lark, base_of

    if args.url_env or args.url_stdin or args.url is not None:
        raise UsageError("--kind feishu-app takes --app-id and the app secret, not a URL")
    if not args.app_id:
        raise UsageError("--kind feishu-app needs --app-id cli_…")
    stdin_text = env.stdin.read().strip() if args.secret_stdin else None
    secret, source = read_secret(args, "secret", env.environ, stdin_text)
    if not secret:
        raise UsageError(
            "--kind feishu-app needs the app secret: --secret-stdin or --secret-env VAR"
        )
    metric, direction = _metric_of(args)
    profile = pf.Profile(
        name=args.name,
        kind=APP,
        url=base_of(args.domain or "feishu"),
        secret=secret,
        app_id=args.app_id,
        on=pf.parse_on(args.on),
        groups=list(dict.fromkeys(args.group)),
        metric=metric,
        metric_direction=direction,
        source=source,
    )
    pf.check(profile)
    Lark(profile.url, args.app_id, secret).token()  # a wrong id or secret: said now, one line
    pf.add(env.home, profile, replace=args.replace)
    started = start_bot(env, profile.name, restart=args.replace)
    shown = pf.describe(profile)
    bot = "its bot is starting" if started else "its bot runs"
    line = (
        f"notify profile {profile.name}: feishu-app {profile.app_id} at {profile.url}, on "
        f"{','.join(profile.on)}; {bot} (`orbit notify list`); message the bot to pair "
        f"(`orbit notify pair {profile.name} CODE`)"
    )
    show(env, args, shown, line)
    return ExitCode.OK


def _metric_of(args: argparse.Namespace) -> tuple[str | None, str | None]:
    from orbit.review.objective import direction_by_name, parse_metric_option

    metric, direction = parse_metric_option(args.metric, args.maximize)
    if direction is not None and metric is None:
        raise UsageError("--max and --min go with --metric NAME")
    if metric is not None and direction is None and direction_by_name(metric) is None:
        raise UsageError(
            f"--metric {metric}: its name does not say which way is better: "
            f"{metric}:max or {metric}:min"
        )
    return metric, direction


def list_profiles(args: argparse.Namespace, env: Env) -> int:
    from orbit.notify import profiles as pf

    profiles = pf.load(env.home)
    shown = [pf.describe(p) for p in profiles.values()]
    for entry in shown:
        if entry["kind"] == APP:
            entry["bot"] = bot_status(env, entry["name"])
    rows = [
        [
            p["name"],
            p["kind"],
            p["url"],
            p["secret"],
            ",".join(p["on"]),
            ",".join(p["groups"]) or "all",
        ]
        for p in shown
    ]
    show_list(env, args, pf.STORE, shown, ["NAME", "KIND", "URL", "SECRET", "ON", "GROUPS"], rows)
    if not args.json:
        for entry in shown:
            if "bot" in entry:
                print(bot_line(entry["name"], entry["bot"]), file=env.stdout)
    return ExitCode.OK


def test(args: argparse.Namespace, env: Env) -> int:
    """Post a sample message now, from this process, and report the answer as it came."""
    from orbit.notify import journal
    from orbit.notify import profiles as pf
    from orbit.notify.message import Message
    from orbit.notify.post import post, request_for

    profile = pf.get(env.home, args.name)
    if profile.kind == APP:
        return test_app(args, env, profile)
    now = time.time()
    message = Message(
        key=f"test-{profile.name}-{int(now)}",
        event="succeeded",
        title=f"Orbit test message for profile {profile.name}",
        state="succeeded",
        fields=[("host", socket.gethostname()), ("home", str(env.home.root))],
        lines=["If you can read this, `orbit notify` reaches this chat."],
    )
    started = time.monotonic()
    verdict = post(
        profile.kind, request_for(profile.kind, profile.url, profile.secret, message, now)
    )
    took = time.monotonic() - started
    detail = pf.scrub(verdict.detail, profile)
    journal.note(
        env.home, profile.name, message.key, message.title,
        "sent" if verdict.ok else "failed", 1, detail,
    )  # fmt: skip
    result = {
        "profile": profile.name,
        "ok": verdict.ok,
        "retry": verdict.retry,
        "answer": detail,
        "seconds": round(took, 2),
    }
    if args.json:
        print_json(env, result)
    elif verdict.ok:
        print(f"notify {profile.name}: ok ({detail}; {took:.1f} s)", file=env.stdout)
    else:
        hint = " (a temporary failure: try again later)" if verdict.retry else ""
        print(f"notify {profile.name}: FAILED: {detail}{hint}", file=env.stderr)
    return ExitCode.OK if verdict.ok else ExitCode.RUN_FAILED


def test_app(args: argparse.Namespace, env: Env, profile: Profile) -> int:
    """A Feishu app's bot: the sample run card, with its curves, to each paired user now; one
    line per user. Exit 0 when every user got it."""
    from orbit.notify import journal
    from orbit.notify import profiles as pf
    from orbit.notify.feishu_app import send_test

    started = time.monotonic()
    results = send_test(env.home, profile)
    took = time.monotonic() - started
    for r in results:
        r.detail = pf.scrub(r.detail, profile)
    ok = all(r.ok for r in results)
    sent = ", ".join(r.name for r in results if r.ok) or "nobody"
    journal.note(env.home, profile.name, f"test-{profile.name}", "Orbit test card",
                 "sent" if ok else "failed", 1, f"sent to {sent}")  # fmt: skip
    if args.json:
        users = [
            {"open_id": r.open_id, "name": r.name, "ok": r.ok, "retry": r.retry,
             "answer": r.detail}
            for r in results
        ]  # fmt: skip
        print_json(env, {"profile": profile.name, "ok": ok, "users": users,
                         "seconds": round(took, 2)})  # fmt: skip
        return ExitCode.OK if ok else ExitCode.RUN_FAILED
    for r in results:
        if r.ok:
            print(f"notify {profile.name}: sent to {r.name} ({r.open_id})", file=env.stdout)
        else:
            hint = " (a temporary failure: try again later)" if r.retry else ""
            print(f"notify {profile.name}: FAILED for {r.name} ({r.open_id}): {r.detail}{hint}",
                  file=env.stderr)  # fmt: skip
    return ExitCode.OK if ok else ExitCode.RUN_FAILED


def rm(args: argparse.Namespace, env: Env) -> int:
    from orbit.notify import profiles as pf
    from orbit.notify.queue import drop_profile

    profile = pf.remove(env.home, args.name)
    dropped = drop_profile(env.home, profile.name)
    extra = f" ({dropped} queued message(s) dropped)" if dropped else ""
    body: dict[str, object] = {"removed": profile.name, "dropped": dropped}
    if profile.app:
        gone = remove_bot(env, profile.name)
        body.update(gone)
        stopped = "its bot stopped and its files removed" if gone["bot_stopped"] else (
            "its bot's files removed")  # fmt: skip
        extra += f"; {stopped}"
    show_removed(env, args, pf.STORE, body, profile.name, extra)
    return ExitCode.OK


def show_log(args: argparse.Namespace, env: Env) -> int:
    from orbit.notify import journal
    from orbit.notify import profiles as pf

    if args.name:
        pf.get(env.home, args.name)  # an unknown name is an error, not an empty log
    rows = journal.recent(env.home, args.name, args.n) if args.n else []
    if args.json:
        print_json(env, rows)
        return ExitCode.OK
    if not rows:
        print("no deliveries yet", file=env.stdout)
        return ExitCode.OK
    table(
        env.stdout,
        ["TIME", "PROFILE", "OUTCOME", "TRY", "MESSAGE", "ANSWER"],
        [
            [
                str(r.get("time", ""))[:19],
                str(r.get("profile", "")),
                str(r.get("outcome", "")),
                str(r.get("attempt", "")),
                str(r.get("title", ""))[:60],
                str(r.get("detail", ""))[:80],
            ]
            for r in rows
        ],
    )
    return ExitCode.OK

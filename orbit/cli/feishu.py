"""orbit feishu init|check: a Feishu app's bot created by QR code, and checked end to end
(docs/notify.md#the-feishu-bot)."""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from orbit.cli.common import positive_float, print_json
from orbit.cli.profiles import Commands
from orbit.env import Env
from orbit.errors import ExitCode, OrbitError, UsageError

if TYPE_CHECKING:
    from orbit.feishu.checks import Report
    from orbit.feishu.registration import Begun, Registered
    from orbit.notify.profiles import Profile

WAIT_S = 20.0  # for the long connection to come up
BEGIN_LIMIT_S = 25.0  # init and begin: two requests of at most 10 s each, and some
GRACE_S = 3.0  # past the code's lifetime before the watchdog gives up on a hung poll


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmds = Commands(
        sub,
        "feishu",
        "orbit.notify.profiles",
        help="the Feishu bot: create its app by QR code, check it",
        description="A Feishu (or Lark) app's bot: `init` creates the app by a QR code scanned "
        "with the Feishu app, keeps it as a notify profile and pairs the scanner; `check` "
        "reconnects the bot and tries the secret, the bot and a card to each paired user. "
        "See docs/notify.md.",
    )
    i = cmds.actions.add_parser("init", help="create the bot's app by QR code and pair yourself")
    i.add_argument("name", help="the profile's name (the bot's, in `orbit notify list`)")
    i.add_argument(
        "--domain",
        default="feishu",
        metavar="feishu|lark",
        help="Feishu (default) or Lark, Feishu's international edition",
    )
    _wait_option(i)
    i.add_argument("--json", action="store_true", help="JSON lines: the QR code's link, the result")
    i.set_defaults(func=init)
    c = cmds.named("check", "reconnect the bot, try its secret and a card to each paired user",
                   check)  # fmt: skip
    _wait_option(c)


def _wait_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        type=positive_float,
        default=WAIT_S,
        metavar="S",
        help=f"seconds to wait for the long connection (default {WAIT_S:g})",
    )


# --- init -----------------------------------------------------------------------------------
def init(args: argparse.Namespace, env: Env) -> int:
    from orbit.feishu.checks import bring_up, pair
    from orbit.feishu.registration import Expired
    from orbit.notify import profiles as pf
    from orbit.notify.lark import ACCOUNTS, DOMAINS, accounts_of, base_of

    name = pf.STORE.check_name(args.name)
    if name in pf.load(env.home):
        raise pf.STORE.conflict(name)
    base = base_of(args.domain)  # a bad --domain: one line, before anything is asked
    accounts = accounts_of(args.domain)
    lark = ACCOUNTS["lark"] if args.domain in ACCOUNTS else accounts
    try:
        registered = _register(env, args, accounts, lark)
    except Expired as exc:
        if args.json:
            _line(env, {"event": "result", "ok": False, "outcome": "expired", "error": str(exc)})
        raise Expired(f"{exc}: run `orbit feishu init {name}` again", exc.error) from None
    except OrbitError as exc:
        if args.json:
            _line(env, {"event": "result", "ok": False, "outcome": "failed", "error": str(exc)})
        raise
    if args.domain in DOMAINS:  # a Lark tenant's scan: the app lives on Lark's Open API
        base = base_of(registered.brand)
    profile = pf.Profile(
        name=name, kind=pf.APP, url=base, secret=registered.secret, app_id=registered.app_id,
        source="init",
    )  # fmt: skip
    try:
        pf.add(env.home, profile)  # an app already kept in this home: refused, nothing stored
    except OrbitError as exc:
        if args.json:
            _line(env, {"event": "result", "ok": False, "outcome": "failed", "error": str(exc)})
        raise
    if registered.open_id:
        pair(env.home, name, registered.open_id, registered.user_info, "init")
    report = bring_up(env.home, profile, registered.open_id, args.wait)
    return _show_init(env, args, profile, registered, report)


def _register(env: Env, args: argparse.Namespace, accounts: str, lark: str) -> Registered:
    """The device flow in a thread, watched from here: a hung request or host cannot keep the
    command past the code's lifetime, and Ctrl-C is taken at once (nothing stored)."""
    from orbit.feishu.registration import Expired, Flow, RegistrationError, expired_line

    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()
    flow = Flow(accounts, lark, stop=stop)

    def work() -> None:
        try:
            begun = flow.begin()
            events.put(("qr", begun))
            events.put(("done", flow.wait(begun)))
        except Exception as exc:  # handed to the waiting command, which raises it
            events.put(("error", exc))

    thread = threading.Thread(target=work, name="feishu-registration", daemon=True)
    thread.start()
    deadline = time.monotonic() + BEGIN_LIMIT_S
    shown_at: float | None = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if shown_at is None:
                    raise RegistrationError(
                        f"the app registration at {accounts} did not answer within "
                        f"{BEGIN_LIMIT_S:g} s"
                    )
                raise Expired(expired_line(time.monotonic() - shown_at), "expired_token")
            try:
                kind, value = events.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if kind == "qr":
                shown_at = time.monotonic()
                deadline = shown_at + value.expires_in + GRACE_S
                _show_qr(env, args, value)
            elif kind == "done":
                registered: Registered = value
                return registered
            else:
                raise value
    finally:
        stop.set()


def _show_qr(env: Env, args: argparse.Namespace, begun: Begun) -> None:
    if args.json:
        _line(env, {"event": "qr", "url": begun.url, "expires_in": round(begun.expires_in)})
        return
    import qrcode

    code = qrcode.QRCode(border=2, error_correction=qrcode.constants.ERROR_CORRECT_L)
    code.add_data(begun.url)
    code.make(fit=True)
    out = env.stdout
    print("Scan this with the Feishu app and confirm: it creates the bot's app.", file=out)
    code.print_ascii(out=out, invert=True)
    print(f"or open: {begun.url}", file=out)
    print(
        f"waiting for the scan (the code expires in {round(begun.expires_in)} s; "
        "Ctrl-C stops, nothing is kept)…",
        file=out,
        flush=True,
    )


def _show_init(
    env: Env, args: argparse.Namespace, profile: Profile, registered: Registered, report: Report
) -> int:
    code = ExitCode.OK if report.ok else ExitCode.RUN_FAILED
    if args.json:
        _line(
            env,
            {
                "event": "result",
                "ok": report.ok,
                "outcome": "created",
                "profile": profile.name,
                "app_id": profile.app_id,
                "url": profile.url,
                "open_id": registered.open_id,
                "paired": registered.open_id is not None,
                "checks": report.checks,
                "fix": [f.as_json() for f in report.fixes],
            },
        )
        return code
    paired = f"; paired {registered.open_id}" if registered.open_id else ""
    print(
        f"feishu {profile.name}: app {profile.app_id} created and kept in notify.yaml "
        f"(its secret private, never shown){paired}",
        file=env.stdout,
    )
    _show_checks(env, profile.name, report)
    if report.ok:
        print(f"feishu {profile.name}: ready; check it any time with `orbit feishu check "
              f"{profile.name}`", file=env.stdout)  # fmt: skip
    else:
        print(f"feishu {profile.name}: fix the app in Feishu's console, then `orbit feishu check "
              f"{profile.name}`:", file=env.stderr)  # fmt: skip
        for fix in report.fixes:
            print(fix.line(), file=env.stderr)
    return code


def _show_checks(env: Env, name: str, report: Report) -> None:
    for c in report.checks:
        out = env.stdout if c["ok"] else env.stderr
        print(f"feishu {name}: {c['check']} {'ok' if c['ok'] else 'FAILED'}: {c['detail']}",
              file=out)  # fmt: skip


def _line(env: Env, data: dict[str, Any]) -> None:
    env.stdout.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    env.stdout.flush()


# --- check ----------------------------------------------------------------------------------
def check(args: argparse.Namespace, env: Env) -> int:
    from orbit.feishu.checks import check_bot
    from orbit.notify import profiles as pf

    profile = pf.get(env.home, args.name)
    if not profile.app:
        raise UsageError(
            f"notify profile {profile.name} is a {profile.kind} webhook, not a Feishu app's bot "
            "(`orbit notify test` tries it)"
        )
    report = check_bot(env.home, profile, args.wait)
    return _show_check(env, args, profile, report)


def _show_check(env: Env, args: argparse.Namespace, profile: Profile, report: Report) -> int:
    code = ExitCode.OK if report.ok else ExitCode.RUN_FAILED
    if args.json:
        print_json(
            env,
            {
                "profile": profile.name,
                "ok": report.ok,
                "app_id": profile.app_id,
                "paired": report.paired,
                "checks": report.checks,
                "fix": [f.as_json() for f in report.fixes],
            },
        )
        return code
    first = report.checks[0]
    if first["check"] == "secret" and not first["ok"]:  # one line: nothing else was tried
        fix = report.fixes[0]
        print(f"orbit: feishu {profile.name}: {first['detail']}: {fix.url} ({fix.why})",
              file=env.stderr)  # fmt: skip
        return code
    _show_checks(env, profile.name, report)
    if not report.paired:
        hint = f"then `orbit notify pair {profile.name} CODE`"
        print(f"feishu {profile.name}: nobody is paired yet: message the bot in Feishu for a "
              f"pairing code, {hint}", file=env.stdout)  # fmt: skip
    if report.ok:
        print(f"feishu {profile.name}: all is well", file=env.stdout)
    else:
        print(f"feishu {profile.name}: fix the app in Feishu's console:", file=env.stderr)
        for fix in report.fixes:
            print(fix.line(), file=env.stderr)
    return code

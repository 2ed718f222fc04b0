"""orbit notify's commands for a feishu-app profile's bot (docs/notify.md#the-feishu-bot):
`pair`, `unpair`, `install`, `uninstall`, and the bot's part of `list`, `add` and `rm`."""

from __future__ import annotations

import argparse
import socket

from orbit.cli.common import print_json
from orbit.cli.profiles import show
from orbit.env import Env
from orbit.errors import ExitCode, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from orbit.notify.profiles import Profile


def start_bot(env: Env, name: str, *, restart: bool) -> bool:
    """Start the profile's bot (stopped first when the profile was replaced: it reads its
    secret at start); True when one was started."""
    from orbit.feishu import control

    if restart:
        control.stop(env.home, name)
    return control.start(env.home, name)


def bot_status(env: Env, name: str) -> dict[str, object]:
    """A feishu-app profile's bot for `notify list`: its connection and its paired users."""
    from orbit.errors import CorruptError
    from orbit.notify.lark import binding_of
    from orbit.store.feishu import bot_worker, load_users, read_connection

    record = read_connection(env.home, name) or {}
    alive = bot_worker(env.home, name).alive()
    state = str(record.get("state") or "")
    if state not in ("failed", "refused") and (not alive or state in ("", "stopped")):
        state = "not running"
    try:
        users = load_users(env.home, name)
        paired = [{"open_id": k, "name": v.get("name") or "", "paired_at": v.get("paired_at")}
                  for k, v in users.paired.items()]  # fmt: skip
        problem = ""
    except CorruptError as exc:
        paired, problem = [], str(exc)
    body: dict[str, object] = {
        "state": state,
        "since": record.get("since"),
        "detail": record.get("detail") or "",
        "running": alive,
        "pid": record.get("pid") if alive else None,
        "binding": binding_of(str(env.home.root)),
        "paired": paired,
    }
    if problem:
        body["users_problem"] = problem
    return body


def bot_line(name: str, bot: dict[str, object]) -> str:
    from orbit.feishu.pairing import shown

    state, since, detail = str(bot["state"]), str(bot.get("since") or "")[:19], bot["detail"]
    if state in ("connected", "reconnecting", "connecting"):
        said = f"{state} since {since}"
    elif state in ("failed", "refused"):
        said = f"{state}: {detail}"
    else:
        said = state
    paired = bot.get("paired")
    users = [shown(u, str(u["open_id"])) for u in paired if isinstance(u, dict)] if isinstance(
        paired, list) else []  # fmt: skip
    who = ", ".join(users) if users else f"nobody yet (`orbit notify pair {name} CODE`)"
    extra = f"; {bot['users_problem']}" if bot.get("users_problem") else ""
    return f"bot {name}: {said}; paired: {who}{extra}"


def _app_profile(env: Env, name: str) -> Profile:
    from orbit.notify import profiles as pf

    profile = pf.get(env.home, name)
    if not profile.app:
        raise UsageError(f"notify profile {name} is a {profile.kind} webhook, not a feishu-app bot")
    return profile


def pair(args: argparse.Namespace, env: Env) -> int:
    """Pair the user of CODE, then tell them so through the bot."""
    import getpass

    from orbit.feishu.pairing import pair as pair_code
    from orbit.feishu.pairing import shown
    from orbit.notify.lark import LarkError, lark_for

    profile = _app_profile(env, args.name)
    who = pair_code(env.home, profile.name, args.code, by=getpass.getuser())
    open_id = str(who["open_id"])
    text = f"Paired: you can now ask Orbit at {socket.gethostname()} about its runs (try /help)."
    try:
        lark_for(profile, str(env.home.root)).send(open_id, "text", {"text": text})
        told = True
    except LarkError as exc:
        told = False
        print(f"orbit: warning: paired, but the bot could not tell them: {exc}",
              file=env.stderr)  # fmt: skip
    body = {"paired": open_id, "name": who.get("name") or "", "bot": profile.name, "told": told}
    show(env, args, body, f"paired {shown(who, open_id)} with the bot {profile.name}")
    return ExitCode.OK


def unpair(args: argparse.Namespace, env: Env) -> int:
    from orbit.feishu.pairing import shown
    from orbit.feishu.pairing import unpair as unpair_user

    _app_profile(env, args.name)
    who = unpair_user(env.home, args.name, args.who)
    open_id = str(who["open_id"])
    body = {"unpaired": open_id, "name": who.get("name") or "", "bot": args.name}
    show(env, args, body, f"unpaired {shown(who, open_id)} from the bot {args.name}")
    return ExitCode.OK


def install(args: argparse.Namespace, env: Env) -> int:
    """`orbit notify install NAME`: the bot as orbit-feishu-NAME.service."""
    from orbit.service import feishu_unit

    _app_profile(env, args.name)
    result = feishu_unit.install_unit(env.home, env.environ, args.name)
    if args.json:
        print_json(env, result.as_dict())
        return ExitCode.OK
    unit, out = feishu_unit.unit_name(args.name), env.stdout
    for path in result.files:
        print(f"{'wrote' if result.changed else 'unchanged'} {path}", file=out)
    if result.started:
        print(f"systemd: {unit} runs the bot {args.name}", file=out)
    elif result.enabled:
        print(f"enabled {unit} but NOT started: {result.problem}", file=out)
    else:
        print(f"written but NOT enabled: {result.problem}", file=out)
    if result.todo:
        print(f"to finish: {result.todo}", file=out)
    return ExitCode.OK


def uninstall(args: argparse.Namespace, env: Env) -> int:
    from orbit.service import feishu_unit

    _app_profile(env, args.name)
    removed = feishu_unit.uninstall_unit(env.home, env.environ, args.name)
    if args.json:
        print_json(env, removed.as_dict())
        return ExitCode.OK
    for item in removed.removed:
        print(f"systemd: removed {item}", file=env.stdout)
    if removed.note or not removed.removed:
        print(f"systemd: {removed.note or 'no unit of this bot'}", file=env.stdout)
    return ExitCode.OK


def remove_bot(env: Env, name: str) -> dict[str, object]:
    """`rm` of a feishu-app profile (already removed from notify.yaml, so no tick starts its
    bot again): its unit removed, its bot stopped, its files (paired users, codes, log)
    deleted; what was done, for rm's JSON."""
    import shutil

    from orbit.feishu import control
    from orbit.service import feishu_unit
    from orbit.store.feishu import bot_dir

    done: dict[str, object] = {}
    if feishu_unit.installed(env.home, env.environ, name):
        done["unit_removed"] = feishu_unit.uninstall_unit(env.home, env.environ, name).removed
    done["bot_stopped"] = control.stop(env.home, name)
    shutil.rmtree(bot_dir(env.home, name), ignore_errors=True)
    return done

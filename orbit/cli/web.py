"""orbit web: start the web view in the background if needed and print its login URL."""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from urllib.parse import quote, urlencode

from orbit.cli.common import add_json, print_json
from orbit.env import Env
from orbit.errors import ExitCode, OrbitError, UsageError
from orbit.store.files import atomic_write
from orbit.store.home import Home

START_TIMEOUT_S = 15.0


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("web", help="open the web view (runs, resources, settings)")
    p.add_argument("id", nargs="?", help="print the URL of this run's page")
    p.add_argument("--open", action="store_true", help="open the URL in a browser")
    p.add_argument("--port", type=_port, help="serve on this port (default 7717 or the next free)")
    p.add_argument("--stop", action="store_true", help="stop the web server of this home")
    p.add_argument(
        "--rotate",
        action="store_true",
        help="make a new web token: every browser is logged out, old links stop working",
    )
    p.add_argument(
        "--install",
        action="store_true",
        help="install a systemd user unit that keeps the server up (orbit-web.service)",
    )
    p.add_argument(
        "--uninstall", action="store_true", help="stop and remove this home's orbit-web.service"
    )
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the server itself
    add_json(p)
    p.set_defaults(func=run)


def _requested_port(args: argparse.Namespace, env: Env) -> int | None:
    if args.port is not None:
        return int(args.port)
    raw = env.environ.get("ORBIT_PORT")
    if not raw:
        return None
    try:
        return _port(raw)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"ORBIT_PORT: {exc}") from None


def _start(env: Env, port: int | None) -> None:
    """Start `orbit web --serve` detached, and wait until it serves (or says why it cannot)."""
    from orbit.service.web_unit import server_command
    from orbit.store.childenv import child_environ
    from orbit.web import server

    home = env.home
    home.ensure()
    log_path = home.runtime_dir / "web.log"
    child_env = child_environ(home, env.environ)
    with open(log_path, "ab") as log, open(os.devnull, "rb") as null:
        start = log.tell()
        proc = subprocess.Popen(
            server_command(port),
            stdin=null,
            stdout=log,
            stderr=log,
            env=child_env,
            cwd=str(home.root),
            start_new_session=True,  # outlives this command and the terminal
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while server.running(home) is None:
        code = proc.poll()
        if code is not None:
            with open(log_path, "rb") as fh:
                fh.seek(start)
                lines = fh.read().decode(errors="replace").strip().splitlines()
            last = lines[-1].removeprefix("orbit: ") if lines else f"exit code {code}"
            if "already running" in last and server.running(home):
                return  # another `orbit web` won the race: use its server
            raise OrbitError(f"the web server did not start: {last} (see {log_path})")
        if time.monotonic() > deadline:
            raise OrbitError(f"the web server did not start within {START_TIMEOUT_S:g} s")
        time.sleep(0.05)


def run(args: argparse.Namespace, env: Env) -> int:
    port = _requested_port(args, env)
    if args.serve:
        import logging

        from orbit.web import server

        logging.basicConfig(level=logging.INFO, format="%(asctime)s web %(message)s")
        server.serve(env.home, port)
        return ExitCode.OK
    actions = [a for a in ("stop", "install", "uninstall", "rotate") if getattr(args, a)]
    if len(actions) > 1:
        raise UsageError(f"{' and '.join(f'--{a}' for a in actions)} cannot be combined")
    if actions and args.id:
        raise UsageError(f"--{actions[0]} takes no run ID")
    if not actions:
        return _open(args, env, port)
    if actions[0] == "install":
        return _install(env, port, args.json)
    return {"rotate": _rotate, "uninstall": _uninstall, "stop": _stop}[actions[0]](env, args.json)


def _rotate(env: Env, as_json: bool) -> int:
    from orbit.web import auth

    env.home.ensure()
    auth.rotate(env.home)
    if as_json:
        print_json(env, {"rotated": True})
    else:
        env.stdout.write(
            "made a new web token: every browser is logged out; `orbit web` prints a new link\n"
        )
    return ExitCode.OK


def _uninstall(env: Env, as_json: bool) -> int:
    from orbit.service import web_unit

    removed = web_unit.uninstall_unit(env.home, env.environ)
    if as_json:
        print_json(env, {"uninstalled": [removed.as_dict()]})
        return ExitCode.OK
    for item in removed.removed:
        print(f"systemd: removed {item}", file=env.stdout)
    if removed.note:
        print(f"systemd: {removed.note}", file=env.stdout)
    return ExitCode.OK


def _stop(env: Env, as_json: bool) -> int:
    from orbit.web import server

    stopped = server.stop(env.home)
    if as_json:
        print_json(env, {"stopped": stopped})
    else:
        env.stdout.write("stopped the web server\n" if stopped else "no web server running\n")
    return ExitCode.OK


def _open(args: argparse.Namespace, env: Env, port: int | None) -> int:
    """Start the server unless it runs, then print (or open) a one-time login URL."""
    from orbit.web import auth, server

    home = env.home
    target = "/"
    if args.id:
        from orbit.store.runs import RunStore

        target = f"/runs/{quote(RunStore(home).resolve(args.id).id)}"
    live = server.running(home)
    started = live is None
    if live is None:
        _start(env, port)
        live = server.running(home)
        assert live is not None
    elif port is not None and live.port != port:
        raise UsageError(
            f"the web server already runs on port {live.port}; `orbit web --stop` it first"
        )
    # A one-time code, not the token: the URL left in history or on a command line expires.
    # Browsers go by the home's secret host name, the only one their session cookie is for.
    token = auth.load_or_create_token(home)
    site = f"http://{auth.load_or_create_host(home)}:{live.port}"
    code = auth.new_login_code(home, token)
    query = {"code": code, **({"next": target} if target != "/" else {})}
    url = f"{site}/login?{urlencode(query)}"
    if args.open:
        _open_browser(home, url)
        code = auth.new_login_code(home, token)  # the first one is the browser's
        url = f"{site}/login?{urlencode({**query, 'code': code})}"
    if args.json:
        # The master token too, for scripts (X-Orbit-Token): only on the stdout of `--json`,
        # which the home's owner asked for; it is never logged or put in a URL.
        info = {"url": url, "base_url": live.url, "token": token, "port": live.port}
        print_json(env, {**info, "pid": live.pid, "started": started})
    else:
        note = "started the web server; " if started else ""
        env.stdout.write(f"{note}open {url}\n")
    return ExitCode.OK


def _open_browser(home: Home, url: str) -> None:
    """Open `url` through a 0600 redirect page, so the browser's command line (which every
    local user can read in /proc) names a file, not the login link."""
    import html
    import webbrowser

    page = home.runtime_dir / "web-open.html"
    text = (
        '<!doctype html><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0;url={html.escape(url)}">'
        f'<p><a href="{html.escape(url)}">Open Orbit</a></p>\n'
    )
    atomic_write(page, text.encode(), durable=False, mode=0o600)
    webbrowser.open(page.as_uri())


def _install(env: Env, port: int | None, as_json: bool) -> int:
    """`orbit web --install`: the same conventions as `orbit scheduler install --systemd`."""
    from orbit.service import web_unit
    from orbit.web import server

    def make_way() -> None:
        if server.running(env.home) is not None:
            server.stop(env.home)

    result = web_unit.install_unit(env.home, env.environ, port, make_way)
    if as_json:
        print_json(env, result.as_dict())
        return ExitCode.OK
    out = env.stdout
    verb = "wrote" if result.changed else "unchanged"
    for path in result.files:
        print(f"{verb} {path}", file=out)
    if result.started:
        print(f"systemd: {web_unit.UNIT} serves this home; `orbit web` prints its URL", file=out)
    elif result.enabled:
        print(
            f"enabled {web_unit.UNIT} (it starts with your user manager) but NOT started: "
            f"{result.problem}",
            file=out,
        )
    else:
        print(f"written but NOT enabled: {result.problem}", file=out)
    if result.todo:
        print(f"to finish: {result.todo}", file=out)
    return ExitCode.OK

"""orbit auth add|ls|test|rm: profiles for agents that run inside a run's container."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from orbit import harnesses
from orbit.cli.common import print_json
from orbit.cli.profiles import Commands, read_secret, secret_options, show, show_list, show_removed
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.harnesses.base import spoken

# The answer `auth test` asks for: a model that reads the prompt can give it, nothing else can.
TEST_ANSWER = "orbit-auth-ok"
TEST_PROMPT = f"Reply with exactly: {TEST_ANSWER}"


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmds = Commands(
        sub,
        "auth",
        "orbit.agents.auth",
        help="credentials for agents inside containers (orbit run --auth)",
        description=f"Auth profiles for {spoken([h.display for h in harnesses.in_container()])} "
        "running inside a run's container. "
        "Secrets are read from an environment variable, stdin or a file, never from "
        "arguments, and kept in ORBIT_HOME/auth.json (mode 0600). See docs/agents.md.",
    )
    a = cmds.add(
        "add a profile (login, API key or relay)",
        add,
        "profile name, used as `orbit run --auth NAME`",
    )
    a.add_argument("--harness", required=True, choices=harnesses.ids())
    a.add_argument("--kind", required=True, choices=("login", "api-key", "relay"))
    src = secret_options(a, "key", "secret", file=True)
    src.add_argument(
        "--from-env",
        action="store_true",
        help="take key, URL and models from this environment (and Claude's settings; "
        "for a Codex login, its auth.json)",
    )
    a.add_argument("--base-url", metavar="URL", help="the relay or gateway URL")
    a.add_argument(
        "--host-network",
        action="store_true",
        help="runs with this profile share the host's network (a proxy on 127.0.0.1)",
    )
    cmds.ls("the profiles, secrets masked", list_profiles)
    t = cmds.named("test", "a real small run in which the agent must answer", test)
    t.add_argument("--image", help="image to run the agent in (default: default_image)")
    t.add_argument("--timeout", type=float, default=5.0, metavar="MIN", help="default 5")
    cmds.named("rm", "remove a profile", rm)


def add(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import auth
    from orbit.agents.incontainer import log_in

    if args.from_env:
        profile = auth.from_environment(args.harness, args.kind, env.environ)
    else:
        stdin_text = env.stdin.read() if args.key_stdin else None
        key, source = read_secret(args, "key", env.environ, stdin_text)
        profile = auth.Profile(name="", harness=args.harness, kind=args.kind, source=source)
        if not log_in(env.home, profile, key, env.environ, env.stderr):
            profile.key = key
    profile.name = args.name
    profile.base_url = args.base_url or profile.base_url
    profile.host_network = args.host_network
    auth.check(profile)
    auth.add(env.home, profile, replace=args.replace)
    shown = auth.describe(profile)
    line = (
        f"auth profile {profile.name}: {profile.harness}, {profile.kind}, secret "
        f"{shown['secret']} (from {profile.source}); try it with `orbit auth test "
        f"{profile.name} --image IMAGE`"
    )
    show(env, args, shown, line)
    return ExitCode.OK


def list_profiles(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import auth

    shown = [auth.describe(p) for p in auth.load(env.home).values()]
    rows = [
        [
            p["name"],
            p["harness"],
            p["kind"],
            p["secret"],
            p["base_url"] or "-",
            "host" if p["host_network"] else "-",
            _last_test(p["last_test"]),
        ]
        for p in shown
    ]
    headers = ["NAME", "HARNESS", "KIND", "SECRET", "BASE URL", "NETWORK", "LAST TEST"]
    show_list(env, args, auth.STORE, shown, headers, rows)
    return ExitCode.OK


def _last_test(last: dict[str, Any] | None) -> str:
    """`ok 5m ago (run 12)`, `FAILED 2h ago (run 9)`, or `-` when never tested."""
    from orbit.human import ago

    if not last:
        return "-"
    return f"{'ok' if last.get('ok') else 'FAILED'} {ago(last.get('at'))} (run {last.get('run')})"


def rm(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import auth

    profile = auth.remove(env.home, args.name)
    show_removed(env, args, auth.STORE, {"removed": profile.name}, profile.name)
    return ExitCode.OK


def test(args: argparse.Namespace, env: Env) -> int:
    """Run the profile's agent with a one-line prompt and check it answered."""
    from orbit.agents import auth
    from orbit.agents.incontainer import setup
    from orbit.cli.common import side_tick
    from orbit.cli.watch import follow_until_done
    from orbit.execute.submit import Request, prepare, submit
    from orbit.store.model import LOG, RunState
    from orbit.store.runs import RunStore

    profile = auth.get(env.home, args.name)
    command = harnesses.cli_of(profile.harness).command(TEST_PROMPT, probe=True)
    root = os.getuid() == 0  # the container runs as the caller
    req = Request(
        command=command,
        image=args.image,
        cpus=1,
        mem_gb=2,
        name=f"auth-test-{profile.name}",
        no_project=True,
        timeout_min=args.timeout,
        in_container=setup(env.home, profile, env.environ, container_root=root),
    )
    started = time.monotonic()
    run = submit(
        env.home,
        prepare(env.home, req, cwd=env.cwd, environ=env.environ, progress=lambda s: None),
        actor=env.actor,
    )
    side_tick(env)
    store = RunStore(env.home)
    run = follow_until_done(env, store, store.load(run.id))
    took = time.monotonic() - started
    try:
        log = run.path(LOG).read_text(errors="replace")
    except OSError:
        log = ""
    # A line that is the answer alone: an error that echoes the prompt does not count.
    ok = run.state is RunState.SUCCEEDED and TEST_ANSWER in (x.strip() for x in log.splitlines())
    auth.record_test(env.home, profile.name, ok=ok, run=run.id, state=run.state.value)
    last = [line for line in log.splitlines() if line.strip()][-3:]
    result = {
        "profile": profile.name,
        "ok": ok,
        "run": run.id,
        "state": run.state.value,
        "reason": run.reason,
        "seconds": round(took, 1),
        "last_lines": last,
    }
    if args.json:
        print_json(env, result)
    elif ok:
        print(
            f"auth {profile.name}: ok (the agent answered in {took:.1f} s; run {run.id})",
            file=env.stdout,
        )
    else:
        said = " | ".join(last) or "no output"
        print(
            f"auth {profile.name}: FAILED (run {run.id} {run.state.value}"
            f"{': ' + run.reason if run.reason else ''}; it said: {said})",
            file=env.stderr,
        )
    return ExitCode.OK if ok else ExitCode.RUN_FAILED

"""orbit auth add|list|test|rm: profiles for agents that run inside a run's container."""

from __future__ import annotations

import argparse
import os
import time

from orbit.cli.common import add_json, print_json, table
from orbit.env import Env
from orbit.errors import ExitCode, UsageError

# The answer `auth test` asks for: a model that reads the prompt can give it, nothing else can.
TEST_ANSWER = "orbit-auth-ok"
TEST_PROMPT = f"Reply with exactly: {TEST_ANSWER}"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "auth",
        help="credentials for agents inside containers (orbit run --auth)",
        description="Auth profiles for Codex and Claude Code running inside a run's container. "
        "Secrets are read from an environment variable, stdin or a file, never from "
        "arguments, and kept in ORBIT_HOME/auth.json (mode 0600). See docs/agents.md.",
    )
    p.set_defaults(func=no_action)
    asub = p.add_subparsers(dest="action", metavar="ACTION")
    a = asub.add_parser("add", help="add a profile (login, API key or relay)")
    a.add_argument("name", help="profile name, used as `orbit run --auth NAME`")
    a.add_argument("--harness", required=True, choices=("codex", "claude-code"))
    a.add_argument("--kind", required=True, choices=("login", "api-key", "relay"))
    src = a.add_mutually_exclusive_group()
    src.add_argument("--key-env", metavar="VAR", help="take the secret from this variable")
    src.add_argument("--key-stdin", action="store_true", help="read the secret from stdin")
    src.add_argument("--key-file", metavar="FILE", help="read the secret from this file")
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
    a.add_argument("--replace", action="store_true", help="replace a profile of this name")
    add_json(a)
    a.set_defaults(func=add)
    ls = asub.add_parser("list", help="the profiles, secrets masked")
    add_json(ls)
    ls.set_defaults(func=list_profiles)
    t = asub.add_parser("test", help="a real small run in which the agent must answer")
    t.add_argument("name")
    t.add_argument("--image", help="image to run the agent in (default: default_image)")
    t.add_argument("--timeout", type=float, default=5.0, metavar="MIN", help="default 5")
    add_json(t)
    t.set_defaults(func=test)
    r = asub.add_parser("rm", help="remove a profile")
    r.add_argument("name")
    add_json(r)
    r.set_defaults(func=rm)


def no_action(args: argparse.Namespace, env: Env) -> int:
    raise UsageError("choose an action: add, list, test or rm (see `orbit auth --help`)")


def add(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import auth
    from orbit.agents.incontainer import claude_setup_token, codex_login

    if args.from_env:
        profile = auth.from_environment(args.harness, args.kind, env.environ)
    else:
        key, source = auth.read_key(
            key_env=args.key_env,
            key_stdin=args.key_stdin,
            key_file=args.key_file,
            environ=env.environ,
            stdin_text=env.stdin.read() if args.key_stdin else None,
        )
        profile = auth.Profile(name="", harness=args.harness, kind=args.kind, source=source)
        if args.kind == "login" and args.harness == "codex":
            # Codex keeps a login as its auth.json: its own flow writes one in a private home.
            profile.files = {"auth.json": codex_login(env.home, env.environ, key)}
            profile.source = f"codex login ({source})" if key else "codex login --device-auth"
        elif args.kind == "login" and key is None:
            profile.key = claude_setup_token(env.home, env.environ, env.stderr)
            profile.source = "claude setup-token"
        else:
            profile.key = key
    profile.name = args.name
    profile.base_url = args.base_url or profile.base_url
    profile.host_network = args.host_network
    auth.check(profile)
    auth.add(env.home, profile, replace=args.replace)
    shown = auth.describe(profile)
    if args.json:
        print_json(env, shown)
    else:
        print(
            f"auth profile {profile.name}: {profile.harness}, {profile.kind}, secret "
            f"{shown['secret']} (from {profile.source}); try it with `orbit auth test "
            f"{profile.name} --image IMAGE`",
            file=env.stdout,
        )
    return ExitCode.OK


def list_profiles(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import auth

    shown = [auth.describe(p) for p in auth.load(env.home).values()]
    if args.json:
        print_json(env, shown)
        return ExitCode.OK
    if not shown:
        print("no auth profiles; add one with `orbit auth add` (docs/agents.md)", file=env.stdout)
        return ExitCode.OK
    rows = [
        [
            p["name"],
            p["harness"],
            p["kind"],
            p["secret"],
            p["base_url"] or "-",
            "host" if p["host_network"] else "-",
        ]
        for p in shown
    ]
    table(env.stdout, ["NAME", "HARNESS", "KIND", "SECRET", "BASE URL", "NETWORK"], rows)
    return ExitCode.OK


def rm(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents import auth

    profile = auth.remove(env.home, args.name)
    if args.json:
        print_json(env, {"removed": profile.name})
    else:
        print(f"auth profile {profile.name} removed", file=env.stdout)
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
    if profile.harness == "claude-code":
        command = ["claude", "-p", TEST_PROMPT, "--output-format", "text"]
    else:
        command = ["codex", "exec", "--skip-git-repo-check", "--ephemeral", TEST_PROMPT]
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

"""orbit plugin: install Orbit's skills (and hooks, and its MCP server) into coding agents: Claude
Code, Codex, pi and dsh (orbit/harnesses/)."""

from __future__ import annotations

import argparse

from orbit import harnesses
from orbit.cli.common import add_json, print_json
from orbit.env import Env
from orbit.errors import ExitCode, UsageError
from orbit.harnesses.base import spoken


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plugin", help="install Orbit's skills, hooks and MCP server into coding agents"
    )
    p.set_defaults(func=no_action)
    psub = p.add_subparsers(dest="action", metavar="ACTION")
    agents = harnesses.plugin_order()
    names = [h.plugin for h in agents]
    agent_help = spoken([h.plugin_help for h in agents], "or")
    i = psub.add_parser("install", help="copy the skills (and hooks) into an agent")
    i.add_argument("agent", choices=names, help=agent_help)
    i.add_argument(
        "--profile", help="an existing dsh profile (in $DSH_HOME/profiles); else ~/.agents/skills"
    )
    add_json(i)
    i.set_defaults(func=install)
    r = psub.add_parser("remove", help="take away what install added for an agent")
    r.add_argument("agent", choices=names, help=agent_help)
    r.add_argument("--profile", help="a dsh profile")
    add_json(r)
    r.set_defaults(func=remove)
    ls = psub.add_parser("list", help="per agent: installed, version, stale, hooks, MCP server")
    add_json(ls)
    ls.set_defaults(func=list_agents)
    u = psub.add_parser("update", help="copy the skills again and refresh every installed agent")
    add_json(u)
    u.set_defaults(func=update)


def no_action(args: argparse.Namespace, env: Env) -> int:
    raise UsageError(
        "choose an action: install, remove, list or update (see `orbit plugin --help`)"
    )


def install(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents.plugin import install as do_install

    result = do_install(env.home, args.agent, args.profile, env.environ)
    if args.json:
        print_json(env, result)
    else:
        _say_installed(env, result)
    return ExitCode.OK


def _say_installed(env: Env, result: dict) -> None:
    names = ", ".join(result["skills"])
    print(f"{result['agent']}: skills {names} in {result['skills_dir']}", file=env.stdout)
    if result["hooks"]:
        where = f"{result['hooks']}, reporting to {result['home']}"
        print(f"{result['agent']}: hooks in {where}", file=env.stdout)
    if result["mcp"]:
        where = f"{result['mcp']}, serving {result['home']}"
        print(f"{result['agent']}: MCP server `orbit` in {where}", file=env.stdout)
    if not (result["copied"] or result["hooks_changed"] or result["mcp_changed"]):
        print("(already installed: nothing changed)", file=env.stdout)


def remove(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents.plugin import remove as do_remove

    result = do_remove(env.home, args.agent, args.profile, env.environ)
    if args.json:
        print_json(env, result)
    else:
        what = "skills, hooks and MCP server" if result["mcp_removed"] else "skills and hooks"
        print(f"{result['agent']}: Orbit's {what} removed", file=env.stdout)
        for name in result["kept_changed"]:
            print(
                f"{result['agent']}: kept {name}: changed since install, now yours", file=env.stdout
            )
    return ExitCode.OK


def list_agents(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents.plugin import status

    result = status(env.home, env.environ)
    if args.json:
        print_json(env, result)
        return ExitCode.OK
    for row in result["agents"]:
        if not row["installed"]:
            print(f"{row['agent']:<12} not installed", file=env.stdout)
            continue
        hooks = {None: "", True: ", hooks", False: ", hooks missing"}[row["hooks"]]
        hooks += _mcp_said(row["mcp"])
        stale = "  STALE: `orbit plugin update`" if row["stale"] else ""
        line = f"{row['agent']:<12} installed {row['version']}{hooks} ({row['skills_dir']}){stale}"
        print(line, file=env.stdout)
    return ExitCode.OK


def _mcp_said(mcp: dict | None) -> str:
    if mcp is None:
        return ""
    if mcp["registered"]:
        return ", MCP server"
    if mcp["home"]:
        return f", MCP server of {mcp['home']}"
    return ", MCP server missing"


def update(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents.plugin import update as do_update

    results = do_update(env.home, env.environ)
    if args.json:
        print_json(env, {"updated": results})
    elif not results:
        print("no agent has Orbit's plugin; `orbit plugin install AGENT`", file=env.stdout)
    for result in results if not args.json else []:
        _say_installed(env, result)
    return ExitCode.OK

"""orbit session ID [--json]: the agent session that launched a run, as a readable
conversation (user turns, assistant text, tool calls and their results, shortened)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from orbit.cli.common import add_json, print_json, runs_argument
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "session",
        help="the agent session that launched a run",
        description="The conversation recorded in the run's session/ folder (copied there by "
        "Orbit's Stop hook, see docs/agents.md): user turns, assistant text, tool calls with "
        "their inputs and results, shortened. --json gives every item in full.",
    )
    runs_argument(p, nargs=None, help="run id, unique id prefix, unique name or name prefix")  # type: ignore[arg-type]
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents.transcript import read_session, transcript_file
    from orbit.store.runs import RunStore

    run = RunStore(env.home).resolve(args.runs)
    agent = run.spec.get("agent") if isinstance(run.spec.get("agent"), dict) else None
    path = transcript_file(run)
    if path is None:
        why = "its session/ holds no transcript yet" if agent else "no agent session recorded"
        raise NotFoundError(f"run {run.label}: {why}")
    items = read_session(path)
    if args.json:
        print_json(env, {"run": run.id, "agent": agent, "transcript": str(path), "items": items})
        return ExitCode.OK
    head = f"session of run {run.label}"
    if agent:
        head += f": {agent.get('harness') or 'agent'} {agent.get('session_id')}"
    env.stdout.write(head + f" ({path})\n")
    for item in items:
        env.stdout.write(render_item(item))
    return ExitCode.OK


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in (text.splitlines() or [""]))


def render_item(item: dict[str, Any]) -> str:
    from orbit.agents.transcript import shorten

    kind = item.get("kind")
    text = str(item.get("text") or "")
    if kind in ("user", "assistant"):
        return f"\n{kind}:\n" + _indent(text.strip())
    if kind == "thinking":
        return "  (thinking) " + shorten(text, 120).replace("\n", " ") + "\n"
    if kind == "tool_use":
        args = json.dumps(item.get("input"), ensure_ascii=False)
        return f"  → {item.get('name')} " + shorten(args) + "\n"
    if kind == "tool_result":
        mark = "✗" if item.get("is_error") else "←"
        return f"  {mark} " + shorten(text).replace("\n", "\n    ") + "\n"
    if kind == "summary":
        return f"\n(summary) {shorten(text)}\n"
    return f"  (raw) {shorten(text, 200)}\n"

"""orbit session ID [--file PATH] [--all] [--json | --atif]: a run's agent sessions, as readable
conversations (user turns, assistant text, tool calls with their results, file edits as diffs),
from the Claude Code transcripts and Codex rollouts in its session/ folder; --atif as ATIF
trajectories (orbit/agents/trajectories.py)."""

from __future__ import annotations

import argparse
from typing import Any

from orbit import harnesses
from orbit.cli.common import add_json, print_json, runs_argument
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, UsageError
from orbit.human import human_count

SHORT = 400  # characters of a tool input or result shown in the terminal
DIFF_SHOWN = 40  # lines of a diff shown in the terminal


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "session",
        help="the agent sessions of a run",
        description="The conversations recorded in the run's session/ folder: the copy Orbit's "
        "Stop hook makes of the session that launched the run, and the transcripts of agents "
        "that ran inside it (Claude Code, Codex rollouts). User turns, assistant text, tool "
        "calls with their inputs and results, file edits as diffs, shortened; --json gives "
        "every item in full.",
    )
    runs_argument(p, nargs=None, help="run id, unique id prefix, unique name or name prefix")  # type: ignore[arg-type]
    p.add_argument("--file", metavar="PATH", help="only this transcript (a path under session/)")
    p.add_argument("--all", action="store_true", help="subagents' transcripts too")
    add_json(p)
    p.add_argument(
        "--atif",
        action="store_true",
        help="as an ATIF trajectory (Harbor's format, the run's outcome in extra.orbit, "
        "subagents embedded); with --all a JSON list of every session's",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.agents.transcript import read_session, transcripts
    from orbit.review.conversation import TEXT_LIMIT
    from orbit.store.runs import RunStore

    if args.json and args.atif:
        raise UsageError("--json and --atif are two forms of the output: give one")
    run = RunStore(env.home).resolve(args.runs)
    agent = run.spec.get("agent") if isinstance(run.spec.get("agent"), dict) else None
    found = transcripts(run)
    if not found:
        # An --auth run's agent writes its transcript into session/ as it goes.
        waiting = agent or isinstance(run.spec.get("auth"), dict)
        why = "its session/ holds no transcript yet" if waiting else "no agent session recorded"
        raise NotFoundError(f"run {run.label}: {why}")
    if args.file:
        shown = [t for t in found if t.rel == args.file.strip("/")]
        if not shown:
            names = ", ".join(t.rel for t in found[:10])
            raise NotFoundError(f"run {run.label}: no transcript {args.file} (there is {names})")
    else:
        shown = [t for t in found if args.all or not t.subagent] or found[:1]
    if args.atif:
        return _atif(env, run, found, shown, listed=bool(args.all))
    others = [t.rel for t in found if t not in shown]
    limit = None if args.json else TEXT_LIMIT
    try:
        read = [(t, read_session(t.path, limit)) for t in shown]
    except OSError as exc:
        raise NotFoundError(f"run {run.label}: cannot read a transcript: {exc.strerror}") from None
    if args.json:
        out = [{"file": t.rel, "path": str(t.path), "size": t.size, **c.to_json()} for t, c in read]
        print_json(env, {"run": run.id, "agent": agent, "transcripts": out, "others": others})
        return ExitCode.OK
    for t, conv in read:
        env.stdout.write(header(run.label, t.rel, conv))
        for item in conv.items:
            env.stdout.write(render_item(item))
    if others:
        env.stdout.write(f"\nalso in session/ (--file PATH or --all): {', '.join(others)}\n")
    return ExitCode.OK


def _atif(env: Env, run: Any, found: list[Any], shown: list[Any], *, listed: bool) -> int:
    """One trajectory (the first shown session's, or --file's), or with --all a list of every
    session's; a subagent's transcript is embedded in its parent's, not listed again."""
    from orbit.agents.trajectories import parent, trajectory_of
    from orbit.bench.records import trial_outcome

    bench = trial_outcome(env.home, run.spec.get("tags") or {})
    alone = [t for t in shown if not t.subagent or parent(t, found) is None or len(shown) == 1]
    out = [trajectory_of(run, t, found, extra=bench) for t in alone]
    print_json(env, out if listed else out[0])
    return ExitCode.OK


def header(label: str, rel: str, conv: Any) -> str:
    harness = harnesses.by_format(conv.format)
    who = harness.display if harness is not None else "transcript"
    h = conv.header
    parts = [f"{who} {h['version']}" if h.get("version") else who]
    for key in ("session_id", "model"):
        if h.get(key):
            parts.append(h[key])
    usage = conv.usage
    if usage:
        tokens = [
            f"{human_count(v)} {k.removesuffix('_tokens').replace('_', ' ')}"
            for k, v in usage.items()
        ]
        parts.append("tokens: " + ", ".join(tokens))
    if conv.cost_usd is not None:
        parts.append(f"${conv.cost_usd:.4f}")
    return f"session of run {label}: session/{rel}\n  " + " · ".join(parts) + "\n"


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in (text.splitlines() or [""]))


def _oneline(text: str, limit: int = 120) -> str:
    from orbit.review.conversation import shorten

    return shorten(" ".join(text.split()), limit)


def render_item(item: dict[str, Any]) -> str:
    kind = item.get("kind")
    text = str(item.get("text") or "")
    if kind in ("user", "assistant"):
        return f"\n{kind}:\n" + _indent(text.strip())
    if kind == "thinking":
        return "  (thinking) " + _oneline(text) + "\n"
    if kind == "tool":
        return _tool(item)
    if kind == "meta":
        return f"  ({_oneline(text, 200)})\n"
    return f"  (raw) {_oneline(text, 200)}\n"


def _tool(item: dict[str, Any]) -> str:
    from orbit.review.conversation import shorten, tool_summary

    name = item.get("name") or "(tool)"
    if item.get("name") is None and item.get("input") is None:
        shown = "(its call is not in this transcript)"
    elif item.get("command"):
        shown = "$ " + tool_summary(item, SHORT)
    else:
        shown = tool_summary(item, SHORT)
    out = f"  → {name} {shown}\n"
    diff = item.get("diff") or []
    out += "".join(f"      {line}\n" for line in diff[:DIFF_SHOWN])
    if len(diff) > DIFF_SHOWN:
        out += f"      … {len(diff) - DIFF_SHOWN} more lines\n"
    if item.get("result") is not None:
        mark = "✗" if item.get("is_error") else "←"
        result = shorten(str(item["result"]).strip(), SHORT)
        out += f"  {mark} " + result.replace("\n", "\n    ") + "\n"
    return out

"""A conversation as an ATIF trajectory: Harbor's Agent Trajectory Interchange Format (RFC 0001,
the models in `harbor.models.trajectories`), as a JSON-ready dict.

`trajectory(conv)` builds it from the items orbit.review.conversation parsed (one parser per
transcript format; nothing here reads JSONL):

    user item                      a `user` step
    meta item, raw item            a `system` step (a raw one: `extra.orbit.raw`, its text as
                                   it was, so a truncated or hand-edited line is kept)
    assistant, thinking, tool      an `agent` step per model call (the items sharing `call`):
                                   its text, its reasoning, its tool calls and, as observation
                                   results by `source_call_id`, their outputs; `metrics` from
                                   that call's usage where the transcript recorded it
    a tool result without its call a `system` step with the result as observation

`final_metrics` holds the session's token totals (as the transcript states or sums them), its
cost where recorded and the step count; a Claude Code subagent (`subagents/agent-<id>.jsonl`)
is embedded in `subagent_trajectories`, referred to from the Task call's observation.
Everything Orbit adds is under one key, `extra.orbit`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from orbit import harnesses
from orbit.review.items import Conversation, Item

SCHEMA_VERSION = "ATIF-v1.8"  # the newest harbor 0.26's models validate
AGENT_KINDS = ("assistant", "thinking", "tool")
# Anthropic's input_tokens leave out the cache; OpenAI's (Codex) include it.
ANTHROPIC_CACHE = ("cache_read_input_tokens", "cache_creation_input_tokens")


def trajectory(
    conv: Conversation,
    *,
    session_id: str | None = None,
    agent_name: str | None = None,
    extra: dict[str, Any] | None = None,
    subagents: list[tuple[str, Conversation]] | None = None,
) -> dict[str, Any]:
    """One ATIF Trajectory. `extra` goes under `extra.orbit`; `subagents` are (agent id,
    conversation) pairs embedded as `subagent_trajectories` (trajectory_id `agent-<id>`)."""
    embedded = {aid: f"agent-{aid}" for aid, _ in subagents or []}
    steps = _steps(conv, embedded)
    orbit: dict[str, Any] = {"format": conv.format, "lines": conv.lines}
    raw = sum(1 for item in conv.items if item.get("kind") == "raw")
    if raw:
        orbit["raw_lines"] = raw
    orbit.update(extra or {})
    sid = session_id or conv.header.get("session_id")
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    if sid:
        out["session_id"] = sid
    out["agent"] = _agent(conv, agent_name)
    out["steps"] = steps
    out["final_metrics"] = _final_metrics(conv, len(steps))
    out["extra"] = {"orbit": orbit}
    if subagents:
        out["subagent_trajectories"] = [
            {"trajectory_id": embedded[aid], **trajectory(sub, agent_name=agent_name)}
            for aid, sub in subagents
        ]
    return out


def _agent(conv: Conversation, name: str | None) -> dict[str, Any]:
    harness = harnesses.by_format(conv.format)
    agent: dict[str, Any] = {
        "name": name or (harness.display.lower().replace(" ", "-") if harness else "unknown"),
        "version": conv.header.get("version") or "unknown",
    }
    if conv.header.get("model"):
        agent["model_name"] = conv.header["model"]
    return agent


# --- steps ----------------------------------------------------------------------------------------
def _steps(conv: Conversation, embedded: dict[str, str]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    group: list[Item] = []
    for item in conv.items:
        kind = item.get("kind")
        if kind in AGENT_KINDS and not _result_alone(item):
            if group and not _same_call(group, item):
                steps.append(_agent_step(group, embedded, conv.calls))
                group = []
            group.append(item)
            continue
        if group:
            steps.append(_agent_step(group, embedded, conv.calls))
            group = []
        steps.append(_other_step(item))
    if group:
        steps.append(_agent_step(group, embedded, conv.calls))
    if not steps:  # ATIF wants one step at least: an empty or unreadable transcript says so
        steps.append({"source": "system", "message": "(no messages in this transcript)"})
    for n, step in enumerate(steps, 1):
        step["step_id"] = n
    return [{"step_id": s.pop("step_id"), **s} for s in steps]


def _result_alone(item: Item) -> bool:
    """A tool result whose call is not in the transcript (or not on this page)."""
    return item.get("kind") == "tool" and item.get("name") is None and item.get("input") is None


def _same_call(group: list[Item], item: Item) -> bool:
    """Whether `item` continues the agent step of `group`: the same model call where both
    name one, else text after text or a tool call, never reasoning after output."""
    call = group[-1].get("call")
    if call is not None and item.get("call") is not None:
        return bool(call == item.get("call"))
    if item.get("kind") == "thinking":
        return all(g.get("kind") == "thinking" for g in group)
    return True


def _agent_step(
    group: list[Item], embedded: dict[str, str], calls: dict[str, dict[str, int]]
) -> dict[str, Any]:
    texts = [str(i.get("text") or "") for i in group if i.get("kind") == "assistant"]
    thoughts = [str(i.get("text") or "") for i in group if i.get("kind") == "thinking"]
    tools = [i for i in group if i.get("kind") == "tool"]
    step: dict[str, Any] = {"source": "agent"}
    _stamp(step, group)
    model = next((i["model"] for i in group if i.get("model")), None)
    if model:
        step["model_name"] = model
    step["message"] = "\n\n".join(texts)
    if thoughts:
        step["reasoning_content"] = "\n\n".join(thoughts)
    if tools:
        made = [_tool_call(t, n) for n, t in enumerate(tools)]
        step["tool_calls"] = made
        results = [
            _result(t, c["tool_call_id"], embedded)
            for t, c in zip(tools, made, strict=True)
            if t.get("result") is not None
        ]
        if results:
            step["observation"] = {"results": results}
    usage = calls.get(str(group[0].get("call")))
    if usage:
        step["metrics"] = step_metrics(usage)
    return step


def _tool_call(item: Item, n: int) -> dict[str, Any]:
    args = item.get("input")
    shown = {k: item[k] for k in ("command", "diff") if item.get(k) is not None}
    if not isinstance(args, dict):  # a custom tool's text input (apply_patch), or none
        if args is not None:
            shown["input_is_text"] = True
        args = {} if args is None else {"input": args}
    call: dict[str, Any] = {
        "tool_call_id": str(item.get("id") or f"call-{n + 1}"),
        "function_name": str(item.get("name") or "unknown"),
        "arguments": args,
    }
    if shown:
        call["extra"] = {"orbit": shown}
    return call


def _result(item: Item, call_id: str | None, embedded: dict[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {"source_call_id": call_id, "content": str(item["result"])}
    if call_id is None:
        del result["source_call_id"]
    ref = embedded.get(str(item.get("agent_id")))
    if ref is not None:
        result["subagent_trajectory_ref"] = [{"trajectory_id": ref}]
    if item.get("is_error"):
        result["extra"] = {"orbit": {"is_error": True}}
    return result


def _other_step(item: Item) -> dict[str, Any]:
    kind = item.get("kind")
    source = "user" if kind == "user" else "system"
    step: dict[str, Any] = {"source": source}
    _stamp(step, [item])
    if kind == "tool":  # its result alone: its call is not in this transcript
        step["message"] = ""
        result = _result(item, None, {})
        result.setdefault("extra", {}).setdefault("orbit", {})["tool_call_id"] = item.get("id")
        step["observation"] = {"results": [result]}
        return step
    step["message"] = str(item.get("text") or "")
    if kind in ("meta", "raw"):
        step["extra"] = {"orbit": {kind: True}}
    return step


def _stamp(step: dict[str, Any], items: list[Item]) -> None:
    """The first valid ISO 8601 timestamp of the items, if any (a hand-edited one is left out,
    so the step still validates)."""
    for item in items:
        stamp = item.get("timestamp")
        if isinstance(stamp, str):
            try:
                datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                continue
            step["timestamp"] = stamp
            return


# --- metrics --------------------------------------------------------------------------------------
def token_metrics(usage: dict[str, int]) -> dict[str, Any]:
    """A usage record as ATIF's prompt/completion/cached tokens (prompt tokens include the
    cached ones, as ATIF defines them), the recorded numbers themselves in `extra`."""
    usage = {k: v for k, v in usage.items() if type(v) is int and v >= 0}  # a hand-edited line
    out: dict[str, Any] = {}
    anthropic = any(k in usage for k in ANTHROPIC_CACHE)
    if "input_tokens" in usage or anthropic:
        cache = sum(usage.get(k, 0) for k in ANTHROPIC_CACHE) if anthropic else 0
        out["prompt"] = usage.get("input_tokens", 0) + cache
    if "output_tokens" in usage:
        out["completion"] = usage["output_tokens"]
    if anthropic:
        out["cached"] = usage.get("cache_read_input_tokens", 0)
    elif "cached_input_tokens" in usage:
        out["cached"] = usage["cached_input_tokens"]
    return out


def step_metrics(usage: dict[str, int]) -> dict[str, Any]:
    tokens = token_metrics(usage)
    out: dict[str, Any] = {f"{k}_tokens": v for k, v in tokens.items()}
    out["extra"] = {"usage": usage}
    return out


def _final_metrics(conv: Conversation, steps: int) -> dict[str, Any]:
    out: dict[str, Any] = {f"total_{k}_tokens": v for k, v in token_metrics(conv.usage).items()}
    if conv.cost_usd is not None:
        out["total_cost_usd"] = conv.cost_usd
    out["total_steps"] = steps
    if conv.usage:
        out["extra"] = {"usage": conv.usage, "usage_is_total": conv.total}
    return out

"""One `codex exec` turn of the codex stand-in: the rollout lines, the --json events, the human
progress on stderr, and the tools (shell, apply_patch) that really run and change files."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

from codex_login import VERSION
from standin_common import (
    Outcome,
    Step,
    append_jsonl,
    iso_now,
    random_id,
    run_command,
    scrubbed_env,
    uuid7,
)

DEFAULT_MODEL = "gpt-6.2-sol"
READ_ONLY_REFUSAL = (
    "patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings"
)


class Thread:
    """One exec turn: the rollout lines, the --json events, the human transcript on stderr."""

    def __init__(self, opts: dict[str, Any], home: Path, cwd: Path, prompt: str) -> None:
        self.opts = opts
        self.home = home
        self.cwd = cwd
        self.prompt = prompt
        self.id = uuid7()
        self.turn_id = uuid7()
        self.model = opts.get("model") or DEFAULT_MODEL
        self.json = bool(opts.get("json"))
        self.items = 0
        self.ordinal = 0
        self.usage = {k: v for k, v in usage_record(0, 0).items() if k != "total_tokens"}
        self.rollout: Path | None = None
        if not opts.get("ephemeral"):
            now = datetime.now().astimezone()
            folder = home / "sessions" / now.strftime("%Y/%m/%d")
            folder.mkdir(parents=True, exist_ok=True)
            stamp = now.strftime("%Y-%m-%dT%H-%M-%S")
            self.rollout = folder / f"rollout-{stamp}-{self.id}.jsonl"

    def sandbox(self) -> str:
        if self.opts.get("yolo"):
            return "danger-full-access"
        return str(self.opts.get("sandbox") or "read-only")

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        if self.rollout is not None:
            line = {
                "timestamp": iso_now(),
                "ordinal": self.ordinal,
                "type": kind,
                "payload": payload,
            }
            append_jsonl(self.rollout, line)
            self.ordinal += 1

    def event(self, event: dict[str, Any]) -> None:
        if self.json:
            print(json.dumps(event, separators=(",", ":")), flush=True)

    def human(self, text: str) -> None:
        if not self.json:
            print(text, file=sys.stderr, flush=True)

    def item(self, phase: str, item: dict[str, Any]) -> None:
        self.event({"type": f"item.{phase}", "item": item})

    def next_item_id(self) -> str:
        self.items += 1
        return f"item_{self.items - 1}"

    def start(self) -> None:
        self.event({"type": "thread.started", "thread_id": self.id})
        self.record(
            "session_meta",
            {
                "session_id": self.id,
                "id": self.id,
                "timestamp": iso_now(),
                "cwd": str(self.cwd),
                "originator": "codex_exec",
                "cli_version": VERSION,
                "source": "exec",
                "model_provider": "openai",
                "base_instructions": {"text": "You are Codex (stand-in)."},
            },
        )
        self.record(
            "event_msg",
            {
                "type": "task_started",
                "turn_id": self.turn_id,
                "started_at": int(time.time()),
                "model_context_window": 475000,
            },
        )
        env_context = (
            f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n  <shell>bash</shell>\n"
            "</environment_context>"
        )
        self.record("response_item", user_message(env_context))
        self.record(
            "turn_context",
            {
                "turn_id": self.turn_id,
                "cwd": str(self.cwd),
                "approval_policy": "never",
                "sandbox_policy": {"type": self.sandbox()},
                "model": self.model,
                "summary": "auto",
            },
        )
        self.record("response_item", user_message(self.prompt))
        self.completed("UserMessage", self.prompt)
        self.event({"type": "turn.started"})
        self.human(
            f"OpenAI Codex v{VERSION}\n--------\nworkdir: {self.cwd}\nmodel: {self.model}\n"
            f"provider: openai\napproval: never\nsandbox: {self.sandbox()}\n"
            f"reasoning effort: none\nreasoning summaries: none\nsession id: {self.id}\n"
            f"--------\nuser\n{self.prompt}"
        )

    def add_usage(self, usage: dict[str, Any]) -> None:
        last = usage_record(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))
        for key in self.usage:
            self.usage[key] += last[key]
        total = {
            **self.usage,
            "total_tokens": self.usage["input_tokens"] + self.usage["output_tokens"],
        }
        info = {
            "total_token_usage": total,
            "last_token_usage": last,
            "last_usage_includes_reasoning": True,
            "model_context_window": 475000,
        }
        self.record("event_msg", {"type": "token_count", "info": info, "rate_limits": None})

    def completed(self, item_type: str, text: str) -> None:
        """0.171 records a finished user or agent message as an item_completed event (older
        versions wrote user_message/agent_message events, which 0.171 no longer does)."""
        now_ms = int(time.time() * 1000)
        item = {"type": item_type, "id": uuid7(), "content": [{"type": "text", "text": text}]}
        payload = {
            "type": "item_completed",
            "thread_id": self.id,
            "turn_id": self.turn_id,
            "item": item,
            "started_at_ms": now_ms,
            "completed_at_ms": now_ms,
        }
        self.record("event_msg", payload)


def usage_record(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "cached_input_tokens": 0,
        "cache_write_input_tokens": 0,
        "output_tokens": output_tokens,
        "reasoning_output_tokens": 0,
        "total_tokens": input_tokens + output_tokens,
    }


def user_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


# --- tools: shell and apply_patch --------------------------------------------------------------


def patch_for(step: Step, cwd: Path) -> tuple[str, str]:
    """(patch body, change kind) in apply_patch's format for a create or an edit step."""
    if step.kind == "write":
        kind = "update" if (cwd / step.path).exists() else "add"
        if kind == "add":
            return f"*** Begin Patch\n*** Add File: {step.path}\n+{step.text}\n*** End Patch", kind
        old = (cwd / step.path).read_text().splitlines()
        body = "".join(f"-{line}\n" for line in old) + f"+{step.text}\n"
        return f"*** Begin Patch\n*** Update File: {step.path}\n@@\n{body}*** End Patch", kind
    try:
        lines = (cwd / step.path).read_text().splitlines()
    except OSError:
        lines = []
    hunk = ""
    for line in lines:
        if step.old in line:
            hunk += f"-{line}\n+{line.replace(step.old, step.new, 1)}\n"
            break
    return f"*** Begin Patch\n*** Update File: {step.path}\n@@\n{hunk}*** End Patch", "update"


def apply_patch(patch: str, cwd: Path) -> Outcome:
    """Apply the patch body: Add File and Update File (one hunk of -/+/space lines)."""
    lines = patch.splitlines()
    if lines[:1] != ["*** Begin Patch"] or lines[-1:] != ["*** End Patch"]:
        return Outcome("apply_patch verification failed: invalid patch", True, 1)
    header, body = lines[1], [line for line in lines[2:-1] if not line.startswith("@@")]
    if header.startswith("*** Add File: "):
        rel = header.removeprefix("*** Add File: ")
        path = cwd / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line[1:] + "\n" for line in body))
        return Outcome(f"Success. Updated the following files:\nA {rel}\n")
    rel = header.removeprefix("*** Update File: ")
    path = cwd / rel
    try:
        current = path.read_text().splitlines()
    except OSError:
        return Outcome(
            f"apply_patch verification failed: Failed to read file to update {rel}", True, 1
        )
    old = [line[1:] for line in body if line[:1] in ("-", " ")]
    new = [line[1:] for line in body if line[:1] in ("+", " ")]
    if not old:
        return Outcome(
            f"apply_patch verification failed: Failed to find expected lines in {rel}", True, 1
        )
    for start in range(len(current) - len(old) + 1):
        if current[start : start + len(old)] == old:
            current[start : start + len(old)] = new
            path.write_text("".join(line + "\n" for line in current))
            return Outcome(f"Success. Updated the following files:\nM {rel}\n")
    return Outcome(
        f"apply_patch verification failed: Failed to find expected lines in {rel}", True, 1
    )


def tool_output(outcome: Outcome, seconds: float) -> str:
    return json.dumps(
        {
            "output": outcome.output,
            "metadata": {"exit_code": outcome.exit_code, "duration_seconds": round(seconds, 1)},
        }
    )


def config_value(thread: Thread, dotted: str, default: Any) -> Any:
    """A config key from `-c key=value` (the value parsed as TOML, else a plain string) or
    $CODEX_HOME/config.toml, in that order, as the real CLI layers them."""
    for override in reversed(thread.opts["config"]):
        key, _, raw = override.partition("=")
        if key.strip() == dotted:
            try:
                return tomllib.loads(f"v = {raw.strip()}")["v"]
            except tomllib.TOMLDecodeError:
                return raw.strip()
    try:
        with (thread.home / "config.toml").open("rb") as fh:
            value: Any = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return default
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return default
        value = value[part]
    return value


def shell_env(thread: Thread) -> dict[str, str]:
    """The shell tool's environment: everything, unless shell_environment_policy's
    ignore_default_excludes is false (in config.toml or -c), which drops *KEY*/*SECRET*/*TOKEN*."""
    if config_value(thread, "shell_environment_policy.ignore_default_excludes", True) is not False:
        return dict(os.environ)
    return scrubbed_env(markers=("KEY", "SECRET", "TOKEN"))


def shell_step(thread: Thread, step: Step) -> None:
    argv = ["bash", "-lc", step.command]
    call_id = random_id("call_")
    item_id = thread.next_item_id()
    shown = shlex.join(argv)
    item = {
        "id": item_id,
        "type": "command_execution",
        "command": shown,
        "aggregated_output": "",
        "exit_code": None,
        "status": "in_progress",
    }
    thread.item("started", item)
    arguments = {"command": argv, "workdir": str(thread.cwd), "timeout_ms": 120000}
    thread.record(
        "response_item",
        {
            "type": "function_call",
            "id": "fc_" + uuid7(),
            "name": "shell",
            "arguments": json.dumps(arguments),
            "call_id": call_id,
        },
    )
    started = time.monotonic()
    outcome = run_command(thread.cwd, argv, shell_env(thread))
    seconds = time.monotonic() - started
    thread.record(
        "response_item",
        {
            "type": "function_call_output",
            "id": "fco_" + uuid7(),
            "call_id": call_id,
            "output": tool_output(outcome, seconds),
        },
    )
    status = "failed" if outcome.is_error else "completed"
    thread.item(
        "completed",
        {
            **item,
            "aggregated_output": outcome.output,
            "exit_code": outcome.exit_code,
            "status": status,
        },
    )
    verdict = "succeeded" if not outcome.is_error else f"exited {outcome.exit_code}"
    thread.human(
        f"exec\n{shown} in {thread.cwd}\n {verdict} in {int(seconds * 1000)}ms:\n"
        f"{outcome.output.rstrip()}"
    )


def patch_step(thread: Thread, step: Step) -> None:
    patch, kind = patch_for(step, thread.cwd)
    call_id = random_id("call_")
    thread.record(
        "response_item",
        {
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": call_id,
            "name": "apply_patch",
            "input": patch,
        },
    )
    started = time.monotonic()
    if thread.sandbox() == "read-only":  # exec never asks for approval: the write is refused
        outcome = Outcome(READ_ONLY_REFUSAL, is_error=True, exit_code=1)
    else:
        outcome = apply_patch(patch, thread.cwd)
    thread.record(
        "response_item",
        {
            "type": "custom_tool_call_output",
            "call_id": call_id,
            "output": tool_output(outcome, time.monotonic() - started),
        },
    )
    status = "failed" if outcome.is_error else "completed"
    thread.item(
        "completed",
        {
            "id": thread.next_item_id(),
            "type": "file_change",
            "changes": [{"path": str(thread.cwd / step.path), "kind": kind}],
            "status": status,
        },
    )
    thread.human(f"apply_patch\n{outcome.output.rstrip()}")

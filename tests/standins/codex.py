#!/usr/bin/env python3
"""Stand-in for the Codex CLI 0.171.0 (`codex`), for tests where no model provider is reachable.

It behaves like the real CLI where Orbit depends on it: `--version`, CODEX_HOME, `login`
(device code, API key from stdin, status, logout) writing $CODEX_HOME/auth.json with mode 0600,
and `codex exec` with its flags, the git-repository check, credentials (CODEX_API_KEY >
OPENAI_API_KEY > auth.json), a real POST to $OPENAI_BASE_URL/responses when that is set, tools
that really run commands and apply patches, the rollout at
$CODEX_HOME/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<thread id>.jsonl and the --json
events. The "model" is described in standin_common.py. See docs/testing.md.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shlex
import sys
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from standin_common import (
    Outcome,
    ProviderError,
    Step,
    append_jsonl,
    in_git_repo,
    iso_now,
    post_json,
    random_id,
    reply_for,
    run_command,
    scrubbed_env,
    steps_of,
    tokens,
    uuid7,
    write_private,
    write_trace,
)

VERSION = "0.171.0"
DEFAULT_MODEL = "gpt-6.2-sol"
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
FLAGS = {
    "--json": "json",
    "--experimental-json": "json",
    "--skip-git-repo-check": "skip_git",
    "--ephemeral": "ephemeral",
    "--ignore-user-config": "ignore_user_config",
    "--ignore-rules": "ignore_rules",
    "--oss": "oss",
    "--dangerously-bypass-approvals-and-sandbox": "yolo",
    "--yolo": "yolo",
}
VALUED = {
    "-o": "output_last_message",
    "--output-last-message": "output_last_message",
    "--output-schema": "output_schema",
    "--color": "color",
    "-m": "model",
    "--model": "model",
    "-p": "profile",
    "--profile": "profile",
    "-s": "sandbox",
    "--sandbox": "sandbox",
    "-C": "cd",
    "--cd": "cd",
    "--add-dir": "add_dir",
    "-i": "image",
    "--image": "image",
    "-c": "config",
    "--config": "config",
}
READ_ONLY_REFUSAL = (
    "patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings"
)
EXEC_USAGE = "Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> [ARGS]"


class Fail(Exception):
    """An error for stderr with the exit code the real CLI uses."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def clap_error(arg: str, usage: str) -> Fail:
    return Fail(
        f"error: unexpected argument '{arg}' found\n\n"
        f"  tip: to pass '{arg}' as a value, use '-- {arg}'\n\n"
        f"{usage}\n\nFor more information, try '--help'.",
        2,
    )


def codex_home(strict: bool) -> Path:
    """$CODEX_HOME (which must exist) or ~/.codex (created); `tmp/` inside, as the real CLI."""
    configured = os.environ.get("CODEX_HOME")
    home = Path(configured) if configured else Path.home() / ".codex"
    if configured and not home.is_dir():
        message = f'CODEX_HOME points to "{configured}", but that path does not exist'
        if strict:
            raise Fail(f"Error loading configuration: {message}")
        print(
            f"WARNING: proceeding, even though we could not create PATH aliases: {message}",
            file=sys.stderr,
        )
        return home
    try:
        (home / "tmp").mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    return home


# --- login ------------------------------------------------------------------------------------


def fake_jwt(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.{secrets.token_urlsafe(32)}"


def login(args: list[str]) -> int:
    home = codex_home(strict=True)
    auth_path = home / "auth.json"
    if args[:1] == ["status"]:
        return login_status(auth_path)
    if args[:1] == ["--with-api-key"]:
        print("Reading API key from stdin...", file=sys.stderr)
        key = sys.stdin.read().strip()
        if not key:
            raise Fail("No API key provided via stdin.")
        write_private(
            auth_path, json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": key}, indent=2)
        )
        print("API key saved. Authentication is checked when you send a request.", file=sys.stderr)
        return 0
    if not args:
        raise Fail(
            "stand-in: the browser login is not supported; use --device-auth or --with-api-key"
        )
    if args[:1] != ["--device-auth"] or len(args) > 1:
        raise clap_error(args[0] if args else "login", "Usage: codex login [OPTIONS] [COMMAND]")
    code = "-".join(secrets.token_hex(2).upper() for _ in range(2))
    print(f"\nWelcome to Codex [v{VERSION}]\nOpenAI's command-line coding agent\n")
    print("Follow these steps to sign in with ChatGPT using device code authorization:\n")
    print("1. Open this link in your browser and sign in to your account")
    print("   https://auth.openai.com/codex/device\n")
    print("2. Enter this one-time code (expires in 15 minutes)")
    print(f"   {code}\n")
    print("Device codes are a common phishing target. Never share this code.\n", flush=True)
    account = str(uuid7())
    claims = {
        "email": "standin@example.com",
        "https://api.openai.com/auth": {
            "chatgpt_plan_type": "plus",
            "chatgpt_account_id": account,
        },
        "exp": int(time.time()) + 10 * 24 * 3600,
    }
    auth = {
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": None,
        "tokens": {
            "id_token": fake_jwt(claims),
            "access_token": fake_jwt({**claims, "scp": ["openid"]}),
            "refresh_token": "rt_" + secrets.token_urlsafe(48),
            "account_id": account,
        },
        "last_refresh": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    write_private(auth_path, json.dumps(auth, indent=2))
    print("Successfully logged in", file=sys.stderr)
    return 0


def read_auth(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def login_status(path: Path) -> int:
    auth = read_auth(path)
    if auth and auth.get("OPENAI_API_KEY"):
        key = str(auth["OPENAI_API_KEY"])
        masked = f"{key[:8]}***{key[-5:]}" if len(key) > 13 else "***"
        print(f"API key configured - {masked}", file=sys.stderr)
        print("Authentication is checked when you send a request.", file=sys.stderr)
        return 0
    if auth and (auth.get("tokens") or {}).get("access_token"):
        print("Logged in using ChatGPT", file=sys.stderr)
        return 0
    print("Not logged in", file=sys.stderr)
    return 1


def logout(home: Path) -> int:
    try:
        (home / "auth.json").unlink()
    except FileNotFoundError:
        print("Not logged in", file=sys.stderr)
        return 0
    print("Successfully logged out", file=sys.stderr)
    return 0


# --- exec -------------------------------------------------------------------------------------


def parse_exec(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"positional": [], "config": []}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if arg == "--":
            opts["positional"].extend(argv[i + 1 :])
            break
        if name in FLAGS and not eq:
            opts[FLAGS[name]] = True
        elif name in VALUED:
            if not eq:
                if i + 1 >= len(argv):
                    raise Fail(
                        f"error: a value is required for '{name} <VALUE>' but none was "
                        f"supplied\n\nFor more information, try '--help'.",
                        2,
                    )
                i += 1
                inline = argv[i]
            key = VALUED[name]
            if key == "config":
                opts["config"].append(inline)
            else:
                opts[key] = inline
        elif arg.startswith("-") and arg != "-":
            raise clap_error(arg, EXEC_USAGE)
        else:
            opts["positional"].append(arg)
        i += 1
    sandbox = opts.get("sandbox")
    if sandbox is not None and sandbox not in SANDBOX_MODES:
        raise Fail(
            f"error: invalid value '{sandbox}' for '--sandbox <SANDBOX_MODE>'\n"
            f"  [possible values: {', '.join(SANDBOX_MODES)}]\n\n"
            "For more information, try '--help'.",
            2,
        )
    if len(opts["positional"]) > 1:
        raise clap_error(opts["positional"][1], EXEC_USAGE)
    return opts


def credential(home: Path) -> str | None:
    for name in ("CODEX_API_KEY", "OPENAI_API_KEY"):
        if os.environ.get(name):
            return os.environ[name]
    auth = read_auth(home / "auth.json") or {}
    if auth.get("OPENAI_API_KEY"):
        return str(auth["OPENAI_API_KEY"])
    token = (auth.get("tokens") or {}).get("access_token")
    return str(token) if token else None


def read_prompt(opts: dict[str, Any]) -> str:
    positional = opts["positional"]
    if not positional or positional[0] == "-":
        print("Reading prompt from stdin...", file=sys.stderr)
        prompt = sys.stdin.read()
        if not prompt.strip():
            raise Fail("No prompt provided via stdin.")
        return prompt.strip()
    prompt = str(positional[0])
    if not sys.stdin.isatty():
        print("Reading additional input from stdin...", file=sys.stderr)
        extra = sys.stdin.read()
        if extra.strip():
            prompt = f"{prompt}\n\n<stdin>\n{extra.strip()}\n</stdin>"
    return prompt


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
        self.usage = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0}
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
        self.record("event_msg", {"type": "user_message", "message": self.prompt, "images": []})
        self.event({"type": "turn.started"})
        self.human(
            f"OpenAI Codex v{VERSION}\n--------\nworkdir: {self.cwd}\nmodel: {self.model}\n"
            f"provider: openai\napproval: never\nsandbox: {self.sandbox()}\n"
            f"reasoning effort: none\nreasoning summaries: none\nsession id: {self.id}\n"
            f"--------\nuser\n{self.prompt}"
        )

    def add_usage(self, usage: dict[str, Any]) -> None:
        self.usage["input_tokens"] += int(usage.get("input_tokens", 0))
        self.usage["output_tokens"] += int(usage.get("output_tokens", 0))
        total = {
            **self.usage,
            "reasoning_output_tokens": 0,
            "total_tokens": self.usage["input_tokens"] + self.usage["output_tokens"],
        }
        self.record(
            "event_msg",
            {
                "type": "token_count",
                "info": {
                    "total_token_usage": total,
                    "last_token_usage": {
                        "input_tokens": int(usage.get("input_tokens", 0)),
                        "cached_input_tokens": 0,
                        "output_tokens": int(usage.get("output_tokens", 0)),
                        "reasoning_output_tokens": 0,
                        "total_tokens": int(usage.get("input_tokens", 0))
                        + int(usage.get("output_tokens", 0)),
                    },
                    "model_context_window": 475000,
                },
                "rate_limits": None,
            },
        )


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


def shell_env(thread: Thread) -> dict[str, str]:
    """The shell tool's environment: everything, unless shell_environment_policy's
    ignore_default_excludes is false (in config.toml or -c), which drops *KEY*/*SECRET*/*TOKEN*."""
    policy: Any = {}
    try:
        with (thread.home / "config.toml").open("rb") as fh:
            policy = tomllib.load(fh).get("shell_environment_policy", {})
    except (OSError, tomllib.TOMLDecodeError):
        pass
    ignore = policy.get("ignore_default_excludes", True) if isinstance(policy, dict) else True
    for override in thread.opts["config"]:
        key, _, value = override.partition("=")
        if key.strip() == "shell_environment_policy.ignore_default_excludes":
            ignore = value.strip().lower() != "false"
    if ignore:
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


def ask_model(thread: Thread, key: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    """A real request to $OPENAI_BASE_URL/responses when set, else a local answer."""
    base = os.environ.get("OPENAI_BASE_URL")
    if not base:
        text = reply_for(thread.prompt)
        return {
            "text": text,
            "usage": {"input_tokens": tokens(json.dumps(history)), "output_tokens": tokens(text)},
        }
    body = {
        "model": thread.model,
        "instructions": "You are Codex (stand-in).",
        "input": history,
        "stream": False,
        "store": False,
    }
    headers = {
        "authorization": f"Bearer {key}",
        "originator": "codex_exec",
        "user-agent": f"codex_exec/{VERSION}",
        "session_id": thread.id,
    }
    reply = post_json(base.rstrip("/") + "/responses", headers, body)
    text = "".join(
        part.get("text", "")
        for out in reply.get("output", [])
        if out.get("type") == "message"
        for part in out.get("content", [])
        if part.get("type") == "output_text"
    )
    return {"text": text, "usage": reply.get("usage", {})}


def run_turn(thread: Thread, key: str) -> str:
    history: list[dict[str, Any]] = [user_message(thread.prompt)]
    for step in steps_of(thread.prompt):
        thread.add_usage(ask_model(thread, key, history)["usage"])
        if step.kind == "run":
            shell_step(thread, step)
        else:
            patch_step(thread, step)
        history.append(user_message(f"(tool call {step.kind} done)"))
    reply = ask_model(thread, key, history)
    thread.add_usage(reply["usage"])
    text = str(reply["text"])
    thread.record(
        "response_item",
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        },
    )
    thread.record("event_msg", {"type": "agent_message", "message": text})
    thread.item("completed", {"id": thread.next_item_id(), "type": "agent_message", "text": text})
    return text


def exec_command(argv: list[str]) -> int:
    opts = parse_exec(argv)
    home = codex_home(strict=True)
    cwd = Path(opts["cd"]).resolve() if opts.get("cd") else Path(os.getcwd())
    if not cwd.is_dir():
        raise Fail(f"Error: failed to change directory to {cwd}: No such file or directory")
    if not opts.get("skip_git") and not in_git_repo(cwd):
        raise Fail("Not inside a trusted directory and --skip-git-repo-check was not specified.")
    prompt = read_prompt(opts)
    key = credential(home)
    thread = Thread(opts, home, cwd, prompt)
    thread.start()
    if key is None:
        return fail_turn(thread, "Not logged in. Run `codex login` or set CODEX_API_KEY.")
    try:
        text = run_turn(thread, key)
    except ProviderError as exc:
        if exc.status == 401:
            return fail_turn(thread, f"unexpected status 401 Unauthorized: {exc.body}")
        return fail_turn(thread, f"stream disconnected before completion: {exc.body}")
    thread.record(
        "event_msg",
        {"type": "task_complete", "turn_id": thread.turn_id, "last_agent_message": text},
    )
    thread.event({"type": "turn.completed", "usage": dict(thread.usage)})
    thread.human(f"codex\n{text}\ntokens used\n{sum(thread.usage.values())}")
    if opts.get("output_last_message"):
        Path(opts["output_last_message"]).write_text(text)
    if not thread.json:
        print(text, flush=True)
    return 0


def fail_turn(thread: Thread, message: str) -> int:
    thread.record("event_msg", {"type": "error", "message": message})
    thread.event({"type": "error", "message": message})
    thread.event({"type": "turn.failed", "error": {"message": message}})
    print(f"ERROR: {message}", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    configured = os.environ.get("CODEX_HOME")
    write_trace(configured or str(Path.home() / ".codex"), False)
    try:
        if argv[:1] in (["--version"], ["-V"]):
            codex_home(strict=False)
            print(f"codex-cli {VERSION}")
            return 0
        if argv[:1] == ["login"]:
            return login(argv[1:])
        if argv[:1] == ["logout"]:
            return logout(codex_home(strict=True))
        if argv[:1] in (["exec"], ["e"]):
            return exec_command(argv[1:])
        raise Fail("stand-in: only --version, login, logout and exec are supported")
    except Fail as exc:
        print(str(exc), file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

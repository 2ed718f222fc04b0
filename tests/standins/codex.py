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

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from codex_login import VERSION, Fail, clap_error, codex_home, login, logout, read_auth
from codex_thread import Thread, config_value, patch_step, shell_step, user_message
from standin_common import (
    ProviderError,
    in_git_repo,
    post_json,
    reply_for,
    steps_of,
    tokens,
    write_trace,
)

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
MISSING_AUTH = json.dumps(
    {
        "error": {
            "message": "Missing bearer or basic authentication in header",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
)
EXEC_USAGE = "Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> [ARGS]"


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
    """CODEX_API_KEY, else auth.json's key or ChatGPT access token. 0.171 sends none for
    OPENAI_API_KEY (checked against the real CLI), so neither does the stand-in."""
    if os.environ.get("CODEX_API_KEY"):
        return os.environ["CODEX_API_KEY"]
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


def ask_model(thread: Thread, key: str | None, history: list[dict[str, Any]]) -> dict[str, Any]:
    """A real request to {openai_base_url}/responses when that is configured (0.171 ignores the
    OPENAI_BASE_URL variable), else a local answer; without a key, OpenAI's 401."""
    base = config_value(thread, "openai_base_url", None)
    if not base:
        if key is None:
            raise ProviderError(401, MISSING_AUTH)
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
        "originator": "codex_exec",
        "user-agent": f"codex_exec/{VERSION}",
        "session_id": thread.id,
    }
    if key is not None:  # the real CLI sends the request without one
        headers["authorization"] = f"Bearer {key}"
    reply = post_json(str(base).rstrip("/") + "/responses", headers, body)
    text = "".join(
        part.get("text", "")
        for out in reply.get("output", [])
        if out.get("type") == "message"
        for part in out.get("content", [])
        if part.get("type") == "output_text"
    )
    return {"text": text, "usage": reply.get("usage", {})}


def run_turn(thread: Thread, key: str | None) -> str:
    history: list[dict[str, Any]] = [user_message(thread.prompt)]
    # Codex records a model call's token_count once the call's response is complete: after
    # the items it produced (the tool call), which is how a reader tells the calls apart.
    for step in steps_of(thread.prompt):
        usage = ask_model(thread, key, history)["usage"]
        if step.kind == "run":
            shell_step(thread, step)
        else:
            patch_step(thread, step)
        thread.add_usage(usage)
        history.append(user_message(f"(tool call {step.kind} done)"))
    reply = ask_model(thread, key, history)
    text = str(reply["text"])
    thread.record(
        "response_item",
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        },
    )
    thread.completed("AgentMessage", text)
    thread.add_usage(reply["usage"])
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
    except OSError as exc:  # e.g. an unwritable CODEX_HOME: one line, no traceback
        print(f"Error: {exc.strerror}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Hand-written agent transcripts for the tests, after the formats Claude Code and Codex write
(see docs/agents.md "Seeing a session"): a Claude Code session JSONL and a Codex rollout.

Both carry an XSS payload in the user's words and tool output, a tool call that fails, a file
edit, lines of kinds the parser does not know and a line that is not JSON.
"""

from __future__ import annotations

import json
from typing import Any

SESSION = "3f7c2a9e-0d4b-4c1e-9a55-6b8f2e1d7c40"
THREAD = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
XSS = '<script>window.pwned=1</script>"><img src=x onerror="window.pwned=2">'
CWD = "/workspace"


def _claude(kind: str, n: int, content: Any, **message: Any) -> dict[str, Any]:
    return {
        "parentUuid": f"u{n - 1}" if n else None,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": SESSION,
        "version": "2.1.332",
        "gitBranch": "main",
        "type": kind,
        "message": {"role": kind, "content": content, **message},
        "uuid": f"u{n}",
        "timestamp": f"2026-11-30T10:{n // 60:02d}:{n % 60:02d}.000Z",
    }


def _assistant(n: int, msg_id: str, blocks: list[Any], output_tokens: int) -> dict[str, Any]:
    usage = {
        "input_tokens": 12,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 1000,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }
    line = _claude(
        "assistant",
        n,
        blocks,
        id=msg_id,
        type="message",
        model="claude-sonnet-4-5",
        stop_reason=None,
        usage=usage,
    )
    line["requestId"] = "req_" + msg_id
    return line


def _result(n: int, tool_id: str, content: Any, is_error: bool = False) -> dict[str, Any]:
    block = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
    if is_error:
        block["is_error"] = True
    return _claude("user", n, [block])


def _use(tool_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


OLD_TRAIN = "import math\n\nlr = 1.0\nsteps = 20\n\nfor i in range(steps):\n    print(i)\n"


def claude_lines() -> list[str]:
    """A Claude Code session: one message split over three lines (its usage repeated), Read,
    Edit, a failing Bash, MultiEdit, Write, a tool result before its use, bookkeeping lines,
    an unknown kind and a line that is not JSON."""
    t = "/workspace/train.py"
    lines: list[Any] = [
        {"type": "summary", "summary": "Fix the learning rate", "leafUuid": "u9"},
        {
            "type": "file-history-snapshot",
            "messageId": "u0",
            "snapshot": {"trackedFileBackups": {}},
            "isSnapshotUpdate": False,
        },
        _claude("user", 0, f"Fix the learning rate in train.py, then run it. {XSS}"),
        # One assistant message written as three lines, each repeating the usage.
        _assistant(
            1, "msg_A", [{"type": "thinking", "thinking": "lr=1.0 diverges", "signature": "x"}], 5
        ),
        _assistant(2, "msg_A", [{"type": "text", "text": "I will read train.py first."}], 5),
        _assistant(3, "msg_A", [_use("toolu_read", "Read", {"file_path": t})], 40),
        _result(4, "toolu_read", OLD_TRAIN),
        _assistant(
            5,
            "msg_B",
            [
                _use(
                    "toolu_edit",
                    "Edit",
                    {
                        "file_path": t,
                        "old_string": "lr = 1.0",
                        "new_string": "lr = 0.1",
                        "replace_all": False,
                    },
                )
            ],
            30,
        ),
        _result(6, "toolu_edit", f"The file {t} has been updated."),
        _assistant(
            7,
            "msg_C",
            [
                _use(
                    "toolu_bash",
                    "Bash",
                    {"command": "python train.py --steps 20", "description": "Run it"},
                )
            ],
            20,
        ),
        _result(
            8,
            "toolu_bash",
            [
                {
                    "type": "text",
                    "text": f"Traceback (most recent call last):\nValueError: bad {XSS}",
                }
            ],
            is_error=True,
        ),
        {"type": "progress", "data": {"type": "hook_progress"}, "uuid": "p1"},
        {"type": "queue-operation", "operation": "enqueue", "content": "x"},
        _assistant(
            9,
            "msg_D",
            [
                _use(
                    "toolu_multi",
                    "MultiEdit",
                    {
                        "file_path": t,
                        "edits": [
                            {"old_string": "steps = 20", "new_string": "steps = 50"},
                            {"old_string": "print(i)", "new_string": "print(i, lr)"},
                        ],
                    },
                ),
                _use(
                    "toolu_write",
                    "Write",
                    {"file_path": "/workspace/NOTES.md", "content": "# Notes\nlr 0.1 works\n"},
                ),
            ],
            60,
        ),
        _result(10, "toolu_multi", "Applied 2 edits"),
        _result(11, "toolu_write", "File created successfully"),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "level": "info",
        },
        # The result before its use (lines written out of order).
        _result(12, "toolu_grep", "train.py:3:lr = 0.1"),
        _assistant(
            13, "msg_E", [_use("toolu_grep", "Grep", {"pattern": "lr =", "path": "/workspace"})], 8
        ),
        {"type": "weird-new-kind", "payload": 1},
        "this line is not JSON {{{",
        _assistant(14, "msg_F", [{"type": "text", "text": f"Done: lr is 0.1 now. {XSS}"}], 25),
    ]
    return [x if isinstance(x, str) else json.dumps(x) for x in lines]


# msg_A counted once, with its last line's output tokens.
CLAUDE_USAGE = {
    "input_tokens": 12 * 6,
    "cache_creation_input_tokens": 300 * 6,
    "cache_read_input_tokens": 1000 * 6,
    "output_tokens": 40 + 30 + 20 + 60 + 8 + 25,
}


def _codex(second: int, kind: str, payload: dict[str, Any]) -> str:
    stamp = f"2026-11-30T10:00:{second:02d}.000Z"
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload})


def _tokens(second: int, inp: int, out: int) -> str:
    total = {"input_tokens": inp, "cached_input_tokens": inp // 2, "output_tokens": out,
             "reasoning_output_tokens": out // 4, "total_tokens": inp + out}  # fmt: skip
    info = {"total_token_usage": total, "last_token_usage": total, "model_context_window": 272000}
    return _codex(second, "event_msg", {"type": "token_count", "info": info, "rate_limits": None})


PATCH = (
    "*** Begin Patch\n*** Update File: train.py\n@@\n-lr = 1.0\n+lr = 0.1\n"
    "*** Add File: NOTES.md\n+lr 0.1 works\n*** End Patch"
)


def codex_lines() -> list[str]:
    """A Codex rollout: session_meta, turn_context, context and user messages, reasoning, a
    shell call, apply_patch (a custom tool call), a failing command, token counts (the last
    is the total), event_msg echoes, an unknown kind and a line that is not JSON."""
    shell_args = json.dumps({"command": ["bash", "-lc", "ls -la"], "workdir": CWD})
    exec_args = json.dumps({"cmd": "python train.py", "yield_time_ms": 10000})
    return [
        _codex(
            0,
            "session_meta",
            {
                "id": THREAD,
                "timestamp": "2026-11-30T10:00:00.000Z",
                "cwd": CWD,
                "originator": "codex_exec",
                "cli_version": "0.171.0",
                "source": "exec",
                "base_instructions": {"text": "You are Codex. " * 50},
                "git": {},
            },
        ),
        _codex(
            0,
            "response_item",
            {
                "type": "message",
                "role": "developer",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<permissions instructions>sandbox</permissions instructions>",
                    }
                ],
            },
        ),
        _codex(
            0,
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<environment_context>\n  <cwd>/workspace</cwd>\n"
                        "</environment_context>",
                    }
                ],
            },
        ),
        _codex(
            0,
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"Lower the learning rate. {XSS}"}],
            },
        ),
        _codex(
            0,
            "event_msg",
            {"type": "user_message", "message": "Lower the learning rate.", "images": []},
        ),
        _codex(
            1,
            "turn_context",
            {
                "cwd": CWD,
                "approval_policy": "never",
                "model": "gpt-5.1-codex",
                "effort": "medium",
                "summary": "auto",
            },
        ),
        _codex(2, "event_msg", {"type": "agent_reasoning", "text": "**Looking at files**"}),
        _codex(
            2,
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Looking at files**"}],
                "content": None,
                "encrypted_content": "gAAAA",
            },
        ),
        _codex(
            3,
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": shell_args,
                "call_id": "call_ls",
            },
        ),
        _codex(
            3,
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_ls",
                "output": json.dumps(
                    {
                        "output": f"train.py\n{XSS}\n",
                        "metadata": {"exit_code": 0, "duration_seconds": 0.0},
                    }
                ),
            },
        ),
        _tokens(3, 6000, 120),
        _codex(
            4,
            "response_item",
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": "call_patch",
                "name": "apply_patch",
                "input": PATCH,
            },
        ),
        _codex(
            4,
            "response_item",
            {
                "type": "custom_tool_call_output",
                "call_id": "call_patch",
                "output": json.dumps(
                    {
                        "output": "Success. Updated the following files:\nM train.py\nA NOTES.md\n",
                        "metadata": {"exit_code": 0},
                    }
                ),
            },
        ),
        _codex(
            5,
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": exec_args,
                "call_id": "call_run",
            },
        ),
        _codex(
            5,
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_run",
                "output": "Exit code: 1\nWall time: 0.2 seconds\nOutput:\n"
                "Traceback (most recent call last):\nValueError: nan",
            },
        ),
        _codex(6, "event_msg", {"type": "agent_message", "message": "The run fails with nan."}),
        _codex(
            6,
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "The run fails with nan; lr is 0.1 now."}
                ],
            },
        ),
        _tokens(6, 9000, 300),
        _codex(7, "mystery_kind", {"x": 1}),
        "garbage {",
    ]


CODEX_USAGE = {"input_tokens": 9000, "cached_input_tokens": 4500, "output_tokens": 300,
               "reasoning_output_tokens": 75, "total_tokens": 9300}  # fmt: skip


SUBAGENT = "a3f9c2e1"  # the id Claude Code gives a Task's subagent (subagents/agent-<id>.jsonl)
SUB_PROMPT = "Count the lines of train.py and report the number."


def claude_task_lines() -> tuple[list[str], list[str]]:
    """A Claude Code session that delegates to a subagent through the Task tool, and the
    subagent's own transcript, as Claude Code 2.x writes them: the Task result's
    `toolUseResult.agentId` names `<session>/subagents/agent-<id>.jsonl`, whose lines are
    `isSidechain` with the `agentId` and the parent's `sessionId`."""
    task = {"description": "count lines", "prompt": SUB_PROMPT, "subagent_type": "general-purpose"}
    result = _result(3, "toolu_task1", [{"type": "text", "text": "train.py has 7 lines."}])
    result["toolUseResult"] = {
        "status": "completed",
        "agentId": SUBAGENT,
        "content": [{"type": "text", "text": "train.py has 7 lines."}],
        "totalDurationMs": 2100,
        "totalTokens": 1450,
        "totalToolUseCount": 1,
    }
    parent = [
        _claude("user", 1, "How long is train.py? Use a subagent."),
        _assistant(2, "msg_p1", [_use("toolu_task1", "Task", task)], 30),
        result,
        _assistant(4, "msg_p2", [{"type": "text", "text": "It has 7 lines."}], 9),
    ]
    sub = [
        _claude("user", 1, SUB_PROMPT),
        _assistant(2, "msg_s1", [_use("toolu_s1", "Bash", {"command": "wc -l train.py"})], 14),
        _result(3, "toolu_s1", "7 train.py"),
        _assistant(4, "msg_s2", [{"type": "text", "text": "train.py has 7 lines."}], 8),
    ]
    for line in sub:
        line.update(isSidechain=True, agentId=SUBAGENT)
    return [json.dumps(x) for x in parent], [json.dumps(x) for x in sub]

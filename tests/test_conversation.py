"""Agent transcripts read as conversations (orbit/review/conversation.py, rollout.py), the web
view's paging of a large transcript (orbit/web/session.py), and `orbit session` on a real run
whose session/ holds a Codex rollout and an in-container Claude Code transcript."""

from __future__ import annotations

import io
import itertools
import json
import os
from pathlib import Path

from conftest import Orbit
from transcripts import (
    CLAUDE_USAGE,
    CODEX_USAGE,
    PATCH,
    SESSION,
    THREAD,
    XSS,
    claude_lines,
    codex_lines,
)

from orbit.review import conversation
from orbit.review.conversation import parse
from orbit.web import session as web_session


def _kinds(conv: conversation.Conversation) -> list[str]:
    return [i["kind"] for i in conv.items]


def _tool(conv: conversation.Conversation, name: str) -> dict:
    return next(i for i in conv.items if i["kind"] == "tool" and i["name"] == name)


def test_claude_transcript() -> None:
    conv = parse([line.encode() for line in claude_lines()])
    assert conv.format == "claude"
    assert conv.header == {
        "session_id": SESSION,
        "cwd": "/workspace",
        "version": "2.1.332",
        "model": "claude-sonnet-4-5",
    }
    # One message over three lines counts once, with its last line's output tokens.
    assert conv.usage == CLAUDE_USAGE and not conv.total
    assert _kinds(conv) == [
        "meta", "user", "thinking", "assistant", "tool", "tool", "tool", "tool", "tool",
        "meta", "tool", "raw", "raw", "assistant",
    ]  # fmt: skip
    assert XSS in conv.items[1]["text"]
    read = _tool(conv, "Read")
    assert read["result"].startswith("import math") and not read["is_error"]
    edit = _tool(conv, "Edit")
    assert "-lr = 1.0" in edit["diff"] and "+lr = 0.1" in edit["diff"]
    assert edit["diff"][0] == "--- /workspace/train.py"
    bash = _tool(conv, "Bash")
    assert bash["command"] == "python train.py --steps 20"
    assert bash["is_error"] and "ValueError: bad" in bash["result"]
    multi = _tool(conv, "MultiEdit")["diff"]
    assert "+steps = 50" in multi and "+print(i, lr)" in multi
    assert _tool(conv, "Write")["diff"][-2:] == ["+# Notes", "+lr 0.1 works"]
    # The result came first: one item, where the result was, completed by the use.
    grep = [i for i in conv.items if i.get("id") == "toolu_grep"]
    assert len(grep) == 1 and grep[0]["name"] == "Grep"
    assert grep[0]["result"] == "train.py:3:lr = 0.1" and grep[0]["input"]["pattern"] == "lr ="
    assert conv.items[11]["text"].startswith('{"type": "weird-new-kind"')
    assert conv.items[12]["text"] == "this line is not JSON {{{"
    assert conv.messages == conversation.count_messages(claude_lines()) == 15


def test_claude_result_line_gives_the_cost_and_total() -> None:
    usage = {"input_tokens": 99, "output_tokens": 7}
    result = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 6,
              "total_cost_usd": 0.0421, "usage": usage}  # fmt: skip
    conv = parse([*claude_lines(), json.dumps(result)])
    assert conv.cost_usd == 0.0421
    assert conv.usage == {"input_tokens": 99, "output_tokens": 7} and conv.total
    assert conv.items[-1] == {"kind": "meta", "text": "result: success, 6 turns, $0.0421"}


def test_codex_rollout() -> None:
    conv = parse(codex_lines())
    assert conv.format == "codex"
    assert conv.header == {
        "session_id": THREAD,
        "cwd": "/workspace",
        "version": "0.171.0",
        "model": "gpt-5.1-codex",
    }
    assert conv.usage == CODEX_USAGE and conv.total  # the last running total, not a sum
    assert _kinds(conv) == [
        "meta", "meta", "meta", "user", "thinking", "tool", "tool", "tool", "assistant",
        "raw", "raw",
    ]  # fmt: skip
    assert conv.items[4]["text"] == "**Looking at files**"
    shell = _tool(conv, "shell")
    assert shell["command"] == "ls -la" and not shell["is_error"]
    assert shell["result"] == f"train.py\n{XSS}\n"
    patch = _tool(conv, "apply_patch")
    assert patch["diff"] == PATCH.splitlines()[1:-1] and patch["command"] is None
    run = _tool(conv, "exec_command")
    assert run["command"] == "python train.py" and run["is_error"]
    assert conv.items[8]["text"] == "The run fails with nan; lr is 0.1 now."
    assert conv.messages == conversation.count_messages(codex_lines()) == 4


def test_garbage_and_odd_lines_never_raise() -> None:
    odd = [
        b"", b"   ", b"\xff\xfe not utf-8", b"[1, 2, 3]", b'"a string"', b"{" * 5000 + b"}" * 5000,
        json.dumps({"type": "assistant", "message": "not a dict"}).encode(),
        json.dumps({"type": "user", "message": {"content": [None, 3, {"type": "new"}]}}).encode(),
        json.dumps({"type": "user", "message": {"content": [{"type": "tool_result"}]}}).encode(),
        json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "input": 5}],
                    "usage": {"input_tokens": "many", "output_tokens": -1}}}).encode(),
        b'{"timestamp": "t", "type": "response_item", "payload": {"type": "function_call"',
    ]  # fmt: skip
    conv = parse(odd)
    assert conv.lines == 9 and conv.usage == {}
    assert all(i["kind"] in ("raw", "user", "assistant", "tool") for i in conv.items)
    codex = parse(
        [
            codex_lines()[0],
            json.dumps({"timestamp": "t", "type": "response_item", "payload": "text"}),
            json.dumps(
                {
                    "timestamp": "t",
                    "type": "response_item",
                    "payload": {"type": "function_call", "arguments": "{not json", "call_id": 5},
                }
            ),
            json.dumps(
                {
                    "timestamp": "t",
                    "type": "event_msg",
                    "payload": {"type": "token_count", "info": None},
                }
            ),
        ]
    )
    assert _kinds(codex) == ["meta", "raw", "tool"] and codex.usage == {}
    assert parse([]).format == "" and parse([b"no json here"]).format == ""


def test_texts_are_shortened_with_a_marker() -> None:
    big = "x" * 50_000
    line = json.dumps({"type": "user", "message": {"role": "user", "content": big}})
    edit = {"file_path": "/a", "old_string": "\n".join(map(str, range(3000))), "new_string": ""}
    use = {"type": "tool_use", "id": "t", "name": "Edit", "input": edit}
    line2 = json.dumps({"type": "assistant", "message": {"content": [use]}})
    short = parse([line, line2], limit=100)
    assert short.items[0]["text"] == "x" * 100 + "… 49900 more characters"
    diff = short.items[1]["diff"]
    assert len(diff) == conversation.DIFF_LINES + 1 and diff[-1].endswith("more lines")
    assert short.items[1]["input"]["old_string"].endswith("more characters")
    full = parse([line, line2], limit=None)
    assert full.items[0]["text"] == big and len(full.items[1]["diff"]) > 3000


def _pages(data: bytes) -> list[tuple[int, int, list[bytes]]]:
    fh = io.BytesIO(data)
    out, offset = [], 0
    while offset < len(data):
        lines, end = web_session.read_page(fh, offset, len(data))
        assert end > offset
        out.append((offset, end, lines))
        offset = end
    return out


def test_a_50k_line_transcript_is_read_a_page_at_a_time() -> None:
    base = claude_lines()
    lines = [base[i % len(base)] for i in range(50_000)]
    data = ("\n".join(lines) + "\n").encode()
    pages = _pages(data)
    assert len(pages) == 250 and all(len(p[2]) == web_session.PAGE_LINES for p in pages)
    assert b"\n".join(line for p in pages for line in p[2]) + b"\n" == data
    fh = io.BytesIO(data)
    for (start, _, _), (next_start, _, _) in itertools.pairwise(pages):
        assert web_session.start_before(fh, next_start) == start  # "previous" lands on a page
    assert web_session.start_before(fh, len(data)) == pages[-1][0]
    page = web_session.read_conversation(fh, len(data), pages[3][0])
    assert page.start == pages[3][0] and page.end == pages[3][1]
    assert page.prev == pages[2][0] and page.last == pages[-1][0]
    assert page.conv.format == "claude" and page.conv.lines == 200
    assert page.header["session_id"] == SESSION


def test_pages_are_bounded_in_bytes_and_cut_only_overlong_lines() -> None:
    big = json.dumps({"type": "user", "message": {"role": "user", "content": "y" * 700_000}})
    data = ("\n".join([big] * 5) + "\n").encode()  # 3.5 MB: a page holds two whole lines
    pages = _pages(data)
    assert [len(p[2]) for p in pages] == [2, 2, 1]
    assert all(parse(p[2]).items[0]["kind"] == "user" for p in pages)
    huge = b"z" * (web_session.PAGE_BYTES + 10) + b"\n" + claude_lines()[2].encode() + b"\n"
    first, second = _pages(huge)
    assert first[1] == web_session.PAGE_BYTES and len(first[2]) == 1  # cut, shown raw
    assert parse(second[2]).items[-1]["kind"] == "user"
    tail = claude_lines()[2].encode() + b"\n" + b'{"type": "user", "mess'  # still being written
    ((_, end, lines),) = _pages(tail)
    assert end == len(tail) and parse(lines).items[-1]["kind"] == "raw"


def test_orbit_session_reads_a_codex_rollout_and_a_claude_transcript(
    orbit: Orbit, busybox: str
) -> None:
    run_id = orbit.submit("--image", busybox, "--no-project", "--", "sh", "-c", "echo agent")
    status = orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 60)
    assert status["state"] == "succeeded", status
    res = orbit("session", run_id)
    assert res.code == 3 and "no agent session recorded" in res.err
    folder = orbit.run_dir(run_id) / "session"
    rollout = folder / "2026" / "11" / "30" / f"rollout-2026-11-30T10-00-00-{THREAD}.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text("\n".join(codex_lines()) + "\n")
    shown = orbit("session", run_id)
    assert shown.code == 0, shown.err
    out = shown.out
    assert f"session/2026/11/30/rollout-2026-11-30T10-00-00-{THREAD}.jsonl" in out
    assert "Codex 0.171.0" in out and "gpt-5.1-codex" in out and "9.3k total" in out
    for text in ("Lower the learning rate.", "→ shell $ ls -la", "+lr = 0.1", "✗ Exit code: 1"):
        assert text in out, (text, out)
    assert out.index("Lower the learning") < out.index("The run fails with nan")

    # An in-container Claude Code session beside it, with a subagent's transcript.
    (folder / f"{SESSION}.jsonl").write_text("\n".join(claude_lines()) + "\n")
    sub = folder / SESSION / "subagents" / "agent-1.jsonl"
    sub.parent.mkdir(parents=True)
    sub.write_text(claude_lines()[2] + "\n")
    data = orbit("session", run_id, "--json").json()
    files = [t["file"] for t in data["transcripts"]]
    assert files == [rollout.relative_to(folder).as_posix(), f"{SESSION}.jsonl"]  # by path
    assert data["others"] == [f"{SESSION}/subagents/agent-1.jsonl"]
    claude = data["transcripts"][1]
    assert claude["format"] == "claude" and claude["usage"] == CLAUDE_USAGE
    assert claude["items"][1]["text"].endswith(XSS)  # in full
    one = orbit("session", run_id, "--file", f"{SESSION}/subagents/agent-1.jsonl", "--json")
    assert [t["messages"] for t in one.json()["transcripts"]] == [1]
    missing = orbit("session", run_id, "--file", "nope.jsonl")
    assert missing.code == 3 and "no transcript nope.jsonl" in missing.err
    assert "Traceback" not in missing.err


def test_find_files_does_not_follow_links(tmp_path: Path) -> None:
    from orbit.store.dirlist import find_files

    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "secret.jsonl").write_text("{}\n")
    top = tmp_path / "session"
    (top / "a" / "b" / "c" / "d" / "e").mkdir(parents=True)
    (top / "a" / "b" / "c" / "d" / "four.jsonl").write_text("{}\n")
    (top / "a" / "b" / "c" / "d" / "e" / "five.jsonl").write_text("{}\n")
    (top / "x.jsonl").write_text("{}\n")
    (top / "notes.txt").write_text("no\n")
    (top / "link").symlink_to(outside)
    (top / "link.jsonl").symlink_to(outside / "deep" / "secret.jsonl")
    os.mkfifo(top / "fifo.jsonl")  # opening it would wait for a writer
    assert find_files(top, ".jsonl", 4, 10) == [("a/b/c/d/four.jsonl", 3), ("x.jsonl", 3)]
    assert find_files(top, ".jsonl", 4, 1) == [("a/b/c/d/four.jsonl", 3)]
    assert find_files(tmp_path / "missing", ".jsonl", 4, 10) == []


def test_format_of_a_first_line_cut_short_and_claude_notes() -> None:
    long_meta = codex_lines()[0].replace("You are Codex. ", "You are Codex. " * 10_000)
    assert len(long_meta) > 100_000
    head = long_meta.encode()[:65536]  # what a 64 KiB head read holds: no whole line
    assert conversation.detect([head]) == "codex"
    assert conversation.detect([claude_lines()[2].encode()[:300]]) == "claude"
    assert conversation.detect([b'{"cut": "nothing to tell"']) == ""
    caveat = {"type": "user", "isMeta": True, "message": {"role": "user", "content": "Caveat: …"}}
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed",
              "action": {"type": "search", "query": "lr schedules"}}  # fmt: skip
    conv = parse([json.dumps(caveat), claude_lines()[2]])
    assert _kinds(conv) == ["meta", "user"] and conv.messages == 2
    codex = parse([codex_lines()[0], json.dumps({"timestamp": "t", "type": "response_item",
                                                 "payload": search})])  # fmt: skip
    assert _tool(codex, "web_search")["input"]["query"] == "lr schedules"


def test_codex_exit_codes_of_plain_text_outputs() -> None:
    def call(n: int, output: str) -> list[str]:
        args = json.dumps({"cmd": f"step {n}"})
        call = {"type": "function_call", "name": "exec_command", "arguments": args, "call_id": n}
        done = {"type": "function_call_output", "call_id": n, "output": output}
        return [
            json.dumps({"timestamp": "t", "type": "response_item", "payload": p})
            for p in (call, done)
        ]

    lines = [codex_lines()[0]]
    lines += call(
        1, "Chunk ID: a1\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\nno"
    )
    lines += call(
        2, "Chunk ID: a2\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nok"
    )
    lines += call(3, "Process running with session ID 7\nOutput:\nstill going")
    lines += call(4, "Exit code: 0\nWall time: 1 seconds\nOutput:\nExit code: 9 is in the output")
    tools = [i for i in parse(lines).items if i["kind"] == "tool"]
    assert [t["command"] for t in tools] == ["step 1", "step 2", "step 3", "step 4"]
    assert [t["is_error"] for t in tools] == [True, False, False, False]

"""`orbit mcp`, driven by the MCP SDK's own stdio client against a real home and real Docker.

The server is `python -m orbit mcp --home H` from this tree, a real process on a real pipe;
every answer is compared with what the CLI itself says about the same home.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psutil
from conftest import REPO_ROOT, Orbit, git_repo
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

READ_ONLY = {
    "resources", "ps", "show", "logs", "failures", "best", "compare", "lessons", "wait",
    "bench_tasks", "bench_show",
}  # fmt: skip
WRITES = {"run", "sweep", "note", "cancel", "bench_run"}

# x=1 and x=2 log a loss and succeed (x=2 after a few seconds, so that the wait has something
# to report); x=3 fails with an error line that `failures` groups by.
TRAIN = """\
echo "{\\"step\\": 1, \\"loss\\": 0.$1}" >> "$ORBIT_METRICS"
echo "epoch 1 x=$1"
echo "greeting: $GREETING"
[ "$1" = 2 ] && sleep 4
[ "$1" = 3 ] && { echo "ValueError: x=$1 is out of range" >&2; exit 3; }
echo "done x=$1"
"""


@asynccontextmanager
async def server(orbit: Orbit):  # type: ignore[no-untyped-def]
    """A client connected to `orbit mcp --home` of this tree, started in the test's work dir."""
    environ = {**orbit.environ, "PYTHONPATH": str(REPO_ROOT)}
    environ.pop("ORBIT_HOME")  # the server knows its home from --home
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "orbit", "mcp", "--home", str(orbit.home)],
        env=environ,
        cwd=orbit.cwd,
    )
    async with Client(params) as client:
        yield client


def serve(orbit: Orbit, body: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        async with server(orbit) as client:
            await body(client)

    asyncio.run(main())


def data(res: CallToolResult) -> Any:
    """The structured answer, which the text block holds too (for clients that read text)."""
    assert not res.is_error, res.content
    assert json.loads(res.content[0].text) == res.structured_content  # type: ignore[union-attr]
    return res.structured_content


async def read(client: Client, uri: str) -> Any:
    """A resource's text, parsed when it is JSON."""
    contents = (await client.read_resource(uri)).contents
    text = contents[0].text  # type: ignore[union-attr]
    return json.loads(text) if contents[0].mime_type == "application/json" else text


def refusal(res: CallToolResult) -> str:
    assert res.is_error
    text = res.content[0].text  # type: ignore[union-attr]
    assert "\n" not in text and "Traceback" not in text, text
    assert text.startswith("orbit: "), text
    return text


def test_tools_say_what_they_take_and_whether_they_change_anything(orbit: Orbit) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == READ_ONLY | WRITES  # nothing that deletes: no rm, no rm-job
        for name, tool in tools.items():
            assert tool.annotations is not None, name
            assert tool.annotations.read_only_hint is (name in READ_ONLY), name
            assert tool.annotations.destructive_hint in (None, False), name
            assert tool.description, name
            for arg, schema in tool.input_schema["properties"].items():
                assert schema.get("description"), f"{name}.{arg} has no description"
        ps = tools["ps"].input_schema
        assert {"all", "group", "state", "name", "where", "sort"} <= set(ps["properties"])
        # compact: no titles, an optional argument is its type (null is still accepted)
        assert ps["properties"]["group"] == {"type": "string", "description": "a group (the -g "
                                             "of run/sweep)"}  # fmt: skip
        assert "title" not in json.dumps(tools["sweep"].input_schema)
        assert data(await client.call_tool("ps", {"group": None})) == {"runs": []}
        wait = tools["wait"].input_schema["properties"]["timeout_s"]
        assert wait["default"] == 50 and wait["maximum"] == 1800
        sweep = tools["sweep"].input_schema
        assert set(sweep["required"]) == {"command", "params"}
        assert sweep["properties"]["command"]["items"]["type"] == "string"
        assert "cwd" in sweep["properties"] and "cwd" in tools["run"].input_schema["properties"]
        assert tools["best"].input_schema["required"] == ["group"]
        listed = await client.list_resource_templates()
        templates = {t.uri_template for t in listed.resource_templates}
        assert templates == {
            f"orbit://runs/{{id}}/{part}" for part in ("status", "log", "metrics", "outputs")
        }

    serve(orbit, body)


def test_bad_calls_are_one_line_tool_errors(orbit: Orbit) -> None:
    async def body(client: Client) -> None:
        said = refusal(await client.call_tool("show", {"run": "99"}))
        assert said == orbit("show", "99").err.strip() == "orbit: no run '99' (see `orbit ps -a`)"
        said = refusal(await client.call_tool("show", {"run": 5}))
        assert said.startswith("orbit: show: run: Input should be a valid string (got 5)")
        said = refusal(await client.call_tool("wait", {"runs": ["1"], "timeout_s": "soon"}))
        assert "timeout_s: Input should be a valid number" in said
        said = refusal(await client.call_tool("wait", {"runs": ["1"], "timeout_s": 99999}))
        assert "timeout_s: Input should be less than or equal to 1800" in said
        said = refusal(await client.call_tool("rm", {"runs": ["1"]}))
        assert said.startswith("orbit: no tool 'rm' (tools: bench_run, bench_show")
        said = refusal(await client.call_tool("ps", {"where": "lr<<1"}))
        assert said == orbit("ps", "--where", "lr<<1").err.strip()
        said = refusal(await client.call_tool("wait", {}))
        assert said == "orbit: give run ids or -g GROUP"
        said = refusal(await client.call_tool("best", {"group": "nope"}))
        assert said == orbit("best", "-g", "nope").err.strip()
        said = refusal(await client.call_tool("bench_tasks", {"benchmark": "nope"}))
        assert said == orbit("bench", "tasks", "nope").err.strip()
        said = refusal(await client.call_tool("bench_show", {"job": "j9"}))
        assert said == orbit("bench", "show", "j9").err.strip()
        # the server lives on
        assert await read(client, "orbit://runs/recent") == {"runs": [], "total": 0}

    serve(orbit, body)


def test_the_review_loop_through_mcp(orbit: Orbit, busybox: str) -> None:
    repo = git_repo(orbit.cwd / "proj", {"train.sh": TRAIN})
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def body(client: Client) -> None:
        free = data(await client.call_tool("resources", {}))
        assert free.keys() == orbit("resources", "--json").json().keys()
        launch = {
            "command": ["sh", "train.sh", "{x}"],
            "params": {"x": ["1", "2", "3"]},
            "group": "xs",
            "image": busybox,
            "cpus": 0.1,
            "mem_gb": 0.1,
            "name": "x{x}",
            "objective": "loss:min",
            "tags": {"kind": "probe"},
            "env": {"GREETING": "hi --there"},  # a value that looks like an option
            "cwd": str(repo),
        }
        swept = data(await client.call_tool("sweep", launch))
        assert swept["group"] == "xs" and len(swept["runs"]) == 3
        ids = {r["name"]: str(r["id"]) for r in swept["runs"]}
        # The protocol survived shepherds and the ticker starting: the next call answers.
        waiting = client.call_tool("wait", {"group": "xs"}, progress_callback=on_progress)
        waited = data(await waiting)
        assert not waited["timed_out"] and not waited["ok"]
        assert {r["name"]: r["state"] for r in waited["runs"]} == {
            "x1": "succeeded", "x2": "succeeded", "x3": "failed",
        }  # fmt: skip
        assert waited == {**orbit("wait", "-g", "xs", "--json").json(), "timed_out": False}

        failed = data(await client.call_tool("failures", {"group": "xs"}))
        assert failed == orbit("failures", "-g", "xs", "--json").json()
        assert [f["count"] for f in failed["failures"]] == [1]
        assert "ValueError" in json.dumps(failed["failures"][0])
        best = data(await client.call_tool("best", {"group": "xs"}))
        assert best == orbit("best", "-g", "xs", "--json").json()
        assert str(best["best"]["id"]) == ids["x1"]  # loss 0.1 beats 0.2
        only = data(await client.call_tool("ps", {"where": "x=3", "group": "xs"}))
        assert [str(r["id"]) for r in only["runs"]] == [ids["x3"]]
        tail = data(await client.call_tool("logs", {"run": ids["x2"], "lines": 1}))
        assert tail["log"] == "done x=2\n"
        first = data(await client.call_tool("logs", {"run": "x2", "first_line": 1, "last_line": 1}))
        assert first["log"] == "epoch 1 x=2\n"
        shown = data(await client.call_tool("show", {"run": "x1"}))
        assert shown["metrics"]["summary"]["loss"]["latest"] == 0.1
        assert shown["tags"] == {"kind": "probe"} and shown["project"] is not None
        two = data(await client.call_tool("logs", {"run": "x2", "first_line": 2}))
        assert two["log"] == "greeting: hi --there\ndone x=2\n" and two["last_line"] == 3

        noted = data(await client.call_tool("note", {"group": "xs", "text": "x=1 is best"}))
        assert noted["text"] == "x=1 is best"
        on_run = data(await client.call_tool("note", {"runs": ["x3"], "text": "-x too big"}))
        assert str(on_run["id"]) == ids["x3"] and on_run["text"] == "-x too big"
        lessons = data(await client.call_tool("lessons", {"group": "xs"}))
        by_cli = orbit("lessons", "-g", "xs", "--json").json()
        assert {**lessons, "cache": None} == {**by_cli, "cache": None}  # (its cache was warm)
        assert "x=1 is best" in json.dumps(lessons)

        status = await read(client, f"orbit://runs/{ids['x3']}/status")
        assert status == orbit("show", ids["x3"], "--json").json()
        metrics = await read(client, f"orbit://runs/{ids['x1']}/metrics")
        assert metrics["summary"]["loss"]["max"] == 0.1 and metrics["state"] == "succeeded"
        log = await read(client, f"orbit://runs/{ids['x3']}/log")
        assert "ValueError: x=3 is out of range\n" in log and "epoch 1 x=3\n" in log
        outputs = await read(client, f"orbit://runs/{ids['x1']}/outputs")
        assert outputs == {"id": ids["x1"], "dir": shown["dir"], "output": shown["output"]}
        recent = await read(client, "orbit://runs/recent")
        assert recent["total"] == 3 and [str(r["id"]) for r in recent["runs"]] == [*ids.values()]
        unknown = "orbit://runs/99/status"
        try:
            await client.read_resource(unknown)
        except Exception as exc:  # the SDK raises the resource error it was sent
            assert "orbit: no run '99'" in str(exc) and "Traceback" not in str(exc)
        else:
            raise AssertionError(f"{unknown} was read")

        # A long run: the wait gives up at its timeout_s (the run goes on), then it is
        # cancelled and its record stays, cancelled.
        one = {"command": ["sleep", "30"], "image": busybox, "cpus": 0.1, "mem_gb": 0.1}
        started = str(data(await client.call_tool("run", {**one, "no_project": True}))["id"])
        t0 = time.monotonic()
        waited = data(await client.call_tool("wait", {"runs": [started], "timeout_s": 1.5}))
        assert waited["timed_out"] and 1.5 <= time.monotonic() - t0 < 5
        assert waited["runs"][0]["state"] in ("starting", "running")
        cancelled = data(await client.call_tool("cancel", {"runs": [started]}))
        assert cancelled["runs"][0]["state"] == "cancelled"

    serve(orbit, body)
    # Seen by the CLI too: the group's note is on every member.
    shown = orbit("show", "x3", "--json").json()
    assert [n["text"] for n in shown["group_notes"]] == ["x=1 is best"]
    assert [n["text"] for n in shown["notes"]] == ["-x too big"]
    # Progress came while the wait waited (x2 still running), and once more at the end.
    assert any(done < 3 for done, _, _ in progress), progress
    assert progress[-1][:2] == (3, 3) and progress[-1][2] == "3 of 3 runs finished"


def _is_server(p: psutil.Process) -> bool:
    """Whether a child of the test is the `orbit mcp` server (a child that is already a
    zombie, left by an earlier test, has no command line to read)."""
    try:
        return "mcp" in p.cmdline()
    except psutil.Error:
        return False


def test_nothing_but_the_protocol_reaches_stdout(orbit: Orbit, busybox: str) -> None:
    """fd 1 of the server, which every child inherits, is its stderr, not the wire; a run
    whose shepherd starts meanwhile leaves the protocol whole."""

    async def body(client: Client) -> None:
        (proc,) = [p for p in psutil.Process().children(recursive=True) if _is_server(p)]
        fd1, fd2 = (os.readlink(f"/proc/{proc.pid}/fd/{n}") for n in (1, 2))
        assert fd1 == fd2 and fd1 != os.readlink(f"/proc/{proc.pid}/fd/0")
        one = {"command": ["echo", "to the log"], "image": busybox, "no_project": True}
        started = data(await client.call_tool("run", {**one, "cpus": 0.1, "mem_gb": 0.1}))
        waited = data(await client.call_tool("wait", {"runs": [str(started["id"])]}))
        assert waited["ok"], waited
        tail = data(await client.call_tool("logs", {"run": str(started["id"])}))
        assert tail["log"] == "to the log\n"

    serve(orbit, body)


def test_the_bench_tools_answer_as_the_commands(orbit: Orbit) -> None:
    tasks = REPO_ROOT / "tests" / "bench_tasks" / "harbor-basic"
    assert orbit("bench", "add", "hb", str(tasks), "--adapter", "harbor").code == 0

    async def body(client: Client) -> None:
        listed = data(await client.call_tool("bench_tasks", {"benchmark": "hb"}))
        assert listed == orbit("bench", "tasks", "hb", "--json").json()
        assert "orbit-test/hello" in {t["name"] for t in listed["tasks"]}
        bad = {"benchmark": "hb", "methods": ["nosuch"], "tasks": ["orbit-test/hello"]}
        said = refusal(await client.call_tool("bench_run", bad))
        cli = orbit("bench", "run", "hb", "-m", "nosuch", "-t", "orbit-test/hello", "--json")
        assert said == cli.err.strip()

    serve(orbit, body)


def test_mcp_start_up_errors_go_to_stderr(orbit: Orbit, tmp_path: Path) -> None:
    afile = tmp_path / "file"
    afile.write_text("")
    res = orbit("mcp", "--home", str(afile))
    assert res.code == 2 and res.out == ""
    assert res.err == f"orbit: --home {afile}: not a directory\n"


def test_wait_timeout_on_the_command_line(orbit: Orbit, busybox: str) -> None:
    """`orbit wait --timeout S`, what the wait tool waits in slices of: 124 and timed_out."""
    res = orbit("run", "--json", "--no-project", "--image", busybox, "--cpus", "0.1", "--mem",
                "0.1", "--", "sleep", "20")  # fmt: skip
    run_id = str(res.json()["id"])
    waited = orbit("wait", run_id, "--timeout", "0.5", "--json")
    assert waited.code == 124
    assert waited.json()["timed_out"] is True and waited.json()["runs"][0]["state"] != "succeeded"
    plain = orbit("wait", run_id, "--timeout", "0.2")
    assert plain.code == 124 and "still waiting after 0.2 s; the runs go on" in plain.err
    orbit("cancel", run_id)
    assert orbit("wait", run_id, "--timeout", "30", "--json").json()["timed_out"] is False

"""The server's tools: one per `orbit` command of the experiment loop, each answering with
that command's `--json` (structured content, and the same JSON as text for clients that read
only text) or, when it refuses, a tool error whose text is its one-line `orbit: …` message.

Names are the commands' own (`ps`, `run`, `bench_show`), without an `orbit_` prefix: the
clients already put the server's name in front (Claude Code `mcp__orbit__ps`, Codex
`orbit.ps`), as the reference servers' `read_file` and GitHub's `list_issues` rely on.
Nothing that deletes (`rm`, `bench rm-job`) is a tool.
"""

from __future__ import annotations

import asyncio
import json
import time
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from orbit.mcp.bridge import Answer, Orbit
from orbit.store.model import RunState

READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
STOP = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

# wait: a tool call is bounded (Codex gives a tool 60 s unless configured). It waits in slices
# of `orbit wait --timeout` and reports the finished runs after each: a short first one, so
# the counts come at once, then slices a little over the 5 s after which `orbit wait` ticks
# once (which repairs a run whose shepherd died).
WAIT_DEFAULT_S = 50.0
WAIT_MAX_S = 1800.0
FIRST_SLICE_S = 1.0
WAIT_SLICE_S = 6.0
LOG_LINES = 100
MAX_LOG_LINES = 2000  # an answer an agent can still read
ACTIVE = {state.value for state in RunState if state.active}  # an unreadable run is done

RunRef = Annotated[str, Field(description="run id (4), unique id prefix, or unique run name")]
Group = Annotated[str | None, Field(description="a group (the -g of run/sweep)")]


def result(answer: Answer) -> CallToolResult:
    """The command's JSON as the tool's result, or its one-line refusal as a tool error."""
    if answer.failed:
        return CallToolResult(content=[TextContent(type="text", text=answer.error)], is_error=True)
    data = answer.data if isinstance(answer.data, dict) else {"result": answer.data}
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def flags(**options: Any) -> list[str]:
    """`--key=value` for each given option (`--key` for True, once per item of a list), so
    that a value starting with `-` is never read as an option."""
    argv: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv.extend(f"{flag}={item}" for item in value)
        else:
            argv.append(f"{flag}={value}")
    return argv


def register(server: MCPServer, orbit: Orbit) -> None:
    """Add every tool to `server`; each runs its command through `orbit`."""
    _run_tools(server, orbit)
    _review_tools(server, orbit)
    _launch_tools(server, orbit)
    _control_tools(server, orbit)
    _bench_tools(server, orbit)


def _run_tools(server: MCPServer, orbit: Orbit) -> None:
    @server.tool(annotations=READ)
    def resources() -> CallToolResult:
        """What the machine has free: GPUs, CPUs, memory, leases and the queue (`orbit
        resources --json`). Call it before choosing a run's --cpus/--mem/--gpus."""
        return result(orbit.call("resources"))

    @server.tool(annotations=READ)
    def ps(
        all: Annotated[bool, Field(description="every run, not only active ones")] = False,
        group: Group = None,
        state: Annotated[
            list[str] | None,
            Field(
                description="only these states (queued, running, succeeded, failed, …, or "
                "active, finished); implies all"
            ),
        ] = None,
        name: Annotated[str | None, Field(description="name contains it, or a glob")] = None,
        where: Annotated[
            str | None,
            Field(
                description="filter expression on params, metrics, fields and tags, e.g. "
                "'lr<1e-3 loss<0.3 state=failed tag:baseline'; implies all"
            ),
        ] = None,
        sort: Annotated[
            str | None,
            Field(
                description="order by a field (id, name, state, submitted, duration), "
                "param:KEY, a metric (metric:NAME[:max|min]) or `best`; -KEY reverses"
            ),
        ] = None,
    ) -> CallToolResult:
        """List runs (`orbit ps --json`): active ones by default."""
        argv = flags(all=all, group=group, state=state, name=name, where=where, sort=sort)
        return result(orbit.call("ps", *argv))

    @server.tool(annotations=READ)
    def show(run: RunRef) -> CallToolResult:
        """A run's request, state and reason, resources and peaks, metrics summary, output
        files and notes (`orbit show ID --json`)."""
        return result(orbit.call("show", run))

    @server.tool(annotations=READ)
    def logs(
        run: RunRef,
        lines: Annotated[
            int,
            Field(ge=0, le=MAX_LOG_LINES, description="the last N lines (unless first_line)"),
        ] = LOG_LINES,
        first_line: Annotated[
            int | None, Field(ge=1, description="a range instead: from this line (1 = first)")
        ] = None,
        last_line: Annotated[
            int | None,
            Field(
                ge=1,
                description=f"to this line, included (default: the end; at most "
                f"{MAX_LOG_LINES} lines are given)",
            ),
        ] = None,
    ) -> CallToolResult:
        """A run's output, log.txt (`orbit logs ID -n N --json`): the tail, or a line range
        (then also first_line and last_line: the lines given)."""
        if first_line is None:
            return result(orbit.call("logs", run, *flags(lines=lines)))
        answer = orbit.call("logs", run)
        if not answer.failed:
            text = answer.data["log"].splitlines(keepends=True)
            last = min(last_line or len(text), first_line + MAX_LOG_LINES - 1, len(text))
            answer.data["log"] = "".join(text[first_line - 1 : last])
            answer.data.update(first_line=first_line, last_line=last)
        return result(answer)


def _review_tools(server: MCPServer, orbit: Orbit) -> None:
    @server.tool(annotations=READ)
    def failures(
        group: Group = None,
        folder: Annotated[str | None, Field(description="runs filed under this folder")] = None,
        since: Annotated[
            str | None, Field(description="only runs that ended since then (2h, 1d, ISO)")
        ] = None,
    ) -> CallToolResult:
        """Failed and lost runs grouped by the cause their logs name, most frequent first
        (`orbit failures --json`)."""
        return result(orbit.call("failures", *flags(group=group, folder=folder, since=since)))

    @server.tool(annotations=READ)
    def best(
        group: Annotated[str, Field(description="the group to rank")],
        metric: Annotated[
            str | None,
            Field(description="NAME[:max|min] (default: the group's objective)"),
        ] = None,
        by_params: Annotated[
            bool, Field(description="rank settings: mean ± std over their seeds")
        ] = False,
        seed_key: Annotated[
            list[str] | None, Field(description="more params that only repeat a setting")
        ] = None,
    ) -> CallToolResult:
        """The best run of a group by its objective, or with by_params its best parameter
        settings (`orbit best -g GROUP --json`)."""
        argv = flags(group=group, metric=metric, by_params=by_params, seed_key=seed_key)
        return result(orbit.call("best", *argv))

    @server.tool(annotations=READ)
    def compare(
        runs: Annotated[list[str] | None, Field(description="run ids or names")] = None,
        group: Group = None,
        folder: Annotated[str | None, Field(description="a folder's runs")] = None,
        metric: Annotated[
            list[str] | None, Field(description="metrics to compare, NAME[:min|max]")
        ] = None,
        result_key: Annotated[
            list[str] | None,
            Field(description="PATH:KEY, a value from a JSON file in each run's output/"),
        ] = None,
    ) -> CallToolResult:
        """Runs side by side: params, outcome, peaks, and per metric its last, min and max
        (`orbit compare --json`)."""
        argv = flags(group=group, folder=folder, metric=metric, result=result_key)
        return result(orbit.call("compare", *(runs or []), *argv))

    @server.tool(annotations=READ)
    def lessons(
        project: Annotated[
            str | None, Field(description="a repository's root (default: the server's cwd)")
        ] = None,
        group: Group = None,
        metric: Annotated[str | None, Field(description="rank by NAME[:max|min]")] = None,
    ) -> CallToolResult:
        """What was tried, the best settings, failure causes and the notes, for a project or
        a group (`orbit lessons --json`). Read it before planning new runs."""
        argv = [*([project] if project else []), *flags(group=group, metric=metric)]
        return result(orbit.call("lessons", *argv))

    @server.tool(annotations=WRITE)
    def note(
        text: Annotated[str, Field(min_length=1, description="the note (markdown)")],
        runs: Annotated[list[str] | None, Field(description="the runs to note")] = None,
        group: Annotated[str | None, Field(description="or note the group once")] = None,
    ) -> CallToolResult:
        """Attach a note to runs, or to a group (shown on every member and in lessons)
        (`orbit note --json`)."""
        return result(orbit.call("note", *(runs or []), *flags(group=group, text=text)))


def _control_tools(server: MCPServer, orbit: Orbit) -> None:
    @server.tool(annotations=STOP)
    def cancel(
        runs: Annotated[list[str], Field(min_length=1, description="run ids or names")],
    ) -> CallToolResult:
        """Cancel runs: queued ones never start, running ones are stopped; their records stay
        (`orbit cancel --json`)."""
        return result(orbit.call("cancel", *runs))

    @server.tool(annotations=READ)
    async def wait(
        ctx: Context,
        runs: Annotated[list[str] | None, Field(description="run ids or names")] = None,
        group: Annotated[str | None, Field(description="or every run of this group")] = None,
        timeout_s: Annotated[
            float,
            Field(
                gt=0,
                le=WAIT_MAX_S,
                description="stop waiting after this long (the runs go "
                "on; call again): timed_out says so",
            ),
        ] = WAIT_DEFAULT_S,
    ) -> CallToolResult:
        """Wait until the runs finish, or timeout_s, with progress notifications (finished
        of total); answers `orbit wait --json`: ok, each run's state, reason and error excerpt,
        timed_out."""
        deadline = time.monotonic() + timeout_s
        slice_s = FIRST_SLICE_S
        while True:
            left = deadline - time.monotonic()
            step = max(0.1, min(slice_s, left))
            argv = ["wait", *(runs or []), *flags(group=group, timeout=f"{step:.3f}")]
            answer = await asyncio.to_thread(partial(orbit.call, *argv))
            if answer.failed:
                return result(answer)
            states = [r["state"] for r in answer.data["runs"]]
            done = sum(state not in ACTIVE for state in states)
            await ctx.report_progress(done, len(states), f"{done} of {len(states)} runs finished")
            if not answer.data["timed_out"] or left <= step:
                return result(answer)
            slice_s = WAIT_SLICE_S


# The run options `run` and `sweep` share (cli/runopts.py), as typed arguments.
Image = Annotated[str | None, Field(description="the image to run")]
Dockerfile = Annotated[str | None, Field(description="or a Dockerfile to build")]
Cpus = Annotated[float | None, Field(gt=0, description="CPU limit per run (default 4)")]
MemGb = Annotated[float | None, Field(gt=0, description="memory limit per run, GiB")]
Gpus = Annotated[int, Field(ge=0, description="whole GPUs per run")]
Objective = Annotated[str | None, Field(description="the group's METRIC[:max|min]")]
Folder = Annotated[str | None, Field(description="file under this folder, e.g. a/b")]
Tags = Annotated[dict[str, str] | None, Field(description="tags, KEY: VALUE")]
Environ = Annotated[
    dict[str, str] | None, Field(description="environment variables (stored: no secrets)")
]
Data = Annotated[list[str] | None, Field(description="named datasets to mount, NAME[:DST[:rw]]")]
TimeoutMin = Annotated[float | None, Field(gt=0, description="stop a run after MIN minutes")]
NoProject = Annotated[bool, Field(description="run without a code snapshot")]
Cwd = Annotated[
    str | None,
    Field(
        description="the project directory whose Git snapshot the runs get (default: the "
        "server's working directory)"
    ),
]


def _launch_tools(server: MCPServer, orbit: Orbit) -> None:
    @server.tool(annotations=WRITE)
    def run(
        command: Annotated[list[str], Field(min_length=1, description="the command, as argv")],
        image: Image = None,
        dockerfile: Dockerfile = None,
        cpus: Cpus = None,
        mem_gb: MemGb = None,
        gpus: Gpus = 0,
        name: Annotated[str | None, Field(description="a name for the run")] = None,
        group: Group = None,
        objective: Objective = None,
        folder: Folder = None,
        tags: Tags = None,
        env: Environ = None,
        data: Data = None,
        timeout_min: TimeoutMin = None,
        no_project: NoProject = False,
        cwd: Cwd = None,
    ) -> CallToolResult:
        """Submit one run (`orbit run --json -- COMMAND`); it queues until the machine has
        its resources. Follow it with wait, logs, show."""
        argv = _run_flags(
            image=image, dockerfile=dockerfile, cpus=cpus, mem_gb=mem_gb, gpus=gpus, name=name,
            group=group, objective=objective, folder=folder, tags=tags, env=env, data=data,
            timeout_min=timeout_min, no_project=no_project,
        )  # fmt: skip
        return result(orbit.call("run", *argv, "--", *command, cwd=_dir(cwd)))

    @server.tool(annotations=WRITE)
    def sweep(
        command: Annotated[
            list[str],
            Field(min_length=1, description="the command, as argv; {KEY} is each run's value"),
        ],
        params: Annotated[
            dict[str, list[str]],
            Field(
                description='each parameter\'s values, e.g. {"lr": ["0.1", "1"]}: one '
                "run per combination"
            ),
        ],
        group: Annotated[str | None, Field(description="the group (default: a new one)")] = None,
        image: Image = None,
        dockerfile: Dockerfile = None,
        cpus: Cpus = None,
        mem_gb: MemGb = None,
        gpus: Gpus = 0,
        name: Annotated[str | None, Field(description="run names, e.g. lr{lr}-s{seed}")] = None,
        objective: Objective = None,
        max_running: Annotated[int | None, Field(ge=1, description="runs at once")] = None,
        folder: Folder = None,
        tags: Tags = None,
        env: Environ = None,
        data: Data = None,
        timeout_min: TimeoutMin = None,
        no_project: NoProject = False,
        cwd: Cwd = None,
    ) -> CallToolResult:
        """Submit one run per combination of params as one group (`orbit sweep --json`).
        Then wait on the group, and read failures, best and lessons."""
        argv = _run_flags(
            image=image, dockerfile=dockerfile, cpus=cpus, mem_gb=mem_gb, gpus=gpus, name=name,
            group=group, objective=objective, folder=folder, tags=tags, env=env, data=data,
            timeout_min=timeout_min, no_project=no_project,
        )  # fmt: skip
        argv += [f"--param={key}={','.join(values)}" for key, values in params.items()]
        argv += flags(max_running=max_running)
        return result(orbit.call("sweep", *argv, "--", *command, cwd=_dir(cwd)))


def _run_flags(
    *, mem_gb: float | None, gpus: int, tags: dict[str, str] | None,
    env: dict[str, str] | None, timeout_min: float | None, **same: Any,
) -> list[str]:  # fmt: skip
    """The run options as `orbit run` and `orbit sweep` spell them."""
    pairs = {k: [f"{key}={v}" for key, v in (d or {}).items()] or None
             for k, d in (("tag", tags), ("env", env))}  # fmt: skip
    return flags(**same, **pairs, mem=mem_gb, gpus=gpus or None, timeout=timeout_min)


def _dir(cwd: str | None) -> Path | None:
    return Path(cwd).expanduser() if cwd else None


def _bench_tools(server: MCPServer, orbit: Orbit) -> None:
    @server.tool(annotations=READ)
    def bench_tasks(
        benchmark: Annotated[str, Field(description="a registered benchmark (bench ls)")],
    ) -> CallToolResult:
        """A benchmark's tasks, their resources, and why unsupported ones cannot run
        (`orbit bench tasks NAME --json`)."""
        return result(orbit.call("bench", "tasks", benchmark))

    @server.tool(annotations=WRITE)
    def bench_run(
        benchmark: Annotated[str, Field(description="a registered benchmark")],
        methods: Annotated[
            list[str],
            Field(min_length=1, description="oracle, empty or NAME=AGENT[,auth=P,model=M]"),
        ],
        tasks: Annotated[list[str] | None, Field(description="default: every supported")] = None,
        seeds: Annotated[int, Field(ge=0, description="trials per task and method")] = 1,
        name: Annotated[str | None, Field(description="a name for the job")] = None,
        folder: Annotated[str | None, Field(description="file the job under")] = None,
        max_running: Annotated[int | None, Field(ge=0, description="trials at once")] = None,
    ) -> CallToolResult:
        """Start a bench job: every task × method × seed is a trial (`orbit bench run
        --json`). Follow it with bench_show."""
        argv = flags(task=tasks, method=methods, seeds=seeds, name=name, folder=folder,
                     max_running=max_running)  # fmt: skip
        return result(orbit.call("bench", "run", benchmark, *argv))

    @server.tool(annotations=READ)
    def bench_show(
        job: Annotated[str, Field(description="job id (j3) or name")],
    ) -> CallToolResult:
        """A bench job's trials: execution, evaluation, score and runs (`orbit bench show
        JOB --json`)."""
        return result(orbit.call("bench", "show", job))

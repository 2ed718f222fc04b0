"""ATIF trajectories (orbit/review/atif.py, orbit/agents/trajectories.py, `orbit session --atif`).

The stand-in CLIs (tests/agent_standins.py) write a real Claude Code transcript and a real Codex
rollout on the host; a hand-written session with a Task subagent (tests/transcripts.py) stands
for what the stand-in cannot do. A real busybox run made through `orbit run` gets them in its
session/, as the agents inside it would write them. Every trajectory is validated by Harbor's
own models (and its trajectory validator); the source JSONL is read here, independently of
Orbit's parsers, to count what a round trip must keep.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_standins import install, run_host
from conftest import Orbit, _cleanup_containers
from docker_setup import BUSYBOX_IMAGE
from transcripts import SESSION, SUB_PROMPT, SUBAGENT, claude_lines, claude_task_lines, codex_lines

from orbit.agents.transcript import read_session
from orbit.review import atif

models = pytest.importorskip("harbor.models.trajectories", reason="scripts/test.sh installs harbor")
validator = pytest.importorskip("harbor.utils.trajectory_validator")

PROMPT = (
    "create notes/a.txt containing hello\n"
    "edit notes/a.txt: hello -> goodbye\n"
    "run: cat notes/a.txt\n"
    "Reply with exactly: all done"
)
CLAUDE = "claude.jsonl"
CODEX = "2026/12/02/rollout-codex.jsonl"
TASK = f"{SESSION}.jsonl"
SUB = f"{SESSION}/subagents/agent-{SUBAGENT}.jsonl"


@dataclass
class Site:
    orbit: Orbit
    run_id: str
    session: Path


def _standin_transcripts(root: Path) -> tuple[Path, Path]:
    """The Claude Code transcript and the Codex rollout the stand-ins write for PROMPT."""
    agents, work = root / "agents", root / "w"
    agents.mkdir()
    work.mkdir()
    (work / ".git").mkdir()  # codex exec wants a repository
    (root / "codex").mkdir()
    install(agents)
    env = {"HOME": str(root), "IS_SANDBOX": "1", "CLAUDE_CONFIG_DIR": str(root / "cfg")}
    env["ANTHROPIC_API_KEY"] = "sk-ant-api03-standin"
    done = run_host(
        agents, "claude", "-p", "--dangerously-skip-permissions", PROMPT, env=env, cwd=work
    )
    assert done.returncode == 0 and done.stdout == "all done\n", done.stderr
    env = {"HOME": str(root), "CODEX_HOME": str(root / "codex"), "CODEX_API_KEY": "sk-proj-x"}
    argv = ["codex", "exec", "--dangerously-bypass-approvals-and-sandbox", PROMPT]
    done = run_host(agents, *argv, env=env, cwd=work)
    assert done.returncode == 0, done.stderr
    (claude,) = (root / "cfg" / "projects").glob("*/*.jsonl")
    (codex,) = (root / "codex" / "sessions").glob("*/*/*/rollout-*.jsonl")
    return claude, codex


@pytest.fixture(scope="module")
def site(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("atif")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    run_id = orbit.submit(
        "--image", BUSYBOX_IMAGE, "--no-project", "-n", "agent-run", "-g", "atif",
        "-t", "kind=agent",
        "--", "sh", "-c", 'echo \'{"step": 1, "loss": 0.5}\' >> "$ORBIT_METRICS"',
    )  # fmt: skip
    status = orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 60)
    assert status["state"] == "succeeded", status
    session = orbit.run_dir(run_id) / "session"
    session.mkdir(exist_ok=True)
    claude, codex = _standin_transcripts(root)
    shutil.copy(claude, session / CLAUDE)
    (session / CODEX).parent.mkdir(parents=True)
    shutil.copy(codex, session / CODEX)
    parent, sub = claude_task_lines()
    (session / TASK).write_text("\n".join(parent) + "\n")
    (session / SUB).parent.mkdir(parents=True)
    (session / SUB).write_text("\n".join(sub) + "\n")
    try:
        yield Site(orbit, run_id, session)
    finally:
        _cleanup_containers(orbit.home)


def valid(traj: dict[str, Any]) -> Any:
    """The trajectory as Harbor's models read it, after its validator passed it too."""
    check = validator.TrajectoryValidator()
    assert check.validate(json.loads(json.dumps(traj))), check.get_errors()
    return models.Trajectory.model_validate(traj)


def session_atif(site: Site, *args: str) -> Any:
    res = site.orbit("session", site.run_id, "--atif", *args)
    assert res.code == 0, res.err
    return res.json()


# --- what the source says, read here without Orbit's parsers --------------------------------------
def claude_source(path: Path) -> dict[str, Any]:
    users, texts, calls, results, usage = [], [], [], {}, {}
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        message = obj.get("message") or {}
        content = message.get("content")
        if obj.get("type") == "user" and isinstance(content, str):
            users.append(content)
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "text":
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                calls.append((block["id"], block["name"], block["input"]))
            elif block.get("type") == "tool_result":
                text = block["content"]
                text = text if isinstance(text, str) else "\n".join(b["text"] for b in text)
                results[block["tool_use_id"]] = text
        if obj.get("type") == "assistant":
            usage[message["id"]] = message["usage"]  # a message's lines repeat its usage
    prompt = sum(
        u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        for u in usage.values()
    )
    completion = sum(u["output_tokens"] for u in usage.values())
    return dict(users=users, texts=texts, calls=calls, results=results, tokens=(prompt, completion))


def codex_source(path: Path) -> dict[str, Any]:
    users, texts, calls, results, total = [], [], [], {}, {}
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        p = obj["payload"]
        if obj["type"] == "event_msg" and p.get("type") == "token_count":
            total = p["info"]["total_token_usage"]
        if obj["type"] != "response_item":
            continue
        if p["type"] == "message":
            text = "\n".join(c["text"] for c in p["content"])
            if p["role"] == "assistant":
                texts.append(text)
            elif not text.startswith("<environment_context>"):
                users.append(text)
        elif p["type"] == "function_call":
            calls.append((p["call_id"], p["name"], json.loads(p["arguments"])))
        elif p["type"] == "custom_tool_call":
            calls.append((p["call_id"], p["name"], {"input": p["input"]}))
        elif p["type"].endswith("_output"):
            results[p["call_id"]] = json.loads(p["output"])["output"]
    tokens = (total["input_tokens"], total["output_tokens"])
    return dict(users=users, texts=texts, calls=calls, results=results, tokens=tokens)


def atif_content(traj: Any) -> dict[str, Any]:
    steps = traj.steps
    calls = [
        (c.tool_call_id, c.function_name, c.arguments) for s in steps for c in s.tool_calls or []
    ]
    results = {
        r.source_call_id: r.content
        for s in steps
        if s.observation
        for r in s.observation.results
        if r.source_call_id
    }
    fm = traj.final_metrics
    return dict(
        users=[s.message for s in steps if s.source == "user"],
        texts=[s.message for s in steps if s.source == "agent" and s.message],
        calls=calls,
        results=results,
        tokens=(fm.total_prompt_tokens, fm.total_completion_tokens),
    )


# --- the tests ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("rel", "source"), [(CLAUDE, claude_source), (CODEX, codex_source)])
def test_a_round_trip_keeps_every_message_tool_call_and_token(
    site: Site, rel: str, source: Any
) -> None:
    traj = valid(session_atif(site, "--file", rel))
    want, got = source(site.session / rel), atif_content(traj)
    assert want["calls"] and want["texts"] == ["all done"] and len(want["calls"]) == 3
    assert got == want
    assert traj.schema_version == atif.SCHEMA_VERSION
    assert traj.agent.name == ("claude-code" if rel == CLAUDE else "codex")
    assert traj.agent.version == ("2.1.332" if rel == CLAUDE else "0.171.0")
    assert traj.final_metrics.total_steps == len(traj.steps)
    # Every line of a real CLI's transcript is understood (bookkeeping such as Claude Code's
    # last-prompt is skipped): no raw step.
    assert "raw_lines" not in traj.extra["orbit"], [s.message for s in traj.steps]
    # Each model call's usage is on its step, and the steps add up to the session's total.
    # (Codex writes a call's token_count after its items, which closes the call, as Harbor
    # reads it.)
    agent_steps = [s for s in traj.steps if s.source == "agent"]
    assert all(s.metrics is not None for s in agent_steps), agent_steps
    assert sum(s.metrics.prompt_tokens for s in agent_steps) == want["tokens"][0]


def test_the_run_outcome_is_in_extra_orbit(site: Site) -> None:
    traj = session_atif(site, "--file", CLAUDE)
    orbit = traj["extra"]["orbit"]
    assert orbit["run"] == site.run_id and orbit["name"] == "agent-run"
    assert (orbit["group"], orbit["tags"], orbit["params"]) == ("atif", {"kind": "agent"}, {})
    assert (orbit["state"], orbit["exit_code"]) == ("succeeded", 0)
    loss = orbit["metrics"]["loss"]
    assert (loss["latest"], loss["min"], loss["max"], loss["count"]) == (0.5, 0.5, 0.5, 1)
    assert (orbit["file"], orbit["format"]) == (CLAUDE, "claude")
    assert "bench" not in orbit  # not a bench trial's run


def test_a_subagent_is_embedded_and_referred_to_from_its_task_call(site: Site) -> None:
    traj = valid(session_atif(site, "--file", TASK))
    (sub,) = traj.subagent_trajectories
    assert sub.trajectory_id == f"agent-{SUBAGENT}"
    assert [s.message for s in sub.steps if s.source == "user"] == [SUB_PROMPT]
    assert [c.function_name for s in sub.steps for c in s.tool_calls or []] == ["Bash"]
    (task,) = [s for s in traj.steps if s.tool_calls and s.tool_calls[0].function_name == "Task"]
    (result,) = task.observation.results
    assert result.source_call_id == "toolu_task1" and result.content == "train.py has 7 lines."
    assert [r.trajectory_id for r in result.subagent_trajectory_ref] == [sub.trajectory_id]
    # 12 + 300 + 1000 prompt tokens per message, two messages; the subagent's counted apart.
    assert traj.final_metrics.total_prompt_tokens == 2 * 1312
    assert sub.final_metrics.total_completion_tokens == 14 + 8


def test_all_gives_every_session_once_with_subagents_inside(site: Site) -> None:
    out = session_atif(site, "--all")
    assert isinstance(out, list)
    files = [t["extra"]["orbit"]["file"] for t in out]
    assert sorted(files) == sorted([CLAUDE, CODEX, TASK])  # the subagent is inside TASK's
    for traj in out:
        valid(traj)
    alone = valid(session_atif(site, "--file", SUB))  # asked for by name: on its own
    assert alone.extra["orbit"]["file"] == SUB and not alone.subagent_trajectories


def test_a_truncated_or_hand_edited_transcript_still_converts(tmp_path: Path) -> None:
    lines = claude_lines()
    edited = json.loads(lines[2])
    edited["timestamp"] = "yesterday, about noon"  # not ISO 8601: left out of its step
    broken = [
        *lines[:2],
        json.dumps(edited),
        "this line is not JSON",
        '{"type": "assistant", "message": {"content": [{"type": "tool_use", "input": 7}]}}',
        *lines[3:],
        '{"type": "result", "usage": {"input_tokens": -5, "output_tokens": true}}',
        lines[4][: len(lines[4]) // 2],  # cut off mid-line, as a crash leaves it
    ]
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(broken))
    traj = valid(atif.trajectory(read_session(path)))
    raw = [s for s in traj.steps if s.extra and s.extra["orbit"].get("raw")]
    assert "this line is not JSON" in [s.message for s in raw]
    assert traj.extra["orbit"]["raw_lines"] == len(raw) >= 2
    # A total that is no count (negative, a boolean) is not passed on as one.
    fm = traj.final_metrics
    assert (fm.total_prompt_tokens, fm.total_completion_tokens) == (None, None)
    # Every tool call is kept, the one without a name too.
    source = [b for line in lines for b in _blocks(line) if b.get("type") == "tool_use"]
    assert len([c for s in traj.steps for c in s.tool_calls or []]) >= len(source)


def _blocks(line: str) -> list[dict[str, Any]]:
    try:
        content = (json.loads(line).get("message") or {}).get("content")
    except ValueError:
        return []
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def test_an_empty_transcript_and_bad_arguments(site: Site, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    traj = valid(atif.trajectory(read_session(empty)))
    assert [s.source for s in traj.steps] == ["system"]
    res = site.orbit("session", site.run_id, "--atif", "--file", "nope.jsonl")
    assert res.code != 0 and len(res.err.strip().splitlines()) == 1, res.err
    assert "no transcript nope.jsonl" in res.err and "Traceback" not in res.err
    both = site.orbit("session", site.run_id, "--atif", "--json")
    assert both.code == 2 and "give one" in both.err, both


def test_a_bench_trials_run_carries_the_trials_score(site: Site) -> None:
    """The run of trial t1 of job j1 (the tags the bench engine gives its runs), with the trial
    file as the engine saves it: its evaluation and score go with the trajectory."""
    from orbit.bench.model import Trial, save_trial
    from orbit.store.home import Home

    run_id = site.orbit.submit(
        "--image", BUSYBOX_IMAGE, "--no-project", "-n", "t1.solve",
        "-t", "bench=j1", "-t", "trial=t1", "-t", "phase=solve", "--", "true",
    )  # fmt: skip
    site.orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 60)
    home = Home.from_environ({"ORBIT_HOME": str(site.orbit.home)})
    trial = Trial("t1", "task", "agent", 0, phase="done", solve_run=run_id, execution="ok")
    trial.evaluation, trial.score = "valid", 0.75
    save_trial(home, "j1", trial)
    session = site.orbit.run_dir(run_id) / "session"
    session.mkdir(exist_ok=True)
    shutil.copy(site.session / CLAUDE, session / CLAUDE)
    res = site.orbit("session", run_id, "--atif")
    assert res.code == 0, res.err
    bench = valid(res.json()).extra["orbit"]["bench"]
    assert bench == {
        "job": "j1",
        "trial": "t1",
        "phase": "solve",
        "evaluation": "valid",
        "score": 0.75,
    }


@pytest.mark.parametrize("lines", [claude_lines, codex_lines])
def test_the_hand_written_transcripts_keep_reasoning_errors_and_results_alone(
    tmp_path: Path, lines: Any
) -> None:
    """tests/transcripts.py's sessions have what the stand-ins do not write: thinking or
    reasoning, a failing tool, a tool result before its use, lines of unknown kinds."""
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines()) + "\n")
    conv = read_session(path)
    traj = valid(atif.trajectory(conv))
    thoughts = [i["text"] for i in conv.items if i["kind"] == "thinking"]
    assert thoughts and all(
        any(t in (s.reasoning_content or "") for s in traj.steps) for t in thoughts
    )
    failed = [i for i in conv.items if i["kind"] == "tool" and i["is_error"]]
    marked = [
        r for s in traj.steps if s.observation for r in s.observation.results
        if r.extra and r.extra["orbit"].get("is_error")
    ]  # fmt: skip
    assert failed and len(marked) == len(failed)
    tools = [i for i in conv.items if i["kind"] == "tool"]
    results = [r for s in traj.steps if s.observation for r in s.observation.results]
    assert len(results) == sum(i["result"] is not None for i in tools)
    assert traj.final_metrics.total_steps == len(traj.steps)

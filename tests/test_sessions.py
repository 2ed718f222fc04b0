"""Agent sessions: Orbit's Claude Code hooks, the `agent` block in run.yaml, the transcript
copied into each run's `session/`, and `orbit session` / `orbit show`.

The agent is a stand-in: a shell script that does what Claude Code does where Orbit depends on
it (docs: code.claude.com/docs/en/hooks, sessions). It runs the SessionStart hook command with
the real payload on stdin and CLAUDE_ENV_FILE set, sources that file before its Bash commands,
writes its transcript JSONL (user/assistant lines whose message.content holds text, tool_use and
tool_result blocks) to transcript_path, launches two real runs, then runs the Stop hook.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from conftest import ORBIT_PY, SMALL, Orbit, git_repo, stop_ticker

SESSION = "5f1c2a9e-7b3d-4e8a-9c21-0d6b3e4f5a17"
ORBIT = f"{sys.executable} {ORBIT_PY}"

STAND_IN = r"""#!/bin/bash
# A stand-in Claude Code session: SessionStart hook, Bash tool calls, transcript, Stop hook.
set -eu
payload() {  # the common hook input fields, plus the event's own
  printf '{"session_id":"%s","transcript_path":"%s","cwd":"%s","permission_mode":"default",'\
'"hook_event_name":"%s"%s}' "$SESSION_ID" "$TRANSCRIPT" "$PWD" "$1" "$2"
}
export CLAUDE_ENV_FILE="$STATE/env-file"
: > "$CLAUDE_ENV_FILE"
payload SessionStart ',"source":"startup","model":"claude-sonnet-4-5"' \
  | sh -c "$HOOK session-start" > "$STATE/session-start.out"
echo "$?" > "$STATE/session-start.rc"
unset CLAUDE_ENV_FILE
line() { printf '%s\n' "$1" >> "$TRANSCRIPT"; }
mkdir -p "$(dirname "$TRANSCRIPT")"
line "$LINE_U1"
line "$LINE_A1"
# Claude Code's Bash tool: each command starts from the env file's exports.
( . "$STATE/env-file"
  for i in 1 2; do $ORBIT run --json $RUN_ARGS -- true > "$STATE/run$i.json"; done )
line "$LINE_U2"
line '{"type":"file-history-snapshot","messageId":"a1","snapshot":{}}'
line '{"type":"weird-new-kind","detail":"from a later version"}'
line "$LINE_A2"
# The transcript is written asynchronously: the next line is still half written at Stop.
printf '%s' '{"type":"user","uuid":"u3","message":{"role":"user","con' >> "$TRANSCRIPT"
payload Stop ',"stop_hook_active":false,"last_assistant_message":"Both runs are queued."' \
  | sh -c "$HOOK session-end"
"""


def transcript_lines(cwd: Path) -> dict[str, str]:
    """The finished lines the stand-in writes, in Claude Code's transcript format."""

    def entry(kind: str, uuid: str, parent: str | None, second: int, content: Any) -> str:
        return json.dumps(
            {
                "type": kind,
                "uuid": uuid,
                "parentUuid": parent,
                "sessionId": SESSION,
                "timestamp": f"2026-11-30T10:00:0{second}.000Z",
                "cwd": str(cwd),
                "version": "2.1.200",
                "isSidechain": False,
                "userType": "external",
                "message": {"role": kind, "content": content},
            }
        )

    tool_use = {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "Bash",
        "input": {"command": "orbit run -- true"},
    }
    result = {
        "tool_use_id": "toolu_01",
        "type": "tool_result",
        "content": "run 1 queued",
        "is_error": False,
    }
    return {
        "LINE_U1": entry("user", "u1", None, 0, "Train twice with lr 0.1"),
        "LINE_A1": entry(
            "assistant",
            "a1",
            "u1",
            1,
            [{"type": "text", "text": "I will launch two runs."}, tool_use],
        ),
        "LINE_U2": entry("user", "u2", "a1", 2, [result]),
        "LINE_A2": entry(
            "assistant", "a2", "u2", 3, [{"type": "text", "text": "Both runs are queued."}]
        ),
    }


def stand_in_agent(orbit: Orbit, tmp_path: Path, cwd: Path, run_args: str) -> dict[str, Path]:
    state = tmp_path / "agent"
    state.mkdir()
    script = state / "claude"
    script.write_text(STAND_IN)
    script.chmod(0o755)
    transcript = tmp_path / "claude-home" / "projects" / "-work" / f"{SESSION}.jsonl"
    env = {
        **orbit.environ,
        "SESSION_ID": SESSION,
        "TRANSCRIPT": str(transcript),
        "STATE": str(state),
        "HOOK": f"{ORBIT} hook",
        "ORBIT": ORBIT,
        "RUN_ARGS": run_args,
        **transcript_lines(cwd),
    }
    for var in ("ORBIT_AGENT_SESSION", "ORBIT_AGENT_HARNESS", "ORBIT_AGENT_TRANSCRIPT"):
        env.pop(var, None)
    proc = subprocess.run(
        [str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return {"state": state, "transcript": transcript}


def hook(
    orbit: Orbit, event: str, payload: Any, cwd: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, ORBIT_PY, "hook", event],
        input=text,
        cwd=cwd,
        env={**orbit.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def finished_lines(path: Path) -> bytes:
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1]


def test_stand_in_session_two_runs(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    got = stand_in_agent(orbit, tmp_path, repo, f"--image {busybox} --cpus 1 --mem 0.25")
    state, transcript = got["state"], got["transcript"]
    assert (state / "session-start.rc").read_text().strip() == "0"
    # No runs of this repository before the session: nothing added to the context.
    assert (state / "session-start.out").read_text() == ""
    env_file = (state / "env-file").read_text()
    assert f"export ORBIT_AGENT_SESSION={SESSION}\n" in env_file
    assert "export ORBIT_AGENT_HARNESS=claude-code\n" in env_file
    assert f"export ORBIT_AGENT_TRANSCRIPT={transcript}\n" in env_file

    ids = [str(json.loads((state / f"run{i}.json").read_text())["id"]) for i in (1, 2)]
    assert len(set(ids)) == 2
    index = json.loads((orbit.home / "agents" / "sessions" / f"{SESSION}.json").read_text())
    assert index["runs"] == ids
    finished = finished_lines(transcript)
    assert finished != transcript.read_bytes()  # the half-written line stayed behind
    copies = [orbit.run_dir(i) / "session" / f"{SESSION}.jsonl" for i in ids]
    for run_id, copy in zip(ids, copies, strict=True):
        spec = yaml.safe_load((orbit.run_dir(run_id) / "run.yaml").read_text())
        assert spec["agent"] == {
            "harness": "claude-code",
            "session_id": SESSION,
            "transcript_path": str(transcript),
        }
        assert copy.read_bytes() == finished

    # A second Stop with nothing new changes nothing.
    stop = {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": str(repo),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    before = [(c.stat().st_mtime_ns, c.stat().st_size) for c in copies]
    res = hook(orbit, "session-end", stop, repo)
    assert (res.returncode, res.stdout) == (0, "")
    assert [(c.stat().st_mtime_ns, c.stat().st_size) for c in copies] == before

    # The half line is finished and another follows: only the new bytes are appended.
    with open(transcript, "a") as f:
        f.write('tent":"and now?"}}\n')
        f.write('{"type":"assistant","message":{"role":"assistant","content":"Done."}}\n')
    res = hook(
        orbit,
        "session-end",
        {**stop, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"},
        repo,
    )
    assert res.returncode == 0
    for copy in copies:
        assert copy.read_bytes() == transcript.read_bytes()

    # orbit session: the turns, the tool call and its result; unknown lines raw.
    shown = orbit("session", ids[0])
    assert shown.code == 0, shown.err
    for text in (
        "Train twice with lr 0.1",
        "I will launch two runs.",
        "Bash",
        "orbit run -- true",
        "run 1 queued",
        "Both runs are queued.",
        "and now?",
        "Done.",
        "weird-new-kind",
    ):
        assert text in shown.out, (text, shown.out)
    assert "file-history-snapshot" not in shown.out
    assert shown.out.index("Train twice") < shown.out.index("Both runs are queued.")
    (copied,) = orbit("session", ids[1], "--json").json()["transcripts"]
    items = copied["items"]
    kinds = [i["kind"] for i in items]
    # The tool call and its result are one item.
    assert kinds == ["user", "assistant", "tool", "raw", "assistant", "user", "assistant"]
    assert items[2]["input"] == {"command": "orbit run -- true"}
    assert items[2]["command"] == "orbit run -- true" and items[2]["result"] == "run 1 queued"
    assert copied["file"] == f"{SESSION}.jsonl" and copied["format"] == "claude"

    # orbit show names the session.
    show = orbit("show", ids[0])
    assert f"claude-code {SESSION} (6 messages" in show.out, show.out
    assert orbit("show", ids[0], "--json").json()["session"]["messages"] == 6

    # Now the repository has runs: a new session starts with its lessons digest in context.
    for run_id in ids:
        orbit.wait_for(run_id, lambda s: s["state"] in ("succeeded", "failed"))
    env_file2 = tmp_path / "env2"
    start = {
        "session_id": "other-session",
        "transcript_path": str(tmp_path / "t2.jsonl"),
        "cwd": str(repo),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    res = hook(orbit, "session-start", start, repo, CLAUDE_ENV_FILE=str(env_file2))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert f"# Lessons of project {repo.resolve()}" in out["additionalContext"]
    assert "2 runs" in out["additionalContext"]
    assert len(out["additionalContext"]) <= 4200
    assert "ORBIT_AGENT_SESSION=other-session" in env_file2.read_text()


def test_broken_payload_writes_nothing(orbit: Orbit, tmp_path: Path) -> None:
    env_file = tmp_path / "env-file"
    env_file.write_text("")
    for event in ("session-start", "session-end"):
        for payload in ("not json", "[1]", '{"session_id": "../../etc"}', ""):
            res = hook(orbit, event, payload, tmp_path, CLAUDE_ENV_FILE=str(env_file))
            assert (res.returncode, res.stdout, res.stderr) == (0, "", ""), (event, payload)
    assert env_file.read_text() == ""
    assert not (orbit.home / "agents").exists()
    assert "failed" in (orbit.home / "runtime" / "hooks.log").read_text()


def test_stop_of_a_session_without_runs_or_transcript(orbit: Orbit, tmp_path: Path) -> None:
    stop = {
        "session_id": SESSION,
        "transcript_path": str(tmp_path / "missing.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "Stop",
    }
    res = hook(orbit, "session-end", stop, tmp_path)
    assert (res.returncode, res.stdout) == (0, "")


def test_session_unknown_run_and_run_without_session(orbit: Orbit, busybox: str) -> None:
    res = orbit("session", "999")
    assert res.code == 3 and res.err.count("\n") == 1, res.err
    run_id = orbit.submit("--image", busybox, *SMALL, "--", "true")
    spec = yaml.safe_load((orbit.run_dir(run_id) / "run.yaml").read_text())
    assert "agent" not in spec
    res = orbit("session", run_id)
    assert res.code == 3 and "no agent session" in res.err
    assert "session" not in orbit("show", run_id, "--json").json()


def test_copy_is_bounded_and_resumes(tmp_path: Path) -> None:
    import time

    from orbit.agents.hooks import copy_new_lines

    src, dest = tmp_path / "t.jsonl", tmp_path / "copy.jsonl"
    line = json.dumps({"type": "user", "message": {"role": "user", "content": "x" * 1000}})
    src.write_text((line + "\n") * 5000 + '{"partial')  # ~5 MB and a torn line
    # A deadline already passed copies nothing; one in the future copies every whole line.
    assert copy_new_lines(src, dest, time.monotonic() - 1) == 0
    # A deadline that passes during the first chunk stops the copy after that chunk.
    first = copy_new_lines(src, dest, time.monotonic() + 0.002)
    assert 0 < first < src.stat().st_size
    assert dest.read_bytes().endswith(b"\n")
    while copy_new_lines(src, dest, time.monotonic() + 5):
        pass
    assert dest.read_bytes() == finished_lines(src)
    # One line longer than a read chunk is copied whole.
    with open(src, "a") as f:
        f.write('"}\n' + "y" * (3 << 20) + "\n")
    copy_new_lines(src, dest, time.monotonic() + 5)
    assert dest.read_bytes() == src.read_bytes()


def test_concurrent_runs_all_indexed(orbit: Orbit, tmp_path: Path) -> None:
    from orbit.store.agent import read_session_index, record_session_run
    from orbit.store.home import Home

    home = Home.from_environ(orbit.environ)
    agent = {"harness": "claude-code", "session_id": SESSION, "transcript_path": None}
    code = (
        "import sys\nfrom orbit.store.agent import record_session_run\n"
        "from orbit.store.home import Home\nimport os\n"
        "h = Home.from_environ(os.environ)\n"
        "for i in range(int(sys.argv[1]), int(sys.argv[1]) + 20):\n"
        f"    record_session_run(h, {agent!r}, str(i))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(k * 100)],
            env={**orbit.environ, "PYTHONPATH": str(Path(ORBIT_PY).parent)},
        )
        for k in range(4)
    ]
    assert all(p.wait(60) == 0 for p in procs)
    record_session_run(home, agent, "0")  # already there: not twice
    runs = read_session_index(home, SESSION)["runs"]
    assert sorted(runs, key=int) == sorted(
        {str(k * 100 + i) for k in range(4) for i in range(20)}, key=int
    )
    assert os.path.exists(home.root / "agents" / "sessions" / f"{SESSION}.json")


def test_sweep_from_a_session_indexes_every_run(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"type":"user","message":{"role":"user","content":"sweep"}}\n')
    orbit.environ.update(
        ORBIT_AGENT_SESSION="sweep-session",
        ORBIT_AGENT_HARNESS="claude-code",
        ORBIT_AGENT_TRANSCRIPT=str(transcript),
    )
    res = orbit(
        "sweep",
        "--json",
        "-g",
        "s",
        "-p",
        "x=1,2,3",
        "--image",
        busybox,
        *SMALL,
        "--",
        "echo",
        "{x}",
    )
    assert res.code == 0, res.err
    ids = [str(r["id"]) for r in res.json()["runs"]]
    index = json.loads((orbit.home / "agents" / "sessions" / "sweep-session.json").read_text())
    assert index["runs"] == ids
    stop = {
        "session_id": "sweep-session",
        "transcript_path": str(transcript),
        "hook_event_name": "Stop",
        "cwd": str(tmp_path),
    }
    assert hook(orbit, "session-end", stop, tmp_path).returncode == 0
    for run_id in ids:
        copy = orbit.run_dir(run_id) / "session" / "sweep-session.jsonl"
        assert copy.read_bytes() == transcript.read_bytes()
    # A different transcript under the same path is not appended to the old copy.
    transcript.write_text('{"type":"user","message":{"role":"user","content":"other"}}\n' * 3)
    assert hook(orbit, "session-end", stop, tmp_path).returncode == 0
    copy = orbit.run_dir(ids[0]) / "session" / "sweep-session.jsonl"
    assert b"other" not in copy.read_bytes()
    assert "no longer starts with its copy" in (orbit.home / "runtime" / "hooks.log").read_text()


def installed_hook(settings: Path, event: str) -> str:
    """The command string `orbit plugin install claude` wrote for `event`."""
    data = json.loads(settings.read_text())
    (command,) = [h["command"] for g in data["hooks"][event] for h in g["hooks"]]
    return str(command)


def run_as_claude(
    command: str, payload: dict[str, Any], cwd: Path, env: dict[str, str]
) -> dict[str, Any]:
    """Run a hook command as Claude Code does: `sh -c COMMAND`, the payload on stdin, in the
    project directory. It must exit 0, say nothing on stderr, and print JSON or nothing."""
    proc = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(payload),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def test_installed_hooks_reach_their_home(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    """The hooks as installed, run the way Claude Code runs them, in an environment with no
    ORBIT_HOME and another HOME: the digest of the repository's runs in the home they were
    installed from, naming its groups; the session's own runs go to that home and get their
    transcript; once the home is moved or deleted, one clear line instead of an empty digest."""
    repo = git_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    orbit.environ["HOME"] = str(tmp_path / "installer")
    orbit.environ.pop("CLAUDE_CONFIG_DIR", None)
    assert orbit("plugin", "install", "claude").code == 0
    settings = tmp_path / "installer" / ".claude" / "settings.json"
    start_cmd, stop_cmd = (installed_hook(settings, e) for e in ("SessionStart", "Stop"))

    small = ("--image", busybox, "--cpus", "1", "--mem", "0.25")
    ids = []
    for group in ("nb", "nb", "nb-next", None):
        grouping = ("-g", group) if group else ()
        res = orbit("run", "--json", *small, *grouping, "--", "true", cwd=repo)
        assert res.code == 0, res.err
        ids.append(str(res.json()["id"]))
    for run_id in ids:
        orbit.wait_for(run_id, lambda s: s["state"] in ("succeeded", "failed"))

    env_file = tmp_path / "claude-env"
    env_file.write_text("export KEPT=1\n")
    transcript = tmp_path / "transcript.jsonl"
    agent_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "agent-home"),
        "CLAUDE_PROJECT_DIR": str(repo),
        "CLAUDE_ENV_FILE": str(env_file),
        # The command runs `python -P -m orbit`: this checkout must be the orbit it imports.
        "PYTHONPATH": str(Path(ORBIT_PY).parent),
    }
    start = {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": "SessionStart",
        "source": "startup",
        "model": "claude-sonnet-4-5",
    }
    out = run_as_claude(start_cmd, start, repo, agent_env)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    context = out["additionalContext"]
    home = orbit.home.resolve()
    assert f"4 runs of this repository in ORBIT_HOME={home}" in context, context
    assert "- nb (`orbit lessons -g nb`): 2 runs, 2 succeeded\n" in context
    assert "- nb-next (`orbit lessons -g nb-next`): 1 run, 1 succeeded\n" in context
    assert "- 1 run in no group\n" in context
    assert f"# Lessons of project {repo.resolve()}" in context
    exported = env_file.read_text()
    assert exported.startswith("export KEPT=1\n")
    assert f"export ORBIT_HOME={shlex.quote(str(home))}\n" in exported

    # A Bash command of the session (the env file sourced first) launches a run: it lands in
    # the hooks' home, and the Stop hook copies the transcript into it.
    launch = f'. "$CLAUDE_ENV_FILE" && {shlex.quote(sys.executable)} {ORBIT_PY} run --json '
    launch += " ".join(shlex.quote(a) for a in (*small, "-g", "nb", "--", "true"))
    proc = subprocess.run(
        ["sh", "-c", launch], cwd=repo, env=agent_env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    run_id = str(json.loads(proc.stdout)["id"])
    orbit.wait_for(run_id, lambda s: s["state"] in ("succeeded", "failed"))
    transcript.write_text(transcript_lines(repo)["LINE_U1"] + "\n")
    stop = {**start, "hook_event_name": "Stop", "stop_hook_active": False}
    del stop["source"], stop["model"]
    assert run_as_claude(stop_cmd, stop, repo, agent_env) == {}
    copy = orbit.run_dir(run_id) / "session" / f"{SESSION}.jsonl"
    assert copy.read_bytes() == transcript.read_bytes()

    # The home moved away: one line for the agent and the user; nothing made in its place.
    stop_ticker(orbit.home)
    moved = tmp_path / "moved-home"
    orbit.home.rename(moved)
    line = (
        f"Orbit: the home {home} this hook was installed for is missing; "
        "reinstall with `orbit plugin install claude`"
    )
    for _ in ("moved", "deleted"):
        got = run_as_claude(start_cmd, start, repo, agent_env)
        assert got == {
            "systemMessage": line,
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": line},
        }
        assert run_as_claude(stop_cmd, stop, repo, agent_env) == {"systemMessage": line}
        assert not home.exists()
        if moved.exists():
            moved.rename(home)  # back: the hooks find it again
            context = run_as_claude(start_cmd, start, repo, agent_env)["hookSpecificOutput"]
            assert "- nb (`orbit lessons -g nb`): 3 runs" in context["additionalContext"]
            shutil.rmtree(home)


def test_a_session_with_another_orbit_home_is_told(orbit: Orbit, tmp_path: Path) -> None:
    """An environment whose ORBIT_HOME is not the hooks' home: the env file is left to it, and
    the context says where the session's runs go."""
    orbit.environ["HOME"] = str(tmp_path / "installer")
    assert orbit("plugin", "install", "claude").code == 0
    command = installed_hook(tmp_path / "installer" / ".claude" / "settings.json", "SessionStart")
    env_file = tmp_path / "claude-env"
    other = tmp_path / "other-home"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "ORBIT_HOME": str(other),
        "CLAUDE_ENV_FILE": str(env_file),
        "PYTHONPATH": str(Path(ORBIT_PY).parent),
    }
    other.mkdir()
    payload = {"session_id": SESSION, "cwd": str(tmp_path), "hook_event_name": "SessionStart"}
    context = run_as_claude(command, payload, tmp_path, env)["hookSpecificOutput"]
    assert context["additionalContext"].startswith(
        f"Orbit: this session's ORBIT_HOME is {other.resolve()}, but its hooks report to "
        f"{orbit.home.resolve()}"
    )
    assert "ORBIT_HOME" not in env_file.read_text()
    assert f"ORBIT_AGENT_SESSION={SESSION}" in env_file.read_text()


def test_a_hook_with_an_unusable_home_says_so(orbit: Orbit, tmp_path: Path) -> None:
    """A home in the way of a file, or whose config.yaml is broken: one line, exit 0."""
    payload = json.dumps({"session_id": SESSION, "cwd": str(tmp_path)})
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    res = hook(orbit, "session-start", payload, tmp_path)
    assert (res.returncode, res.stdout) == (0, "")  # a usable home, nothing of this repo
    for home, expected in ((not_a_dir, "is not a directory"), (orbit.home, "cannot be used")):
        if home == orbit.home:
            (orbit.home / "config.yaml").write_text("format: 1\nno_such_setting: 3\n")
        proc = subprocess.run(
            [sys.executable, ORBIT_PY, "hook", "session-end", "--home", str(home)],
            input=payload,
            cwd=tmp_path,
            env=orbit.environ,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        (message,) = json.loads(proc.stdout).values()
        assert message.startswith(f"Orbit: the home {home.resolve()} this hook was installed for")
        assert expected in message and "\n" not in message

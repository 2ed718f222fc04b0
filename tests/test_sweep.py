"""`orbit sweep`, `orbit wait -g` progress, `ps -g` and `rm -g`, against a real Docker engine."""

from __future__ import annotations

import io
import itertools
import os
import shutil
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from conftest import Orbit, Result

from orbit.cli import main
from orbit.env import Env
from orbit.errors import ExitCode
from orbit.store.files import read_jsonl, read_yaml
from orbit.store.groups import group_dir
from orbit.store.home import Home
from orbit.store.locks import release, try_lock

SMALL = ("--no-project", "--cpus", "0.1", "--mem", "0.1")
FINAL_EVENTS = {"succeeded", "failed", "cancelled", "lost"}


def sweep(orbit: Orbit, image: str, *args: str) -> Result:
    return orbit("sweep", *SMALL, "--image", image, *args)


def spec(orbit: Orbit, run_id: str) -> dict:
    return read_yaml(orbit.run_dir(run_id) / "run.yaml")


def log(orbit: Orbit, run_id: str) -> str:
    return (orbit.run_dir(run_id) / "log.txt").read_text()


def run_ids(orbit: Orbit) -> list[str]:
    runs = orbit.home / "runs"
    if not runs.exists():
        return []
    return sorted((p.name for p in runs.iterdir() if not p.name.startswith(".")), key=int)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_2x3_sweep_makes_six_runs_with_their_params(orbit: Orbit, busybox: str) -> None:
    res = sweep(
        orbit,
        busybox,
        "-g",
        "lr",
        "-p",
        "lr=1e-4,3e-4",
        "-p",
        "seed=1,2,3",
        "-n",
        "lr{lr}-s{seed}",
        "--max-running",
        "4",
        "--json",
        "--",
        "sh",
        "-c",
        "echo {lr} {seed} {{lr}}",
    )
    assert res.code == 0, res.err
    out = res.json()
    assert set(out) == {"group", "runs"} and out["group"] == "lr"
    assert [set(r) for r in out["runs"]] == [{"id", "name", "params"}] * 6
    combos = [(lr, seed) for lr in ("1e-4", "3e-4") for seed in ("1", "2", "3")]
    assert [r["params"] for r in out["runs"]] == [{"lr": lr, "seed": s} for lr, s in combos]
    assert [r["name"] for r in out["runs"]] == [f"lr{lr}-s{s}" for lr, s in combos]

    waited = orbit("wait", "-g", "lr")
    assert waited.code == 0, waited.out + waited.err
    for entry, (lr, seed) in zip(out["runs"], combos, strict=True):
        recorded = spec(orbit, entry["id"])
        assert recorded["params"] == {"lr": lr, "seed": seed}  # strings, as given
        assert recorded["command"] == ["sh", "-c", f"echo {lr} {seed} {{lr}}"]
        assert recorded["name"] == f"lr{lr}-s{seed}"
        assert recorded["group"] == "lr" and recorded["group_cap"] == 4
        assert log(orbit, entry["id"]) == f"{lr} {seed} {{lr}}\n"
    # The parameters are in the record people read, too.
    shown = orbit("show", "--json", out["runs"][5]["id"]).json()
    assert shown["params"] == {"lr": "3e-4", "seed": "3"}
    # Values in YAML stay strings for every reader ("1e-4" is quoted in run.yaml).
    assert 'lr: "1e-4"' in (orbit.run_dir(out["runs"][0]["id"]) / "run.yaml").read_text()


def test_sweep_text_output_and_one_shared_snapshot(
    orbit: Orbit, busybox: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import git_repo

    project = git_repo(orbit.cwd / "proj", {"train.py": "print('hi')\n"})
    # The real git, behind a script that notes each call: the snapshot is taken once.
    calls = tmp_path / "git-calls"
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    (wrapper / "git").write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("git")} "$@"\n'
    )
    (wrapper / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}{os.environ['PATH']}")
    res = orbit(
        "sweep",
        "--cpus",
        "0.1",
        "--mem",
        "0.1",
        "--image",
        busybox,
        "--project",
        str(project),
        "-g",
        "g",
        "-p",
        "x=a,b,c",
        "--",
        "cat",
        "/workspace/train.py",
    )
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0] == "submitted 3 runs to group g"
    assert lines[1].split() == ["ID", "NAME", "STATE", "PARAMS"]
    assert [line.split()[0] for line in lines[2:]] == ["1", "2", "3"]
    assert lines[2].endswith("x=a") and lines[3].endswith("x=b") and lines[4].endswith("x=c")
    snaps = {spec(orbit, i)["project"]["snapshot"] for i in ("1", "2", "3")}
    assert len(snaps) == 1
    listings = [c for c in calls.read_text().splitlines() if c.startswith("-C") and "--cached" in c]
    assert len(listings) == 1, listings
    assert orbit("wait", "-g", "g").code == 0


def test_a_sweep_builds_its_dockerfile_once(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    ctx = tmp_path / "sweepimg"
    ctx.mkdir()
    (ctx / "nonce").write_text(uuid.uuid4().hex)  # a new context: the image is really built
    (ctx / "Dockerfile").write_text(f"FROM {busybox}\nRUN echo built-for-the-sweep\n")
    try:
        res = orbit(
            "sweep", *SMALL, "--dockerfile", str(ctx / "Dockerfile"), "-g", "b", "-p", "x=1,2,3",
            "--", "echo", "{x}",
        )  # fmt: skip
        assert res.code == 0, res.err
        specs = [spec(orbit, i) for i in ("1", "2", "3")]
        # One build for all: had each run built or looked up its own, the later ones would
        # say `reused: true` and have no build.log.
        assert len({s["image"] for s in specs}) == 1
        assert all(s["build"]["reused"] is False for s in specs)
        for i in ("1", "2", "3"):
            assert "built-for-the-sweep" in (orbit.run_dir(i) / "build.log").read_text()
        assert [s["command"] for s in specs] == [["echo", "1"], ["echo", "2"], ["echo", "3"]]
        assert orbit("wait", "-g", "b").code == 0
    finally:
        import docker

        for image in docker.from_env().images.list(name="orbit-build/sweepimg"):
            for tag in image.tags:
                docker.from_env().images.remove(tag, force=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-p", "lr=1,2", "--", "echo", "{lr}"), "a sweep needs a group: -g GROUP"),
        (("-g", "g", "--", "echo", "hi"), "give at least one parameter: -p KEY=V1,V2"),
        (
            ("-g", "g", "-p", "lr=1,2", "--", "echo", "{seed}"),
            "unknown placeholder {seed} in the command: the parameters are lr "
            "(write {{ and }} for literal braces)",
        ),
        (
            ("-g", "g", "-p", "lr=1,2", "-n", "r{rate}", "--", "echo", "{lr}"),
            "unknown placeholder {rate} in the name (-n)",
        ),
        (("-g", "g", "-p", "lr=1", "-p", "lr=2", "--", "echo"), "-p lr is given twice"),
        (("-g", "g", "-p", "lr=1,,2", "--", "echo"), "-p lr: empty value in '1,,2'"),
        (("-g", "g", "-p", "lr=1,1", "--", "echo"), "-p lr: value '1' is given twice"),
        (("-g", "g", "-p", "=1", "--", "echo"), "-p expects KEY=V1,V2"),
        (("-g", "g", "-p", "lr", "--", "echo"), "-p expects KEY=V1,V2"),
        (
            ("-g", "g", "-p", "a=1,2", "-p", "b=3,4", "-n", "r{a}", "--", "echo"),
            "-n 'r{a}' gives several runs the name 'r1'",
        ),
        (("-g", "g", "-p", "a=1", "--max-running", "0", "--", "echo"), "--max-running"),
        (("-g", "g", "-p", "a=1"), "no command given"),
        (("-g", "g", "-p", "a=1", "--folder", "../up", "--", "echo"), "not folder names"),
    ],
    ids=[
        "no-group",
        "no-param",
        "unknown-in-command",
        "unknown-in-name",
        "key-twice",
        "empty-value",
        "value-twice",
        "empty-key",
        "no-equals",
        "names-collide",
        "cap-zero",
        "no-command",
        "folder-dotdot",
    ],
)
def test_bad_sweeps_are_one_line_errors_and_write_nothing(
    orbit: Orbit, busybox: str, args: tuple[str, ...], message: str
) -> None:
    res = sweep(orbit, busybox, *args)
    assert res.code == ExitCode.USAGE, res.err
    assert res.err.startswith("orbit: ") and message in res.err
    assert res.err.count("\n") == 1
    assert run_ids(orbit) == []


def test_braces_that_are_escaped_or_not_placeholders(orbit: Orbit, busybox: str) -> None:
    # awk's braces must be doubled; a lone brace is kept as it is.
    res = sweep(
        orbit,
        busybox,
        "-g",
        "b",
        "-p",
        "n=7",
        "-w",
        "--",
        "sh",
        "-c",
        "echo {n} | awk '{{print $1 + 1}}'; echo }",
    )
    assert res.code == 0, res.err
    assert log(orbit, "1") == "8\n}\n"
    bad = sweep(orbit, busybox, "-g", "b", "-p", "n=7", "--", "awk", "{print}")
    assert bad.code == ExitCode.USAGE and "unknown placeholder {print}" in bad.err


def test_wait_g_shows_progress_lines_and_exits_1_when_one_failed(
    orbit: Orbit, busybox: str
) -> None:
    res = sweep(orbit, busybox, "-g", "ok3", "-p", "n=1,2,3", "--", "sh", "-c", "test {n} -ne 2")
    assert res.code == 0, res.err
    waited = orbit("wait", "-g", "ok3")
    assert waited.code == ExitCode.RUN_FAILED
    assert "\r" not in waited.err  # not a terminal: plain lines
    lines = waited.err.splitlines()
    assert lines and all(line.startswith("ok3: ") for line in lines)
    assert lines[-1] == "ok3: 2 succeeded, 1 failed"
    assert all(a != b for a, b in itertools.pairwise(lines))  # only changes
    assert waited.out.splitlines() == [
        "run 1 succeeded",
        "run 2 failed: exit code 1",
        "run 3 succeeded",
    ]
    # --json is unchanged and prints no progress.
    as_json = orbit("wait", "-g", "ok3", "--json")
    assert as_json.code == ExitCode.RUN_FAILED and as_json.err == ""
    assert as_json.json()["ok"] is False
    assert [r["state"] for r in as_json.json()["runs"]] == ["succeeded", "failed", "succeeded"]


def test_wait_g_on_a_terminal_rewrites_one_line(orbit: Orbit, busybox: str) -> None:
    assert sweep(orbit, busybox, "-g", "t", "-p", "n=1,2", "--", "sleep", "0.5").code == 0
    err = Tty()
    env = Env(
        environ=dict(orbit.environ),
        stdin=io.StringIO(),
        stdout=io.StringIO(),
        stderr=err,
        cwd=orbit.cwd,
    )
    assert main(["wait", "-g", "t"], env) == 0
    text = err.getvalue()
    assert text.startswith("\rt: ") and text.endswith("t: 2 succeeded\x1b[K\n")
    assert text.count("\n") == 1  # one line, rewritten in place


def test_sweep_w_waits_for_its_runs(orbit: Orbit, busybox: str) -> None:
    res = sweep(
        orbit, busybox, "-g", "w", "-p", "code=0,3", "-w", "--json", "--", "sh", "-c", "exit {code}"
    )
    assert res.code == ExitCode.RUN_FAILED, res.err
    out = res.json()
    assert set(out) == {"group", "ok", "runs"} and out["ok"] is False
    assert [set(r) for r in out["runs"]] == [
        {"id", "name", "params", "state", "reason", "exit_code", "error_excerpt", "log_note"}
    ] * 2
    assert [(r["params"]["code"], r["state"], r["exit_code"]) for r in out["runs"]] == [
        ("0", "succeeded", 0),
        ("3", "failed", 3),
    ]
    text = sweep(orbit, busybox, "-g", "w2", "-p", "n=1", "-w", "--", "true")
    assert text.code == 0
    assert text.out.splitlines()[-1] == "run 3 succeeded"
    assert text.err.splitlines()[-1] == "w2: 1 succeeded"


def test_ps_g_and_rm_g_with_typed_confirmation(orbit: Orbit, busybox: str) -> None:
    assert sweep(orbit, busybox, "-g", "done", "-p", "n=1,2", "--", "true").code == 0
    assert orbit("wait", "-g", "done").code == 0
    other = orbit.submit(*SMALL, "--image", busybox, "-g", "other", "--", "sleep", "30")

    # ps -g lists the group's active runs (none left), ps -a -g all of them.
    assert orbit("ps", "-g", "done", "--json").json() == {"runs": [], "interrupted": []}
    assert orbit("ps", "-g", "done").out == (
        "no active runs in group done (orbit ps -a -g done lists all)\n"
    )
    listed = orbit("ps", "-a", "-g", "done", "--json").json()["runs"]
    assert [(r["id"], r["state"]) for r in listed] == [("1", "succeeded"), ("2", "succeeded")]
    assert [r["id"] for r in orbit("ps", "-g", "other", "--json").json()["runs"]] == [other]

    def rm_typing(*args: str, typed: str) -> int:
        stdin = Tty(typed)
        env = Env(
            environ=dict(orbit.environ),
            stdin=stdin,
            stdout=io.StringIO(),
            stderr=io.StringIO(),
            cwd=orbit.cwd,
        )
        return main(["rm", *args], env)

    # Without a terminal and without --yes: refused. A wrong answer: refused. Nothing deleted.
    assert orbit("rm", "-g", "done").code == ExitCode.USAGE
    assert rm_typing("-g", "done", typed="yes\n") == ExitCode.USAGE
    assert run_ids(orbit) == ["1", "2", other]
    # An active run in the group: nothing is deleted.
    assert rm_typing("-g", "other", typed="other\n") == ExitCode.CONFLICT
    # Typing the group's name deletes exactly its runs.
    assert rm_typing("-g", "done", typed="done\n") == 0
    assert run_ids(orbit) == [other]
    assert orbit("ps", "-a", "-g", "done", "--json").json() == {"runs": [], "interrupted": []}
    assert orbit("wait", "-g", "done").code == ExitCode.NOT_FOUND


def _overlap(orbit: Orbit, ids: list[str]) -> int:
    """The most runs holding a lease at once, from each run's admitted and final events."""
    points: list[tuple[datetime, int]] = []
    for run_id in ids:
        events = orbit.events(run_id)
        start = next(e["time"] for e in events if e["event"] == "admitted")
        end = next(e["time"] for e in events if e["event"] in FINAL_EVENTS)
        points += [(datetime.fromisoformat(start), 1), (datetime.fromisoformat(end), -1)]
    most = now = 0
    for _, step in sorted(points, key=lambda p: (p[0], p[1])):  # ends before starts at a tie
        now += step
        most = max(most, now)
    return most


def test_max_running_caps_the_group(orbit: Orbit, busybox: str) -> None:
    res = sweep(
        orbit,
        busybox,
        "-g",
        "cap",
        "-p",
        "n=1,2,3,4,5,6",
        "--max-running",
        "2",
        "--json",
        "--",
        "sleep",
        "1",
    )
    assert res.code == 0, res.err
    ids = [r["id"] for r in res.json()["runs"]]
    assert all(spec(orbit, i)["group_cap"] == 2 for i in ids)
    assert orbit("wait", "-g", "cap").code == 0
    assert _overlap(orbit, ids) <= 2


def _has_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open (it is waiting for that lock)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.path.realpath(fd) == str(path.resolve()) for fd in fds.iterdir())
    except OSError:  # a descriptor closed while looked at
        return False


def _wait_for(check, proc, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_sweep_killed_before_its_runs_appear_leaves_no_debris_and_its_group_says_so(
    orbit: Orbit, busybox: str
) -> None:
    """kill -9 of a real `orbit sweep` while it stages its runs: the next command clears what
    it left (empty and hidden run directories, --pass-env secrets), and `wait -g`, `ps -g`
    say the group lacks a launch of 200 runs instead of calling it complete."""
    orbit.environ["SWEEP_TOKEN"] = "hunter22"
    assert sweep(orbit, busybox, "-g", "sw", "-p", "i=1", "--", "true").code == 0
    values = ",".join(str(i) for i in range(200))
    proc = orbit.proc(
        "sweep", *SMALL, "--image", busybox, "--pass-env", "SWEEP_TOKEN", "-g", "sw",
        "-p", f"i={values}", "--", "echo", "{i}",
    )  # fmt: skip
    runs, secrets = orbit.home / "runs", orbit.home / "runtime" / "secrets"
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if sum(n.startswith(".staging-") for n in os.listdir(runs)) >= 5 and any(secrets.iterdir()):
            break
        time.sleep(0.001)
    proc.kill()
    proc.wait()
    assert proc.returncode == -9  # killed, not finished
    waited = orbit("wait", "-g", "sw")
    assert waited.code == ExitCode.RUN_FAILED
    assert "run 1 succeeded" in waited.out
    assert "group sw: a launch of 200 runs was killed before its runs were written" in waited.err
    assert sorted(os.listdir(runs)) == ["1"] and list(secrets.iterdir()) == []
    listed = orbit("ps", "-a", "-g", "sw", "--json").json()
    assert [r["id"] for r in listed["runs"]] == ["1"]
    assert [x["count"] for x in listed["interrupted"]] == [200]
    assert "a launch of 200 runs was killed" in orbit("ps", "-g", "sw").err
    # Killed before its batch is recorded (held in --objective's write of group.yaml): it
    # leaves no launch line, so it neither claims runs that never came nor hides the note.
    folder = group_dir(Home.from_environ(orbit.environ), "sw")
    held = try_lock(folder / ".lock")
    assert held is not None
    try:
        early = orbit.proc("sweep", *SMALL, "--image", busybox, "-g", "sw", "--objective",
                           "loss:min", "-p", "i=7,8", "--", "true")  # fmt: skip
        _wait_for(lambda: _has_open(early.pid, folder / ".lock"), early)
        early.kill()
        early.wait()
    finally:
        release(held)
    assert len(read_jsonl(folder / "launches.jsonl")) == 2  # the first sweep and the killed one
    waited = orbit("wait", "-g", "sw")
    assert waited.code == ExitCode.RUN_FAILED, waited.err
    assert "group sw: a launch of 200 runs was killed before its runs were written" in waited.err
    assert sorted(os.listdir(runs)) == ["1"]
    # Launching the group again supersedes the note.
    assert sweep(orbit, busybox, "-g", "sw", "-p", "i=2", "--", "true").code == 0
    again = orbit("wait", "-g", "sw", "--json")
    assert again.code == 0 and again.json()["interrupted"] == []

"""External bench adapters: protocol 1 over stdin/stdout (orbit/bench/external.py), with the
example adapter of examples/bench-adapters/arith and adapters written here that break the
protocol in each way Orbit must report in one line."""

from __future__ import annotations

import json
import os
import queue
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from orbit.bench.external import AdapterError, ExternalAdapter
from orbit.bench.model import Benchmark, Method, Task
from orbit.store.home import Home

REPO = Path(__file__).resolve().parents[1]
ARITH = REPO / "examples" / "bench-adapters" / "arith"


def adapter_file(folder: Path, body: str, name: str = "adapter.py") -> Path:
    """An executable Python adapter: `body` runs with `request` parsed from stdin."""
    path = folder / name
    path.write_text(
        f"#!{sys.executable}\nimport json, os, sys, time\nrequest = json.load(sys.stdin)\n"
        + textwrap.dedent(body)
    )
    path.chmod(0o755)
    return path


def make(tmp_path: Path, adapter: Path, bench_dir: Path | None = None, **config: str):
    bench = Benchmark(
        name="ext",
        dir=str(bench_dir or tmp_path),
        adapter=str(adapter),
        config=dict(config),
    )
    home = Home(tmp_path / "home", dict(os.environ))
    return ExternalAdapter(bench, home)


def answering(tmp_path: Path, phase: dict, bench_dir: Path | None = None) -> ExternalAdapter:
    """An adapter whose solve answer is `phase` (read from phase.json at each request)."""
    (tmp_path / "phase.json").write_text(json.dumps(phase))
    body = f"""
        phase = json.load(open({str(tmp_path / "phase.json")!r}))
        print(json.dumps({{"protocol": 1, "phase": phase}}))
    """
    return make(tmp_path, adapter_file(tmp_path, body), bench_dir)


ORACLE = Method("oracle", "oracle")
TASK = Task("t1")


# --- the example adapter, request by request ----------------------------------------------------
def test_the_example_adapter_speaks_protocol_1(tmp_path: Path) -> None:
    ext = make(tmp_path, ARITH / "adapter.py", ARITH, image="orbit-test/busybox:1")
    assert ext.hello() == {"name": "arith", "version": "1.0", "protocols": [1]}
    assert ext.check() == "arith 1.0 (protocol 1), 4 tasks"
    tasks = {t.name: t for t in ext.tasks()}
    assert sorted(tasks) == ["add", "big", "multiply", "nested"]
    assert not tasks["big"].supported and tasks["big"].reason == "needs Windows"
    assert tasks["nested"].timeout_min == 2.0

    trial = tmp_path / "trial"
    oracle = ext.solve(tasks["add"], ORACLE, trial)
    assert oracle.image == "orbit-test/busybox:1" and oracle.commit and oracle.network == "none"
    assert oracle.collect == ["/work/answer.txt"]
    assert oracle.run_dirs == ["logs/agent"]
    solution = {"source": str(trial / "oracle"), "target": "/orbit/bench/solution", "rw": False}
    assert solution in oracle.mounts
    assert (trial / "oracle" / "answer.txt").read_text() == "42\n"

    empty = ext.solve(tasks["add"], Method("empty", "empty"), trial)
    assert empty.command == ["true"]
    agent = ext.solve(tasks["add"], Method("gpt", "codex", auth="p"), trial)
    assert agent.command == [] and "19 + 23" in str(agent.instruction)

    verify = ext.verify(tasks["add"], trial, "orbit-bench/x:solved")
    assert verify.env == {"EXPECTED": "42"}
    assert verify.run_dirs == ["logs/verifier"]

    out = tmp_path / "verify-run"
    missing = ext.score(tasks["add"], out)
    assert not missing.valid and missing.reason == "the verifier wrote no score.json"
    (out / "logs" / "verifier").mkdir(parents=True)
    (out / "logs" / "verifier" / "score.json").write_text('{"correct": 1}\n')
    got = ext.score(tasks["add"], out)
    assert got.valid and got.score == 1.0 and got.scores == {"correct": 1.0}


def test_a_request_carries_the_benchmark_the_task_and_the_method(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    body = f"""
        open({str(seen)!r}, "w").write(json.dumps(request))
        print(json.dumps({{"protocol": 1, "phase": {{"image": "img", "command": ["true"]}}}}))
    """
    ext = make(tmp_path, adapter_file(tmp_path, body), level="b2")
    ext.solve(Task("t1", data={"path": "/x"}), Method("m", "oracle"), tmp_path / "trial")
    request = json.loads(seen.read_text())
    assert request["protocol"] == 1 and request["op"] == "solve"
    assert request["benchmark"] == {"name": "ext", "dir": str(tmp_path), "config": {"level": "b2"}}
    assert request["task"] == {"name": "t1", "data": {"path": "/x"}}
    assert request["method"]["name"] == "m" and request["method"]["agent"] == "oracle"
    assert request["trial_dir"] == str(tmp_path / "trial")


# --- protocol errors: one line naming the adapter and the request --------------------------------
def test_an_answer_that_is_not_json(tmp_path: Path) -> None:
    ext = make(tmp_path, adapter_file(tmp_path, 'print("Traceback? no: hello")'))
    with pytest.raises(AdapterError) as err:
        ext.tasks()
    message = str(err.value)
    assert message.startswith(f"adapter {tmp_path / 'adapter.py'} (benchmark ext), request tasks")
    assert "not JSON" in message and "hello" in message and "\n" not in message


def test_a_non_zero_exit_quotes_the_last_line_of_stderr(tmp_path: Path) -> None:
    body = 'print("starting", file=sys.stderr); print("no such dataset", file=sys.stderr)\n'
    ext = make(tmp_path, adapter_file(tmp_path, body + "sys.exit(3)\n"))
    with pytest.raises(AdapterError, match=r"request tasks: exited with code 3: no such dataset$"):
        ext.tasks()


def test_an_adapter_that_cannot_be_started(tmp_path: Path) -> None:
    script = tmp_path / "adapter.py"
    script.write_text("print(1)\n")  # not executable
    with pytest.raises(AdapterError, match="cannot be started"):
        make(tmp_path, script).tasks()


def test_a_wrong_protocol_version(tmp_path: Path) -> None:
    body = 'print(json.dumps({"protocol": 2, "tasks": []}))\n'
    with pytest.raises(AdapterError, match="answered with protocol 2, expected 1"):
        make(tmp_path, adapter_file(tmp_path, body)).tasks()
    hello = 'print(json.dumps({"protocol": 1, "name": "x", "version": "2", "protocols": [2]}))\n'
    with pytest.raises(AdapterError, match=r"request hello: it speaks protocols \[2\]"):
        make(tmp_path, adapter_file(tmp_path, hello)).check()


def test_an_error_answer_is_reported(tmp_path: Path) -> None:
    body = 'print(json.dumps({"protocol": 1, "error": "instances dir is empty"}))\n'
    with pytest.raises(AdapterError, match="request tasks: it reports: instances dir is empty"):
        make(tmp_path, adapter_file(tmp_path, body)).tasks()


@pytest.mark.parametrize(
    ("phase", "problem"),
    [
        ({"command": ["true"]}, "give exactly one of `image` and `dockerfile`"),
        ({"image": "i"}, "`command` is empty"),
        ({"image": "i", "command": "true"}, "`command` must be a list"),
        ({"image": "i", "command": ["true"], "comand": 1}, "unknown fields: comand"),
        ({"image": "i", "command": ["true"], "workdir": "app"}, "absolute container path"),
        ({"image": "i", "command": ["true"], "cpus": -1}, "`cpus` must be a positive number"),
        ({"image": "i", "command": ["true"], "gpus": 1.5}, "`gpus` must be an integer"),
        ({"image": "i", "command": ["true"], "network": "public"}, "`network` must be one of"),
        ({"image": "i", "command": ["true"], "env": {"A-B": "1"}}, "bad variable name"),
        ({"image": "i", "command": ["true"], "collect": ["out.txt"]}, "absolute container path"),
        (
            {"image": "i", "command": ["true"], "mounts": [{"run_dir": "../x", "target": "/x"}]},
            "must not contain `..`",
        ),
        (
            {"image": "i", "command": ["true"], "mounts": [{"tmpfs": True, "target": "x"}]},
            "a mount's `target` must be an absolute container path",
        ),
    ],
)
def test_a_bad_phase_is_refused(tmp_path: Path, phase: dict, problem: str) -> None:
    ext = answering(tmp_path, phase)
    with pytest.raises(AdapterError) as err:
        ext.solve(TASK, ORACLE, tmp_path / "trial")
    assert "request solve for task 't1', method 'oracle': " in str(err.value)
    assert problem in str(err.value)


def test_mounts_only_of_the_benchmark_and_the_trial(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    (bench / "data").mkdir(parents=True)
    trial = tmp_path / "trial"
    (trial / "artifacts").mkdir(parents=True)
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (bench / "link").symlink_to(secret)
    ext = answering(tmp_path, {}, bench)

    def solve(*mounts: dict) -> list:
        phase = {"image": "i", "command": ["true"], "mounts": list(mounts)}
        (tmp_path / "phase.json").write_text(json.dumps(phase))
        return ext.solve(TASK, ORACLE, trial).mounts

    ok = solve(
        {"source": str(bench / "data"), "target": "/data"},
        {"source": str(trial / "artifacts"), "target": "/out", "rw": True},
        {"run_dir": "logs/verifier", "target": "/logs/verifier", "rw": True},
    )
    assert ok[0] == {"source": str(bench / "data"), "target": "/data", "rw": False}
    assert ok[1]["rw"] is True
    for bad, problem in [
        ({"source": str(secret), "target": "/s"}, "outside the benchmark's folder"),
        ({"source": str(bench / "link"), "target": "/s"}, "outside the benchmark's folder"),
        ({"source": "/etc", "target": "/s"}, "outside the benchmark's folder"),
        ({"source": "data", "target": "/s"}, "must be an absolute host path"),
        ({"source": str(bench / "data"), "target": "/s", "rw": True}, "read-only only"),
        ({"source": str(bench / "nope"), "target": "/s"}, "does not exist"),
        ({"source": str(bench), "run_dir": "x", "target": "/s"}, "exactly one of"),
    ]:
        with pytest.raises(AdapterError, match="request solve") as err:
            solve(bad)
        assert problem in str(err.value), (bad, str(err.value))


def test_a_dockerfile_must_be_inside_the_benchmark(tmp_path: Path) -> None:
    ext = answering(tmp_path, {"dockerfile": "/etc/hostname", "command": ["true"]})
    with pytest.raises(AdapterError, match="outside the benchmark's folder"):
        ext.solve(TASK, ORACLE, tmp_path / "trial")


@pytest.mark.slow
def test_a_hanging_adapter_times_out_and_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    body = f"""
        import subprocess
        subprocess.Popen(["sh", "-c", "sleep 3; touch {marker}"])
        time.sleep(600)
    """
    ext = make(tmp_path, adapter_file(tmp_path, body), adapter_timeout_s="1")
    with pytest.raises(AdapterError, match=r"request tasks: gave no answer within 1 s"):
        ext.tasks()
    import time

    time.sleep(4)
    assert not marker.exists()  # the adapter's own children went with it


def test_bad_score_answers(tmp_path: Path) -> None:
    for answer, problem in [
        ({"score": 1}, "`valid` must be true or false"),
        ({"valid": True}, "a valid score needs `score`"),
        ({"valid": True, "score": "1"}, "a valid score needs `score`"),
        ({"valid": True, "score": 1, "scores": {"a": "x"}}, "`scores` must map names"),
    ]:
        body = f"print(json.dumps({{'protocol': 1, **{answer!r}}}))\n"
        ext = make(tmp_path, adapter_file(tmp_path, body))
        with pytest.raises(AdapterError, match="request score for task 't1'") as err:
            ext.score(TASK, tmp_path)
        assert problem in str(err.value)
    body = "print(json.dumps({'protocol': 1, 'valid': False}))\n"
    invalid = make(tmp_path, adapter_file(tmp_path, body)).score(TASK, tmp_path)
    assert not invalid.valid and invalid.score is None and invalid.reason


def test_bad_task_lists(tmp_path: Path) -> None:
    for tasks, problem in [
        ([{"name": "a"}, {"name": "a"}], "two tasks have the same name"),
        ([{"name": "../a"}], "bad task name"),
        ([{"name": "a", "data": []}], "`data` must be a JSON object"),
        ([{"name": "a", "supported": "no"}], "`supported` must be true or false"),
        ([{"name": "a", "mem": 2}], "unknown fields: mem"),
    ]:
        body = f"print(json.dumps({{'protocol': 1, 'tasks': {tasks!r}}}))\n"
        with pytest.raises(AdapterError, match="request tasks") as err:
            make(tmp_path, adapter_file(tmp_path, body)).tasks()
        assert problem in str(err.value)


# --- end to end through the engine ----------------------------------------------------------------
def test_the_example_adapter_end_to_end(orbit, busybox: str) -> None:  # type: ignore[no-untyped-def]
    from test_bench_engine import kill_holder, remove_solved_images

    adapter = str(ARITH / "adapter.py")
    res = orbit("bench", "add", "ex", str(ARITH), "--adapter", adapter, "-c", f"image={busybox}")
    assert res.code == 0, res.err
    assert "4 tasks, 3 supported" in res.out
    try:
        res = orbit("bench", "run", "ex", "-m", "oracle", "-m", "empty", "-w", "--json")
        assert res.code == 0, res.err
        job = res.json()
        trials = {(t["task"], t["method"]): t for t in job["trials"]}
        assert len(trials) == 6
        for task in ("add", "multiply", "nested"):
            oracle, empty = trials[(task, "oracle")], trials[(task, "empty")]
            assert (oracle["evaluation"], oracle["score"]) == ("valid", 1.0), oracle
            assert (empty["evaluation"], empty["score"]) == ("valid", 0.0), empty
            assert oracle["execution"] == "succeeded"
        folder = orbit.home / "bench" / "jobs" / job["job"]["id"] / "trials"
        answer = folder / trials[("multiply", "oracle")]["id"] / "artifacts/work/answer.txt"
        assert answer.read_text() == "391\n"  # collected from the solved image
        verify = orbit.run_dir(trials[("add", "empty")]["runs"]["verify"][-1])
        assert (verify / "logs" / "verifier" / "score.json").read_text() == '{"correct": 0}\n'
    finally:
        for lock in (orbit.home / "bench" / "jobs").glob("*/driver.lock"):
            kill_holder(lock)
        remove_solved_images(orbit)


def test_bench_add_refuses_an_adapter_of_another_protocol(orbit, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    body = """
        if request["op"] == "hello":
            print(json.dumps({"protocol": 1, "name": "x", "version": "9", "protocols": [2]}))
        else:
            print(json.dumps({"protocol": 1, "tasks": []}))
    """
    adapter = adapter_file(tmp_path, body)
    res = orbit("bench", "add", "two", str(tmp_path), "--adapter", str(adapter))
    assert res.code == 2 and res.out == ""
    assert res.err.strip().endswith("request hello: it speaks protocols [2], this Orbit speaks 1")
    assert len(res.err.strip().splitlines()) == 1
    assert orbit("bench", "ls", "--json").json()["benchmarks"] == []


@pytest.fixture
def arith(orbit, busybox: str):  # type: ignore[no-untyped-def]
    """`orbit` with the example adapter registered as `ex`; the home's drivers killed after."""
    from test_bench_engine import kill_holder, remove_solved_images

    adapter = str(ARITH / "adapter.py")
    res = orbit("bench", "add", "ex", str(ARITH), "--adapter", adapter, "-c", f"image={busybox}")
    assert res.code == 0, res.err
    yield orbit
    for lock in (orbit.home / "bench" / "jobs").glob("*/driver.lock"):
        kill_holder(lock)
    remove_solved_images(orbit)


def test_a_finished_jobs_driver_returns_at_once_and_rm_job_deletes_it(arith) -> None:  # type: ignore[no-untyped-def]
    res = arith("bench", "run", "ex", "-t", "add", "-m", "empty", "-w", "--json")
    assert res.code == 0, res.err
    job_id = res.json()["job"]["id"]
    assert res.json()["job"]["state"] == "finished"
    # A driver started late (a second start racing the first) finds nothing to drive.
    proc = arith.proc("bench", "_drive", job_id)
    try:
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()
    folder = arith.home / "bench" / "jobs" / job_id
    assert f"job {job_id}: finished" in (folder / "driver.log").read_text()
    # A driver of a finished job writes nothing: one still holding the lock (an older Orbit's,
    # looping) does not keep the job from being deleted.
    from orbit.store.locks import release, try_lock

    handle = try_lock(folder / "driver.lock")
    assert handle is not None
    try:
        res = arith("bench", "rm-job", job_id, "--yes", job_id)
    finally:
        release(handle)
    assert res.code == 0 and f"deleted job {job_id}" in res.out, res.err


def test_bench_tasks_shows_the_resources_the_solve_runs_use(orbit, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    resources = tmp_path / "resources.json"
    resources.write_text(json.dumps({"add": {"cpus": 0.5, "mem_gb": 0.5, "timeout_min": 1},
                                     "*": {"mem_gb": 2}}))  # fmt: skip
    adapter = str(ARITH / "adapter.py")
    res = orbit("bench", "add", "ex", str(ARITH), "--adapter", adapter, "-c", "image=x:1",
                "--resources", str(resources))  # fmt: skip
    assert res.code == 0, res.err
    res = orbit("bench", "tasks", "ex", "--json")
    assert res.code == 0, res.err
    tasks = {t["name"]: t for t in res.json()["tasks"]}
    add, nested = tasks["add"], tasks["nested"]
    assert (add["cpus"], add["mem_gb"], add["timeout_min"]) == (0.5, 0.5, 1.0)
    assert add["resources_from"] == {"file": str(resources), "entry": "add",
                                     "keys": ["cpus", "mem_gb", "timeout_min"]}  # fmt: skip
    # The "*" entry: for a task without its own; the task's own timeout stays.
    assert (nested["mem_gb"], nested["timeout_min"]) == (2.0, 2.0)
    assert nested["resources_from"] == {"file": str(resources), "entry": "*", "keys": ["mem_gb"]}
    res = orbit("bench", "tasks", "ex")
    rows = {line.split()[0]: line for line in res.out.splitlines()[1:]}
    assert res.out.splitlines()[0].split()[6:] == ["FROM", "WHY", "NOT"]
    assert rows["add"].split()[2:4] == ["0.5", "0.5"]
    assert f'{resources} ["add"]: cpus mem_gb timeout_min' in rows["add"]
    assert f'{resources} ["*"]: mem_gb' in rows["nested"]
    plain = orbit("bench", "add", "plain", str(ARITH), "--adapter", adapter, "-c", "image=x:1")
    assert plain.code == 0, plain.err
    shown = orbit("bench", "tasks", "plain", "--json").json()["tasks"]
    assert all(t["resources_from"] is None for t in shown)


def _lines(stream) -> queue.Queue[str]:  # type: ignore[no-untyped-def]
    """The lines of a process's stream, read by a thread as they come."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _line_with(lines: queue.Queue[str], text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r} within {timeout} s")


def test_regrade_w_says_why_it_waits_and_a_cancelled_regrade_keeps_the_grading(  # type: ignore[no-untyped-def]
    arith, busybox: str
) -> None:
    res = arith("bench", "run", "ex", "-t", "add", "-m", "oracle", "-w", "--json")
    assert res.code == 0, res.err
    job_id = res.json()["job"]["id"]
    before = res.json()["trials"][0]
    assert (before["evaluation"], before["score"]) == ("valid", 1.0)
    # Every CPU leased to another run: the regrade's verify run waits in the queue.
    res = arith("run", "--no-project", "--image", busybox, "--cpus", "2", "--mem", "0.05",
                "-n", "hog", "--", "sleep", "120")  # fmt: skip
    assert res.code == 0, res.err
    proc = arith.proc("bench", "regrade", job_id, "-w")
    try:
        line = _line_with(_lines(proc.stderr), "queued: waiting for 1 CPU")
        assert line.startswith("orbit: run ") and "add__oracle__1.verify-2" in line, line
        res = arith("bench", "cancel", job_id)
        assert res.code == 0, res.err
        proc.wait(timeout=60)
    finally:
        proc.kill()
    # Only a regrade was stopped: the job is finished, with the grading it had.
    assert res.out.strip() == (
        f"job {job_id}: cancelled the regrade of 1 trial(s); the job keeps its earlier grading"
    ), res.out
    res = arith("bench", "show", job_id, "--json")
    assert res.json()["job"]["state"] == "finished", res.json()["job"]
    trial = res.json()["trials"][0]
    assert (trial["evaluation"], trial["score"], trial["reason"]) == ("valid", 1.0, None)
    assert trial["runs"]["verify"][0] == before["runs"]["verify"][0]
    assert len(trial["runs"]["verify"]) == 2
    assert trial["runs"]["cancelled"] == trial["runs"]["verify"][1:]
    assert arith.status(trial["runs"]["verify"][1])["state"] == "cancelled"
    shown = arith("bench", "show", job_id)
    assert f"{trial['runs']['verify'][1]}(cancelled)" in shown.out, shown.out
    # A regrade after it is numbered on: its verify run is a new one, and it grades.
    hog = next(r for r in (arith.home / "runs").iterdir() if r.name.isdigit()
               and "hog" in (r / "run.yaml").read_text())  # fmt: skip
    assert arith("cancel", hog.name).code == 0
    res = arith("bench", "regrade", job_id, "-w", "--json")
    assert res.code == 0, res.err
    again = res.json()["trials"][0]
    assert len(again["runs"]["verify"]) == 3
    assert again["runs"]["cancelled"] == trial["runs"]["cancelled"]
    assert (again["evaluation"], again["score"]) == ("valid", 1.0)


def _wait_until(check, timeout: float = 90) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_damaged_trial_is_rebuilt_from_its_runs_and_named(arith, busybox: str) -> None:  # type: ignore[no-untyped-def]
    res = arith("run", "--no-project", "--image", busybox, "--cpus", "2", "--mem", "0.05",
                "-n", "hog", "--", "sleep", "120")  # fmt: skip
    assert res.code == 0, res.err
    hog = res.out.split()[1]
    res = arith("bench", "run", "ex", "-t", "add", "-m", "oracle", "-m", "empty", "--json")
    job_id = res.json()["job"]["id"]
    folder = arith.home / "bench" / "jobs" / job_id
    trials = folder / "trials"
    oracle = trials / "add__oracle__1.json"
    _wait_until(lambda: json.loads(oracle.read_text())["solve_run"])  # queued behind the hog
    solve = json.loads(oracle.read_text())["solve_run"]
    oracle.write_bytes(b"\x00\xff{")
    (trials / "stray.json").write_bytes(b"\x00\xff{")  # no trial of the job: cannot be rebuilt
    _wait_until(lambda: (trials / "add__oracle__1.json.damaged").exists())
    assert (trials / "add__oracle__1.json.damaged").read_bytes() == b"\x00\xff{"
    # The damaged bytes are kept aside first, then the rebuilt trial replaces them.
    _wait_until(lambda: oracle.read_bytes() != b"\x00\xff{")
    rebuilt = json.loads(oracle.read_text())
    assert (rebuilt["phase"], rebuilt["solve_run"]) == ("solving", solve)
    assert (rebuilt["task"], rebuilt["method"], rebuilt["seed"]) == ("add", "oracle", 1)
    assert arith("cancel", hog).code == 0
    _wait_until(lambda: all(json.loads(p.read_text())["phase"] == "done"
                            for p in trials.glob("add__*.json")))  # fmt: skip
    time.sleep(1.5)  # the driver's passes: it must not finish over the stray file
    assert json.loads((folder / "job.json").read_text())["state"] == "running"
    log = (folder / "driver.log").read_text()
    assert f"job {job_id}: trial add__oracle__1: its file is damaged: not JSON" in log, log
    assert f"rebuilt from its runs ({solve})" in log
    assert "trial file stray.json: not JSON" in log and "the job cannot finish" in log
    shown = arith("bench", "show", job_id)
    assert "add__oracle__1 was rebuilt from its runs" in shown.err, shown.err
    assert "trial file stray.json: not JSON" in shown.err
    row = next(line for line in shown.out.splitlines() if line.startswith("stray.json"))
    assert "unreadable" in row
    listed = arith("bench", "jobs")
    assert "trial file stray.json: not JSON" in listed.err
    (trials / "stray.json").unlink()
    _wait_until(lambda: json.loads((folder / "job.json").read_text())["state"] == "finished")
    job = arith("bench", "show", job_id, "--json").json()
    assert {(t["method"], t["score"]) for t in job["trials"]} == {("oracle", 1.0), ("empty", 0.0)}
    assert job["job"]["rebuilt"] == ["add__oracle__1.json"]
    solves = [t["runs"]["solve"] for t in job["trials"]]
    assert solve in solves and len(list((arith.home / "runs").glob("[0-9]*"))) == 5  # no re-solve

    # A damaged job.json is a row of `bench jobs`, and a line on stderr.
    (folder / "job.json").write_text("{")
    listed = arith("bench", "jobs")
    assert listed.code == 0 and f"orbit: job {job_id}: job.json" in listed.err, listed.err
    rows = [line.split() for line in listed.out.splitlines()]
    assert any(row[0] == job_id and "unreadable" in row for row in rows), listed.out
    data = arith("bench", "jobs", "--json").json()
    assert data["jobs"] == [] and data["unreadable"][0]["id"] == job_id

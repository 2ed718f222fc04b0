"""`orbit bench`: jobs of real runs driven by the detached driver, on a toy benchmark
(tests/bench_toy.py) whose tasks are small shell scripts in orbit-test/python:3.

Validity is what these tests are about: an oracle that solves scores 1 and empty 0; a reward
planted by the solve is not seen by the verifier; a verifier that writes no reward, and a solve
killed for memory, make the trial invalid, never 0; a solve that timed out is still graded; a
separate verifier sees the declared artifacts and nothing else of the solve.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit

from orbit.errors import ExitCode

TESTS = Path(__file__).resolve().parent
ADAPTER = "python:bench_toy:ToyAdapter"
REWARD = "/logs/verifier/reward.txt"
SECRET = "grader-s3cret-value-1234"
SECRET_HASH = hashlib.sha256(SECRET.encode()).hexdigest()  # the check must not hold the secret
KEY_CHECK = '"$(printf %s "$GRADER_KEY" | sha256sum | cut -d" " -f1)"'
ANSWER = "echo 3 > /app/answer.txt"
CHECK_ANSWER = (
    f'if [ "$(cat /app/answer.txt 2>/dev/null)" = 3 ]; then echo 1 > {REWARD}; '
    f"else echo 0 > {REWARD}; fi"
)


def toy_tasks(image: str) -> dict[str, dict[str, Any]]:
    return {
        "add": {"image": image, "solve": "mkdir -p /app && echo 3 > /app/answer.txt",
                "check": CHECK_ANSWER,
                "instruction": "create /app/answer.txt containing 3\nReply with exactly: ok"},
        # A cheating solve: plants a reward of 1 where the verifier writes its own.
        "planted": {"image": image, "check": CHECK_ANSWER,
                    "solve": "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"},
        "noreward": {"image": image, "solve": "echo 3 > /tmp/x", "check": "echo graded"},
        "hog": {"image": image, "mem_gb": 0.1, "check": CHECK_ANSWER,
                "solve": "python3 -c 'x = bytearray(400 * 2**20); print(len(x))'"},
        "slow": {"image": image, "timeout_min": 0.05, "check": CHECK_ANSWER,
                 "solve": "mkdir -p /app && echo 3 > /app/answer.txt && sleep 60"},
        "sep": {"image": image, "separate": True, "collect": ["/app/out"],
                "solve": "mkdir -p /app/out && echo 3 > /app/out/result.txt && "
                         "echo hidden > /app/secret.txt && echo n > /logs/artifacts/note.txt",
                "check": "if [ -f /app/out/result.txt ] && [ ! -e /app/secret.txt ] && "
                         f"[ -f /logs/artifacts/note.txt ]; then echo 1 > {REWARD}; "
                         f"else echo 0 > {REWARD}; fi"},
        "gpu": {"image": image, "solve": "true", "check": "true",
                "unsupported": "needs 2 GPUs, this machine has 0"},
        "wait": {"image": image, "solve": "sleep 60", "check": CHECK_ANSWER},
        # The grader's secret reaches the verify run only.
        "secret": {"image": image,
                   "check": f"if [ {KEY_CHECK} = {SECRET_HASH} ]; then {CHECK_ANSWER}; fi",
                   "solve": f"mkdir -p /app && if [ -z $GRADER_KEY ]; then {ANSWER}; fi"},
        # Solvable by an agent only with the bundle: the answer is in its config home.
        "bundled": {"image": image, "solve": "true", "check": CHECK_ANSWER,
                    "instruction": "run: mkdir -p /app && cp $CLAUDE_CONFIG_DIR/answer.txt /app/"},
    }  # fmt: skip


@pytest.fixture
def bench(orbit: Orbit, python_image: str, tmp_path: Path) -> Orbit:
    """`orbit` with the toy benchmark registered as `toy`; kills the home's drivers after."""
    root = tmp_path / "toy"
    for name, data in toy_tasks(python_image).items():
        (root / name).mkdir(parents=True)
        (root / name / "task.json").write_text(json.dumps(data))
    orbit.environ["PYTHONPATH"] = str(TESTS)
    res = orbit("bench", "add", "toy", str(root), "--adapter", ADAPTER)
    assert res.code == 0, res.err
    yield orbit
    for lock in (orbit.home / "bench" / "jobs").glob("*/driver.lock"):
        kill_holder(lock)
    remove_solved_images(orbit)


def kill_holder(lock: Path) -> None:
    from orbit.store.locks import lock_holder

    holder = lock_holder(lock)
    if holder and holder.pid:
        try:
            os.kill(holder.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def remove_solved_images(orbit: Orbit) -> None:
    """Remove the home's containers first: a shepherd still running commits its image last."""
    from conftest import _cleanup_containers

    from orbit.store.home import Home

    _cleanup_containers(orbit.home)

    tag = Home(orbit.home.resolve()).tag
    names = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "orbit-bench/*"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    mine = [n for n in names if n.endswith(f"-{tag}:solved")]
    if mine:
        subprocess.run(["docker", "rmi", "-f", *mine], capture_output=True, check=False)


def run_job(orbit: Orbit, *args: str) -> tuple[int, dict[str, Any]]:
    res = orbit("bench", "run", "toy", "-w", "--json", *args)
    assert res.out, res.err
    return res.code, res.json()


def by_key(job: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(t["task"], t["method"]): t for t in job["trials"]}


def bench_runs(orbit: Orbit) -> list[dict[str, Any]]:
    """run.yaml of every run the home holds."""
    import yaml

    folder = orbit.home / "runs"
    dirs = [d for d in folder.iterdir() if not d.name.startswith(".")] if folder.is_dir() else []
    return [yaml.safe_load((d / "run.yaml").read_text()) for d in dirs if (d / "run.yaml").exists()]


def test_validity_oracle_empty_planted_missing_oom_timeout_separate(bench: Orbit) -> None:
    tasks = ["add", "planted", "noreward", "hog", "slow", "sep"]
    picks = [x for t in tasks for x in ("-t", t)]
    code, job = run_job(bench, *picks, "-m", "oracle", "-m", "empty")
    assert job["job"]["state"] == "finished" and job["job"]["trials"] == 12
    assert code == 1  # some trials are invalid
    t = by_key(job)
    add_o, add_e = t[("add", "oracle")], t[("add", "empty")]
    assert (add_o["evaluation"], add_o["score"], add_o["execution"]) == ("valid", 1.0, "succeeded")
    assert (add_e["evaluation"], add_e["score"]) == ("valid", 0.0)
    # The planted reward of 1 is not what the verifier sees: it grades the missing answer.
    assert (t[("planted", "oracle")]["evaluation"], t[("planted", "oracle")]["score"]) == (
        "valid",
        0.0,
    )
    missing = t[("noreward", "oracle")]
    assert missing["evaluation"] == "invalid" and missing["score"] is None
    assert missing["reason"] == "no reward file" and len(missing["runs"]["verify"]) == 1
    hog = t[("hog", "oracle")]
    assert hog["execution"] == "out of memory" and hog["evaluation"] == "invalid"
    assert hog["score"] is None and hog["runs"]["verify"] == [] and hog["solved_image"] is None
    assert "killed for memory" in hog["reason"]
    slow = t[("slow", "oracle")]
    assert slow["execution"] == "timed out" and (slow["evaluation"], slow["score"]) == ("valid", 1)
    # Separate verifier: the artifact and /logs/artifacts arrive, /app/secret.txt does not.
    assert (t[("sep", "oracle")]["score"], t[("sep", "empty")]["score"]) == (1.0, 0.0)
    sep_dir = (
        bench.home / "bench" / "jobs" / job["job"]["id"] / "trials" / t[("sep", "oracle")]["id"]
    )
    assert (sep_dir / "artifacts" / "app" / "out" / "result.txt").read_text() == "3\n"
    manifest = json.loads((sep_dir / "artifacts.json").read_text())
    assert manifest == {"collected": ["/app/out"], "missing": []}
    # Every run says which trial and phase it is.
    runs = bench_runs(bench)
    assert len(runs) == 23  # 12 solves, 11 verifies (the OOM-killed solve is not verified)
    assert {r["bench"]["phase"] for r in runs} == {"solve", "verify"}
    solve = next(r for r in runs if r["name"] == f"{add_o['id']}.solve")
    assert solve["commit"] == add_o["solved_image"] and solve["user"] is None
    # The human view says the same.
    res = bench("bench", "show", job["job"]["id"])
    assert res.code == 0 and "out of memory" in res.out and "no reward file" in res.out


def test_unsupported_tasks_and_bad_methods_are_refused_up_front(bench: Orbit) -> None:
    res = bench("bench", "tasks", "toy", "--json")
    gpu = next(t for t in res.json()["tasks"] if t["name"] == "gpu")
    assert gpu == {**gpu, "supported": False, "reason": "needs 2 GPUs, this machine has 0"}
    cases = {
        ("-t", "gpu", "-m", "oracle"): "task 'gpu' is not supported: needs 2 GPUs",
        ("-t", "nope", "-m", "oracle"): "no task 'nope'",
        ("-t", "add", "-m", "x=gpt"): "unknown agent 'gpt'",
        ("-t", "add", "-m", "c=claude-code"): "needs auth=PROFILE",
        ("-t", "add", "-m", "c=claude-code,auth=none"): "auth profile",
        ("-t", "add"): "give at least one method",
        ("-t", "add", "-m", "oracle", "--seeds", "0"): "--seeds must be 1 or more",
    }
    for args, message in cases.items():
        res = bench("bench", "run", "toy", *args)
        assert res.code in (2, 3) and message in res.err, (args, res.err)
        assert len(res.err.strip().splitlines()) == 1
    assert not (bench.home / "bench" / "jobs").exists() or not list(
        (bench.home / "bench" / "jobs").glob("j*/job.json")
    )
    res = bench("bench", "add", "toy", str(bench.home), "--adapter", "harbor")
    assert res.code == 5 and "exists already" in res.err
    res = bench("bench", "add", "other", str(bench.home), "--adapter", "./nothing")
    assert res.code == 2 and "not harbor, asi, or an executable" in res.err
    res = bench("bench", "show", "j9")
    assert res.code == 3 and "no job 'j9'" in res.err


def test_killed_driver_is_restarted_and_no_trial_runs_twice(bench: Orbit) -> None:
    res = bench("bench", "run", "toy", "-t", "add", "-t", "sep", "-m", "oracle", "-m", "empty",
                "--max-running", "1", "-n", "crashy", "--json")  # fmt: skip
    assert res.code == 0, res.err
    job_id = res.json()["job"]["id"]
    lock = bench.home / "bench" / "jobs" / job_id / "driver.lock"
    # Kill the driver twice, each time once a run of the job exists that it may not yet have
    # written into its trial.
    for seen in (1, 3):
        deadline = time.monotonic() + 60
        while len(bench_runs(bench)) < seen and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_holder(lock)
        time.sleep(0.2)
        if seen == 1:
            forget_first_run(bench.home / "bench" / "jobs" / job_id / "trials")
        res = bench("bench", "jobs", "--json")  # any bench command restarts it
        assert res.code == 0, res.err
    deadline = time.monotonic() + 120
    while bench("bench", "show", job_id, "--json").json()["job"]["state"] != "finished":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    job = bench("bench", "show", "crashy", "--json").json()
    scores = {(t["task"], t["method"]): t["score"] for t in job["trials"]}
    assert scores == {("add", "oracle"): 1, ("add", "empty"): 0, ("sep", "oracle"): 1,
                      ("sep", "empty"): 0}  # fmt: skip
    runs = bench_runs(bench)
    # --max-running 1: no two runs of the job were ever running at once.
    spans = sorted((bench.status(r["id"])["started_at"], bench.status(r["id"])["finished_at"])
                   for r in runs)  # fmt: skip
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    phases = [(r["bench"]["trial"], r["bench"]["phase"]) for r in runs]
    assert len(phases) == len(set(phases)) == 8  # one solve and one verify per trial
    assert {r["id"] for r in runs} == {
        x for t in job["trials"] for x in [t["runs"]["solve"], *t["runs"]["verify"]]
    }


def forget_first_run(trials: Path) -> None:
    """Put one trial back where a driver killed between submitting its solve run and writing
    the run's id would have left it: solving, no run named."""
    for path in sorted(trials.glob("*.json")):
        trial = json.loads(path.read_text())
        if trial["solve_run"]:
            trial.update(phase="solving", solve_run=None, verify_runs=[], verifies=0)
            path.write_text(json.dumps(trial))
            return
    raise AssertionError("no trial has a solve run yet")


def test_regrade_verifies_again_without_solving(bench: Orbit) -> None:
    code, job = run_job(bench, "-t", "add", "-t", "sep", "-m", "oracle")
    assert code == 0, job
    job_id = job["job"]["id"]
    before = by_key(job)
    assert set(job["job"]) == {
        "id", "benchmark", "name", "tasks", "methods", "seeds", "max_running", "created_at",
        "state", "folder", "trials", "done", "valid", "invalid", "unknown", "unreadable",
        "rebuilt",
    }  # fmt: skip
    assert set(job["trials"][0]) == {
        "id", "task", "method", "seed", "phase", "execution", "evaluation", "reason", "score",
        "scores", "cleanup", "solved_image", "updated_at", "trajectories", "runs",
    }  # fmt: skip
    assert all(t["trajectories"] == [] for t in job["trials"])  # an oracle has no session
    res = bench("bench", "regrade", job_id, "-w", "--json")
    assert res.code == 0, res.err
    after = by_key(res.json())
    for key, trial in after.items():
        assert trial["runs"]["solve"] == before[key]["runs"]["solve"]
        assert len(trial["runs"]["verify"]) == 2
        assert trial["runs"]["verify"][0] == before[key]["runs"]["verify"][0]
        assert (trial["evaluation"], trial["score"]) == ("valid", 1.0)
    assert len(bench_runs(bench)) == 6
    res = bench("bench", "jobs")
    row = res.out.splitlines()[1].split()
    assert res.code == 0 and row[:6] == [job_id, "-", "toy", "finished", "2/2", "2"], res.out


def test_a_job_is_filed_in_a_folder_and_moved_like_runs(bench: Orbit) -> None:
    bad = bench("bench", "run", "toy", "-t", "add", "-m", "oracle", "--folder", "a/../b")
    assert bad.code == 2 and "`.` and `..` are not folder names" in bad.err
    assert not (bench.home / "bench" / "jobs").exists() or not any(
        (bench.home / "bench" / "jobs").iterdir()
    )
    code, job = run_job(bench, "-t", "add", "-m", "oracle", "-n", "smoke", "--folder", "/p//b/")
    assert code == 0, job
    job_id, solve = job["job"]["id"], job["trials"][0]["runs"]["solve"]
    assert job["job"]["folder"] == "p/b"
    listed = bench("folders", "--json").json()
    assert {"path": "p/b", "runs": 0, "direct": 0, "jobs": 1, "direct_jobs": 1} in listed["folders"]
    assert listed["top_level_jobs"] == 0
    assert bench("folders").out.splitlines()[0].split() == [
        "FOLDER",
        "RUNS",
        "HERE",
        "BENCH",
        "JOBS",
    ]

    moved = bench("mv", job_id, "final", "--json")
    assert moved.code == 0, moved.err
    assert moved.json() == {"folder": "final", "moved": [], "jobs": [job_id]}
    assert bench("bench", "show", job_id, "--json").json()["job"]["folder"] == "final"
    # A job by its name, with a run, to the top level; the job's runs were never moved.
    both = bench("mv", "smoke", solve, "/")
    assert both.code == 0, both.err
    assert both.out == (
        f"moved 1 run(s) to the top level: {solve}\n"
        f"moved 1 bench job(s) to the top level: {job_id}\n"
    )
    assert bench("bench", "show", job_id, "--json").json()["job"]["folder"] is None
    # An unknown reference moves nothing and says what it looked for.
    none = bench("mv", job_id, "j99", "elsewhere")
    assert none.code == ExitCode.NOT_FOUND
    assert none.err == (
        "orbit: no run or bench job 'j99' (see `orbit ps -a` and `orbit bench jobs`)\n"
    )
    assert bench("bench", "show", job_id, "--json").json()["job"]["folder"] is None


def test_cancel_then_rm_job(bench: Orbit) -> None:
    res = bench("bench", "run", "toy", "-t", "wait", "-t", "add", "-m", "oracle", "--json")
    job_id = res.json()["job"]["id"]
    deadline = time.monotonic() + 60
    while not any(r.get("name", "").startswith("wait") for r in bench_runs(bench)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    res = bench("bench", "rm-job", job_id, "--yes", job_id)
    assert res.code == 5 and "running" in res.err
    res = bench("bench", "cancel", job_id, "--json")
    assert res.code == 0, res.err
    job = res.json()
    assert job["job"]["state"] == "cancelled"
    wait = by_key(job)[("wait", "oracle")]
    assert (wait["evaluation"], wait["reason"], wait["score"]) == ("invalid", "job cancelled", None)
    states = {bench.status(r["id"])["state"] for r in bench_runs(bench)}
    assert not states & {"queued", "starting", "running"}
    # rm-job: typed confirmation; a wrong answer deletes nothing.
    res = bench("bench", "rm-job", job_id, stdin="j999\n")
    assert res.code == 2 and "not confirmed" in res.err
    assert (bench.home / "bench" / "jobs" / job_id).is_dir()
    res = bench("bench", "rm-job", job_id, "--json", stdin=f"{job_id}\n")
    assert res.code == 0, res.err
    assert not (bench.home / "bench" / "jobs" / job_id).exists()
    assert bench_runs(bench) == []
    tag = by_key(job)[("add", "oracle")]["solved_image"]
    if tag:
        gone = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
        assert gone.returncode != 0


def test_agent_method_runs_claude_inside_with_its_profile_and_bundle(
    bench: Orbit, tmp_path: Path
) -> None:
    from agent_standins import install

    bin_dir = install(tmp_path / "npm-global")
    bench.environ["PATH"] = f"{bin_dir}:{bench.environ['PATH']}"
    bench.environ["TEST_KEY"] = "sk-ant-api03-Qw7Er5Ty3Ui1Op9As7Df5Gh3Jk1Lz"
    res = bench("auth", "add", "c", "--harness", "claude-code", "--kind", "api-key",
                "--key-env", "TEST_KEY")  # fmt: skip
    assert res.code == 0, res.err
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "answer.txt").write_text("3\n")
    code, job = run_job(bench, "-t", "add", "-t", "bundled", "-m", "plain=claude-code,auth=c",
                        "-m", f"withb=claude-code,auth=c,bundle={bundle}")  # fmt: skip
    t = by_key(job)
    scores = {k: (v["evaluation"], v["score"]) for k, v in t.items()}
    assert scores == {
        ("add", "plain"): ("valid", 1.0),
        ("add", "withb"): ("valid", 1.0),
        ("bundled", "plain"): ("valid", 0.0),
        ("bundled", "withb"): ("valid", 1.0),
    }
    assert code == 0
    solve = bench.run_dir(t[("add", "plain")]["runs"]["solve"])
    import yaml

    spec = yaml.safe_load((solve / "run.yaml").read_text())
    assert spec["command"][:3] == ["claude", "-p", "--dangerously-skip-permissions"]
    assert spec["auth"]["profile"] == "c" and spec["bench"]["phase"] == "solve"
    assert list((solve / "session").glob("*.jsonl"))  # the agent's transcript
    assert "sk-ant-api03" not in (solve / "run.yaml").read_text()
    check_trajectories(bench, job)
    res = bench("bench", "run", "toy", "-t", "add", "-m", "x=codex,auth=c")
    assert res.code == 2 and "is for claude-code, not codex" in res.err


def check_trajectories(bench: Orbit, job: dict[str, Any]) -> None:
    """Each agent trial keeps its solve's session as ATIF where Harbor's runner keeps a trial's
    (agent/trajectory.json), with the trial's grading; `bench show` lists it."""
    from harbor.models.trajectories import Trajectory

    job_id = job["job"]["id"]
    shown = bench("bench", "show", job_id)
    assert shown.code == 0 and "trajectories (ATIF):" in shown.out, shown.out
    for trial in job["trials"]:
        folder = bench.home / "bench" / "jobs" / job_id / "trials" / trial["id"]
        path = folder / "agent" / "trajectory.json"
        assert trial["trajectories"] == [str(path)]
        assert f"  {trial['id']}: {path}" in shown.out.splitlines()
        traj = Trajectory.model_validate_json(path.read_text())
        assert traj.steps and traj.extra is not None
        outcome = traj.extra["orbit"]["bench"]
        assert outcome == {"job": job_id, "trial": trial["id"], "phase": "solve",
                           "evaluation": "valid", "score": trial["score"]}  # fmt: skip


def test_pass_env_reaches_the_verify_run_only_and_is_kept_nowhere_after(bench: Orbit) -> None:
    toy = json.loads((bench.home / "bench" / "benchmarks" / "toy.json").read_text())["dir"]
    res = bench("bench", "add", "sec", toy, "--adapter", ADAPTER, "--pass-env", "GRADER_KEY")
    assert res.code == 0, res.err
    res = bench("bench", "run", "sec", "-t", "secret", "-m", "oracle")
    assert res.code == 2 and "passes GRADER_KEY to its verifier: not set here" in res.err
    bench.environ["GRADER_KEY"] = SECRET
    res = bench("bench", "run", "sec", "-t", "secret", "-m", "oracle", "-w", "--json")
    assert res.code == 0, res.err
    job = res.json()
    assert (job["trials"][0]["evaluation"], job["trials"][0]["score"]) == ("valid", 1.0)
    res = bench("bench", "regrade", job["job"]["id"], "-w", "--json")
    assert res.code == 0 and res.json()["trials"][0]["score"] == 1.0
    leaks = [p for p in bench.home.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []


# --- the Harbor fixtures (tests/bench_tasks/harbor-basic), through whole jobs ------------------
HELLO = "orbit-test/hello"  # its [task].name
HARBOR_TASKS = [
    HELLO,
    "as-user",
    "separate",
    "multi-score",
    "planted",
    "no-reward",
    "oom",
    "slow",
]


@pytest.fixture
def harbor(orbit: Orbit, python_image: str) -> Orbit:
    """`orbit` with the Harbor fixtures registered as `hb`; small default leases, so that the
    trials of a job run side by side."""
    from bench_setup import BASIC, ensure_debian_image

    ensure_debian_image()
    orbit.configure(default_cpus=0.5, default_mem_gb=0.5)
    res = orbit("bench", "add", "hb", str(BASIC), "--adapter", "harbor")
    assert res.code == 0, res.err
    yield orbit
    for lock in (orbit.home / "bench" / "jobs").glob("*/driver.lock"):
        kill_holder(lock)
    remove_solved_images(orbit)


def test_harbor_fixtures_oracle_empty_and_validity(harbor: Orbit) -> None:
    picks = [x for t in HARBOR_TASKS for x in ("-t", t)]
    res = harbor("bench", "run", "hb", *picks, "-m", "oracle", "-m", "empty", "-w", "--json")
    assert res.out, res.err
    t = by_key(res.json())
    assert len(t) == 16 and res.code == 1
    got = {k: (v["evaluation"], v["score"]) for k, v in t.items()}
    for task in (HELLO, "as-user", "separate"):  # oracle 1, empty 0
        assert (got[(task, "oracle")], got[(task, "empty")]) == (("valid", 1), ("valid", 0)), task
    assert t[("separate", "oracle")]["scores"]["isolated"] == 1  # scratch.txt did not arrive
    assert t[("multi-score", "oracle")]["scores"]["accuracy"] == 1
    assert t[("multi-score", "empty")]["scores"]["accuracy"] == 0
    assert got[("planted", "oracle")] == ("valid", 0)  # its planted reward.json was not seen
    for method in ("oracle", "empty"):
        missing = t[("no-reward", method)]
        assert missing["evaluation"] == "invalid" and missing["score"] is None
        assert "reward" in missing["reason"] and missing["runs"]["verify"]
    oom = t[("oom", "oracle")]
    assert (oom["execution"], oom["evaluation"], oom["runs"]["verify"]) == (
        "out of memory",
        "invalid",
        [],
    )
    assert got[("oom", "empty")] == ("valid", 0)
    slow = t[("slow", "oracle")]
    assert slow["execution"] == "timed out" and got[("slow", "oracle")] == ("valid", 0.5)
    assert slow["scores"]["finished"] == 0


def test_harbor_resources_file_overrides_a_tasks_solve(harbor: Orbit, tmp_path: Path) -> None:
    from bench_setup import BASIC

    resources = tmp_path / "resources.json"
    resources.write_text(json.dumps({"oom": {"mem_gb": 1, "cpus": 1}}))
    res = harbor("bench", "add", "roomy", str(BASIC), "--adapter", "harbor",
                 "--resources", str(resources))  # fmt: skip
    assert res.code == 0, res.err
    res = harbor("bench", "run", "roomy", "-t", "oom", "-m", "oracle", "-w", "--json")
    trial = res.json()["trials"][0]
    assert res.code == 0 and (trial["execution"], trial["score"]) == ("succeeded", 1.0)
    spec = harbor.run_dir(trial["runs"]["solve"]) / "run.yaml"
    import yaml

    assert yaml.safe_load(spec.read_text())["resources"]["mem_gb"] == 1


def test_harbor_unsupported_tasks_are_listed_with_why_and_never_run(harbor: Orbit) -> None:
    from bench_setup import UNSUPPORTED

    res = harbor("bench", "add", "un", str(UNSUPPORTED), "--adapter", "harbor", "--json")
    assert res.code == 0 and res.json()["supported"] == 0, res.err
    res = harbor("bench", "tasks", "un")
    rows = {line.split()[0]: line for line in res.out.splitlines()[1:]}
    assert res.code == 0 and len(rows) == 5
    assert all(line.split()[1] == "no" for line in rows.values())
    assert "GPU" in rows["two-gpus"] and "indows" in rows["windows"]
    res = harbor("bench", "run", "un", "-m", "oracle")
    assert res.code == 2 and "no task of un can run here (5 unsupported;" in res.err
    res = harbor("bench", "run", "un", "-t", "compose", "-m", "oracle")
    assert res.code == 2 and "task 'compose' is not supported:" in res.err
    assert not list((harbor.home / "bench").glob("jobs/j*/job.json"))


def test_harbor_job_killed_driver_regrade_cancel_rm_job(harbor: Orbit) -> None:
    res = harbor("bench", "run", "hb", "-t", HELLO, "-t", "separate", "-m", "oracle", "-m",
                 "empty", "--max-running", "2", "--json")  # fmt: skip
    job_id = res.json()["job"]["id"]
    deadline = time.monotonic() + 60
    while len(bench_runs(harbor)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_holder(harbor.home / "bench" / "jobs" / job_id / "driver.lock")
    res = harbor("bench", "regrade", job_id, "-w", "--json")  # restarts the driver first
    assert res.code == 5 and "is running" in res.err
    deadline = time.monotonic() + 120
    while harbor("bench", "show", job_id, "--json").json()["job"]["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    phases = [(r["bench"]["trial"], r["bench"]["phase"]) for r in bench_runs(harbor)]
    assert len(phases) == len(set(phases)) == 8
    # Regrade: the separate verifier grades the stored artifacts again; no solve runs again.
    res = harbor("bench", "regrade", job_id, "-w", "--json")
    assert res.code == 0, res.err
    t = by_key(res.json())
    assert {k: v["score"] for k, v in t.items()} == {
        (HELLO, "oracle"): 1, (HELLO, "empty"): 0, ("separate", "oracle"): 1,
        ("separate", "empty"): 0,
    }  # fmt: skip
    assert all(len(v["runs"]["verify"]) == 2 for v in t.values()) and len(bench_runs(harbor)) == 12
    images = [v["solved_image"] for v in t.values()]
    # Cancel a second job mid-solve; then remove both jobs with their runs and images.
    res = harbor("bench", "run", "hb", "-t", "slow", "-m", "oracle", "--json")
    second = res.json()["job"]["id"]
    deadline = time.monotonic() + 60
    while not any(r["name"].startswith("slow") for r in bench_runs(harbor)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    res = harbor("bench", "cancel", second, "--json")
    trial = res.json()["trials"][0]
    assert (trial["evaluation"], trial["reason"], trial["score"]) == (
        "invalid",
        "job cancelled",
        None,
    )
    for job in (job_id, second):
        res = harbor("bench", "rm-job", job, "--yes", job)
        assert res.code == 0, res.err
    assert bench_runs(harbor) == [] and not list((harbor.home / "bench" / "jobs").iterdir())
    for tag in images:
        assert subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode

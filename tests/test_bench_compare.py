"""`orbit bench compare` and `orbit bench usage`: scores per task × method over seeds, paired
means over the tasks valid for every method, names qualified across jobs, and suggested
resources from the peaks of real solve runs.

Jobs and trials are written through orbit/bench/model.py, as the engine writes them; the
solve runs of the usage test are real runs in Docker whose peaks the shepherd measured.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import SMALL, Orbit

from orbit.bench.compare import compare, compare_jobs
from orbit.bench.model import Job, Method, Trial, job_dir, save_job, save_trial, trial_id
from orbit.bench.records import read_job
from orbit.bench.usage import measure, resources_file
from orbit.errors import ExitCode, NotFoundError
from orbit.store.home import Home
from orbit.store.runs import RunStore

GIB = 2**30


def home_of(orbit: Orbit) -> Home:
    return Home.from_environ(orbit.environ)


def job(home: Home, job_id: str, tasks: list[str], methods: list[str], **kw: object) -> Job:
    record = Job(
        id=job_id,
        benchmark="toy",
        name=kw.pop("name", None),  # type: ignore[arg-type]
        tasks=tasks,
        methods=[Method(m, m if m in ("oracle", "empty") else "codex") for m in methods],
        seeds=int(kw.pop("seeds", 1)),  # type: ignore[call-overload]
        created_at="2026-11-30T20:00:00.000+00:00",
        state="finished",
    )
    save_job(home, record)
    return record


def trial(
    home: Home,
    job_id: str,
    task: str,
    method: str,
    seed: int = 1,
    score: float | None = None,
    reason: str | None = None,
    **kw: object,
) -> Trial:
    """A done trial: valid with `score`, or invalid with `reason`."""
    valid = reason is None and score is not None
    record = Trial(
        id=trial_id(task, method, seed),
        task=task,
        method=method,
        seed=seed,
        phase=str(kw.pop("phase", "done")),
        execution="succeeded",
        evaluation=str(kw.pop("evaluation", "valid" if valid else "invalid")),
        reason=reason,
        score=score if valid else None,
        solve_run=kw.pop("solve_run", None),  # type: ignore[arg-type]
        verify_runs=list(kw.pop("verify_runs", [])),  # type: ignore[call-overload]
    )
    save_trial(home, job_id, record)
    return record


# --- pure: scores, seeds, pairing --------------------------------------------------------------
def test_seeds_mean_spread_and_invalid_trials_never_counted(orbit: Orbit) -> None:
    home = home_of(orbit)
    job(home, "j1", ["hello", "sum", "broken-task"], ["oracle", "gpt"], seeds=3)
    for seed in (1, 2, 3):
        trial(home, "j1", "hello", "oracle", seed, 1.0)
        trial(home, "j1", "sum", "oracle", seed, 1.0)
        trial(home, "j1", "broken-task", "oracle", seed, reason="no reward file")
    for seed, score in ((1, 0.0), (2, 1.0), (3, 1.0)):
        trial(home, "j1", "hello", "gpt", seed, score)
    trial(home, "j1", "sum", "gpt", 1, 0.5)
    # An invalid trial that still carries a score (a grader that wrote one and then timed out)
    # must not count; nor a "valid" one without a score.
    trial(home, "j1", "sum", "gpt", 2, 0.0, reason="the verify run timed out")
    save_trial(home, "j1", Trial(trial_id("sum", "gpt", 3), "sum", "gpt", 3, phase="done",
                                 evaluation="valid", score=None))  # fmt: skip
    trial(home, "j1", "broken-task", "gpt", 1, 1.0)
    trial(home, "j1", "broken-task", "gpt", 2, phase="verifying", evaluation="unknown")

    cmp = compare([read_job(home, "j1")])
    hello = cmp.cell("hello", "gpt")
    assert (hello.n, hello.mean) == (3, pytest.approx(2 / 3))
    assert hello.spread == pytest.approx(math.sqrt(1 / 3))  # sample std of 0, 1, 1
    sum_gpt = cmp.cell("sum", "gpt")
    assert (sum_gpt.n, sum_gpt.mean, sum_gpt.spread) == (1, 0.5, None)
    assert (sum_gpt.count("valid"), sum_gpt.count("invalid"), sum_gpt.count("unknown")) == (1, 2, 0)
    assert cmp.cell("broken-task", "oracle").mean is None
    assert cmp.cell("broken-task", "gpt").count("unknown") == 1

    # Paired: broken-task has no valid oracle trial, so both methods are compared on 2 tasks.
    assert cmp.paired_tasks == ["hello", "sum"]
    assert cmp.left_out == [("broken-task", "oracle: 3 invalid (no reward file)")]
    assert cmp.paired("oracle") == (1.0, 0.0)
    assert cmp.paired("gpt")[0] == pytest.approx((2 / 3 + 0.5) / 2)

    data = cmp.to_json()
    assert set(data) == {"jobs", "methods", "tasks", "paired"}
    assert data["paired"] == {
        "tasks": ["hello", "sum"],
        "n": 2,
        "left_out": [{"task": "broken-task", "reason": "oracle: 3 invalid (no reward file)"}],
    }
    gpt = next(m for m in data["methods"] if m["label"] == "gpt")
    assert (gpt["valid"], gpt["invalid"], gpt["unknown"], gpt["tasks_valid"]) == (5, 2, 1, 3)
    cells = {row["task"]: row["cells"] for row in data["tasks"]}
    shown = {t["seed"]: t for t in cells["sum"]["gpt"]["trials"]}
    assert shown[2]["evaluation"] == "invalid" and shown[2]["score"] is None
    assert shown[2]["reason"] == "the verify run timed out"
    assert shown[3]["evaluation"] == "invalid" and shown[3]["reason"] == "valid, but no score"


def test_a_task_without_any_valid_trial_for_a_method_leaves_pairing_empty(orbit: Orbit) -> None:
    home = home_of(orbit)
    job(home, "j1", ["a"], ["oracle", "empty"])
    trial(home, "j1", "a", "oracle", 1, 1.0)
    cmp = compare([read_job(home, "j1")])
    assert cmp.paired_tasks == []
    assert cmp.left_out == [("a", "empty: not run")]
    assert cmp.paired("oracle") == (None, None)


def test_methods_of_several_jobs_are_qualified_only_when_names_collide(orbit: Orbit) -> None:
    home = home_of(orbit)
    job(home, "j1", ["a", "b"], ["oracle", "gpt"], name="first")
    job(home, "j2", ["a", "b", "c"], ["oracle", "claude"], name="second")
    for task, score in (("a", 0.0), ("b", 1.0)):
        trial(home, "j1", task, "oracle", 1, 1.0)
        trial(home, "j1", task, "gpt", 1, score)
    for task in ("a", "b", "c"):
        trial(home, "j2", task, "oracle", 1, 1.0)
        trial(home, "j2", task, "claude", 1, 0.5)
    cmp = compare_jobs(home, ["first", "j2", "j1"])  # by name and id; j1 once
    assert [c.label for c in cmp.columns] == ["j1:oracle", "gpt", "j2:oracle", "claude"]
    assert (cmp.columns[0].job, cmp.columns[0].method) == ("j1", "oracle")
    assert cmp.tasks == ["a", "b", "c"]
    assert cmp.paired_tasks == ["a", "b"]
    assert cmp.left_out == [("c", "j1:oracle: not run; gpt: not run")]
    assert cmp.paired("gpt") == (0.5, pytest.approx(math.sqrt(0.5)))
    assert cmp.paired("claude")[0] == 0.5
    with pytest.raises(NotFoundError, match="no job 'nope'"):
        compare_jobs(home, ["nope"])


def test_unreadable_trial_files_are_listed_not_fatal(orbit: Orbit) -> None:
    home = home_of(orbit)
    job(home, "j1", ["a"], ["oracle"])
    trial(home, "j1", "a", "oracle", 1, 1.0)
    folder = job_dir(home, "j1") / "trials"
    (folder / "cut.json").write_text('{"id": "a__oracle__2", "task": "a", ')
    (folder / "typed.json").write_text(json.dumps({"id": "x", "task": "a", "method": "oracle",
                                                   "seed": "two"}))  # fmt: skip
    (folder / "list.json").write_text("[1, 2]")
    rec = read_job(home, "j1")
    assert len(rec.trials) == 1
    problems = {u.file: u.problem for u in rec.unreadable}
    assert set(problems) == {"cut.json", "typed.json", "list.json"}
    assert problems["cut.json"].startswith("not JSON")
    assert problems["typed.json"] == "'seed' is \"two\""
    assert problems["list.json"] == "not a JSON object"
    assert rec.summary()["trials"] == 4
    assert compare([rec]).cell("a", "oracle").mean == 1.0

    # `bench show` and `bench jobs` read the same way: the damaged files named, the rest shown.
    save_trial(home, "j1", Trial(trial_id("a", "oracle", 3), "a", "oracle", 3, phase="done",
                                 evaluation="valid", score=None))  # fmt: skip
    res = orbit("bench", "show", "j1", "--json")
    assert res.code == 0, res.err
    shown = res.json()
    assert {u["file"] for u in shown["job"]["unreadable"]} == {
        "cut.json",
        "typed.json",
        "list.json",
    }
    assert (shown["job"]["valid"], shown["job"]["invalid"], shown["job"]["trials"]) == (1, 1, 5)
    by_seed = {t["seed"]: t for t in shown["trials"]}
    assert (by_seed[3]["evaluation"], by_seed[3]["reason"]) == ("invalid", "valid, but no score")
    res = orbit("bench", "show", "j1")
    assert res.code == 0 and "trial file cut.json: not JSON" in res.err, res.err
    assert "valid, but no score" in res.out
    jobs = orbit("bench", "jobs", "--json").json()["jobs"]
    assert [(j["id"], j["valid"], len(j["unreadable"])) for j in jobs] == [("j1", 1, 3)]


def test_compare_command_text_json_and_errors(orbit: Orbit) -> None:
    home = home_of(orbit)
    job(home, "j1", ["hello", "hard"], ["oracle", "empty"], name="smoke", seeds=2)
    for seed in (1, 2):
        trial(home, "j1", "hello", "oracle", seed, 1.0, solve_run="1", verify_runs=["2"])
        trial(home, "j1", "hello", "empty", seed, 0.0)
        trial(home, "j1", "hard", "oracle", seed, reason="no reward file", solve_run="5")
        trial(home, "j1", "hard", "empty", seed, 0.0)
    res = orbit("bench", "compare", "smoke")
    assert res.code == 0, res.err
    assert "job j1 (smoke): toy, finished; 6 valid, 2 invalid" in res.out
    assert "hello  1 ± 0 (n=2)" in res.out
    assert "invalid ×2" in res.out
    assert "paired over 1 of 2 tasks valid for every method" in res.out
    assert "  oracle: 1\n" in res.out and "  empty: 0\n" in res.out
    assert "left out hard: oracle: 2 invalid (no reward file)" in res.out
    assert "hard × oracle seed 1: no reward file (runs 5)" in res.out

    data = orbit("bench", "compare", "j1", "--json").json()
    assert data["paired"]["tasks"] == ["hello"]
    assert [m["paired_mean"] for m in data["methods"]] == [1.0, 0.0]

    missing = orbit("bench", "compare", "j9")
    assert missing.code == ExitCode.NOT_FOUND and missing.out == ""
    assert missing.err.strip() == "orbit: no job 'j9' (see `orbit bench jobs`)"
    (job_dir(home, "j2")).mkdir(parents=True)
    (job_dir(home, "j2") / "job.json").write_text('{"id": "j2", "benchmark": "toy", "tasks": 3}')
    for text, problem in (
        ('{"id": "j2", "benchmark": "toy", "tasks": 3}', "job.json does not hold a job"),
        (
            '{"id": "j2", "benchmark": "toy", "name": null, "tasks": [], "methods": "abc"}',
            "job.json: 'methods' is not a list of objects",
        ),
    ):
        (job_dir(home, "j2") / "job.json").write_text(text)
        corrupt = orbit("bench", "compare", "j2")
        assert corrupt.code == ExitCode.CORRUPT and "Traceback" not in corrupt.err
        assert corrupt.err.strip() == f"orbit: job j2: {problem}"


# --- usage on real runs ------------------------------------------------------------------------
HOG = (
    "import time\n"
    "block = bytearray({mb} * 2**20)\n"
    "for i in range(0, len(block), 4096): block[i] = 1\n"
    "end = time.time() + {secs}\n"
    "while time.time() < end: pass\n"
)


def _solve(orbit: Orbit, image: str, name: str, mb: int, secs: float, mem: str) -> str:
    return orbit.submit(
        "--image", image, "--no-project", "--cpus", "1", "--mem", mem, "-n", name,
        "--", "python3", "-c", HOG.format(mb=mb, secs=secs),
    )  # fmt: skip


def test_usage_from_the_peaks_of_real_solve_runs(
    orbit: Orbit, python_image: str, busybox: str, tmp_path: Path
) -> None:
    big = _solve(orbit, python_image, "big-solve", 300, 2.5, "1")
    small = _solve(orbit, python_image, "small-solve", 20, 1.5, "1")
    oom = _solve(orbit, python_image, "oom-solve", 600, 1, "0.25")
    quick = orbit.submit("--image", busybox, *SMALL, "-n", "quick", "--", "true")
    busy = orbit.submit("--image", busybox, *SMALL, "-n", "busy", "--", "sleep", "120")
    for run_id in (big, small, oom, quick):
        orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 120)
    orbit.wait_for(busy, lambda s: s["state"] == "running", 60)
    assert orbit.status(oom)["oom_killed"] is True

    home = home_of(orbit)
    job(home, "j1", ["big", "small", "greedy", "quick", "unsure"], ["oracle"])
    trial(home, "j1", "big", "oracle", 1, 1.0, solve_run=big)
    trial(home, "j1", "small", "oracle", 1, 1.0, solve_run=small)
    trial(home, "j1", "greedy", "oracle", 1, reason="the solve was killed for memory",
          solve_run=oom)  # fmt: skip
    trial(home, "j1", "quick", "oracle", 1, 1.0, solve_run=quick)
    trial(home, "j1", "unsure", "oracle", 1, solve_run=busy, phase="solving", evaluation="unknown")
    trial(home, "j1", "unsure", "oracle", 2, reason="the solve run was lost", solve_run="9999")

    usage = {u.task: u for u in measure(RunStore(home), [read_job(home, "j1")])}
    peak_big = orbit.status(big)["peaks"]
    assert usage["big"].mem_bytes == peak_big["mem_bytes"] >= 300 * 2**20
    # It spun a core for 2.5 s (the share it got depends on the machine's other load).
    assert 0 < usage["big"].cpu_cores == max(peak_big["cpu_cores"], usage["big"].cpu_cores)
    assert usage["big"].cpu_seconds == peak_big["cpu_seconds"] > 0
    suggested = usage["big"].suggestion()
    assert suggested is not None
    assert suggested["mem_gb"] == math.ceil(peak_big["mem_bytes"] * 1.25 / GIB / 0.5) * 0.5
    assert suggested["cpus"] == 1 and suggested["gpus"] == 0 and suggested["timeout_min"] == 1
    small_s = usage["small"].suggestion()
    assert small_s is not None and small_s["mem_gb"] == 0.5  # 20 MB: the smallest step
    greedy = usage["greedy"].suggestion()
    assert greedy is not None and greedy["mem_gb"] >= 0.5
    assert greedy["mem_gb"] == math.ceil(usage["greedy"].mem_bytes * 2 / GIB / 0.5) * 0.5
    assert any("killed for memory" in n for n in usage["greedy"].notes())
    # `true` may end before the shepherd's first sample: it counts all the same, as little use.
    assert usage["quick"].runs == [quick]
    assert usage["quick"].suggestion() == {"cpus": 1, "mem_gb": 0.5, "gpus": 0, "timeout_min": 1}
    assert usage["unsure"].suggestion() is None
    assert usage["unsure"].notes() == [
        f"run {busy}: still running",
        "run 9999: cannot be read (no run '9999')",
    ]
    assert orbit("cancel", busy).code == 0
    orbit.wait_for(busy, lambda s: bool(s.get("finished_at")), 60)

    document = resources_file(list(usage.values()))
    assert set(document) == {"big", "small", "greedy", "quick", "*"}
    assert document["*"]["mem_gb"] == max(suggested["mem_gb"], greedy["mem_gb"])
    assert document["big"]["measured"]["runs"] == [big]

    out = tmp_path / "resources.json"
    res = orbit("bench", "usage", "j1", "-o", str(out))
    assert res.code == 0, res.err
    assert json.loads(out.read_text()) == json.loads(json.dumps(document))
    assert f"wrote {out} (5 entries)" in res.out
    assert f"unsure: run {busy}: cancelled (its peaks are partial)" in res.out
    assert "big " in res.out and "1 CPU" in res.out
    data = orbit("bench", "usage", "j1", "--json").json()
    assert set(data) == {"tasks", "resources"}
    assert [t["task"] for t in data["tasks"]] == ["big", "small", "greedy", "quick", "unsure"]
    bad = orbit("bench", "usage", "j1", "-o", str(tmp_path / "no" / "such" / "dir.json"))
    assert bad.code == ExitCode.USAGE and bad.err.count("\n") == 1 and "Traceback" not in bad.err


def test_peaks_are_read_from_the_containers_own_cgroup_only() -> None:
    """A pid whose cgroup does not name the container (a short run's pid, reused by then) gives
    no counters: the root cgroup's would be the whole machine's."""
    import os

    from orbit.sched.cgroup import locate

    assert locate("0" * 64, os.getpid()) == {}

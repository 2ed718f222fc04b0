"""The ASI-Bench adapter (orbit/bench/asi.py) on what this machine has: an instances folder in
the layout `asibench task pull` writes, checkouts with and without the fixes ASI Agent runs
need, a real virtual environment importing a frozen copy, the commands and mounts of the runs,
and reports in `asibench score`'s schema. Hugging Face cannot be reached here, so no real
instance is pulled and no real run is made (docs/bench.md, ASI: what is and is not verified)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orbit.bench.asi import AsiAdapter, imported_package, interpreter_prefixes, problems
from orbit.bench.model import Benchmark, Method
from orbit.errors import OrbitError, UsageError
from orbit.store.home import Home

# Small stand-ins for the lines the check looks at, in the shape of ASI's own code.
CLI = '@click.option("--fail-on-agent-error", is_flag=True, default=False)\n'
BASE_FIXED = (
    "def is_os_sandbox_timeout(success, log):\n    return _is_timeout_marker(success, log)\n"
)
ADAPTER_FIXED = (
    "if is_os_sandbox_timeout(success, log):\n    status = RunStatus.TIMEOUT\n"
    "elif success:\n    status = RunStatus.COMPLETED\n"
)
ADAPTER_BUGGY = (
    'if "timed out" in log:\n    status = RunStatus.TIMEOUT\n'
    "elif success:\n    status = RunStatus.COMPLETED\n"
)


def checkout(root: Path, *, cli: str = CLI, base: str = BASE_FIXED, claude: str = ADAPTER_FIXED):
    pkg = root / "ai4sci_bench"
    (pkg / "adapters").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text(cli)
    (pkg / "adapters" / "subprocess_base.py").write_text(base)
    (pkg / "adapters" / "codex_cli.py").write_text(ADAPTER_FIXED)
    (pkg / "adapters" / "claude_code_cli.py").write_text(claude)
    (root / "tasks" / "physics" / "pendulum").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "asibench"\n')
    return root


def instances(root: Path) -> Path:
    """Two instances as pulled: one of seed31415 (public reference/), one without (seed42)."""
    if root.exists():
        return root
    full = root / "physics.pendulum__s31415_0"
    (full / "data").mkdir(parents=True)
    (full / "reference").mkdir()
    for level in ("b1", "b2", "b3", "b4"):
        (full / f"prompt_{level}.md").write_text(f"Fit the period ({level}).\n")
    (full / "data" / "swings.csv").write_text("t,theta\n0,0.1\n")
    (full / "task_info.json").write_text('{"id": "physics.pendulum"}\n')
    (full / "reference" / "gt.json").write_text('{"period": 2.007}\n')
    private = root / "chem.kinetics__s42_0"
    private.mkdir()
    (private / "prompt_b1.md").write_text("Find the rate constant.\n")
    (root / "not-an-instance").mkdir()
    (root / "README.md").write_text("pulled\n")
    return root


def venv(path: Path, site_files: dict[str, str]) -> Path:
    """A real virtual environment (no pip) whose site-packages holds `site_files`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = next((path / "lib").glob("python3*/site-packages"))
    for name, text in site_files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return path / "bin" / "python"


def adapter(tmp_path: Path, python: Path, **config: str) -> AsiAdapter:
    root = tmp_path / "ASI-Bench"
    if not root.exists():
        checkout(root)
    settings = {
        "instances": str(instances(tmp_path / "pulled")),
        "python": str(python),
        "image": "orbit-test/python:3",
        **config,
    }
    bench = Benchmark(name="asi", dir=str(root), adapter="asi", config=settings)
    return AsiAdapter(bench, Home(tmp_path / "home", dict(os.environ)))


@pytest.fixture
def editable(tmp_path: Path) -> Path:
    """A venv with the checkout installed editable (a .pth file naming it)."""
    root = checkout(tmp_path / "ASI-Bench")
    return venv(tmp_path / "venv", {"_asibench.pth": f"{root}\n"})


# --- tasks from the instances folder ------------------------------------------------------------
def test_tasks_are_instances_at_levels(tmp_path: Path, editable: Path) -> None:
    tasks = {t.name: t for t in adapter(tmp_path, editable, levels="b1,b3").tasks()}
    assert sorted(tasks) == [
        "chem.kinetics__s42_0@b1",
        "chem.kinetics__s42_0@b3",
        "physics.pendulum__s31415_0@b1",
        "physics.pendulum__s31415_0@b3",
    ]
    b1 = tasks["physics.pendulum__s31415_0@b1"]
    assert b1.supported and b1.timeout_min == 180.0
    assert b1.data == {
        "instance": str(tmp_path / "pulled" / "physics.pendulum__s31415_0"),
        "task_id": "physics.pendulum",
        "level": "b1",
    }
    assert tasks["chem.kinetics__s42_0@b3"].reason == "the instance has no prompt_b3.md"
    assert "seed42" in str(tasks["chem.kinetics__s42_0@b1"].reason)


def test_bad_configuration_is_one_line(tmp_path: Path, editable: Path) -> None:
    with pytest.raises(UsageError, match="-c levels must be some of b1,b2,b3,b4"):
        adapter(tmp_path, editable, levels="b5")
    with pytest.raises(UsageError, match=r"instances folder .* is missing"):
        adapter(tmp_path, editable, instances=str(tmp_path / "nowhere")).tasks()
    with pytest.raises(UsageError, match=r"ASI needs -c python=/path/to/venv/bin/python"):
        adapter(tmp_path, Path("python3")).check()


# --- the pre-launch check -------------------------------------------------------------------------
def test_a_fixed_checkout_passes_and_the_bug_is_found(tmp_path: Path) -> None:
    good = checkout(tmp_path / "good")
    assert problems(good, None, agent=None) == []
    assert problems(good, None, agent="codex") == []
    buggy = checkout(tmp_path / "buggy", claude=ADAPTER_BUGGY)
    assert problems(buggy, None, agent="codex") == []
    [found] = problems(buggy, None, agent="claude-code")
    assert "adapters/claude_code_cli.py takes a background timeout warning" in found


def test_an_old_or_incomplete_checkout_is_named(tmp_path: Path) -> None:
    old = checkout(tmp_path / "old", cli="@click.option('--retries')\n", base="pass\n")
    found = problems(old, None, agent=None)
    assert found == [
        "asibench run has no --fail-on-agent-error (update the checkout)",
        "no sandbox timeout fix (adapters/subprocess_base.py; update the checkout)",
    ]
    partial = tmp_path / "partial"
    (partial / "ai4sci_bench").mkdir(parents=True)
    assert problems(partial, None, agent=None) == [
        "no tasks/ catalog (not a complete ASI-Bench source checkout)",
        "no ai4sci_bench/cli.py (not a complete ASI-Bench source checkout)",
    ]


def test_the_copy_the_interpreter_imports_is_checked_too(tmp_path: Path) -> None:
    root = checkout(tmp_path / "ASI-Bench")
    frozen = venv(
        tmp_path / "frozen",
        {
            "ai4sci_bench/__init__.py": "",
            "ai4sci_bench/cli.py": CLI,
            "ai4sci_bench/adapters/subprocess_base.py": "pass\n",
            "ai4sci_bench/adapters/codex_cli.py": ADAPTER_BUGGY,
        },
    )
    copy = imported_package(frozen)
    assert copy is not None and copy.name == "ai4sci_bench" and "frozen" in str(copy)
    found = problems(root, frozen, agent="codex")
    assert len(found) == 2 and all(f"the copy {frozen} imports ({copy})" in f for f in found)
    assert "no sandbox timeout fix" in found[0] and "codex_cli.py takes" in found[1]
    editable = venv(tmp_path / "editable", {"_asibench.pth": f"{root}\n"})
    assert imported_package(editable) == root / "ai4sci_bench"
    assert problems(root, editable, agent="codex") == []
    bare = venv(tmp_path / "bare", {})
    assert problems(root, bare, agent=None) == [f"{bare} cannot import ai4sci_bench"]


def test_check_for_bench_add(tmp_path: Path) -> None:
    root = checkout(tmp_path / "ASI-Bench", claude=ADAPTER_BUGGY)
    python = venv(tmp_path / "venv", {"_asibench.pth": f"{root}\n"})
    asi = adapter(tmp_path, python)
    said = asi.check()
    assert said.startswith("ASI-Bench, 2 tasks")
    assert "claude_code_cli has the timeout-warning bug (claude-code refused)" in said
    (root / "ai4sci_bench" / "cli.py").write_text("\n")
    with pytest.raises(UsageError, match=f"ASI checkout {root}: asibench run has no"):
        asi.check()


# --- the runs -------------------------------------------------------------------------------------
def test_the_solve_runs_asibench_on_one_instance_without_its_answers(
    tmp_path: Path, editable: Path
) -> None:
    asi = adapter(tmp_path, editable, timeout_min="30")
    task = next(t for t in asi.tasks() if t.name == "physics.pendulum__s31415_0@b1")
    trial = tmp_path / "trial"
    phase = asi.solve(task, Method("empty", "empty"), trial)
    root = str(tmp_path / "ASI-Bench")
    assert phase.command == [
        str(editable), "-m", "ai4sci_bench.cli", "run",
        "--instances-dir", "/orbit/asi/instances",
        "--tasks", "physics.pendulum",
        "--prompt-levels", "b1",
        "--tasks-dir", f"{root}/tasks",
        "--output-dir", "/logs/artifacts/asi-results",
        "--sandbox", "none",
        "--timeout", "1800",
        "--fail-on-agent-error",
        "--agent-cmd", "true",
    ]  # fmt: skip
    assert phase.image == "orbit-test/python:3" and phase.workdir == root
    assert phase.timeout_min == 45.0 and not phase.commit
    staged = trial / "instance" / "physics.pendulum__s31415_0"
    assert (staged / "prompt_b1.md").is_file() and (staged / "data" / "swings.csv").is_file()
    assert not (staged / "reference").exists()  # the agent never sees the answers
    targets = {m["target"]: m for m in phase.mounts}
    assert targets["/orbit/asi/instances/physics.pendulum__s31415_0"]["source"] == str(staged)
    assert targets[root] == {"source": root, "target": root, "rw": False}
    assert targets[f"{root}/.ai4sci-bench"] == {"tmpfs": True, "target": f"{root}/.ai4sci-bench"}
    venv_dir = str(tmp_path / "venv")
    assert targets[venv_dir]["rw"] is False
    assert targets["/logs/artifacts"]["rw"] is True
    assert set(phase.run_dirs) == {"logs/artifacts", "logs/agent"}

    agent = asi.solve(task, Method("gpt", "codex", auth="p", model="gpt-5", effort="high"), trial)
    assert agent.command[-4:] == [
        "--agent",
        "codex_cli",
        "--agent-config",
        '{"model": "gpt-5", "effort": "high"}',
    ]
    with pytest.raises(OrbitError, match="no reference solutions"):
        asi.solve(task, Method("oracle", "oracle"), trial)


def test_an_agent_is_refused_before_launch_on_a_buggy_checkout(tmp_path: Path) -> None:
    root = checkout(tmp_path / "ASI-Bench", claude=ADAPTER_BUGGY)
    python = venv(tmp_path / "venv", {"_asibench.pth": f"{root}\n"})
    asi = adapter(tmp_path, python)
    task = asi.tasks()[-1]
    with pytest.raises(OrbitError, match=r"claude_code_cli\.py takes a background timeout"):
        asi.solve(task, Method("c", "claude-code", auth="p"), tmp_path / "trial")
    codex = asi.solve(task, Method("g", "codex", auth="p"), tmp_path / "trial")
    assert codex.command[-3:] == ["codex_cli", "--agent-config", "{}"]


def test_the_interpreter_is_mounted_at_its_own_paths(tmp_path: Path, editable: Path) -> None:
    base = Path(sys.base_prefix)
    expected = [str(tmp_path / "venv")]
    if str(base) not in ("/", "/usr", "/usr/local"):
        expected.append(str(base))
    assert interpreter_prefixes(editable) == expected


def test_the_verify_scores_the_collected_results(tmp_path: Path, editable: Path) -> None:
    asi = adapter(tmp_path, editable)
    task = next(t for t in asi.tasks() if t.name.startswith("physics."))
    trial = tmp_path / "trial"
    phase = asi.verify(task, trial, None)
    assert phase.command[3:] == [
        "score", "--repo", "seed31415",
        "--results-dir", "/orbit/asi/results",
        "--instances-dir", "/orbit/asi/instances",
        "--tasks-dir", f"{tmp_path / 'ASI-Bench'}/tasks",
        "--output", "/logs/verifier/local_score.json",
    ]  # fmt: skip
    targets = {m["target"]: m for m in phase.mounts}
    instance = tmp_path / "pulled" / "physics.pendulum__s31415_0"
    assert targets[f"/orbit/asi/instances/{instance.name}"]["source"] == str(instance)
    assert targets["/orbit/asi/results"]["source"] == str(trial / "logs/artifacts/asi-results")
    assert phase.run_dirs == ["logs/verifier"]


def report(tmp_path: Path, *results: dict) -> Path:
    out = tmp_path / "verify-run"
    (out / "logs" / "verifier").mkdir(parents=True, exist_ok=True)
    body = {"schema_version": 2, "repo": "seed31415", "official": False, "results": list(results)}
    (out / "logs" / "verifier" / "local_score.json").write_text(json.dumps(body))
    return out


def test_the_score_is_the_final_attempt_of_the_level(tmp_path: Path, editable: Path) -> None:
    asi = adapter(tmp_path, editable)
    task = next(t for t in asi.tasks() if t.name.endswith("s31415_0@b1"))
    item = {"prompt_level": "b1", "attempt": 1, "evaluation_status": "completed"}
    out = report(
        tmp_path,
        {**item, "final_score": 20.0, "max_score": 100.0},
        {**item, "attempt": 2, "final_score": 73.5, "max_score": 100.0},
    )
    got = asi.score(task, out)
    assert got.valid and got.score == pytest.approx(0.735)
    assert got.scores == {"final_score": 73.5, "max_score": 100.0}

    failed = {**item, "evaluation_status": "evaluation_invalid", "final_score": None}
    bad = asi.score(task, report(tmp_path, {**failed, "failure_kind": "evaluator_runtime_error"}))
    assert not bad.valid and bad.reason == "the ASI scorer failed (evaluator_runtime_error)"
    assert asi.score(task, report(tmp_path)).reason.startswith("the score report has no result")
    (out / "logs" / "verifier" / "local_score.json").unlink()
    assert asi.score(task, out).reason == "asibench score wrote no report"


# --- end to end, with the asibench stand-in ------------------------------------------------------
STANDIN = Path(__file__).resolve().parent / "standins" / "asibench"


def test_asi_end_to_end_with_the_stand_in(orbit, python_image: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Real Orbit runs: the host's virtual environment (and its base Python) mounted into the
    image, the stand-in's `run` in the solve, `score` in the verify; empty scores 0, validly,
    and the solve never saw the instance's reference/; the oracle is refused."""
    from test_bench_engine import kill_holder, remove_solved_images

    root = tmp_path / "ASI-Bench"
    shutil.copytree(STANDIN, root)
    (root / "tasks" / "physics" / "pendulum").mkdir(parents=True)
    pulled = instances(tmp_path / "pulled")
    (pulled / "physics.pendulum__s31415_0" / "reference" / "answer.txt").write_text("2.007\n")
    python = venv(tmp_path / "venv", {"_asibench.pth": f"{root}\n"})
    config = [f"python={python}", f"instances={pulled}", f"image={python_image}"]
    options = [part for c in config for part in ("-c", c)]
    res = orbit("bench", "add", "asi", str(root), "--adapter", "asi", *options)
    assert res.code == 0, res.err
    assert "2 tasks, 1 supported" in res.out
    try:
        res = orbit("bench", "run", "asi", "-m", "empty", "-m", "oracle", "-w", "--json")
        trials = {t["method"]: t for t in res.json()["trials"]}
        empty, oracle = trials["empty"], trials["oracle"]
        got = (empty["execution"], empty["evaluation"], empty["score"])
        assert got == ("succeeded", "valid", 0.0), empty
        assert empty["scores"] == {"final_score": 0.0, "max_score": 100.0}
        verify = orbit.run_dir(empty["runs"]["verify"][-1])
        report = json.loads((verify / "logs" / "verifier" / "local_score.json").read_text())
        assert report["results"][0]["reference_was_visible"] is False
        assert oracle["evaluation"] == "invalid" and "no reference solutions" in oracle["reason"]
    finally:
        for lock in (orbit.home / "bench" / "jobs").glob("*/driver.lock"):
            kill_holder(lock)
        remove_solved_images(orbit)

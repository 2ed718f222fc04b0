"""ASI-Bench through its own package (`asibench`), run inside Orbit runs (docs/bench.md, ASI).

    orbit bench add asi ../ASI-Bench --adapter asi -c python=/venv/bin/python \
        -c instances=/data/asi-seed31415 -c image=IMAGE

The benchmark's folder is an ASI-Bench source checkout (its tasks/ catalog holds the scorers);
`instances` is a folder filled by `asibench task pull --repo seed31415 --output-dir DIR`
(`<domain>.<task>__<suffix>/` with prompt_b1..b4.md, data/, task_info.json, reference/).
One Orbit task is one instance at one guidance level: `<instance>@<level>`.

    solve   `asibench run` for that instance alone (a copy of it without reference/, so the
            agent cannot read the answers), --sandbox none inside the run's container,
            --fail-on-agent-error (ASI's own attempt status becomes the run's exit code),
            results into /logs/artifacts/asi-results
    verify  `asibench score --repo seed31415` over those results, report into
            /logs/verifier/local_score.json
    score   that report's final_score / max_score (0..1); no report, no result or a scorer
            error: invalid

The interpreter (`python`, a virtual environment with asibench installed) and the checkout are
mounted read-only at their own paths; `image` must provide what the environment was made from.
ASI publishes no reference solutions: the oracle is refused. Before an agent method launches,
the checkout (and the copy of ai4sci_bench the interpreter imports, if it is another) is checked
for the fixes ASI Agent runs need (`problems`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, TypeGuard

from orbit import harnesses
from orbit.bench.model import Benchmark, Method, Phase, Score, Task
from orbit.errors import OrbitError, UsageError
from orbit.store.home import Home

LEVELS = ("b1", "b2", "b3", "b4")
REPO = "seed31415"  # the only contract ASI scores locally (seed42: `asibench submit`)
DEFAULT_TIMEOUT_MIN = 180.0  # asibench run's own default, 10800 s
SETUP_MARGIN_MIN = 15.0  # the run's limit: the agent's, plus asibench's own set-up
VERIFY_TIMEOUT_MIN = 60.0
INSTANCES = "/orbit/asi/instances"
RESULTS = "/logs/artifacts/asi-results"
REPORT = "local_score.json"
RUNTIME = ".ai4sci-bench"  # ASI's writable state inside the checkout (a tmpfs in the runs)
SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")  # the image's own, never mounted over
INSTANCE_NAME = re.compile(r"^([a-z0-9_]+(?:\.[A-Za-z0-9_-]+)+)__([A-Za-z0-9._-]+)$")


def agent_adapters() -> dict[str, str]:
    """The harnesses ASI-Bench has an agent adapter for: id → its module in adapters/."""
    return {
        h.id: h.cli.asi_adapter for h in harnesses.in_container() if h.cli and h.cli.asi_adapter
    }


# The known bug: any "timed out" in the agent's log (a background command's timeout warning)
# made a finished attempt a timeout, i.e. a failure. Fixed by matching the sandbox's exact marker.
TIMEOUT_BUG = re.compile(r"""["']timed out["']\s+in\s+\w*log\b""")
TIMEOUT_FIX = "def is_os_sandbox_timeout"
FAIL_FLAG = "--fail-on-agent-error"


class AsiAdapter:
    def __init__(self, bench: Benchmark, home: Home) -> None:
        self.bench = bench
        self.home = home
        self.checkout = Path(bench.dir).resolve()
        self.config = bench.config
        self.levels = _levels(self.config.get("levels", "b1"))
        self.timeout_min = _minutes(self.config.get("timeout_min"), DEFAULT_TIMEOUT_MIN)

    # --- configuration -------------------------------------------------------------------------
    def _path(self, key: str, example: str) -> Path:
        value = self.config.get(key)
        if not value:
            raise UsageError(f"benchmark {self.bench.name}: ASI needs -c {key}={example}")
        path = Path(value)
        return (path if path.is_absolute() else self.checkout / path).resolve(strict=False)

    def instances(self) -> Path:
        path = self._path("instances", "DIR (filled by `asibench task pull`)")
        if not path.is_dir():
            raise UsageError(f"benchmark {self.bench.name}: instances folder {path} is missing")
        return path

    def python(self) -> Path:
        # Not resolved: a virtual environment's interpreter is a link to its base interpreter.
        value = self.config.get("python")
        if not value or not Path(value).is_absolute():
            raise UsageError(
                f"benchmark {self.bench.name}: ASI needs -c python=/path/to/venv/bin/python"
            )
        return Path(value)

    def image(self) -> str:
        value = self.config.get("image")
        if not value:
            raise UsageError(
                f"benchmark {self.bench.name}: ASI runs need -c image=IMAGE (an image with "
                f"the Python the environment of {self.config.get('python')} was made from)"
            )
        return value

    # --- the adapter ---------------------------------------------------------------------------
    def check(self) -> str:
        """What `orbit bench add` says: the checkout's problems raise; an agent adapter with
        the timeout-warning bug is named (methods using it are refused at launch)."""
        common = problems(self.checkout, self.python(), agent=None)
        if common:
            raise UsageError(f"ASI checkout {self.checkout}: {'; '.join(common)}")
        count = len(self.tasks())
        notes = []
        for method, module in agent_adapters().items():
            if problems(self.checkout, self.python(), agent=method):
                notes.append(f"{module} has the timeout-warning bug ({method} refused)")
        return f"ASI-Bench, {count} tasks" + (f"; {'; '.join(notes)}" if notes else "")

    def tasks(self) -> list[Task]:
        out = []
        for folder in sorted(p for p in self.instances().iterdir() if p.is_dir()):
            match = INSTANCE_NAME.match(folder.name)
            if not match:
                continue
            for level in self.levels:
                out.append(self._task(folder, match.group(1), level))
        return out

    def _task(self, folder: Path, task_id: str, level: str) -> Task:
        data = {"instance": str(folder), "task_id": task_id, "level": level}
        task = Task(f"{folder.name}@{level}", timeout_min=self.timeout_min, data=data)
        if not (folder / f"prompt_{level}.md").is_file():
            task.supported, task.reason = False, f"the instance has no prompt_{level}.md"
        elif not (folder / "reference").is_dir():
            task.supported = False
            task.reason = "no public reference/ (seed42 is scored only by `asibench submit`)"
        return task

    def solve(self, task: Task, method: Method, trial_dir: Path) -> Phase:
        if method.agent == "oracle":
            raise OrbitError("ASI-Bench publishes no reference solutions: no oracle")
        if method.agent in agent_adapters():
            found = problems(self.checkout, self.python(), agent=method.agent)
            if found:
                raise OrbitError(f"ASI checkout {self.checkout}: {'; '.join(found)}")
        staged = self._stage(task, trial_dir)
        command = [
            *self.asibench(),
            "run",
            "--instances-dir", INSTANCES,
            "--tasks", str(task.data["task_id"]),
            "--prompt-levels", str(task.data["level"]),
            "--tasks-dir", str(self.checkout / "tasks"),
            "--output-dir", RESULTS,
            "--sandbox", "none",
            "--timeout", str(int((task.timeout_min or self.timeout_min) * 60)),
            FAIL_FLAG,
            *agent_args(method),
        ]  # fmt: skip
        mounts = [
            {"source": str(staged), "target": f"{INSTANCES}/{staged.name}", "rw": False},
            {"run_dir": "logs/artifacts", "target": "/logs/artifacts", "rw": True},
            {"run_dir": "logs/agent", "target": "/logs/agent", "rw": True},
        ]
        timeout = (task.timeout_min or self.timeout_min) + SETUP_MARGIN_MIN
        return self._phase(command, mounts, timeout, cpus=task.cpus, mem_gb=task.mem_gb)

    def verify(self, task: Task, trial_dir: Path, solved_image: str | None) -> Phase:
        instance = Path(str(task.data["instance"]))
        results = trial_dir / "logs" / "artifacts" / "asi-results"  # collected from the solve
        results.mkdir(parents=True, exist_ok=True)
        command = [
            *self.asibench(),
            "score",
            "--repo", REPO,
            "--results-dir", "/orbit/asi/results",
            "--instances-dir", INSTANCES,
            "--tasks-dir", str(self.checkout / "tasks"),
            "--output", f"/logs/verifier/{REPORT}",
        ]  # fmt: skip
        mounts = [
            {"source": str(instance), "target": f"{INSTANCES}/{instance.name}", "rw": False},
            {"source": str(results), "target": "/orbit/asi/results", "rw": False},
            {"run_dir": "logs/verifier", "target": "/logs/verifier", "rw": True},
        ]
        return self._phase(command, mounts, VERIFY_TIMEOUT_MIN)

    def score(self, task: Task, verify_output: Path) -> Score:
        return read_report(verify_output / "logs" / "verifier" / REPORT, task)

    # --- the runs --------------------------------------------------------------------------------
    def asibench(self) -> list[str]:
        """The command that runs asibench with the configured interpreter."""
        return [str(self.python()), "-m", "ai4sci_bench.cli"]

    def _phase(
        self,
        command: list[str],
        mounts: list[dict[str, Any]],
        timeout_min: float,
        **resources: Any,
    ) -> Phase:
        runtime = self.checkout / RUNTIME
        runtime.mkdir(exist_ok=True)  # the tmpfs's mount point in the read-only checkout
        shared = [
            {"source": str(self.checkout), "target": str(self.checkout), "rw": False},
            {"tmpfs": True, "target": str(runtime)},
            *(
                {"source": prefix, "target": prefix, "rw": False}
                for prefix in interpreter_prefixes(self.python())
            ),
        ]
        return Phase(
            command=command,
            image=self.image(),
            workdir=str(self.checkout),
            env={"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"},
            mounts=[*shared, *mounts],
            run_dirs=[m["run_dir"] for m in mounts if "run_dir" in m],
            timeout_min=timeout_min,
            **{k: v for k, v in resources.items() if v is not None},
        )

    def _stage(self, task: Task, trial_dir: Path) -> Path:
        """A copy of the instance without reference/ (the answers), in the trial's folder."""
        source = Path(str(task.data["instance"]))
        dest = trial_dir / "instance" / source.name
        shutil.rmtree(dest, ignore_errors=True)
        try:
            shutil.copytree(source, dest, ignore=shutil.ignore_patterns("reference"))
        except OSError as exc:
            raise OrbitError(f"cannot copy the instance {source}: {exc}") from None
        return dest


# --- commands, mounts, the report ----------------------------------------------------------
def agent_args(method: Method) -> list[str]:
    """`asibench run`'s agent options for a method: empty runs `true` as the agent command."""
    if method.agent == "empty":
        return ["--agent-cmd", "true"]
    if method.agent in agent_adapters():
        config = {k: v for k, v in (("model", method.model), ("effort", method.effort)) if v}
        return ["--agent", agent_adapters()[method.agent], "--agent-config", json.dumps(config)]
    raise OrbitError(f"ASI-Bench cannot run method agent {method.agent!r}")


def interpreter_prefixes(python: Path) -> list[str]:
    """The folders the interpreter needs at their own paths: its virtual environment (the
    folder holding pyvenv.cfg) and the base installation, unless it is the image's own."""
    out = []
    venv = python.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        out.append(str(venv))
        home = _venv_home(venv / "pyvenv.cfg")
        if home is not None and str(home.parent) not in SYSTEM_PREFIXES:
            out.append(str(home.parent))
    else:
        prefix = python.resolve().parent.parent
        if str(prefix) not in SYSTEM_PREFIXES:
            out.append(str(prefix))
    return list(dict.fromkeys(out))


def _venv_home(cfg: Path) -> Path | None:
    for line in cfg.read_text(errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home":
            return Path(value.strip())
    return None


def read_report(path: Path, task: Task) -> Score:
    """The trial's score from `asibench score`'s report."""
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        return Score(False, "asibench score wrote no report")
    except (OSError, ValueError) as exc:
        return Score(False, f"the score report cannot be read ({exc})")
    results = report.get("results") if isinstance(report, dict) else None
    if not isinstance(results, list) or not results:
        return Score(False, "the score report has no result (the solve left none)")
    level = task.data.get("level")
    mine = [r for r in results if isinstance(r, dict) and r.get("prompt_level") in (level, None)]
    if not mine:
        return Score(False, f"the score report has no result at level {level}")
    item = max(mine, key=lambda r: int(r.get("attempt") or 0))  # the final attempt
    if item.get("evaluation_status") != "completed":
        kind = item.get("failure_kind") or "evaluation_invalid"
        return Score(False, f"the ASI scorer failed ({kind})")
    final, top = item.get("final_score"), item.get("max_score")
    if not _is_number(final) or not _is_number(top) or top <= 0:
        return Score(False, "the score report has no final_score / max_score")
    scores = {"final_score": float(final), "max_score": float(top)}
    return Score(True, None, float(final) / float(top), scores)


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _levels(raw: str) -> list[str]:
    levels = [p.strip() for p in raw.split(",") if p.strip()]
    bad = [p for p in levels if p not in LEVELS]
    if bad or not levels:
        raise UsageError(f"-c levels must be some of {','.join(LEVELS)}, got {raw!r}")
    return levels


def _minutes(raw: str | None, default: float) -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise UsageError(f"-c timeout_min must be a positive number of minutes, got {raw!r}")
    return value


# --- the pre-launch check -------------------------------------------------------------------
def problems(checkout: Path, python: Path | None, agent: str | None) -> list[str]:
    """What keeps ASI Agent runs from being trusted, in the checkout and in the copy of
    ai4sci_bench the interpreter imports when that is another (a frozen, non-editable
    install): an incomplete checkout, `asibench run` without --fail-on-agent-error, no sandbox
    timeout fix, and, for `agent` (a harness with an ASI adapter), its adapter's
    timeout-warning bug."""
    found = [f"{p}" for p in package_problems(checkout / "ai4sci_bench", agent)]
    if not (checkout / "tasks").is_dir():
        found.insert(0, "no tasks/ catalog (not a complete ASI-Bench source checkout)")
    if python is None:
        return found
    imported = imported_package(python)
    if imported is None:
        found.append(f"{python} cannot import ai4sci_bench")
    elif imported.resolve() != (checkout / "ai4sci_bench").resolve():
        found.extend(
            f"the copy {python} imports ({imported}): {p}"
            for p in package_problems(imported, agent)
        )
    return found


def package_problems(package: Path, agent: str | None) -> list[str]:
    cli = _read(package / "cli.py")
    if cli is None:
        return [f"no {package.name}/cli.py (not a complete ASI-Bench source checkout)"]
    found = []
    if FAIL_FLAG not in cli:
        found.append(f"asibench run has no {FAIL_FLAG} (update the checkout)")
    if TIMEOUT_FIX not in (_read(package / "adapters" / "subprocess_base.py") or ""):
        found.append("no sandbox timeout fix (adapters/subprocess_base.py; update the checkout)")
    if agent in agent_adapters():
        name = f"adapters/{agent_adapters()[agent]}.py"
        source = _read(package / name)
        if source is None:
            found.append(f"no {name}")
        elif TIMEOUT_BUG.search(source):
            found.append(
                f"{name} takes a background timeout warning for a failed attempt "
                "(the known bug; update the checkout)"
            )
    return found


def imported_package(python: Path) -> Path | None:
    """The ai4sci_bench folder `python` imports, or None when it cannot."""
    code = "import os, ai4sci_bench; print(os.path.dirname(os.path.abspath(ai4sci_bench.__file__)))"
    try:
        done = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, cwd="/"
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return Path(lines[-1]) if done.returncode == 0 and lines else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None

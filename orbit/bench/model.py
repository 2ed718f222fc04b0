"""Benchmarks, jobs and trials: the records `orbit bench` keeps, and the adapter contract.

    ORBIT_HOME/bench/
      benchmarks/<name>.json       one registered benchmark (Benchmark)
      jobs/<job>/job.json          one job: its benchmark, tasks, methods, seeds (Job)
      jobs/<job>/trials/<id>.json  one trial: task × method × seed, its runs and outcome (Trial)
      jobs/<job>/trials/<id>/      the trial's files (collected artifacts, the instruction)
      jobs/<job>/driver.lock       held by the process driving the job (`orbit bench _drive`)
      next_job                     the next job number

Every solve and every verify of a trial is an Orbit run; a trial names its runs. A trial keeps
three things apart (only a valid evaluation has a score):

    execution   how the solve run ended: succeeded, failed (exit N), timed out, out of memory,
                lost, cancelled, not started (why)
    evaluation  valid | invalid | unknown, with the reason (e.g. "no reward file")
    cleanup     what is left to remove: the solved image, containers
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orbit.errors import CorruptError, NotFoundError
from orbit.store.files import atomic_write
from orbit.store.home import Home

BUILT_IN_METHODS = ("oracle", "empty")  # the agents of all other methods: orbit/harnesses/
EVALUATIONS = ("valid", "invalid", "unknown")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


# --- what an adapter describes ----------------------------------------------------------------
@dataclass
class Task:
    """One task of a benchmark, as its adapter sees it."""

    name: str
    supported: bool = True
    reason: str | None = None  # why it is not supported ("needs 2 GPUs, this machine has 0")
    cpus: float | None = None
    mem_gb: float | None = None
    gpus: int = 0
    timeout_min: float | None = None  # of the solve; None: no limit of the task's own
    data: dict[str, Any] = field(default_factory=dict)  # the adapter's own (path, parsed toml…)


@dataclass
class Phase:
    """One Orbit run of a trial (a solve or a verify), as the adapter asks for it."""

    command: list[str]
    image: str | None = None  # an image (used as is when local)…
    dockerfile: str | None = None  # …or a Dockerfile to build with BuildKit (cached by content)
    workdir: str | None = None  # None: the image's WORKDIR
    user: str | None = None  # None: the image's user
    network: str = "bridge"  # bridge | none | host
    env: dict[str, str] = field(default_factory=dict)
    pass_env: list[str] = field(default_factory=list)  # names, values from the caller: secrets
    mounts: list[dict[str, Any]] = field(default_factory=list)  # run.yaml `mounts` entries
    run_dirs: list[str] = field(default_factory=list)  # folders of the run directory to create
    cpus: float | None = None
    mem_gb: float | None = None
    gpus: int = 0
    timeout_min: float | None = None
    commit: bool = False  # keep the container's file system as an image when it ends
    instruction: str | None = None  # agent methods: the task's instruction (command left empty)
    collect: list[str] = field(default_factory=list)  # solve: container paths to keep (artifacts)


@dataclass
class Score:
    valid: bool
    reason: str | None = None  # why not valid
    score: float | None = None  # the trial's score (None unless valid)
    scores: dict[str, float] = field(default_factory=dict)  # every number the grader gave


@dataclass
class Method:
    """`-m name=agent[,auth=P,model=M,effort=E,bundle=DIR]`, or just `oracle` / `empty`."""

    name: str
    agent: str
    auth: str | None = None
    model: str | None = None
    effort: str | None = None
    bundle: str | None = None


class Adapter(Protocol):
    """What the engine asks of a benchmark's adapter (harbor.py, external.py, asi.py)."""

    def tasks(self) -> list[Task]: ...

    def solve(self, task: Task, method: Method, trial_dir: Path) -> Phase: ...

    def verify(self, task: Task, trial_dir: Path, solved_image: str | None) -> Phase: ...

    def score(self, task: Task, verify_output: Path) -> Score: ...


# --- records ----------------------------------------------------------------------------------
@dataclass
class Benchmark:
    name: str
    dir: str
    adapter: str  # harbor | asi | an executable's absolute path
    config: dict[str, str] = field(default_factory=dict)  # -c KEY=VALUE
    pass_env: list[str] = field(default_factory=list)  # reach the verify runs only
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # --resources FILE
    resources_file: str = ""  # that file's path, as it was read
    added_at: str = ""


@dataclass
class Job:
    id: str
    benchmark: str
    name: str | None
    tasks: list[str]
    methods: list[Method]
    seeds: int = 1
    max_running: int | None = None
    created_at: str = ""
    state: str = "running"  # running | finished | cancelled
    folder: str | None = None  # filed under this folder (`bench run --folder`, `orbit mv`)


@dataclass
class Trial:
    id: str  # <task>__<method>__<seed>, made safe for a file name
    task: str
    method: str
    seed: int
    phase: str = "pending"  # pending | solving | collecting | verifying | done
    solve_run: str | None = None
    verify_runs: list[str] = field(default_factory=list)  # all; the last not cancelled grades
    cancelled_verifies: list[str] = field(default_factory=list)  # of regrades cancelled
    earlier: dict[str, Any] | None = None  # while a regrade runs: the grading it would replace
    verifies: int = 0  # verify runs asked for: one more than verify_runs while one is submitted
    solved_image: str | None = None
    execution: str | None = None
    evaluation: str = "unknown"
    reason: str | None = None
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    cleanup: str = "pending"  # pending | done | the error
    updated_at: str = ""
    trajectories: list[str] = field(default_factory=list)  # agent methods: bench/trajectory.py

    GRADING = ("evaluation", "reason", "score", "scores")

    def keep_earlier(self) -> None:
        """Put back the grading a regrade would have replaced (its verify run was cancelled):
        that run is recorded in cancelled_verifies, the trial is done as it was before."""
        assert self.earlier is not None
        for key in self.GRADING:
            setattr(self, key, self.earlier.get(key))
        self.scores = dict(self.scores or {})
        if len(self.verify_runs) >= self.verifies:  # the regrade's run was submitted
            self.cancelled_verifies = [*self.cancelled_verifies, self.verify_runs[-1]]
        self.verifies = len(self.verify_runs)
        self.earlier = None


def trial_id(task: str, method: str, seed: int) -> str:
    raw = f"{task}__{method}__{seed}"
    return re.sub(r"[^A-Za-z0-9._-]", "-", raw)


# --- where they live ----------------------------------------------------------------------------
def bench_dir(home: Home) -> Path:
    return home.root / "bench"


def benchmark_path(home: Home, name: str) -> Path:
    return bench_dir(home) / "benchmarks" / f"{name}.json"


def job_dir(home: Home, job_id: str) -> Path:
    return bench_dir(home) / "jobs" / job_id


def trial_path(home: Home, job_id: str, trial: str) -> Path:
    return job_dir(home, job_id) / "trials" / f"{trial}.json"


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())


def _read(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise NotFoundError(f"no {what}") from None
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{path} cannot be read ({exc})") from None
    if not isinstance(data, dict):
        raise CorruptError(f"{path} is not a JSON object")
    return data


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k in cls.__dataclass_fields__}  # type: ignore[attr-defined]


def save_benchmark(home: Home, bench: Benchmark) -> None:
    _write(benchmark_path(home, bench.name), asdict(bench))


def load_benchmark(home: Home, name: str) -> Benchmark:
    data = _read(benchmark_path(home, name), f"benchmark {name!r} (see `orbit bench ls`)")
    return Benchmark(**_known(Benchmark, data))


def save_job(home: Home, job: Job) -> None:
    _write(job_dir(home, job.id) / "job.json", asdict(job))


def load_job(home: Home, job_id: str) -> Job:
    data = _read(job_dir(home, job_id) / "job.json", f"job {job_id!r} (see `orbit bench jobs`)")
    job = Job(**_known(Job, data))
    methods = data.get("methods") or []
    if not isinstance(methods, list) or not all(isinstance(m, dict) for m in methods):
        raise CorruptError(f"job {job_id}: job.json: 'methods' is not a list of objects")
    job.methods = [Method(**_known(Method, m)) for m in methods]
    return job


def save_trial(home: Home, job_id: str, trial: Trial) -> None:
    _write(trial_path(home, job_id, trial.id), asdict(trial))


def load_trials(home: Home, job_id: str) -> list[Trial]:
    """The job's trials; one whose file cannot be read is skipped, never the whole job."""
    folder = job_dir(home, job_id) / "trials"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append(Trial(**_known(Trial, _read(path, "trial"))))
        except (CorruptError, NotFoundError, TypeError):
            continue
    return out

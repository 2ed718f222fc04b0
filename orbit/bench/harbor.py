"""Harbor tasks (Terminal-Bench 2, TB-Science) as Orbit runs (docs/bench.md, "Harbor tasks").

A benchmark folder that is itself a task is one task; otherwise each immediate sub-folder with a
task.toml is one. Every task is listed: one Orbit cannot run faithfully is unsupported, with the
reason, and never run. A trial's solve runs in the task's image with /logs/agent and
/logs/artifacts; its verify runs in the solved image (shared) or a fresh image from tests/
(separate), always with a fresh /logs/verifier, so a reward the solve planted is never read.
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from orbit import harnesses
from orbit.bench.harbor_support import Machine, unsupported_reason
from orbit.bench.harbor_toml import (
    TEMPLATE,
    Environment,
    TaskConfig,
    TaskTomlError,
    read_task_toml,
    resolve,
)
from orbit.bench.model import Benchmark, Method, Phase, Score, Task
from orbit.errors import UsageError
from orbit.store.home import Home

TASK_TOML = "task.toml"
SOLUTION_MOUNT = "/orbit/bench/solution"
TESTS_MOUNT = "/orbit/bench/tests"
NETWORKS = {"public": "bridge", "no-network": "none"}
# Where the engine keeps what it collected from the solve (orbit/bench/collect.py).
ARTIFACTS = "artifacts"
LOG_ARTIFACTS = "logs/artifacts"


class HarborAdapter:
    def __init__(self, bench: Benchmark, home: Home) -> None:
        self.bench = bench
        self.home = home
        self.root = Path(bench.dir).expanduser().resolve()
        self._configs: dict[str, TaskConfig] = {}

    # --- listing --------------------------------------------------------------------------
    def tasks(self) -> list[Task]:
        """Every task folder, supported or not; a broken task.toml is that task's reason."""
        if (self.root / TASK_TOML).is_file():
            folders = [self.root]
        else:
            try:
                children = sorted(p for p in self.root.iterdir() if not p.name.startswith("."))
            except OSError as exc:
                raise UsageError(
                    f"benchmark {self.bench.name}: cannot list {self.root} ({exc.strerror or exc})"
                ) from None
            folders = [p for p in children if (p / TASK_TOML).is_file()]
        machine = Machine(self.home)
        out: list[Task] = []
        seen: dict[str, Path] = {}
        for folder in folders:
            task = self._task(folder, machine)
            if task.name in seen:
                task.supported = False
                task.reason = f"another task has the same name ({seen[task.name].name})"
            seen.setdefault(task.name, folder)
            out.append(task)
        return out

    def _task(self, folder: Path, machine: Machine) -> Task:
        data: dict[str, Any] = {"path": str(folder)}
        try:
            cfg = read_task_toml(folder / TASK_TOML)
        except TaskTomlError as exc:
            return Task(name=folder.name, supported=False, reason=str(exc), data=data)
        self._configs[str(folder)] = cfg
        env = cfg.environment
        reason = unsupported_reason(folder, cfg, machine, self.home.environ)
        data.update(mode=cfg.verifier_mode, schema_version=cfg.schema_version)
        if env.storage_mb is not None:
            data["storage_mb"] = env.storage_mb  # recorded, not enforced
        return Task(
            name=cfg.name or folder.name,
            supported=reason is None,
            reason=reason,
            cpus=env.cpus,
            mem_gb=env.memory_mb / 1024 if env.memory_mb is not None else None,
            gpus=env.gpus or 0,
            timeout_min=cfg.agent_timeout_sec / 60 if cfg.agent_timeout_sec else None,
            data=data,
        )

    def _config(self, task: Task) -> tuple[Path, TaskConfig]:
        folder = Path(task.data["path"])
        cfg = self._configs.get(str(folder))
        if cfg is None:
            try:
                cfg = read_task_toml(folder / TASK_TOML)
            except TaskTomlError as exc:
                raise UsageError(f"task {task.name}: {exc}") from None
            self._configs[str(folder)] = cfg
        return folder, cfg

    # --- the solve ------------------------------------------------------------------------------
    def solve(self, task: Task, method: Method, trial_dir: Path) -> Phase:
        folder, cfg = self._config(task)
        env = cfg.environment
        image, dockerfile = self._solve_image(folder, env, trial_dir)
        values, pass_env = _environment_values(env.env, self.home.environ)
        phase = Phase(
            command=["true"],
            image=image,
            dockerfile=dockerfile,
            workdir=env.workdir,
            user=cfg.agent_user,
            network=_network(cfg.agent_network_mode or env.network_mode),
            env=values,
            pass_env=pass_env,
            mounts=[
                {"run_dir": "logs/agent", "target": "/logs/agent", "rw": True},
                {"run_dir": "logs/artifacts", "target": "/logs/artifacts", "rw": True},
            ],
            run_dirs=["logs/agent", "logs/artifacts"],
            cpus=task.cpus,
            mem_gb=task.mem_gb,
            gpus=task.gpus,
            timeout_min=task.timeout_min,
            commit=True,
            collect=[a.source for a in cfg.artifacts],
        )
        if method.agent == "oracle":
            extra, more = _environment_values(cfg.solution_env, self.home.environ)
            phase.env = {**phase.env, "DEBIAN_FRONTEND": "noninteractive", **extra}
            phase.pass_env = list(dict.fromkeys([*phase.pass_env, *more]))
            # solution/ is copied to /solution, a folder of the run directory: writable by
            # the script, kept with the run, and never part of the solved image.
            phase.mounts += [
                {"source": str(folder / "solution"), "target": SOLUTION_MOUNT},
                {"run_dir": "solution", "target": "/solution", "rw": True},
            ]
            phase.run_dirs.append("solution")
            phase.command = ["bash", "-c", _oracle_script()]
        elif method.agent in harnesses.ids():
            phase.command = []
            phase.instruction = instruction_text(folder / "instruction.md")
        elif method.agent != "empty":
            raise UsageError(f"method {method.name}: Harbor tasks have no agent {method.agent!r}")
        return phase

    def _solve_image(
        self, folder: Path, env: Environment, trial_dir: Path
    ) -> tuple[str | None, str | None]:
        """(image, dockerfile) of the task's environment. A named image is used when it is
        local or when there is no Dockerfile; else the Dockerfile is built (nothing pulled)."""
        context = folder / "environment"
        dockerfile = context / "Dockerfile"
        if not env.docker_image:
            return None, str(dockerfile)
        if dockerfile.is_file():
            if _image_is_local(env.docker_image):
                return env.docker_image, None
            return None, str(dockerfile)
        files = [p for p in context.iterdir() if not p.name.startswith(".")]
        if not files:
            return env.docker_image, None
        # Harbor puts the files of environment/ into the working directory of a named image.
        return None, str(_upload_dockerfile(context, env, trial_dir))

    # --- the verify -----------------------------------------------------------------------------
    def verify(self, task: Task, trial_dir: Path, solved_image: str | None) -> Phase:
        folder, cfg = self._config(task)
        separate = cfg.verifier_mode == "separate"
        where = (cfg.verifier_environment or Environment()) if separate else cfg.environment
        image: str | None = solved_image
        dockerfile = None
        if separate:
            built = folder / "tests" / "Dockerfile"
            named = where.docker_image
            if named and (_image_is_local(named) or not built.is_file()):
                image = named
            else:
                image, dockerfile = None, str(built)
        values, pass_env = _environment_values(where.env, self.home.environ)
        exports, more = _verifier_values(cfg.verifier_env, self.home.environ, values)
        mounts: list[dict[str, Any]] = [
            {"run_dir": "logs/verifier", "target": "/logs/verifier", "rw": True},
            {"source": str(folder / "tests"), "target": TESTS_MOUNT},
        ]
        run_dirs = ["logs/verifier"]
        if separate:
            mounts += _artifact_mounts(cfg, trial_dir)
        else:  # a fresh /tests: whatever the solve left there is hidden
            mounts.append({"run_dir": "tests", "target": "/tests", "rw": True})
            run_dirs.append("tests")
        network = cfg.verifier_network_mode or where.network_mode
        return Phase(
            command=["bash", "-c", _verify_script(exports, separate)],
            image=image,
            dockerfile=dockerfile,
            workdir=where.workdir,
            user=cfg.verifier_user,
            network=_network(network),
            env=values,
            pass_env=list(dict.fromkeys([*pass_env, *more])),
            mounts=mounts,
            run_dirs=run_dirs,
            cpus=where.cpus,
            mem_gb=where.memory_mb / 1024 if where.memory_mb is not None else None,
            gpus=where.gpus or 0,
            timeout_min=cfg.verifier_timeout_sec / 60,
        )

    # --- the score ------------------------------------------------------------------------------
    def score(self, task: Task, verify_output: Path) -> Score:
        return score_rewards(verify_output)


def score_rewards(verify_output: Path) -> Score:
    """The score of a verify run's directory (or of its logs/verifier folder itself).

    reward.json (a flat object of numbers) is read before reward.txt (one number); test.sh's
    exit code plays no part. The score is the `reward` key, else the only number, else the mean.
    """
    folder = verify_output / "logs" / "verifier"
    if not folder.is_dir():
        folder = verify_output
    json_path, txt_path = folder / "reward.json", folder / "reward.txt"
    try:
        if json_path.is_file():
            scores = _json_rewards(json_path.read_text(encoding="utf-8", errors="replace"))
        elif txt_path.is_file():
            scores = {"reward": _number(txt_path.read_text(encoding="utf-8", errors="replace"))}
        else:
            return Score(valid=False, reason="no reward file (reward.json or reward.txt)")
    except ValueError as exc:
        return Score(valid=False, reason=str(exc))
    if "reward" in scores:
        value = scores["reward"]
    elif len(scores) == 1:
        value = next(iter(scores.values()))
    else:
        value = sum(scores.values()) / len(scores)
    return Score(valid=True, score=value, scores=scores)


def _json_rewards(text: str) -> dict[str, float]:
    if not text.strip():
        raise ValueError("reward.json is empty")
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError("reward.json is not JSON") from None
    if not isinstance(data, dict) or not data:
        raise ValueError("reward.json is not an object of numbers")
    out = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"reward.json: {key!r} is not a number")
        if not math.isfinite(value):
            raise ValueError(f"reward.json: {key!r} is not a finite number")
        out[str(key)] = float(value)
    return out


def _number(text: str) -> float:
    if not text.strip():
        raise ValueError("reward.txt is empty")
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"reward.txt is not a number: {text.strip()[:40]!r}") from None
    if not math.isfinite(value):
        raise ValueError("reward.txt is not a finite number")
    return value


# --- pieces ---------------------------------------------------------------------------------------
def instruction_text(path: Path) -> str:
    """instruction.md without the leading canary comment lines Harbor strips."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    while lines and (
        not lines[0].strip()
        or ("canary" in lines[0].lower() and lines[0].lstrip().startswith(("#", "<!--")))
    ):
        lines.pop(0)
    return "\n".join(lines).rstrip() + "\n"


def _network(mode: str) -> str:
    return NETWORKS.get(mode, "bridge")


def _image_is_local(name: str) -> bool:
    from orbit.errors import DockerError
    from orbit.execute import docker_ops

    try:
        return docker_ops.connect().image(name) is not None
    except DockerError:
        return False


def _upload_dockerfile(context: Path, env: Environment, trial_dir: Path) -> Path:
    """A build context in the trial folder: the named image with environment/'s files copied
    into its working directory (the same content gives the same cached image)."""
    target = trial_dir / "environment"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(context, target, symlinks=True)
    dockerfile = target / "Dockerfile"
    dest = env.workdir or "."
    dockerfile.write_text(f"FROM {env.docker_image}\nCOPY . {shlex.quote(dest)}\n")
    (target / ".dockerignore").write_text("Dockerfile\n.dockerignore\n")
    return dockerfile


def _environment_values(table: dict[str, str], environ: Any) -> tuple[dict[str, str], list[str]]:
    """([environment].env or [solution].env: values, names passed from the caller's environment).

    `K = "${K}"` passes K itself (its value is never stored); other ${VAR} / ${VAR:-d} references
    are resolved here (Harbor resolves them on the host too)."""
    values: dict[str, str] = {}
    passed: list[str] = []
    for key, value in table.items():
        if value == f"${{{key}}}" and environ.get(key) is not None:
            passed.append(key)
        else:
            values[key] = resolve(value, environ)
    return values, passed


def _verifier_values(
    table: dict[str, str], environ: Any, values: dict[str, str]
) -> tuple[dict[str, str], list[str]]:
    """[verifier].env: (shell assignments run before test.sh, names passed from the caller).

    Referenced variables reach the container as secrets (pass_env) and the shell inside
    assembles each value, so a resolved value is never stored with the run."""
    exports: dict[str, str] = {}
    passed: list[str] = []
    for key, value in table.items():
        if not TEMPLATE.search(value):
            values[key] = value
            continue
        parts: list[str] = []
        pos = 0
        for match in TEMPLATE.finditer(value):
            if match.start() > pos:
                parts.append(shlex.quote(value[pos : match.start()]))
            name, default = match.group(1), match.group(2)
            if environ.get(name):
                parts.append(f'"${{{name}}}"')
                passed.append(name)
            else:
                parts.append(shlex.quote(default or ""))
            pos = match.end()
        if pos < len(value):
            parts.append(shlex.quote(value[pos:]))
        exports[key] = "".join(parts)
        values.pop(key, None)
    return exports, list(dict.fromkeys(passed))


def _artifact_mounts(cfg: TaskConfig, trial_dir: Path) -> list[dict[str, Any]]:
    """The separate verifier's inputs: the solve's /logs/artifacts and the declared artifacts,
    read-only at their own paths (only those the engine collected)."""
    out = []
    logs = trial_dir / LOG_ARTIFACTS
    if logs.is_dir():
        out.append({"source": str(logs), "target": "/logs/artifacts"})
    for artifact in cfg.artifacts:
        rel = PurePosixPath(artifact.source).relative_to("/").as_posix()
        kept = trial_dir / ARTIFACTS / rel
        if kept.exists():
            out.append({"source": str(kept), "target": artifact.source})
    return out


def _oracle_script() -> str:
    return (
        f"set -e\ncp -R {SOLUTION_MOUNT}/. /solution/\nset +e\n"
        "bash /solution/solve.sh 2>&1 | tee /logs/agent/oracle.txt\n"
        'exit "${PIPESTATUS[0]}"\n'
    )


def _verify_script(exports: dict[str, str], separate: bool) -> str:
    lines = ["set -e"]
    if separate:  # the image from tests/ brings /tests; the task's tests/ fill in when it does not
        lines.append(
            f"if [ ! -e /tests/test.sh ]; then mkdir -p /tests && cp -R {TESTS_MOUNT}/. /tests/; fi"
        )
    else:
        lines.append(f"cp -R {TESTS_MOUNT}/. /tests/")
    lines += [f"export {key}={value}" for key, value in exports.items()]
    lines += [
        "set +e",
        "bash /tests/test.sh 2>&1 | tee /logs/verifier/test-stdout.txt",
        'exit "${PIPESTATUS[0]}"',
    ]
    return "\n".join(lines) + "\n"

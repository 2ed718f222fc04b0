"""External adapters: an executable that speaks protocol 1 (docs/guides/bench-adapter.md).

Orbit runs the adapter once per request: one JSON object on its stdin, one JSON object on its
stdout; its stderr is kept for the error message. Every answer is checked strictly before the
engine sees it (types, absolute container paths, mounts only of the benchmark's folder, the
trial's folder or folders of the run directory): an adapter's mistake fails its trial with one
line naming the adapter and the request, never a half-made run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path, PurePosixPath
from typing import Any, TypeGuard

from orbit import harnesses
from orbit.bench.model import Benchmark, Method, Phase, Score, Task
from orbit.errors import OrbitError
from orbit.store.home import Home

PROTOCOL = 1
TIMEOUT_KEY = "adapter_timeout_s"  # -c adapter_timeout_s=N: seconds one request may take
DEFAULT_TIMEOUT_S = 120.0
MAX_STDERR = 2000  # characters of the adapter's stderr quoted in an error
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NETWORKS = ("bridge", "none", "host")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")

PHASE_KEYS = {
    "command", "image", "dockerfile", "workdir", "user", "network", "env", "pass_env",
    "mounts", "run_dirs", "cpus", "mem_gb", "gpus", "timeout_min", "commit", "instruction",
    "collect",
}  # fmt: skip
TASK_KEYS = {"name", "supported", "reason", "cpus", "mem_gb", "gpus", "timeout_min", "data"}
SCORE_KEYS = {"valid", "reason", "score", "scores"}


class AdapterError(OrbitError):
    """The adapter failed a request or answered outside the protocol."""


class ExternalAdapter:
    """The Adapter of model.py for `--adapter /path/to/executable`."""

    def __init__(self, bench: Benchmark, home: Home) -> None:
        self.bench = bench
        self.home = home
        self.executable = bench.adapter
        self.timeout_s = _timeout(bench)

    # --- the handshake and the four requests of the Adapter protocol ---------------------------
    def hello(self) -> dict[str, Any]:
        """The adapter's name, version and protocol versions; raises unless it speaks 1."""
        with self.checking("request hello"):
            answer = self.request("hello", {})
            _only(answer, {"name", "version", "protocols"}, "the answer")
            protocols = answer.get("protocols")
            if not isinstance(protocols, list) or not all(type(p) is int for p in protocols):
                raise _Invalid("`protocols` must be a list of integers")
            if PROTOCOL not in protocols:
                raise _Invalid(f"it speaks protocols {protocols}, this Orbit speaks {PROTOCOL}")
            return {
                "name": _string(answer, "name", required=True),
                "version": _string(answer, "version", required=True),
                "protocols": protocols,
            }

    def check(self) -> str:
        """What `orbit bench add` says of the adapter (the handshake, then the task list);
        raises AdapterError when either fails."""
        info = self.hello()
        count = len(self.tasks())
        return f"{info['name']} {info['version']} (protocol {PROTOCOL}), {count} tasks"

    def tasks(self) -> list[Task]:
        with self.checking("request tasks"):
            answer = self.request("tasks", {})
            _only(answer, {"tasks"}, "the answer")
            items = answer.get("tasks")
            if not isinstance(items, list):
                raise _Invalid("`tasks` must be a list")
            tasks = [_task(item, i) for i, item in enumerate(items)]
            names = [t.name for t in tasks]
            if len(set(names)) != len(names):
                raise _Invalid("two tasks have the same name")
            return tasks

    def solve(self, task: Task, method: Method, trial_dir: Path) -> Phase:
        with self.checking(f"request solve for task {task.name!r}, method {method.name!r}"):
            extra = {"task": _task_ref(task), "method": asdict(method), "trial_dir": str(trial_dir)}
            phase = self._phase(self.request("solve", extra), trial_dir)
            # an agent method's command the engine may build from `instruction`
            if not phase.command and method.agent not in harnesses.ids():
                raise _Invalid("`command` is empty (only an agent method may leave it so)")
            if not phase.command and not phase.instruction:
                raise _Invalid("an agent method needs `instruction` when `command` is empty")
            return phase

    def verify(self, task: Task, trial_dir: Path, solved_image: str | None) -> Phase:
        with self.checking(f"request verify for task {task.name!r}"):
            extra = {
                "task": _task_ref(task),
                "trial_dir": str(trial_dir),
                "solved_image": solved_image,
            }
            phase = self._phase(self.request("verify", extra), trial_dir)
            if not phase.command:
                raise _Invalid("`command` must not be empty")
            return phase

    def score(self, task: Task, verify_output: Path) -> Score:
        with self.checking(f"request score for task {task.name!r}"):
            extra = {"task": _task_ref(task), "verify_output": str(verify_output)}
            return _score(self.request("score", extra))

    # --- one request ---------------------------------------------------------------------------
    @contextmanager
    def checking(self, where: str) -> Iterator[None]:
        """Any protocol problem inside becomes one AdapterError naming the adapter and `where`."""
        try:
            yield
        except _Invalid as exc:
            raise AdapterError(
                f"adapter {self.executable} (benchmark {self.bench.name}), {where}: {exc}"
            ) from None

    def request(self, op: str, extra: dict[str, Any]) -> dict[str, Any]:
        """Run the adapter once for `op`; its answer (a JSON object without `error`)."""
        body = {
            "protocol": PROTOCOL,
            "op": op,
            "benchmark": {
                "name": self.bench.name,
                "dir": self.bench.dir,
                "config": dict(self.bench.config),
            },
            **extra,
        }
        out = self._run(json.dumps(body) + "\n")
        try:
            answer = json.loads(out)
        except ValueError:
            first = out.strip().splitlines()[0][:200] if out.strip() else ""
            raise _Invalid(f"its answer is not JSON (stdout began: {first!r})") from None
        if not isinstance(answer, dict):
            raise _Invalid("its answer is not a JSON object")
        got = answer.pop("protocol", None)
        if "error" in answer:
            raise _Invalid(f"it reports: {answer['error']}")
        if got != PROTOCOL:
            raise _Invalid(f"it answered with protocol {got!r}, expected {PROTOCOL}")
        return answer

    def _run(self, stdin: str) -> str:
        if not os.path.isabs(self.executable):
            raise _Invalid("the adapter must be given as an absolute path")
        try:
            proc = subprocess.Popen(
                [self.executable],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.bench.dir if os.path.isdir(self.bench.dir) else None,
                env=dict(self.home.environ),
                text=True,
                start_new_session=True,  # a timeout ends the adapter and all it started
            )
        except OSError as exc:
            raise _Invalid(f"cannot be started ({exc.strerror or exc})") from None
        try:
            out, err = proc.communicate(stdin, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise _Invalid(
                f"gave no answer within {self.timeout_s:g} s (-c {TIMEOUT_KEY}=SECONDS)"
            ) from None
        if proc.returncode != 0:
            lines = err.strip().splitlines()
            tail = lines[-1][-MAX_STDERR:] if lines else "nothing on stderr"
            raise _Invalid(f"exited with code {proc.returncode}: {tail}")
        return out

    # --- checking a phase ----------------------------------------------------------------------
    def _phase(self, answer: dict[str, Any], trial_dir: Path) -> Phase:
        _only(answer, {"phase"}, "the answer")
        raw = answer.get("phase")
        if not isinstance(raw, dict):
            raise _Invalid("`phase` must be a JSON object")
        _only(raw, PHASE_KEYS, "the phase")
        image, dockerfile = _string(raw, "image"), _string(raw, "dockerfile")
        if (image is None) == (dockerfile is None):
            raise _Invalid("give exactly one of `image` and `dockerfile`")
        if dockerfile is not None:
            dockerfile = self._inside(dockerfile, "`dockerfile`", trial_dir)
            if not Path(dockerfile).is_file():
                raise _Invalid(f"`dockerfile` {dockerfile} is not a file")
        network = raw.get("network", "bridge")
        if network not in NETWORKS:
            raise _Invalid(f"`network` must be one of {', '.join(NETWORKS)}")
        mounts = [self._mount(m, trial_dir) for m in _list(raw, "mounts")]
        run_dirs = [_relative(d, "`run_dirs`") for d in _strings(raw, "run_dirs")]
        run_dirs += [str(m["run_dir"]) for m in mounts if "run_dir" in m]
        return Phase(
            command=_strings(raw, "command"),
            image=image,
            dockerfile=dockerfile,
            workdir=_container_path(raw, "workdir"),
            user=_string(raw, "user"),
            network=str(network),
            env=_env(raw),
            pass_env=_names(raw, "pass_env"),
            mounts=mounts,
            run_dirs=list(dict.fromkeys(run_dirs)),
            cpus=_positive(raw, "cpus"),
            mem_gb=_positive(raw, "mem_gb"),
            gpus=_count(raw, "gpus"),
            timeout_min=_positive(raw, "timeout_min"),
            commit=_flag(raw, "commit"),
            instruction=_string(raw, "instruction"),
            collect=[_absolute(p, "`collect`") for p in _strings(raw, "collect")],
        )

    def _mount(self, entry: Any, trial_dir: Path) -> dict[str, Any]:
        """One mount: `source` (inside the benchmark's folder, read-only, or the trial's),
        `run_dir` (a folder of the run directory) or `tmpfs`; always an absolute `target`."""
        if not isinstance(entry, dict):
            raise _Invalid("a mount must be a JSON object")
        kinds = [k for k in ("source", "run_dir", "tmpfs") if k in entry]
        if len(kinds) != 1:
            raise _Invalid(f"a mount needs exactly one of source, run_dir, tmpfs: {entry}")
        _only(entry, {kinds[0], "target", "rw"}, "a mount")
        target = _absolute(entry.get("target"), "a mount's `target`")
        rw = _flag(entry, "rw")
        if kinds[0] == "tmpfs":
            if entry["tmpfs"] is not True:
                raise _Invalid("a mount's `tmpfs` must be true")
            return {"tmpfs": True, "target": target}
        if kinds[0] == "run_dir":
            return {"run_dir": _relative(entry["run_dir"], "`run_dir`"), "target": target, "rw": rw}
        source = self._inside(entry["source"], "a mount's `source`", trial_dir)
        if rw and not _under(Path(source), trial_dir.resolve()):
            raise _Invalid(f"{source} may be mounted read-only only (rw: the trial's folder)")
        if not os.path.exists(source):
            raise _Invalid(f"mount source {source} does not exist")
        return {"source": source, "target": target, "rw": rw}

    def _inside(self, value: Any, what: str, trial_dir: Path) -> str:
        """`value`, a host path inside the benchmark's folder or the trial's, resolved (so a
        symbolic link cannot lead out)."""
        if not isinstance(value, str) or not os.path.isabs(value):
            raise _Invalid(f"{what} must be an absolute host path, got {value!r}")
        path = Path(value).resolve()
        roots = [Path(self.bench.dir).resolve(), trial_dir.resolve()]
        if not any(_under(path, root) for root in roots):
            raise _Invalid(f"{what} {value} is outside the benchmark's folder and the trial's")
        return str(path)


def _task(item: Any, index: int) -> Task:
    if not isinstance(item, dict):
        raise _Invalid(f"tasks[{index}] must be a JSON object")
    _only(item, TASK_KEYS, f"tasks[{index}]")
    name = _string(item, "name", required=True)
    if not NAME.match(name):
        raise _Invalid(f"tasks[{index}]: bad task name {name!r} (letters, digits, . _ - @)")
    data = item.get("data", {})
    if not isinstance(data, dict):
        raise _Invalid(f"task {name}: `data` must be a JSON object")
    return Task(
        name=name,
        supported=_flag(item, "supported", default=True),
        reason=_string(item, "reason"),
        cpus=_positive(item, "cpus"),
        mem_gb=_positive(item, "mem_gb"),
        gpus=_count(item, "gpus"),
        timeout_min=_positive(item, "timeout_min"),
        data=data,
    )


def _score(answer: dict[str, Any]) -> Score:
    _only(answer, SCORE_KEYS, "the answer")
    valid = _flag(answer, "valid", default=None)
    reason = _string(answer, "reason")
    scores = answer.get("scores", {})
    if not isinstance(scores, dict) or not all(_number(v) for v in scores.values()):
        raise _Invalid("`scores` must map names to numbers")
    numbers = {str(k): float(v) for k, v in scores.items()}
    if not valid:
        return Score(False, reason or "the adapter found no valid score", None, numbers)
    value = answer.get("score")
    if not _number(value):
        raise _Invalid("a valid score needs `score`, a number")
    return Score(True, reason, float(value), numbers)


# --- small checks -----------------------------------------------------------------------------
def _timeout(bench: Benchmark) -> float:
    raw = bench.config.get(TIMEOUT_KEY)
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise OrbitError(f"benchmark {bench.name}: -c {TIMEOUT_KEY} must be a positive number")
    return value


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _task_ref(task: Task) -> dict[str, Any]:
    return {"name": task.name, "data": task.data}


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class _Invalid(Exception):
    """An answer outside the protocol; `ExternalAdapter.checking` names the adapter and the
    request."""


def _only(data: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise _Invalid(f"{what} has unknown fields: {', '.join(unknown)}")


def _string(data: dict[str, Any], key: str, *, required: bool = False) -> Any:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise _Invalid(f"`{key}` must be a string" + (" (required)" if required else ""))
    return value


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _positive(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if not _number(value) or value <= 0:
        raise _Invalid(f"`{key}` must be a positive number or null")
    return float(value)


def _flag(data: dict[str, Any], key: str, default: bool | None = False) -> Any:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise _Invalid(f"`{key}` must be true or false")
    return value


def _count(data: dict[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if type(value) is not int or value < 0:
        raise _Invalid(f"`{key}` must be an integer, 0 or more")
    return value


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise _Invalid(f"`{key}` must be a list")
    return value


def _strings(data: dict[str, Any], key: str) -> list[str]:
    value = _list(data, key)
    if not all(isinstance(v, str) for v in value):
        raise _Invalid(f"`{key}` must be a list of strings")
    return list(value)


def _names(data: dict[str, Any], key: str) -> list[str]:
    names = _strings(data, key)
    bad = [n for n in names if not ENV_NAME.match(n)]
    if bad:
        raise _Invalid(f"`{key}` has a bad variable name: {bad[0]!r}")
    return names


def _env(data: dict[str, Any]) -> dict[str, str]:
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise _Invalid("`env` must map names to strings")
    bad = [k for k in env if not ENV_NAME.match(k)]
    if bad:
        raise _Invalid(f"`env` has a bad variable name: {bad[0]!r}")
    return dict(env)


def _absolute(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise _Invalid(f"{what} must be an absolute container path, got {value!r}")
    if ".." in PurePosixPath(value).parts:
        raise _Invalid(f"{what} must not contain `..`: {value!r}")
    return value


def _container_path(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else _absolute(value, f"`{key}`")


def _relative(value: Any, what: str) -> str:
    """A folder of the run directory: relative, without `..`."""
    if not isinstance(value, str) or not value or value.startswith("/"):
        raise _Invalid(f"{what} must be a relative folder of the run directory")
    parts = PurePosixPath(value).parts
    if ".." in parts or "." in parts:
        raise _Invalid(f"{what} must not contain `..`: {value!r}")
    return value

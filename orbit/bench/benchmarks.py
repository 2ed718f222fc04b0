"""Registering benchmarks (`orbit bench add`) and reading their --resources files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from orbit.bench.adapters import BUILT_IN, PYTHON, load_adapter
from orbit.bench.model import (
    NAME,
    Benchmark,
    Task,
    bench_dir,
    benchmark_path,
    load_benchmark,
    save_benchmark,
)
from orbit.errors import ConflictError, CorruptError, NotFoundError, UsageError
from orbit.execute.submit import ENV_NAME
from orbit.store.home import Home
from orbit.store.model import now_iso

RESOURCE_KEYS = {"cpus": float, "mem_gb": float, "gpus": int, "timeout_min": float}


def read_resources(path: Path) -> dict[str, dict[str, Any]]:
    """A --resources file: {TASK: {"cpus": N, "mem_gb": N, "gpus": N, "timeout_min": N}, …}
    (also accepted inside {"tasks": {…}}); every key optional."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"--resources {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--resources {path}: not JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("tasks"), dict):
        data = data["tasks"]
    if not isinstance(data, dict):
        raise UsageError(f"--resources {path}: expected an object of tasks")
    out: dict[str, dict[str, Any]] = {}
    for task, entry in data.items():
        if not isinstance(entry, dict):
            raise UsageError(f"--resources {path}: task {task!r} is not an object")
        out[str(task)] = {}
        for key, value in entry.items():
            kind = RESOURCE_KEYS.get(key)
            if kind is None:
                continue  # notes a generator may add (measured peaks, …)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UsageError(f"--resources {path}: {task}.{key} must be a number ≥ 0")
            out[str(task)][key] = kind(value)
    return out


def resource_entry(bench: Benchmark, task: str) -> tuple[str | None, dict[str, Any]]:
    """The --resources entry a task's solve takes (its own, else "*"): the entry's key (None:
    no entry) and the values it sets."""
    for key in (task, "*"):
        entry = bench.resources.get(key)
        if entry:
            return key, {k: v for k, v in entry.items() if k in RESOURCE_KEYS and v is not None}
    return None, {}


def with_resources(bench: Benchmark, task: Task) -> tuple[Task, dict[str, Any] | None]:
    """The task with its --resources entry applied, and where the values came from
    ({"file", "entry", "keys"}; None when the task's own stand)."""
    from dataclasses import replace

    key, values = resource_entry(bench, task.name)
    if not values:
        return task, None
    source = {"file": bench.resources_file or None, "entry": key, "keys": list(values)}
    return replace(task, **values), source


def _adapter_name(adapter: str, cwd: Path) -> str:
    if adapter in BUILT_IN or adapter.startswith(PYTHON):
        return adapter
    path = (cwd / adapter).resolve()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise UsageError(f"--adapter {adapter!r}: not harbor, asi, or an executable file")
    return str(path)


def add_benchmark(
    home: Home,
    name: str,
    directory: str,
    adapter: str,
    *,
    cwd: Path,
    config: dict[str, str],
    pass_env: list[str],
    resources: Path | None,
) -> tuple[Benchmark, list[Task]]:
    """Check and register a benchmark; it and its tasks (the adapter is asked for them, so a
    directory it cannot read is refused here)."""
    if not NAME.match(name):
        raise UsageError(f"benchmark name {name!r}: letters, digits, . _ - (up to 64)")
    if benchmark_path(home, name).exists():
        raise ConflictError(f"benchmark {name!r} exists already (orbit bench ls)")
    folder = (cwd / directory).resolve()
    if not folder.is_dir():
        raise UsageError(f"{directory!r} is not a directory")
    for var in pass_env:
        if not ENV_NAME.match(var):
            raise UsageError(f"--pass-env expects a variable name, got {var!r}")
    bench = Benchmark(
        name=name,
        dir=str(folder),
        adapter=_adapter_name(adapter, cwd),
        config=dict(config),
        pass_env=list(dict.fromkeys(pass_env)),
        resources=read_resources((cwd / resources).resolve()) if resources else {},
        resources_file=str((cwd / resources).resolve()) if resources else "",
        added_at=now_iso(),
    )
    speaker = load_adapter(home, bench)
    check = getattr(speaker, "check", None)
    if callable(check):
        check()  # the adapter's own check: external's `hello` handshake, asi's checkout
    tasks = speaker.tasks()
    save_benchmark(home, bench)
    return bench, tasks


def list_benchmarks(home: Home) -> list[Benchmark]:
    folder = bench_dir(home) / "benchmarks"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append(load_benchmark(home, path.stem))
        except (CorruptError, NotFoundError, TypeError):
            continue
    return out


def select_tasks(all_tasks: list[Task], names: list[str]) -> tuple[list[Task], list[Task]]:
    """The tasks to run and the unsupported ones left out: the named ones (every name must be
    a task), else every supported task."""
    if not names:
        return [t for t in all_tasks if t.supported], [t for t in all_tasks if not t.supported]
    by_name = {t.name: t for t in all_tasks}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise NotFoundError(f"no task {unknown[0]!r} in this benchmark (orbit bench tasks)")
    return [by_name[n] for n in dict.fromkeys(names)], []

"""What changed between what two runs of one setting asked for: resources (CPUs, memory,
GPUs), timeout, image, command (apart from the seed values in it), code (commit, snapshot)
and env, in the order FIELDS names them.

Each run's side is read once (`Request.of`, cached by the caller), so comparing a failed run
with many succeeded ones compares tuples, not run.yaml files.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from orbit.human import fmt_cpus, fmt_gib, fmt_minutes, fmt_num
from orbit.review.best import setting_of
from orbit.review.objective import number
from orbit.store.model import Run

FIELDS = ("mem_gb", "cpus", "gpus", "timeout_min", "image", "command", "commit", "snapshot", "env")
PLAIN = ("mem_gb", "cpus", "gpus", "timeout_min", "image", "commit", "snapshot")


def request_spec(run: Run) -> dict[str, Any]:
    """The part of a run.yaml that is compared, in run.yaml's shape and without empty values
    (for a cache that rebuilds runs from it)."""
    spec = run.spec
    res, project = _mapping(spec.get("resources")), _mapping(spec.get("project"))
    out = {
        "command": spec.get("command"),
        "image": spec.get("image"),
        "resources": {k: res[k] for k in ("cpus", "mem_gb", "gpus") if res.get(k) is not None},
        "timeout_min": spec.get("timeout_min"),
        "env": spec.get("env"),
        "pass_env": spec.get("pass_env"),
        "project": {k: project[k] for k in ("commit", "snapshot") if project.get(k)},
    }
    return {k: v for k, v in out.items() if v not in (None, [], {})}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def params_of(run: Run) -> dict[str, Any]:
    params = run.spec.get("params")
    return params if isinstance(params, dict) else {}


@dataclass(frozen=True)
class Request:
    """What one run asked for, as compared: `values` in PLAIN's order, the env (a `--pass-env`
    variable's value is None: it comes from the host and is never stored), the command, and
    the command with each seed value replaced by its key (equal templates: the same command)."""

    values: tuple[Any, ...]
    env: tuple[tuple[str, str | None], ...]
    command: tuple[str, ...]
    seeds: tuple[tuple[str, str], ...]
    template: tuple[str, ...]
    params: str  # all params, seed included, as JSON

    @classmethod
    def of(cls, run: Run) -> Request:
        spec = run.spec
        res, project = _mapping(spec.get("resources")), _mapping(spec.get("project"))
        env: dict[str, str | None] = {str(k): str(v) for k, v in _mapping(spec.get("env")).items()}
        passed = spec.get("pass_env")
        env.update({str(n): None for n in passed} if isinstance(passed, list) else {})
        command = spec.get("command")
        args = tuple(str(a) for a in command) if isinstance(command, list) else (str(command),)
        params = params_of(run)
        kept = setting_of(params)
        seeds = tuple(sorted((str(k), str(v)) for k, v in params.items() if k not in kept and v))
        values = (
            number(res.get("mem_gb")),
            number(res.get("cpus")),
            number(res.get("gpus")) or 0.0,
            number(spec.get("timeout_min")),
            spec.get("image"),
            project.get("commit"),
            project.get("snapshot"),
        )
        return cls(
            values,
            tuple(sorted(env.items())),
            args,
            seeds,
            _template(args, seeds),
            json.dumps(params, sort_keys=True, default=str),
        )


def _bounded(value: str) -> str:
    """A regex for `value` not inside a longer number or word (seed 1 is not the 1 of 0.1)."""
    before = r"(?<![\d.])" if value[0].isdigit() else r"(?<!\w)" if value[0].isalnum() else ""
    after = r"(?!\.?\d)" if value[-1].isdigit() else r"(?!\w)" if value[-1].isalnum() else ""
    return before + re.escape(value) + after


def _finder(values: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(_bounded(v) for v in sorted(values, key=len, reverse=True)))


def _template(args: tuple[str, ...], seeds: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    if not seeds:
        return args
    key = {v: k for k, v in seeds}
    find = _finder(list(key))
    return tuple(find.sub(lambda m: "\0" + key[m.group(0)], a) for a in args)


def same_command(a: Request, b: Request) -> bool:
    """Whether two runs of one setting ran the same command, apart from their seed values:
    wherever one has its seed's value (also where that value stands for something else: the
    command's template is not recorded), the other may have its own."""
    return a.command == b.command or a.template == b.template or _alike(a, b)


@functools.lru_cache(maxsize=4096)
def _alike(a: Request, b: Request) -> bool:
    if len(a.command) != len(b.command) or not a.seeds:
        return False
    theirs = dict(b.seeds)
    pairs = {v: theirs.get(k, v) for k, v in a.seeds}
    find = _finder(list(pairs))
    for x, y in zip(a.command, b.command, strict=True):
        if x == y:
            continue
        pattern, at = "", 0
        for m in find.finditer(x):
            seed = m.group(0)
            pattern += (
                re.escape(x[at : m.start()]) + f"(?:{re.escape(seed)}|{re.escape(pairs[seed])})"
            )
            at = m.end()
        if not re.fullmatch(pattern + re.escape(x[at:]), y):
            return False
    return True


def changes(failed: Request, succeeded: Request) -> dict[str, dict[str, Any]]:
    """What `succeeded` asked for that `failed` did not: field → {"failed", "succeeded"}, in
    FIELDS' order; {} when nothing changed."""
    out: dict[str, dict[str, Any]] = {}
    for key, a, b in zip(PLAIN, failed.values, succeeded.values, strict=True):
        if a != b:
            out[key] = {"failed": a, "succeeded": b}
    if not same_command(failed, succeeded):
        out["command"] = {"failed": list(failed.command), "succeeded": list(succeeded.command)}
    if failed.env != succeeded.env:
        ea, eb = dict(failed.env), dict(succeeded.env)
        names = sorted(k for k in {*ea, *eb} if (k in ea, ea.get(k)) != (k in eb, eb.get(k)))
        out["env"] = {
            "failed": {k: ea[k] for k in names if k in ea},
            "succeeded": {k: eb[k] for k in names if k in eb},
        }
    if "commit" in out:
        out.pop("snapshot", None)  # another commit is other code: its snapshot says no more
    return {k: out[k] for k in FIELDS if k in out}


def change_words(changed: dict[str, dict[str, Any]], peak_mem_bytes: int | None) -> str:
    """`at 1 GiB (peak 0.48 GiB) with 1 CPU`: the changes as the succeeded runs had them."""
    words = []
    for key, values in changed.items():
        to = values["succeeded"]
        if key == "mem_gb":
            peak = f" (peak {fmt_gib(peak_mem_bytes)})" if peak_mem_bytes else ""
            words.append(f"at {fmt_num(to)} GiB{peak}" if to else "without a memory limit")
        elif key == "cpus":
            words.append(f"with {fmt_cpus(to)}" if to else "without a CPU limit")
        elif key == "gpus":
            words.append(f"with {int(to)} GPU" + ("" if to == 1 else "s"))
        elif key == "timeout_min":
            words.append(f"with a timeout of {fmt_minutes(to)}" if to else "without a timeout")
        elif key == "image":
            words.append(f"with image {to}")
        elif key == "command":
            words.append("with another command")
        elif key == "commit":
            words.append(f"at commit {str(to)[:8]}" if to else "without a commit")
        elif key == "snapshot":
            words.append("with uncommitted changes" + (f" (snapshot {str(to)[:8]})" if to else ""))
        elif key == "env":
            env = [f"{k}={v}" if v is not None else f"{k} from the host" for k, v in to.items()]
            env += [f"{k} unset" for k in values["failed"] if k not in to]
            words.append("with env " + ", ".join(env))
    return " ".join(words)

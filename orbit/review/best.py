"""The best run and the best parameter setting of a set of runs, by one metric.

A run's score is the metric's final value: the last value metrics.jsonl holds for the key
(`latest_metrics`), not its minimum or maximum over the run. Only succeeded runs with a
finite number for the metric are scored; failed and lost runs are counted per setting.

A setting is a run's params without the seed-like keys (SEED_KEYS, or the caller's), so the
runs of one setting differ only in their seed; a setting is ranked by the mean of its scored
runs, with the sample standard deviation as its spread.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orbit.review.objective import Objective, number, resolve
from orbit.review.series import X_KEYS
from orbit.store.describe import latest_metrics
from orbit.store.groups import Declared
from orbit.store.model import Run, RunState
from orbit.store.runs import id_key

SEED_KEYS: tuple[str, ...] = ("seed", "seeds", "rep", "repeat", "trial", "run")
AXES = frozenset({*X_KEYS, "epoch"})  # an axis, never the main metric
FAILED = frozenset({RunState.FAILED.value, RunState.LOST.value})
__all__ = ["number"]


def metric_values(runs: Iterable[Run], metric: str) -> dict[str, float | None]:
    """Each run's final value of `metric`, read from the tail of its metrics.jsonl."""
    return {r.id: number(latest_metrics(r)[0].get(metric)) for r in runs}


def finals(runs: Iterable[Run]) -> dict[str, dict[str, Any]]:
    """Each succeeded run's final metrics (the last value of each key), by id."""
    return {r.id: latest_metrics(r)[0] for r in runs if r.state is RunState.SUCCEEDED}


def objective_of(
    runs: Iterable[Run],
    *,
    metric: str | None = None,
    direction: str | None = None,
    declared: Declared | None = None,
    group: str | None = None,
    read: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[Objective, dict[str, float | None]]:
    """The runs' objective (review/objective.py) and each run's final value of its metric.
    `read` (the succeeded runs' final metrics by id, as `finals` gives them) replaces reading
    them again."""
    runs = list(runs)
    read = finals(runs) if read is None else read
    o = resolve(read.values(), metric=metric, direction=direction, declared=declared, group=group)
    values = {r.id: number(read.get(r.id, {}).get(o.metric)) for r in runs} if o.metric else {}
    return o, values


def setting_of(params: Mapping[str, Any], seed_keys: Sequence[str] = SEED_KEYS) -> dict[str, Any]:
    drop = {k.lower() for k in seed_keys}
    return {k: v for k, v in params.items() if k.lower() not in drop}


def params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "(no params)"


@dataclass
class BestRun:
    id: str
    name: str
    params: dict[str, Any]
    value: float
    scored: int  # succeeded runs with a value
    runs: int  # every run considered

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name or None,
            "params": self.params,
            "value": self.value,
            "scored": self.scored,
            "runs": self.runs,
        }


@dataclass
class Setting:
    params: dict[str, Any]
    values: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    scored_ids: list[str] = field(default_factory=list)
    failed: int = 0
    unscored: int = 0  # succeeded without the metric, cancelled, or still active
    best: bool = False

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) >= 2 else None

    @property
    def best_run(self) -> str | None:
        return self.scored_ids[0] if self.scored_ids else None

    def to_json(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "mean": self.mean,
            "std": self.std,
            "n": self.n,
            "runs": len(self.run_ids),
            "failed": self.failed,
            "unscored": self.unscored,
            "min": min(self.values) if self.values else None,
            "max": max(self.values) if self.values else None,
            "run_ids": self.run_ids,
            "best_run": self.best_run,
            "best": self.best,
        }


def _scored(
    runs: Iterable[Run], metric: str, values: Mapping[str, float | None] | None
) -> list[tuple[Run, float | None]]:
    runs = list(runs)
    vals = values if values is not None else metric_values(runs, metric)
    out = []
    for r in runs:
        ok = r.status.get("state") == RunState.SUCCEEDED.value
        out.append((r, vals.get(r.id) if ok else None))
    return out


def best_run(
    runs: Iterable[Run],
    metric: str,
    maximize: bool,
    *,
    values: Mapping[str, float | None] | None = None,
) -> BestRun | None:
    """The succeeded run with the best final value of `metric`; None when no run has one.
    `values` (run id → value) replaces reading each run's metrics.jsonl."""
    scored = _scored(runs, metric, values)
    candidates = [(r, v) for r, v in scored if v is not None]
    if not candidates:
        return None
    sign = -1.0 if maximize else 1.0
    run, value = min(candidates, key=lambda rv: (sign * (rv[1] or 0.0), id_key(rv[0].id)))
    return BestRun(
        run.id,
        run.name,
        dict(run.spec.get("params") or {}),
        float(value or 0.0),
        len(candidates),
        len(scored),
    )


def by_params(
    runs: Iterable[Run],
    metric: str,
    maximize: bool,
    *,
    seed_keys: Sequence[str] = SEED_KEYS,
    values: Mapping[str, float | None] | None = None,
) -> list[Setting]:
    """Every setting, ranked: those with scored runs by their mean (best first, marked
    `best`), then those without any (all failed, say), most failures first."""
    settings: dict[Any, Setting] = {}
    sign = -1.0 if maximize else 1.0
    for run, value in sorted(_scored(runs, metric, values), key=lambda rv: id_key(rv[0].id)):
        params = setting_of(run.spec.get("params") or {}, seed_keys)
        try:
            key: Any = tuple(sorted(params.items()))
            hash(key)
        except TypeError:  # a list or mapping as a value
            key = json.dumps(params, sort_keys=True, default=str)
        s = settings.setdefault(key, Setting(params))
        s.run_ids.append(run.id)
        if value is not None:
            s.values.append(value)
            s.scored_ids.append(run.id)
        elif run.status.get("state") in FAILED:
            s.failed += 1
        else:
            s.unscored += 1
    for s in settings.values():  # the setting's own best run first
        pairs = sorted(zip(s.values, s.scored_ids, strict=True), key=lambda p: sign * p[0])
        s.scored_ids = [i for _, i in pairs]
    ranked = sorted(
        settings.values(),
        key=lambda s: (
            s.mean is None,
            sign * s.mean if s.mean is not None else -s.failed,
            -s.n,
        ),
    )
    if ranked and ranked[0].mean is not None:
        ranked[0].best = True
    return ranked


def settings_json(
    group: str, objective: Objective, settings: Sequence[Setting], seed_keys: Sequence[str]
) -> dict[str, Any]:
    """`orbit best -g GROUP --by-params --json`, also the web's /api/compare?group=GROUP."""
    return {
        "group": group,
        "metric": objective.metric,
        "maximize": objective.maximize,
        "objective": objective.to_json(),
        "seed_keys": list(seed_keys),
        "settings": [s.to_json() for s in settings],
    }

"""A run's metric summaries: last, min and max of each numeric key, and the x where min and max
were reached. Read through series.py, the parser the web's charts use, so both say the same."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from orbit.review import sidecar
from orbit.review.series import Metrics, read_metrics
from orbit.store.model import METRICS, Run


@dataclass(frozen=True)
class Summary:
    latest: float
    min: float
    max: float
    count: int  # the points the key has (a line without the key, or not a number, is no point)
    min_step: float | int  # the x (`step` when the file has it) of the first minimum
    max_step: float | int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _x(value: float) -> float | int:
    """A step is shown as the integer it usually is (3, not 3.0)."""
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def summarize_with_x(
    run: Run, *, save: bool = False, deadline: float | None = None
) -> tuple[str, dict[str, Summary]]:
    """The x axis the steps are of (`step`, `time`, `timestamp` or `line`) and each numeric
    key's summary, in the file's key order. Read through metrics.summary.json when it is
    current (then only the lines appended since are parsed); without one, a file past
    series.MAX_PARSE_BYTES is summarised over its last part only. Keys past series.MAX_KEYS
    are not summarised (as the charts). With `save`, a finished run whose sidecar was missing
    or stale gets one (a run that ended before Orbit wrote them, or whose shepherd could not).
    A `deadline` as series.read_metrics's."""
    save = save and run.state.finished
    metrics = read_metrics(run.path(METRICS), max_points=0, save=save, deadline=deadline)
    return metrics.x_label, _of(metrics)


def _of(metrics: Metrics) -> dict[str, Summary]:
    return {
        key: Summary(s.last, s.min, s.max, s.count, _x(s.min_at), _x(s.max_at))
        for key, s in metrics.series.items()
    }


def metrics_json(run: Run, *, save: bool = False) -> dict[str, Any]:
    """What `orbit show --json` adds to its `metrics`: `x` and `summary` (key → Summary)."""
    x_label, summaries = summarize_with_x(run, save=save)
    return {"x": x_label, "summary": {k: s.to_json() for k, s in summaries.items()}}


def glance(run: Run, *, deadline: float | None = None) -> tuple[dict[str, Summary], bool]:
    """Each numeric key's summary for a list of many runs, and whether it covers the whole file:
    the `summary` of the shepherd's metrics.summary.json when it covers the whole file (nothing
    of metrics.jsonl is parsed), else the file's parse (the lines appended since the sidecar, or
    the file), by the `deadline` when one is given (as series.read_metrics's: past it, a preview
    whose summaries are not complete; the rest is read in the background). {} without metrics."""
    path = run.path(METRICS)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = sidecar.read_summary(path, fh, size) if size else None
    except OSError:
        return {}, True
    if not size:
        return {}, True
    found = _summaries(data) if data is not None and data.get("offset") == size else None
    if found is not None:
        return found, True
    metrics = read_metrics(path, max_points=0, deadline=deadline)
    return _of(metrics), metrics.complete


def _summaries(data: dict[str, Any]) -> dict[str, Summary] | None:
    """A sidecar's `summary` as Summary objects; None when it is damaged."""
    raw = data.get("summary")
    if not isinstance(raw, dict):
        return None
    out = {}
    for key, s in raw.items():
        if not isinstance(s, dict):
            return None
        values: list[Any] = [s.get(k) for k in ("last", "min", "max", "count", "min_at", "max_at")]
        if not all(type(v) in (int, float) and math.isfinite(v) for v in values):
            return None
        last, lo, hi, count, lo_at, hi_at = (float(v) for v in values)
        out[str(key)] = Summary(last, lo, hi, int(count), _x(float(lo_at)), _x(float(hi_at)))
    return out

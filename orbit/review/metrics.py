"""A run's metric summaries: last, min and max of each numeric key, and the x where min and max
were reached. Read through series.py, the parser the web's charts use, so both say the same."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from orbit.review.series import read_metrics
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
    return metrics.x_label, {
        key: Summary(s.last, s.min, s.max, s.count, _x(s.min_at), _x(s.max_at))
        for key, s in metrics.series.items()
    }


def metrics_json(run: Run, *, save: bool = False) -> dict[str, Any]:
    """What `orbit show --json` adds to its `metrics`: `x` and `summary` (key → Summary)."""
    x_label, summaries = summarize_with_x(run, save=save)
    return {"x": x_label, "summary": {k: s.to_json() for k, s in summaries.items()}}

"""The runs list's sweep columns: a column per param key and per chosen metric statistic
(final, min, max), their sort keys and cells, and each run's metric summaries, read through
orbit/review/metrics.py `glance` (the shepherd's metrics.summary.json) and kept while the run's
files are unchanged."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from orbit.human import fmt_metric
from orbit.review import where
from orbit.review.metrics import Summary, glance
from orbit.store.model import METRICS, Run
from orbit.store.runs import Broken, RunStore, id_key

PARAM_COLUMNS = 8  # param columns shown unless the URL chooses them: the most common keys
CHOICES_MAX = 200  # keys offered by a chooser
STATS = ("final", "min", "max")

Row = dict[str, Any] | Broken
T = TypeVar("T")


@dataclass(frozen=True)
class Column:
    """A sweep column: `param:lr`, `final:loss`, `min:loss` or `max:loss` (its `id`, the
    `sort=` value)."""

    kind: str
    key: str

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.key}"

    @property
    def label(self) -> str:
        return self.key if self.kind in ("param", "final") else f"{self.key} {self.kind}"

    @property
    def is_metric(self) -> bool:
        return self.kind in STATS

    @classmethod
    def parse(cls, text: str) -> Column | None:
        kind, sep, key = text.partition(":")
        return cls(kind, key) if sep and key and kind in ("param", *STATS) else None


class StampCache(Generic[T]):
    """Values read from a run's files, by run directory, reused while those files are unchanged
    (size, mtime, inode): the list polls, and a finished run's files never change, so a view
    costs a few stats per run instead of a read. Paths are plain strings: a list of 10,000
    runs would spend more on pathlib than on the stats."""

    def __init__(
        self,
        names: tuple[str, ...],
        read: Callable[[RunStore, str], T],
        cap: int,
        keep: Callable[[T], bool] = lambda value: True,  # a value not kept is read again
    ):
        self._names, self._read, self._cap, self._keep = names, read, cap, keep
        self._lock = threading.Lock()
        self._items: dict[str, tuple[tuple[Any, ...], T]] = {}

    def get(self, store: RunStore, run_id: str, runs_dir: str | None = None) -> T:
        """The value for the run; `runs_dir` (str(store.home.runs_dir)) saves computing it."""
        folder = f"{runs_dir or store.home.runs_dir}/{run_id}"
        stamp = tuple(_stamp(f"{folder}/{name}") for name in self._names)
        with self._lock:
            hit = self._items.get(folder)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = self._read(store, run_id)
        if not self._keep(value):
            return value
        with self._lock:
            self._items.pop(folder, None)
            self._items[folder] = (stamp, value)
            while len(self._items) > self._cap:
                del self._items[next(iter(self._items))]
        return value


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


LIST_BUDGET_S = 1.0  # files without a current sidecar are parsed this long for one list view
# The view's deadline (`list_deadline`): one for all its runs, so a list of many such runs
# answers in about LIST_BUDGET_S too (the runs past it get previews; the rest is read later).
_DEADLINE: ContextVar[float | None] = ContextVar("orbit_list_deadline", default=None)


@contextmanager
def list_deadline() -> Iterator[None]:
    """One deadline for the metric summaries a list view reads."""
    token = _DEADLINE.set(time.monotonic() + LIST_BUDGET_S)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _read_summaries(store: RunStore, run_id: str) -> tuple[dict[str, Summary], bool]:
    deadline = _DEADLINE.get() or time.monotonic() + LIST_BUDGET_S
    return glance(Run(run_id, store.run_dir(run_id)), deadline=deadline)


# Keyed on metrics.jsonl alone: the summaries are a function of its bytes (the sidecar only
# saves parsing them), so one stat a run tells whether they can have changed. A preview (a big
# file read past the budget: the rest is read in the background) is not kept.
SUMMARIES: StampCache[tuple[dict[str, Summary], bool]] = StampCache(
    (METRICS,), _read_summaries, cap=1 << 15, keep=lambda value: value[1]
)


def summaries(store: RunStore | None, row: Row, runs_dir: str | None = None) -> dict[str, Summary]:
    """The run's metric summaries (key → Summary); {} for an unreadable run."""
    if store is None or isinstance(row, Broken):
        return {}
    return SUMMARIES.get(store, str(row["id"]), runs_dir)[0]


def param_keys(rows: Iterable[Row]) -> list[str]:
    """Every param key of these runs, the most common first (then in order of appearance)."""
    counts: dict[str, int] = {}
    for row in rows:
        params = None if isinstance(row, Broken) else row.get("params")
        if params and isinstance(params, dict):
            for k in params:
                counts[k] = counts.get(k, 0) + 1
    return [str(k) for k, _ in Counter(counts).most_common()]


def value_of(column: Column, row: Row, store: RunStore | None, runs_dir: str | None = None) -> Any:
    """The column's raw value for a run (None when it has none)."""
    if isinstance(row, Broken):
        return None
    if column.kind == "param":
        params = row.get("params")
        return params.get(column.key) if isinstance(params, dict) else None
    found = summaries(store, row, runs_dir).get(column.key)
    return None if found is None else getattr(found, where.STATS[column.kind])


def sort_rows(rows: list[Row], column: Column, desc: bool, store: RunStore | None) -> list[Row]:
    """Sorted by the column (numbers before text, ties by id); runs without a value last in
    either direction."""
    runs_dir = str(store.home.runs_dir) if store is not None else None
    keyed = [(_order(value_of(column, r, store, runs_dir)), r) for r in rows]
    have = [(k, r) for k, r in keyed if k is not None]
    have.sort(key=lambda kr: (kr[0], _id_of(kr[1])), reverse=desc)
    return [r for _, r in have] + [r for k, r in keyed if k is None]


def _id_of(row: Row) -> Any:
    return id_key(row.id if isinstance(row, Broken) else str(row["id"]))


def _order(value: Any) -> tuple[int, Any] | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value))
    try:
        return (0, float(str(value)))
    except ValueError:
        return (1, str(value).lower())


def cell(column: Column, row: Row, store: RunStore | None) -> tuple[str, str]:
    """A cell's text and its title (the full value, for a clamped cell)."""
    value = value_of(column, row, store)
    if value is None:
        return "", ""
    if column.is_metric:
        return fmt_metric(value), repr(value)
    return str(value), str(value)


@dataclass
class Columns:
    """The sweep columns a page shows and the keys its choosers offer."""

    params: list[Column]
    metrics: list[Column]
    param_choices: list[str]
    metric_choices: list[str]


def columns_for(
    kept: list[Row],
    shown: list[Row],
    chosen_params: list[str] | None,
    chosen_metrics: list[str],
    stats: list[str],
    store: RunStore | None,
) -> Columns:
    """Param columns: those chosen, else the PARAM_COLUMNS most common keys of the runs the
    filters kept; metric columns: each chosen metric × statistic. The metric chooser offers
    the keys of the shown runs (and the chosen ones)."""
    keys = param_keys(kept)
    params = chosen_params if chosen_params is not None else keys[:PARAM_COLUMNS]
    offered = dict.fromkeys(chosen_metrics)
    for row in shown:
        offered.update(dict.fromkeys(summaries(store, row)))
    return Columns(
        params=[Column("param", k) for k in params],
        metrics=[Column(s, k) for k in chosen_metrics for s in stats],
        param_choices=list(dict.fromkeys([*(chosen_params or []), *keys]))[:CHOICES_MAX],
        metric_choices=list(offered)[:CHOICES_MAX],
    )

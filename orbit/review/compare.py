"""Runs side by side: one row per run with its parameters, outcome, peaks, metric summaries and
result-file values. `orbit compare` prints it as a table fitted to the terminal, `--json` and
the web's /api/compare give the same data typed, and the web's compare page shows it per run.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from orbit.errors import UsageError
from orbit.human import fmt_metric, human_bytes, human_seconds
from orbit.review.metrics import Summary, summarize_with_x
from orbit.review.objective import direction_by_name
from orbit.store.describe import duration_s
from orbit.store.groups import parse_objective
from orbit.store.model import OUTPUT, Run

DEFAULT_METRICS = 8  # metrics compared when none is named (in the order the runs first have them)
RESULT_MAX_BYTES = 16 << 20  # a bigger result file is not read (its cells stay empty)
CELL_MAX = 24  # text cells are cut to this many characters in the table


@dataclass(frozen=True)
class MetricSpec:
    """A metric and which way is better: given, declared, or by its name (None: the name
    does not say, and then no step is called its best). review/objective.py is the rule."""

    name: str
    maximize: bool | None
    why: str = "by its name"

    @property
    def goal(self) -> str | None:
        return None if self.maximize is None else "max" if self.maximize else "min"


@dataclass(frozen=True)
class ResultKey:
    path: str  # relative to the run directory, always under output/
    key: str

    @property
    def label(self) -> str:
        return f"{self.path}:{self.key}"


@dataclass(frozen=True)
class Column:
    key: str  # the key in each row (and in --json)
    title: str  # the table's header
    kind: str = "text"  # text, number, metric, step, bytes, seconds
    rank: int = 0  # the higher, the earlier the column is left out of a narrow table


@dataclass
class Comparison:
    columns: list[Column]
    rows: list[dict[str, Any]]
    metrics: list[MetricSpec]
    results: list[ResultKey]
    x_label: str = "step"
    metrics_left_out: list[str] = field(default_factory=list)
    # Per row, the recorded text of a parameter given as a number in `rows` ("1e-4" for 0.0001)
    texts: list[dict[str, str]] = field(default_factory=list)

    def text(self, i: int, col: Column) -> str:
        """Row i's value in `col` as the table and the web page show it ("" for missing)."""
        own = self.texts[i].get(col.key) if i < len(self.texts) else None
        return own if own is not None else cell(col, self.rows[i].get(col.key))

    @property
    def same(self) -> dict[str, Any]:
        """The columns with one value in every row (two rows or more; never the id)."""
        if len(self.rows) < 2:
            return {}
        out = {}
        for col in self.columns:
            values = [r.get(col.key) for r in self.rows]
            if col.key != "id" and all(v == values[0] for v in values):
                out[col.key] = values[0]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": [{"key": c.key, "title": c.title} for c in self.columns],
            "same": self.same,
            "metrics": [{"name": m.name, "goal": m.goal, "why": m.why} for m in self.metrics],
            "metrics_left_out": self.metrics_left_out,
            "results": [r.label for r in self.results],
            "x": self.x_label,
            "runs": self.rows,
        }


def spec_of(name: str, direction: str | None = None, why: str = "given") -> MetricSpec:
    """The metric with the direction given, else its name's (review/objective.py)."""
    if direction is None:
        direction, why = direction_by_name(name), "by its name"
    return MetricSpec(name, None if direction is None else direction == "max", why)


def parse_metric(text: str) -> MetricSpec:
    """`loss`, `acc:max`, `error:min`: a metric and which way is better."""
    name, way = parse_objective(text, "--metric")
    return spec_of(name, way)


def parse_result(text: str) -> ResultKey:
    """`output/result.json:test_loss` (or `result.json:test_loss`, relative to output/)."""
    path, sep, key = text.rpartition(":")
    if not sep or not path.strip() or not key.strip():
        raise UsageError(f"--result {text!r}: give PATH:KEY, e.g. output/result.json:test_loss")
    pure = PurePosixPath(path.strip())
    parts = list(pure.parts)
    if pure.is_absolute() or ".." in parts or "\\" in path:
        raise UsageError(f"--result {text!r}: the path must stay inside the run's output/")
    if parts and parts[0] == OUTPUT:
        parts = parts[1:]
    parts = [p for p in parts if p != "."]
    if not parts:
        raise UsageError(f"--result {text!r}: name a file inside the run's output/")
    return ResultKey("/".join([OUTPUT, *parts]), key.strip())


def read_result(run: Run, result: ResultKey) -> Any:
    """The value at `result.key` in the run's JSON file (a dotted key walks nested objects
    when the file has no such top-level key); None when the file, the key or the JSON is
    missing or the path leads outside output/ through a link. Never raises for the file."""
    base = run.dir / OUTPUT
    try:
        real = Path(os.path.realpath(run.dir / result.path))
        if not real.is_relative_to(os.path.realpath(base)):
            return None  # a link out of output/
        if real.stat().st_size > RESULT_MAX_BYTES:
            return None
        data = json.loads(real.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(data, dict) and result.key in data:
        return _typed(data[result.key])
    for part in result.key.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return _typed(data)


def _param(value: Any) -> Any:
    """A parameter as a number when its text is one (a sweep records `lr: "1e-4"`)."""
    if not isinstance(value, str):
        return value
    try:
        return int(value)
    except ValueError:
        pass
    try:
        f = float(value)
    except ValueError:
        return value
    return f if math.isfinite(f) else value


def _typed(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # NaN and infinities are not JSON
    return value


def compare(
    runs: Sequence[Run],
    metrics: Sequence[MetricSpec] = (),
    results: Sequence[ResultKey] = (),
    *,
    max_metrics: int = DEFAULT_METRICS,
    objective: MetricSpec | None = None,
    deadline: float | None = None,
) -> Comparison:
    """The comparison of `runs` (in the given order). Without `metrics`, the first
    `max_metrics` numeric keys the runs have are compared (the rest named in
    `metrics_left_out`), the `objective` (the group's) first and with its direction. With a
    `deadline` (series.read_metrics), a big metrics file may be summarised from a preview."""
    read = [summarize_with_x(r, deadline=deadline) for r in runs]
    summaries = [s for _, s in read]
    x_label = next((x for x, s in read if s), "step")
    chosen = list(metrics)
    left_out: list[str] = []
    if not chosen:
        names = list(dict.fromkeys(k for s in summaries for k in s))
        if objective is not None and objective.name in names:
            names.remove(objective.name)
            chosen = [objective]
        chosen += [spec_of(n) for n in names[: max_metrics - len(chosen)]]
        left_out = names[
            max_metrics - (1 if objective is not None and chosen[:1] == [objective] else 0) :
        ]
    rows = [_row(run, summ, chosen, results) for run, summ in zip(runs, summaries, strict=True)]
    columns = _columns(runs, rows, chosen, results)
    keys = [c.key for c in columns]
    texts = [
        {k: v for k, v in (run.spec.get("params") or {}).items() if isinstance(v, str)}
        for run in runs
    ]
    texts = [{f"params.{k}": v for k, v in t.items()} for t in texts]
    rows = [{k: row.get(k) for k in keys} for row in rows]
    return Comparison(columns, rows, chosen, list(results), x_label, left_out, texts)


def _row(
    run: Run, summ: dict[str, Summary], metrics: Sequence[MetricSpec], results: Iterable[ResultKey]
) -> dict[str, Any]:
    res = run.resources
    peaks = run.status.get("peaks") or {}
    row: dict[str, Any] = {
        "id": run.id,
        "name": run.name or None,
        "group": run.group,
        "folder": run.folder,
        "image": run.spec.get("image"),
        "cpus": res.cpus,
        "mem_gb": res.mem_gb,
        "gpus": res.gpus,
        "state": run.status.get("state"),
        "reason": run.reason,
        "exit_code": run.exit_code,
        "duration_s": duration_s(run.status),
        "peak_mem_bytes": peaks.get("mem_bytes"),
        "peak_cpu_cores": peaks.get("cpu_cores"),
        "peak_gpu_mem_bytes": peaks.get("gpu_mem_bytes"),  # the sum over its GPUs
    }
    for k, v in (run.spec.get("tags") or {}).items():
        row[f"tags.{k}"] = v
    for k, v in (run.spec.get("params") or {}).items():
        row[f"params.{k}"] = _param(v)
    for m in metrics:
        s = summ.get(m.name)
        if s is None:
            continue
        row[f"{m.name}.last"] = s.latest
        row[f"{m.name}.min"] = s.min
        row[f"{m.name}.max"] = s.max
        if m.maximize is not None:
            row[f"{m.name}.best_step"] = s.max_step if m.maximize else s.min_step
    for r in results:
        row[r.label] = read_result(run, r)
    return row


_BASE = [  # rank: the higher, the earlier left out of a narrow table
    Column("id", "id", "text", 0),
    Column("name", "name", "text", 8),
    Column("group", "group", "text", 12),
    Column("folder", "folder", "text", 13),
    Column("image", "image", "text", 11),
    Column("cpus", "cpus", "number", 11),
    Column("mem_gb", "mem GiB", "number", 11),
    Column("gpus", "gpus", "number", 11),
]
_OUTCOME = [
    Column("state", "state", "text", 1),
    Column("reason", "reason", "text", 6),
    Column("exit_code", "exit", "number", 10),
    Column("duration_s", "time", "seconds", 7),
    Column("peak_mem_bytes", "peak mem", "bytes", 7),
    Column("peak_cpu_cores", "peak CPU", "number", 9),
    Column("peak_gpu_mem_bytes", "peak GPU mem", "bytes", 7),
]


def _columns(
    runs: Sequence[Run],
    rows: list[dict[str, Any]],
    metrics: Sequence[MetricSpec],
    results: Sequence[ResultKey],
) -> list[Column]:
    def present(key: str) -> bool:
        return any(r.get(key) is not None for r in rows)

    cols = [c for c in _BASE if c.key == "id" or present(c.key)]
    for prefix, title, rank in (("tags.", "tag:", 10), ("params.", "", 2)):
        keys = dict.fromkeys(k for r in rows for k in r if k.startswith(prefix))
        cols.extend(Column(k, title + k[len(prefix) :], "text", rank) for k in keys)
    cols.extend(c for c in _OUTCOME if present(c.key))
    for m in metrics:
        cols += [
            Column(f"{m.name}.last", m.name, "metric", 4),
            Column(f"{m.name}.min", f"{m.name} min", "metric", 3 if m.maximize else 2),
            Column(f"{m.name}.max", f"{m.name} max", "metric", 2 if m.maximize else 3),
        ]
        if m.goal is not None:  # a step is the best only where the direction is known
            cols.append(Column(f"{m.name}.best_step", f"{m.name} @{m.goal}", "step", 5))
    cols.extend(Column(r.label, r.key, "metric", 2) for r in results)
    return cols


def cell(col: Column, value: Any) -> str:
    """A value as the table and the web page show it ("" for missing)."""
    if value is None:
        return ""
    if col.kind == "bytes" and isinstance(value, int | float):
        return human_bytes(value)
    if col.kind == "seconds" and isinstance(value, int | float):
        return human_seconds(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return fmt_metric(value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render(cmp: Comparison, width: int) -> list[str]:
    """The text: a "same for all" line, the table (columns equal in every row folded away,
    long cells cut, and columns left out until it fits `width`), and what was left out."""
    same = cmp.same
    lines: list[str] = []
    shown_same = [
        f"{c.title}={_cut(cmp.text(0, c), CELL_MAX)}"
        for c in cmp.columns
        if c.key in same and same[c.key] is not None
    ]
    if shown_same:
        lines += _wrap(
            ["same for all:", *(f"{t}," for t in shown_same[:-1]), shown_same[-1]], width
        )
    cols = [c for c in cmp.columns if c.key not in same]
    cells = {c.key: [_cut(cmp.text(i, c), CELL_MAX) for i in range(len(cmp.rows))] for c in cols}
    widths = {c.key: max([len(c.title), *map(len, cells[c.key])]) for c in cols}
    dropped: list[Column] = []
    by_rank = sorted((c for c in cols if c.key != "id"), key=lambda c: (-c.rank, -cols.index(c)))
    while sum(widths[c.key] for c in cols) + 2 * (len(cols) - 1) > width and by_rank:
        gone = by_rank.pop(0)
        cols.remove(gone)
        dropped.append(gone)
    for i in range(len(cmp.rows) + 1):
        texts = [c.title if i == 0 else cells[c.key][i - 1] for c in cols]
        padded = [t.rjust(widths[c.key]) if _right(c) else t.ljust(widths[c.key])
                  for c, t in zip(cols, texts, strict=True)]  # fmt: skip
        lines.append(_cut("  ".join(padded).rstrip(), width))
    if dropped:
        names = _listed([c.title for c in sorted(dropped, key=cmp.columns.index)])
        lines += _wrap(["left out for width:", *names, "(--json", "has", "them)"], width)
    if cmp.metrics_left_out:
        more = len(cmp.metrics_left_out)
        text = f"{more} more metric{'s' if more != 1 else ''} not compared (--metric NAME)"
        lines += _wrap(text.split(" "), width)
    return lines


def _listed(items: list[str]) -> list[str]:
    """The items with a comma after each but the last (one word each for `_wrap`)."""
    return [f"{t}," for t in items[:-1]] + items[-1:]


def _wrap(words: list[str], width: int) -> list[str]:
    """`words` joined by spaces into lines of at most `width` (a longer word is cut); the
    lines after the first are indented."""
    lines: list[str] = []
    line = ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = "  "
        line = f"{line} {word}" if line.strip() else line + word
    lines.append(line)
    return [_cut(x, width) for x in lines]


def _right(col: Column) -> bool:
    return col.kind in ("number", "metric", "step", "bytes", "seconds")

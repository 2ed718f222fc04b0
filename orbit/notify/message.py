"""What a notification says, independent of where it goes (platforms.py renders it).

A Message is plain data: the outbox stores it as JSON (to_json / from_json), so a message
written by one process is sent, merged or retried by another.

Building one reads only bounded parts of a run directory: the last METRICS_TAIL_BYTES of
metrics.jsonl through the one metrics parser (orbit/review/series.py, as `orbit show` and
the charts read it) and the last LOG_TAIL_BYTES of log.txt. A damaged or missing file gives
a shorter message, never an exception.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlencode

from orbit.errors import CorruptError
from orbit.human import fmt_cpus, fmt_metric, fmt_num, human_bytes, human_seconds
from orbit.review.best import AXES, best_run, finals
from orbit.review.objective import resolve, way_text
from orbit.review.series import Series, read_tail
from orbit.store.describe import duration_s
from orbit.store.excerpt import clean_lines
from orbit.store.groups import Declared
from orbit.store.home import Home
from orbit.store.lognote import log_note
from orbit.store.model import LOG, METRICS, Run, RunState


@dataclass
class Message:
    key: str  # idempotency key: the same event always gets the same key (e.g. "run-12-failed")
    event: str  # "succeeded" | "failed" | "cancelled" | "group" | "digest" (a merged burst)
    title: str  # one line, e.g. "run 12 (lr-0.1) failed: exit code 1"
    state: str  # the run's state, or for a group/digest its worst: decides the colour
    fields: list[tuple[str, str]] = field(default_factory=list)  # (label, value), in order
    lines: list[str] = field(default_factory=list)  # plain text lines: sparkline, reasons, ...
    code: str | None = None  # preformatted text (a failure's last log lines), may be long
    link: str | None = None  # the run or group page when web_url is configured

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        data = dict(data)
        data["fields"] = [tuple(f) for f in data.get("fields", [])]
        return cls(**data)


LOG_TAIL_BYTES = 64 * 1024  # of log.txt read for a failure's last lines
METRICS_TAIL_BYTES = 8 << 20  # of metrics.jsonl summarised (about 0.2 s of parsing)
LINE_CHARS = 500  # a log line longer than this is cut (a progress bar without newlines)
SPARK = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 20
MAX_METRICS = 8  # final metrics shown as fields; the rest are counted
MAX_FAILURES = 10  # failed runs of a group named one by one; the rest are counted
MAX_DIGEST_LINES = 30
# Worst first: a group or digest takes the colour of its worst member.
SEVERITY = (
    "failed", "lost", "unknown", "cancelled", "running", "starting", "queued", "succeeded"
)  # fmt: skip
FAILED = frozenset({RunState.FAILED.value, RunState.LOST.value})


def worst(states: Iterable[str]) -> str:
    """The most severe of `states` (SEVERITY order; an unknown state counts as "failed")."""
    rank = {s: i for i, s in enumerate(SEVERITY)}
    return min(states, key=lambda s: rank.get(s, 0), default="succeeded")


def event_of(state: str) -> str:
    """The event a finished run raises: `succeeded`, `cancelled`, or `failed` (failed, lost)."""
    return state if state in ("succeeded", "cancelled") else "failed"


def sparkline(values: list[float]) -> str:
    """One block character per value, ▁ at the minimum and █ at the maximum (▄ when flat)."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if hi == lo:
        return SPARK[3] * len(values)
    top = len(SPARK) - 1
    return "".join(SPARK[round((v - lo) / (hi - lo) * top)] for v in values)


def log_tail(run: Run, n: int) -> str | None:
    """The last `n` non-empty lines of the run's log.txt (ANSI codes and progress-bar
    rewrites removed, each line cut at LINE_CHARS), from at most its last LOG_TAIL_BYTES;
    None when there is no log, nothing in it, or `n` < 1."""
    if n < 1:
        return None
    try:
        with open(run.path(LOG), "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            raw = fh.read(LOG_TAIL_BYTES)
    except OSError:
        return None
    if size > LOG_TAIL_BYTES:
        raw = raw.partition(b"\n")[2]  # the first line is probably cut
    lines = [line for line in clean_lines(raw.decode("utf-8", "replace")) if line.strip()]
    lines = [line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…" for line in lines]
    return "\n".join(lines[-n:]) or None


def _resources(run: Run) -> str:
    res = run.resources
    parts = [fmt_cpus(res.cpus), f"{fmt_num(res.mem_gb)} GiB"]
    if res.gpus:
        parts.append(f"{res.gpus} GPU" + ("" if res.gpus == 1 else "s"))
    return ", ".join(parts)


def _peaks(run: Run) -> str | None:
    peaks = run.peaks
    if not peaks.sampled:
        return None
    parts = [f"mem {human_bytes(peaks.mem_bytes)}", f"CPU {fmt_num(peaks.cpu_cores)} cores"]
    if peaks.gpu_mem_bytes is not None:
        parts.append(f"GPU mem {human_bytes(peaks.gpu_mem_bytes)}")
    return ", ".join(parts)


def _metric_fields(
    series: dict[str, Series], main: str | None, *, partial: bool
) -> tuple[list[tuple[str, str]], list[str]]:
    """The final value of each metric (the main one first) and the main one's sparkline
    (`partial`: of the file's last part only, and it says so)."""
    keys = [k for k in series if k not in AXES]
    if main in series:
        keys = [main, *(k for k in keys if k != main)]
    fields = [(k, fmt_metric(series[k].last)) for k in keys[:MAX_METRICS]]
    if len(keys) > MAX_METRICS:
        fields.append(("more metrics", str(len(keys) - MAX_METRICS)))
    lines = []
    if main in series:
        s = series[main]
        first = fmt_metric(s.y[0]) if s.y else "-"
        lines.append(
            f"{main} {sparkline(s.y)} {first} → {fmt_metric(s.last)}"
            f" (min {fmt_metric(s.min)}, max {fmt_metric(s.max)},"
            f" {'last ' if partial else ''}{s.count} points)"
        )
    return fields, lines


def run_message(
    run: Run,
    web_url: str | None,
    *,
    log_lines: int = 20,
    metric: str | None = None,
    declared: Declared | None = None,
) -> Message:
    """The message for a finished run: state and reason, duration, resources and peaks, final
    metrics with a sparkline of the main one (`metric`, else its group's objective: `declared`
    or picked from the run's metrics, review/objective.py), and for a failed or lost run the
    last `log_lines` lines of its log. Never raises on a damaged metrics.jsonl or log.txt:
    what cannot be read is left out."""
    state = run.state.value
    reason = run.reason or ""
    title = f"run {run.label} {state}"
    if reason and state != RunState.SUCCEEDED.value:
        title += f": {reason}"
    fields = [("state", f"{state} ({reason})" if reason else state)]
    note = log_note(run.status)
    if note:
        title += f"; {note.split(':', 1)[0]}"
        fields.append(("log", note))
    fields.append(("duration", human_seconds(duration_s(run.status))))
    if run.group:
        fields.append(("group", run.group))
    fields.append(("resources", _resources(run)))
    peaks = _peaks(run)
    if peaks:
        fields.append(("peaks", peaks))
    metrics = read_tail(run.path(METRICS), METRICS_TAIL_BYTES, max_points=SPARK_POINTS)
    series = metrics.series
    if metric is None:
        latest = {k: v.last for k, v in series.items()}
        metric = resolve([latest], declared=declared, group=run.group).metric
    main = metric
    more, lines = _metric_fields(series, main, partial=metrics.skipped_bytes > 0)
    fields.extend(more)
    return Message(
        key=f"run-{run.id}-{state}",
        event=event_of(state),
        title=title,
        state=state,
        fields=fields,
        lines=lines,
        code=log_tail(run, log_lines) if state in FAILED else None,
        link=f"{web_url.rstrip('/')}/runs/{run.id}" if web_url else None,
    )


def _by_severity(counts: Counter[str]) -> list[tuple[str, int]]:
    """(state, count), succeeded first and failed last; other labels ("group finished") after."""
    order = {s: i for i, s in enumerate(SEVERITY[::-1])}
    return sorted(counts.items(), key=lambda sn: order.get(sn[0], len(order)))


def _counts_text(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {s}" for s, n in _by_severity(counts))


def group_message(
    group: str,
    runs: list[Run],
    web_url: str | None,
    *,
    metric: str | None = None,
    direction: str | None = None,
    declared: Declared | None = None,
) -> Message:
    """The message for a finished group: counts by state, the best succeeded run by the final
    value of the group's objective (review/objective.py: `metric` and `direction` when given,
    else `declared`, else picked; the field names the metric, the direction and why), and the
    failed and lost runs with their reasons (the first MAX_FAILURES by id, then how many more).
    The key changes whenever a run or its state does, so each outcome is notified once."""
    if direction not in (None, "max", "min"):
        raise ValueError(f"direction must be 'max' or 'min', not {direction!r}")
    ordered = sorted(runs, key=lambda r: (len(r.id), r.id))
    counts = Counter(r.state.value for r in ordered)
    digest = hashlib.sha256(
        "\n".join(f"{r.id}:{r.state.value}" for r in ordered).encode()
    ).hexdigest()[:12]
    state = worst(counts) if counts else RunState.SUCCEEDED.value
    n = len(ordered)
    title = f"group {group} finished: {n} run{'' if n == 1 else 's'}, {_counts_text(counts)}"
    fields = [("runs", str(len(ordered)))] + [(s, str(counts[s])) for s in SEVERITY if counts[s]]
    lines = []
    o = resolve(
        finals(ordered).values(),
        metric=metric,
        direction=direction,
        declared=declared,
        group=group,
    )
    if o.ok and o.metric:
        best = best_run(ordered, o.metric, o.maximize)
        if best is not None:
            label = f"{best.id} ({best.name})" if best.name else best.id
            way = way_text(o.direction).replace(" is better", "")
            fields.append(
                (
                    f"best {o.metric} ({way}, {o.short_why})",
                    f"{fmt_metric(best.value)}: run {label}",
                )
            )
    elif o.problem and any(r.state.value == "succeeded" for r in ordered):
        lines.append(o.problem)
    failures = [r for r in ordered if r.state.value in FAILED]
    for r in failures[:MAX_FAILURES]:
        lines.append(f"run {r.label} {r.state.value}: {r.reason or 'no reason recorded'}")
    if len(failures) > MAX_FAILURES:
        lines.append(f"… and {len(failures) - MAX_FAILURES} more failed")
    link = None
    if web_url:
        link = f"{web_url.rstrip('/')}/?{urlencode({'group': group})}"
    return Message(f"group-{group}-{digest}", "group", title, state, fields, lines, None, link)


def merge(messages: list[Message]) -> Message:
    """One "digest" standing for a burst of messages (and for earlier digests among them):
    counts by state, one line per message (its title; the first MAX_DIGEST_LINES, then how
    many more), a key derived from the merged keys. `messages` must not be empty."""
    if not messages:
        raise ValueError("merge needs at least one message")
    counts: Counter[str] = Counter()
    titles: list[str] = []
    for m in messages:
        if m.event == "digest":  # a digest carries its counts as fields
            counts.update({label: int(n) for label, n in m.fields if n.isdigit()})
            titles.extend(line for line in m.lines if not line.startswith("… and "))
        else:
            counts["group finished" if m.event == "group" else m.state] += 1
            titles.append(m.title)
    total = sum(counts.values())
    runs_only = "group finished" not in counts
    title = f"{total} {'runs finished' if runs_only else 'notifications'}: {_counts_text(counts)}"
    lines = titles[:MAX_DIGEST_LINES]
    if total > len(lines):
        lines.append(f"… and {total - len(lines)} more")
    key = "digest-" + hashlib.sha256("\n".join(m.key for m in messages).encode()).hexdigest()[:16]
    links = {m.link for m in messages}
    return Message(
        key=key,
        event="digest",
        title=title,
        state=worst(m.state for m in messages),
        fields=[(label, str(n)) for label, n in _by_severity(counts)],
        lines=lines,
        link=links.pop() if len(links) == 1 else None,
    )


def web_url_of(home: Home) -> str | None:
    """The `web_url` setting that messages and cards link their run's page with (read again:
    a running sender sees a change); None without one, or with a broken config.yaml."""
    try:
        return Home(home.root, home.environ).settings.web_url
    except CorruptError:  # a broken config.yaml: messages without links
        return None

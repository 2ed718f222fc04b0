"""The lessons digest: what was tried in a group or a repository, what worked best, what
failed and why, and what people and agents concluded; one page, for an agent to read first.

Kept up to date incrementally. ORBIT_HOME/review/lessons-<key>.json (one file per group or
project; a cache, deleting it loses nothing) holds each run's contribution: its params, state,
reason, error excerpt, final metric values and notes, stamped with its status.yaml stamp (the
index row's `st`) and the size and mtime of its notes.jsonl and metrics.jsonl. A call lists
the runs through index.jsonl, stats the two files of each member, and reads only the runs
whose stamps changed; everything else comes from the cache.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import textwrap
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbit.errors import NotFoundError, OrbitError
from orbit.review.best import (
    SEED_KEYS,
    best_run,
    by_params,
    main_metric,
    number,
    params_text,
)
from orbit.review.compare import default_maximize
from orbit.review.signatures import failures
from orbit.store.describe import latest_metrics
from orbit.store.excerpt import run_excerpt
from orbit.store.files import atomic_write, read_jsonl
from orbit.store.model import ACTIVE, NOTES, Run, parse_iso
from orbit.store.notes import group_notes
from orbit.store.runs import Broken, RunStore, id_key

CACHE_FORMAT = 1
REVIEW_DIR = "review"
MAX_METRICS = 32  # final values kept per run
MAX_RUN_NOTES = 3  # newest notes kept per run
NOTE_CHARS = 240
MAX_CHARS = 5000  # the page: notes beyond it are left to --json
SHOWN_SETTINGS = 5
SHOWN_FAILURES = 5
SHOWN_NOTES = 8
SHOWN_VALUES = 10  # values listed per param key; more are given as a range
WIDTH = 100
ACTIVE_STATES = frozenset(state.value for state in ACTIVE)


@dataclass(frozen=True)
class Scope:
    """A group, or a project directory (runs whose run.yaml project path is in it)."""

    group: str | None = None
    project: str | None = None

    @property
    def key(self) -> str:
        raw = f"group\0{self.group}" if self.group is not None else f"project\0{self.project}"
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    @property
    def title(self) -> str:
        return f"group {self.group}" if self.group is not None else f"project {self.project}"

    def holds(self, entry: dict[str, Any]) -> bool:
        if self.group is not None:
            return bool(entry.get("group") == self.group)
        path = entry.get("project") or ""
        return bool(path) and (path == self.project or path.startswith(f"{self.project}/"))


def cache_path(store: RunStore, scope: Scope) -> Path:
    return store.home.root / REVIEW_DIR / f"lessons-{scope.key}.json"


# --- the per-run contributions, cached ---------------------------------------------------------
def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _entry(run: Run) -> dict[str, Any]:
    """What one run contributes to a digest (everything the digest needs from its files)."""
    spec, status = run.spec, run.status
    latest, _ = latest_metrics(run)
    metrics = {k: v for k, v in latest.items() if number(v) is not None}
    notes = []
    for note in read_jsonl(run.path(NOTES))[-MAX_RUN_NOTES:]:
        text = str(note.get("text") or "")[:NOTE_CHARS]
        notes.append({"time": note.get("time"), "author": note.get("author"), "text": text})
    return {
        "name": spec.get("name"),
        "group": spec.get("group"),
        "params": spec.get("params") or {},
        "project": (spec.get("project") or {}).get("path"),
        "state": status.get("state"),
        "reason": status.get("reason"),
        "exit_code": status.get("exit_code"),
        "error_excerpt": run_excerpt(run),  # a run settled before excerpts: from its log, once
        "submitted_at": status.get("submitted_at"),
        "finished_at": status.get("finished_at"),
        "metrics": dict(list(metrics.items())[:MAX_METRICS]),
        "notes": notes,
    }


def _load_cache(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return {}
    runs = data.get("runs")
    return runs if isinstance(runs, dict) else {}


def collect(store: RunStore, scope: Scope) -> tuple[dict[str, dict[str, Any]], int, int]:
    """The scope's runs (id → contribution), how many were read from their files this call,
    and how many could not be read. The cache file is rewritten only when something changed."""
    path = cache_path(store, scope)
    cached = _load_cache(path)
    runs_dir = str(store.home.runs_dir)
    found: dict[str, dict[str, Any]] = {}
    others: dict[str, dict[str, Any]] = {}  # outside a project: kept so they are not read again
    read = broken = 0
    for row in store.list_rows():
        if isinstance(row, Broken):
            broken += scope.group is not None and row.may_be_in(scope.group)
            continue
        if scope.group is not None and row.get("group") != scope.group:
            continue  # the index row names the group: no need to open the run
        run_id = row["id"]
        base = f"{runs_dir}/{run_id}"
        entry = cached.get(run_id)
        # metrics.jsonl only changes while a run is active: a finished run's is not stat'ed.
        if entry is not None and entry.get("state") not in ACTIVE_STATES:
            metrics = entry["stamp"][2]
        else:
            metrics = _stat(f"{base}/metrics.jsonl")
        stamp = [row.get("st"), _stat(f"{base}/notes.jsonl"), metrics]
        if entry is None or entry.get("stamp") != stamp:
            try:
                entry = {**_entry(store.load(run_id)), "stamp": stamp}
            except (OrbitError, OSError):  # removed or damaged since the listing
                broken += 1
                continue
            read += 1
        if scope.holds(entry):
            found[run_id] = entry
        elif scope.project is not None:
            others[run_id] = entry
    if read or set(cached) != set(found) | set(others):
        data = {"format": CACHE_FORMAT, "scope": scope.__dict__, "runs": {**found, **others}}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps(data, separators=(",", ":")).encode(), durable=False)
        except OSError:
            pass  # only a cache: the next call reads the runs again
    return found, read, broken


def as_runs(store: RunStore, entries: dict[str, dict[str, Any]]) -> list[Run]:
    """Run records rebuilt from cached contributions: enough for best.py and signatures.py."""
    out = []
    runs_dir = store.home.runs_dir  # once: the property reads the configuration
    for run_id in sorted(entries, key=id_key):
        e = entries[run_id]
        spec = {
            "name": e.get("name"),
            "group": e.get("group"),
            "params": e.get("params") or {},
            "project": {"path": e.get("project")},
        }
        status = {
            k: e.get(k)
            for k in (
                "state",
                "reason",
                "exit_code",
                "error_excerpt",
                "submitted_at",
                "finished_at",
            )
        }
        out.append(Run(run_id, runs_dir / run_id, spec, status))
    return out


# --- the digest --------------------------------------------------------------------------------
def digest(
    store: RunStore,
    scope: Scope,
    *,
    metric: str | None = None,
    maximize: bool | None = None,
    seed_keys: Iterable[str] = SEED_KEYS,
) -> dict[str, Any]:
    """The digest as data (the CLI's --json, /api/lessons); `render` makes the page of it."""
    # Tens of thousands of small dicts, none of them cyclic: the collector would only scan
    # them again and again (a fifth of the time over 10,000 runs).
    paused = gc.isenabled()
    gc.disable()
    try:
        return _digest(store, scope, metric, maximize, list(seed_keys))
    finally:
        if paused:
            gc.enable()


def _digest(
    store: RunStore, scope: Scope, metric: str | None, maximize: bool | None, seed_keys: list[str]
) -> dict[str, Any]:
    entries, read, broken = collect(store, scope)
    if not entries:
        raise NotFoundError(f"no runs in {scope.title}")
    runs = as_runs(store, entries)
    if metric is None:
        ordered = [entries[r.id] for r in runs if r.status.get("state") == "succeeded"]
        metric = main_metric(e["metrics"] for e in ordered)
    if maximize is None:
        maximize = default_maximize(metric) if metric else False
    out: dict[str, Any] = {
        "scope": {"group": scope.group, "project": scope.project},
        "runs": len(runs),
        "unreadable": broken,
        "states": dict(Counter(str(r.status.get("state")) for r in runs).most_common()),
        "params": _params_covered(runs),
        "metric": metric,
        "maximize": maximize,
        "best_run": None,
        "settings": [],
        "failures": failure_summary(runs),
        "notes": _notes(store, scope, entries),
        "cache": {"runs": len(runs), "read": read},
    }
    if metric:
        values = {r.id: number(entries[r.id]["metrics"].get(metric)) for r in runs}
        best = best_run(runs, metric, maximize, values=values)
        out["best_run"] = best.to_json() if best else None
        settings = by_params(runs, metric, maximize, seed_keys=seed_keys, values=values)
        out["settings"] = [_setting_json(s) for s in settings[:SHOWN_SETTINGS]]
        out["settings_total"] = len(settings)
    return out


def _setting_json(s: Any) -> dict[str, Any]:
    full = s.to_json()
    return {
        k: full[k] for k in ("params", "mean", "std", "n", "runs", "failed", "best_run", "best")
    }


def _sort_values(values: Iterable[str]) -> list[str]:
    def key(v: str) -> tuple[int, float, str]:
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)

    return sorted(values, key=key)


def _params_covered(runs: list[Run]) -> dict[str, dict[str, int]]:
    """Per param key, how many runs had each value (values as text, numbers in order)."""
    seen: dict[str, Counter[str]] = {}
    for r in runs:
        for k, v in (r.spec.get("params") or {}).items():
            seen.setdefault(str(k), Counter())[str(v)] += 1
    return {k: {v: c[v] for v in _sort_values(c)} for k, c in seen.items()}


def _notes(
    store: RunStore, scope: Scope, entries: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Group notes and run notes, newest first (SHOWN_NOTES of them)."""
    groups = (
        {scope.group} if scope.group is not None else {e.get("group") for e in entries.values()}
    )
    shared: list[dict[str, Any]] = []
    for g in sorted(x for x in groups if x):
        shared.extend({**_short(n), "group": g, "runs": []} for n in group_notes(store.home, g))
    # One note written on several runs at once (`orbit note 4 5 6 TEXT`) is listed once.
    same: dict[tuple[Any, Any], dict[str, Any]] = {}
    for run_id in sorted(entries, key=id_key):
        for n in entries[run_id].get("notes") or []:
            key = (n.get("text"), n.get("author"))
            seen = same.get(key)
            if seen is not None and abs(_epoch(seen["time"]) - _epoch(n.get("time"))) < 60:
                seen["runs"].append(run_id)
                seen["time"] = max(seen["time"], str(n.get("time") or ""))
            else:
                same[key] = {**n, "time": str(n.get("time") or ""), "group": None, "runs": [run_id]}
    of_runs = list(same.values())
    # A group's conclusions first in line for the page, then the runs' notes.
    shared.sort(key=newest_first, reverse=True)
    of_runs.sort(key=newest_first, reverse=True)
    kept = shared[:SHOWN_NOTES] + of_runs[: max(0, SHOWN_NOTES - len(shared))]
    return sorted(kept, key=newest_first, reverse=True)


def _epoch(stamp: Any) -> float:
    when = parse_iso(stamp if isinstance(stamp, str) else None)
    return when.timestamp() if when else 0.0


def newest_first(note: dict[str, Any]) -> str:
    return str(note.get("time") or "")


def _short(note: dict[str, Any]) -> dict[str, Any]:
    text = str(note.get("text") or "")
    return {"time": note.get("time"), "author": note.get("author"), "text": text[:NOTE_CHARS]}


def failure_summary(runs: list[Run]) -> list[dict[str, Any]]:
    """The failure signatures of `runs` (orbit/review/signatures.py), most frequent first."""
    return [f.to_json() for f in failures(runs)[:SHOWN_FAILURES]]


# --- the page ------------------------------------------------------------------------------------
def _cut(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def render(d: dict[str, Any]) -> str:
    """The digest as plain text: headings, short lines (≤ 100 columns), a page at most."""
    scope = d["scope"]
    title = (
        f"group {scope['group']}"
        if scope.get("group") is not None
        else f"project {scope['project']}"
    )
    states = ", ".join(f"{n} {s}" for s, n in d["states"].items())
    lines = [f"# Lessons of {title}", "", f"{d['runs']} runs: {states}."]
    if d.get("unreadable"):
        lines.append(f"{d['unreadable']} more cannot be read (see `orbit ps -a`).")
    lines += ["", "## Tried"]
    for key, values in list(d["params"].items())[:12]:
        lines.append(_cut(f"- {key}: {_values_text(values)}"))
    if not d["params"]:
        lines.append("- no params recorded (runs made with `orbit run`, not `orbit sweep -p`)")
    lines += ["", *_best_lines(d), "", "## Failures"]
    for f in d["failures"]:
        shared = params_text(f.get("shared_params") or {}) if f.get("shared_params") else ""
        where = f"all {shared}; " if shared else ""
        shown = [str(i) for i in (f.get("run_ids") or [])[:3]]
        examples = ", ".join(shown) + (", …" if (f.get("count") or 0) > len(shown) else "")
        lines.append(_cut(f"- {f.get('count')}× {str(f.get('signature')).splitlines()[0]}"))
        lines.append(_cut(f"  ({where}runs {examples})"))
    if not d["failures"]:
        lines.append("- none")
    head = "\n".join(lines) + "\n\n## Notes (newest first)\n"
    notes = [_note_lines(n) for n in d["notes"]]
    while notes and len(head) + sum(len(n) for n in notes) > MAX_CHARS:
        notes.pop()  # the oldest go first: the page stays a page
    if not d["notes"]:
        notes = ["- none yet (orbit note -g GROUP TEXT records a conclusion once)\n"]
    elif len(notes) < len(d["notes"]):
        notes.append(f"- … {len(d['notes']) - len(notes)} older (orbit lessons --json)\n")
    return head + "".join(notes)


def _note_lines(n: dict[str, Any]) -> str:
    runs = n.get("runs") or []
    where = f"group {n['group']}" if n.get("group") else "run" + ("s " if len(runs) > 1 else " ")
    where += ", ".join(runs[:6]) + (" …" if len(runs) > 6 else "")
    stamp = str(n.get("time") or "")[:16].replace("T", " ")
    return _wrapped(f"- [{stamp}, {where}, {n.get('author')}] {n.get('text')}")


def _wrapped(text: str) -> str:
    """`text` in lines of at most WIDTH columns, continued with an indent."""
    out = textwrap.wrap(" ".join(text.split()), WIDTH, subsequent_indent="  ")
    return "".join(line + "\n" for line in out)


def _values_text(values: dict[str, int]) -> str:
    items = list(values.items())
    if len(items) > SHOWN_VALUES:
        return f"{len(items)} values, {items[0][0]} … {items[-1][0]}"
    return ", ".join(f"{v} ×{c}" for v, c in items)


def _best_lines(d: dict[str, Any]) -> list[str]:
    from orbit.human import fmt_metric

    metric = d.get("metric")
    if not metric:
        return ["## Best", "- no succeeded run logged a numeric metric"]
    way = "highest" if d["maximize"] else "lowest"
    out = [f"## Best by final {metric} ({way} is better)"]
    for s in d["settings"]:
        if s["mean"] is None:
            out.append(
                _cut(
                    f"- {params_text(s['params'])}: no succeeded run with {metric} "
                    f"({s['failed']} of {s['runs']} failed)"
                )
            )
            continue
        spread = f" ± {fmt_metric(s['std'])}" if s["std"] is not None else ""
        mark = "best setting: " if s["best"] else ""
        failed = f", {s['failed']} failed" if s["failed"] else ""
        out.append(
            _cut(
                f"- {mark}{params_text(s['params'])}: mean {fmt_metric(s['mean'])}{spread} "
                f"(n={s['n']} of {s['runs']}{failed}; its best run {s['best_run']})"
            )
        )
    more = d.get("settings_total", 0) - len(d["settings"])
    if more > 0:
        out.append(f"- … {more} more settings (orbit best -g GROUP --metric {metric} --by-params)")
    b = d.get("best_run")
    if b:
        out.append(
            _cut(
                f"- best single run: {b['id']} ({params_text(b['params'])}), "
                f"{metric} {fmt_metric(b['value'])}"
            )
        )
    return out

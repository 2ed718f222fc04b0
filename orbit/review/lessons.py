"""The lessons digest: what was tried in a group or a repository, what worked best, what
failed and why, and what people and agents concluded; one page, for an agent to read first.

Kept up to date incrementally. ORBIT_HOME/review/lessons-<key>.json (one file per group or
project; a cache, deleting it loses nothing) holds each run's contribution: its params, state,
reason, error excerpt, final metric values and notes, stamped with its status.yaml stamp (the
index row's `st`) and the size and mtime of its notes.jsonl and metrics.jsonl. A call lists
the runs through index.jsonl, stats the two files of each member, and reads only the runs
whose stamps changed; everything else comes from the cache. The page made of the digest is
review/lessons_page.py's.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbit.errors import NotFoundError, OrbitError
from orbit.review.best import SEED_KEYS, best_run, by_params
from orbit.review.changes import request_spec
from orbit.review.objective import Objective, declared_of, logged_keys, number, resolve
from orbit.review.outcomes import peak_bytes
from orbit.review.signatures import failures
from orbit.store import grouprows
from orbit.store.describe import latest_metrics
from orbit.store.excerpt import run_excerpt
from orbit.store.files import atomic_write, read_jsonl
from orbit.store.groups import go_on
from orbit.store.model import ACTIVE, METRICS, NOTES, Run, parse_iso
from orbit.store.notes import group_notes
from orbit.store.runs import Broken, RunStore, id_key

CACHE_FORMAT = 3  # 3: each entry has `request` and `peaks` (failure outcomes)
REVIEW_DIR = "review"
MAX_METRICS = 32  # final values kept per run
MAX_RUN_NOTES = 3  # newest notes kept per run
SHOWN_SETTINGS = 5
SHOWN_FAILURES = 5
SHOWN_NOTES = 8
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
    every = read_jsonl(run.path(NOTES))
    notes = [_note(n) for n in every[-MAX_RUN_NOTES:]]
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
        "notes_total": len(every),
        "request": request_spec(run),  # what a failure's outcome compares
        "peaks": {"mem_bytes": peak_bytes(run)},
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
    listed = store.list_rows() if scope.group is None else grouprows.rows(store, scope.group)
    for row in listed:
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
            metrics = _stat(f"{base}/{METRICS}")
        stamp = [row.get("st"), _stat(f"{base}/{NOTES}"), metrics]
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
        request = e.get("request") or {}
        spec = {
            **request,
            "name": e.get("name"),
            "group": e.get("group"),
            "params": e.get("params") or {},
            "project": {**(request.get("project") or {}), "path": e.get("project")},
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
                "peaks",
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
    direction: str | None = None,
    seed_keys: Iterable[str] = SEED_KEYS,
) -> dict[str, Any]:
    """The digest as data (the CLI's --json, /api/lessons); `render` makes the page of it.
    `metric` and `direction` (max or min) replace the objective's (review/objective.py)."""
    # Tens of thousands of small dicts, none of them cyclic: the collector would only scan
    # them again and again (a fifth of the time over 10,000 runs).
    paused = gc.isenabled()
    gc.disable()
    try:
        return _digest(store, scope, metric, direction, list(seed_keys))
    finally:
        if paused:
            gc.enable()


def _digest(
    store: RunStore, scope: Scope, metric: str | None, direction: str | None, seed_keys: list[str]
) -> dict[str, Any]:
    entries, read, broken = collect(store, scope)
    if not entries:
        raise NotFoundError(f"no runs in {scope.title}")
    runs = as_runs(store, entries)
    groups = _groups(store, runs)
    finals = [entries[r.id]["metrics"] for r in runs if r.status.get("state") == "succeeded"]
    o = _objective(scope, finals, groups, metric, direction)
    notes, total = _notes(store, scope, entries)
    out: dict[str, Any] = {
        "scope": {"group": scope.group, "project": scope.project},
        "runs": len(runs),
        "unreadable": broken,
        "states": dict(Counter(str(r.status.get("state")) for r in runs).most_common()),
        "params": _params_covered(runs),
        "groups": [{k: v for k, v in g.items() if k != "declared"} for g in groups],
        "objective": o.to_json(),
        "metrics_logged": logged_keys(finals),  # key -> succeeded runs: what can rank
        "metric": o.metric if o.ok else None,
        "maximize": o.maximize if o.ok else None,
        "best_run": None,
        "settings": [],
        "failures": failure_summary(runs),
        "notes": notes,
        "notes_total": total,
        "cache": {"runs": len(runs), "read": read},
    }
    if o.ok and o.metric:
        values = {r.id: number(entries[r.id]["metrics"].get(o.metric)) for r in runs}
        best = best_run(runs, o.metric, o.maximize, values=values)
        out["best_run"] = best.to_json() if best else None
        settings = by_params(runs, o.metric, o.maximize, seed_keys=seed_keys, values=values)
        out["settings"] = [_setting_json(s) for s in settings[:SHOWN_SETTINGS]]
        out["settings_total"] = len(settings)
    return out


def _groups(store: RunStore, runs: list[Run]) -> list[dict[str, Any]]:
    """The groups of `runs`, most runs first: name, run count, states, declared objective."""
    counts: dict[str, Counter[str]] = {}
    for r in runs:
        name = r.spec.get("group")
        if name:
            counts.setdefault(str(name), Counter())[str(r.status.get("state"))] += 1
    out = []
    for name, states in sorted(counts.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        declared, warning = declared_of(store.home, name)
        out.append(
            {
                "group": name,
                "runs": sum(states.values()),
                "states": dict(states.most_common()),
                "objective": declared.to_json() if declared else None,
                "warning": warning,
                "go_on": go_on(store.home, name),
                "declared": declared,
            }
        )
    return out


def _objective(
    scope: Scope,
    finals: list[dict[str, Any]],
    groups: list[dict[str, Any]],
    metric: str | None,
    direction: str | None,
) -> Objective:
    """The digest's objective: the one given, else the declared one of the scope's group (of
    a project: the one its groups declare, when they all declare the same), else picked."""
    declared = None
    named = [g["declared"] for g in groups]
    if named and all(d is not None for d in named) and len({d.text for d in named}) == 1:
        declared = named[0]
    group = scope.group if scope.group is not None else (groups[0]["group"] if groups else None)
    return resolve(finals, metric=metric, direction=direction, declared=declared, group=group)


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
) -> tuple[list[dict[str, Any]], int]:
    """Group notes and run notes, newest first (SHOWN_NOTES of them, each whole), and how
    many notes the scope has in all (one written on several runs at once counts once)."""
    groups = (
        {scope.group} if scope.group is not None else {e.get("group") for e in entries.values()}
    )
    shared: list[dict[str, Any]] = []
    for g in sorted(x for x in groups if x):
        shared.extend({**_note(n), "group": g, "runs": []} for n in group_notes(store.home, g))
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
    older = sum(
        max(0, int(e.get("notes_total") or 0) - len(e.get("notes") or [])) for e in entries.values()
    )
    return sorted(kept, key=newest_first, reverse=True), len(shared) + len(of_runs) + older


def _epoch(stamp: Any) -> float:
    when = parse_iso(stamp if isinstance(stamp, str) else None)
    return when.timestamp() if when else 0.0


def newest_first(note: dict[str, Any]) -> str:
    return str(note.get("time") or "")


def _note(note: dict[str, Any]) -> dict[str, Any]:
    """A note as the digest carries it: whole."""
    return {
        "time": note.get("time"),
        "author": note.get("author"),
        "text": str(note.get("text") or ""),
    }


def failure_summary(runs: list[Run]) -> list[dict[str, Any]]:
    """The failure signatures of `runs` (orbit/review/signatures.py), most frequent first."""
    return [f.to_json() for f in failures(runs)[:SHOWN_FAILURES]]

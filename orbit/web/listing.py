"""The runs page: filter, sort, group and page the listing rows; the live-state API; cancel."""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import bottle

from orbit.errors import OrbitError
from orbit.human import fmt_metric, human_seconds
from orbit.review.objective import declared_of, number, resolve
from orbit.store.describe import duration_s, latest_metrics
from orbit.store.groups import Declared
from orbit.store.index import row_for
from orbit.store.model import METRICS, NOTES, Run
from orbit.store.runs import Broken, RunStore, id_key
from orbit.web.context import Route, current, header, local_path

PER_PAGE = 50
FILTERS = ("state", "name", "group", "tag", "folder", "q")
COLUMNS = ("id", "name", "state", "group", "folder", "submitted", "duration")
IDS_MAX = 500  # /api/runs?ids=: the page asks for the PER_PAGE runs it shows
NOTES_READ_MAX = 1 << 20  # a larger notes.jsonl is not counted: only its last note is read
NOTE_WORDS = 40  # characters of the last note the list shows
STATES = (
    "queued", "starting", "running", "unknown", "succeeded", "failed", "cancelled", "lost"
)  # fmt: skip


@dataclass
class Query:
    """The runs page's query string, parsed (unknown or bad values fall back to defaults)."""

    filters: dict[str, str] = field(default_factory=dict)
    sort: str = "id"
    desc: bool = True
    grouped: bool = False
    page: int = 1

    @classmethod
    def parse(cls, params: Any) -> Query:
        filters = {k: params.getunicode(k, "").strip() for k in FILTERS}
        sort = params.getunicode("sort", "id")
        try:
            page = max(1, int(params.get("page", "1")))
        except ValueError:
            page = 1
        return cls(
            filters={k: v for k, v in filters.items() if v},
            sort=sort if sort in COLUMNS else "id",
            desc=params.get("desc", "1") != "0",
            grouped=params.get("groupby") == "1",
            page=page,
        )

    def url(self, **changes: Any) -> str:
        """This page's URL with some parameters changed (used by sort links and pagination)."""
        params: dict[str, Any] = dict(self.filters)
        params.update(sort=self.sort, desc="1" if self.desc else "0", page=self.page)
        if self.grouped:
            params["groupby"] = "1"
        params.update(changes)
        return "/?" + urlencode({k: v for k, v in params.items() if v not in ("", None)})


def _tag_matches(tags: Any, wanted: str) -> bool:
    if not isinstance(tags, dict):
        return False
    key, sep, value = wanted.partition("=")
    if key not in tags:
        return False
    return not sep or str(tags[key]) == value


def matches(row: dict[str, Any], filters: dict[str, str]) -> bool:
    if "state" in filters and row.get("state") not in filters["state"].split(","):
        return False
    if "name" in filters and filters["name"].lower() not in str(row.get("name") or "").lower():
        return False
    if "group" in filters and str(row.get("group") or "") != filters["group"]:
        return False
    folder = filters.get("folder")
    if folder:
        mine = str(row.get("folder") or "")
        if mine != folder and not mine.startswith(folder + "/"):
            return False
    if "tag" in filters and not _tag_matches(row.get("tags"), filters["tag"]):
        return False
    if "q" in filters:
        hay = " ".join(
            str(row.get(k) or "")
            for k in ("id", "name", "group", "folder", "state", "reason", "image")
        )
        hay += " " + " ".join(str(c) for c in row.get("command") or [])
        hay += " " + " ".join(f"{k}={v}" for k, v in (row.get("tags") or {}).items())
        if filters["q"].lower() not in hay.lower():
            return False
    return True


def resources_text(row: dict[str, Any]) -> str:
    parts = []
    if row.get("cpus"):
        parts.append(f"{row['cpus']:g} CPU")
    if row.get("mem_gb"):
        parts.append(f"{row['mem_gb']:g} GiB")
    if row.get("gpus"):
        parts.append(f"{row['gpus']} GPU")
    return ", ".join(parts) or "-"


def params_text(params: Any) -> str:
    """`lr=0.1 seed=2`: a run's sweep parameters, compact."""
    if not isinstance(params, dict):
        return ""
    return " ".join(f"{k}={v}" for k, v in params.items())


def notes_glance(path: Path) -> tuple[int | None, str]:
    """How many notes a notes.jsonl holds (None when it is too large to count cheaply) and the
    text of the last one: one read of a small file, only its last line parsed."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - NOTES_READ_MAX))
            data = fh.read()
    except OSError:
        return 0, ""
    lines = [line for line in data.splitlines() if line.strip()]
    count = len(lines) if size <= NOTES_READ_MAX else None
    for line in reversed(lines):
        try:
            note = json.loads(line)
        except ValueError:
            continue
        if isinstance(note, dict):
            return count, str(note.get("text") or "")
    return count, ""


def metric_text(latest: dict[str, Any], declared: Declared | None = None) -> str:
    """`loss 0.0211`: the run's main metric (its group's declared objective, else the one
    picked from its own metrics: review/objective.py) and its latest value; "" without one."""
    key = resolve([latest], declared=declared).metric
    value = number(latest.get(key)) if key else None
    return f"{key} {fmt_metric(value)}" if key and value is not None else ""


def notes_text(count: int | None, last: str) -> str:
    """`2 · BEST CONFIG, converges fast` (the last note's first words)."""
    if count == 0:
        return ""
    first = " ".join(last.split())
    if len(first) > NOTE_WORDS:
        first = first[: NOTE_WORDS - 1].rstrip() + "…"
    return f"{'many' if count is None else count} · {first}"


@dataclass
class Glance:
    """What the list reads from a run's own files (its metrics tail and notes.jsonl)."""

    latest: dict[str, Any]
    notes: int | None
    last_note: str

    @classmethod
    def read(cls, store: RunStore, run_id: str) -> Glance:
        folder = store.run_dir(run_id)
        latest, _ = latest_metrics(Run(run_id, folder))
        count, last = notes_glance(folder / NOTES)
        return cls(latest, count, last)


def view_row(
    row: dict[str, Any] | Broken, glance: Glance | None = None, declared: Declared | None = None
) -> dict[str, Any]:
    """What one table row shows (all plain strings; the template escapes them); `declared`:
    the objective of the run's group."""
    if isinstance(row, Broken):
        return {"id": row.id, "error": row.problem, "state": "error", "group": ""}
    dur = duration_s(row)
    glance = glance or Glance({}, 0, "")
    return {
        "id": str(row["id"]),
        "error": None,
        "name": str(row.get("name") or ""),
        "state": str(row.get("state") or ""),
        "group": str(row.get("group") or ""),
        "folder": str(row.get("folder") or ""),
        "submitted": str(row.get("submitted_at") or "")[:19].replace("T", " "),
        "submitted_at": row.get("submitted_at") or "",
        "duration": human_seconds(dur),
        "duration_s": dur or 0.0,
        "resources": resources_text(row),
        "reason": str(row.get("reason") or ""),
        "tags": ", ".join(f"{k}={v}" for k, v in (row.get("tags") or {}).items()),
        "params": params_text(row.get("params")),
        "metric": metric_text(glance.latest, declared),
        "notes": notes_text(glance.notes, glance.last_note),
        "last_note": glance.last_note,
    }


def _sort_key(col: str) -> Any:
    """Sorts raw index rows (and Broken entries), so only the page shown is formatted."""

    def key(row: dict[str, Any] | Broken) -> Any:
        if isinstance(row, Broken):
            return id_key(row.id) if col == "id" else ("", id_key(row.id))
        if col == "id":
            return id_key(str(row["id"]))
        if col == "submitted":
            return row.get("submitted_at") or ""
        if col == "duration":
            return duration_s(row) or 0.0
        return (str(row.get(col) or "").lower(), id_key(str(row["id"])))

    return key


def _group_of(row: dict[str, Any] | Broken) -> str:
    return "" if isinstance(row, Broken) else str(row.get("group") or "")


def select(
    rows: list[dict[str, Any] | Broken], query: Query, store: RunStore | None = None
) -> dict[str, Any]:
    """The rows of one page, after filters, sorting, grouping and paging; with `store`, each
    shown run's latest main metric and notes are read from its files (PER_PAGE runs at most)."""
    field_filters = {k: v for k, v in query.filters.items() if k != "q"}
    kept: list[dict[str, Any] | Broken] = []
    for row in rows:
        if isinstance(row, Broken):
            # A run that cannot be read matches no field, but must not vanish silently.
            if not field_filters and query.filters.get("q", row.id) in row.id:
                kept.append(row)
        elif matches(row, query.filters):
            kept.append(row)
    kept.sort(key=_sort_key(query.sort), reverse=query.desc)
    if query.grouped:  # stable: keeps the chosen order inside each group
        kept.sort(key=_group_of)
    pages = max(1, math.ceil(len(kept) / PER_PAGE))
    page = min(query.page, pages)
    objectives: dict[str, Declared | None] = {}

    def declared(row: dict[str, Any] | Broken) -> Declared | None:
        group = _group_of(row)
        if store is None or not group:
            return None
        if group not in objectives:
            objectives[group] = declared_of(store.home, group)[0]
        return objectives[group]

    page_rows = kept[(page - 1) * PER_PAGE : page * PER_PAGE]
    shown = [view_row(r, _glance(store, r), declared(r)) for r in page_rows]
    return {"rows": shown, "total": len(kept), "page": page, "pages": pages}


class GlanceCache:
    """Glances by run directory, reused while its metrics.jsonl and notes.jsonl are unchanged
    (size, mtime, inode): the page polls /api/runs every 2.5 s, and a finished run's files
    never change, so a poll costs two stats per run instead of a parse of its metrics tail."""

    MAX = 4096  # entries kept; the oldest go first

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[Path, tuple[tuple[Any, Any], Glance]] = {}

    def get(self, store: RunStore, run_id: str) -> Glance:
        folder = store.run_dir(run_id)
        stamp = (_stamp(folder / METRICS), _stamp(folder / NOTES))
        with self._lock:
            hit = self._items.get(folder)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        glance = Glance.read(store, run_id)
        with self._lock:
            self._items.pop(folder, None)
            self._items[folder] = (stamp, glance)
            while len(self._items) > self.MAX:
                del self._items[next(iter(self._items))]
        return glance


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


GLANCES = GlanceCache()


def _glance(store: RunStore | None, row: dict[str, Any] | Broken) -> Glance | None:
    if store is None or isinstance(row, Broken):
        return None
    return GLANCES.get(store, str(row["id"]))


def runs_page() -> str:
    ctx = current()
    query = Query.parse(bottle.request.query)
    data = select(ctx.store.list_rows(), query, ctx.store)
    return ctx.render("listing", title="Runs", query=query, states=STATES, q=quote, **data)


def runs_api() -> dict[str, Any]:
    """State, reason, duration, params, latest metrics and note count of the runs named in
    ?ids=1,2 (or of all runs: then the files of the IDS_MAX newest runs only are read)."""
    ctx = current()
    wanted = list(dict.fromkeys(i for i in bottle.request.query.get("ids", "").split(",") if i))
    if len(wanted) > IDS_MAX:
        bottle.abort(400, f"ask for at most {IDS_MAX} runs at once")
    rows: list[dict[str, Any] | Broken]
    if wanted:  # the page polls only what it shows: read those runs, not all of them
        rows = []
        for item in ctx.store.load_many(i for i in wanted if i.isdigit()):
            rows.append(item if isinstance(item, Broken) else row_for(item, None))
    else:
        rows = ctx.store.list_rows()
    ids = [r.id if isinstance(r, Broken) else str(r["id"]) for r in rows]
    read = set(sorted(ids, key=id_key)[-IDS_MAX:])  # each run's files: a bounded number
    return {
        "runs": {
            i: api_row(r, _glance(ctx.store, r) if i in read else None)
            for i, r in zip(ids, rows, strict=True)
        }
    }


def api_row(row: dict[str, Any] | Broken, glance: Glance | None = None) -> dict[str, Any]:
    """One run of /api/runs: typed as in `orbit ps --json` (`reason` null when there is none,
    `duration_s` in seconds or null before the start), `duration` and `metric` as the page
    shows them; `metrics_latest` and `notes` (a count) are null when not read (`glance`)."""
    if isinstance(row, Broken):
        return {
            "state": "error",
            "reason": None,
            "duration": None,
            "duration_s": None,
            "params": {},
            "metric": None,
            "metrics_latest": None,
            "notes": None,
            "error": row.problem,
        }
    dur = duration_s(row)
    return {
        "state": row.get("state"),
        "reason": row.get("reason") or None,
        "duration": human_seconds(dur),
        "duration_s": dur,
        "params": row.get("params") or {},
        "metric": metric_text(glance.latest) if glance else None,
        "metrics_latest": glance.latest if glance else None,
        "notes": glance.notes if glance else None,
        "error": None,
    }


def cancel() -> Any:
    from orbit.execute.control import request_cancel

    ctx = current()
    ctx.check_csrf()
    ids = [i for v in bottle.request.forms.getall("ids") for i in v.split(",") if i]
    if not ids:
        bottle.abort(400, "no runs selected")
    results = {}
    for ref in ids:
        try:
            run = request_cancel(ctx.store, ctx.store.resolve(ref).id, actor=ctx.actor)
            results[run.id] = {"state": run.state.value}
        except OrbitError as exc:
            results[ref] = {"error": str(exc)}
    if (header("Accept") or "").startswith("application/json"):
        return {"cancelled": results}
    bottle.redirect(local_path(bottle.request.forms.getunicode("back", "/")), 303)


ROUTES: list[Route] = [
    ("GET", "/", runs_page),
    ("GET", "/api/runs", runs_api),
    ("POST", "/cancel", cancel),
]

"""The runs page: filter, sort, group and page the listing rows; the live-state API; cancel."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import bottle

from orbit.errors import OrbitError, UsageError
from orbit.human import human_seconds
from orbit.review.objective import declared_of, metric_text
from orbit.review.where import Where
from orbit.review.where import parse as parse_where
from orbit.store.describe import duration_s, latest_metrics
from orbit.store.groups import Declared
from orbit.store.index import row_for
from orbit.store.model import METRICS, NOTES, Run
from orbit.store.runs import Broken, RunStore, id_key
from orbit.web.context import RUN_ID, Route, current, header, local_path
from orbit.web.table import (
    CHOICES_MAX,
    STATS,
    Column,
    Columns,
    StampCache,
    cell,
    columns_for,
    list_deadline,
    sort_rows,
)
from orbit.web.table import summaries as summaries_of

PER_PAGE = 50
FILTERS = ("state", "name", "group", "tag", "folder", "q")
COLUMNS = ("id", "name", "state", "group", "folder", "submitted", "duration", "reason")
SELECTED_MAX = 5000  # ids a `sel=` keeps
STATS_ORDER = STATS
IDS_MAX = 500  # /api/runs?ids=: the page asks for the PER_PAGE runs it shows
NOTES_READ_MAX = 1 << 20  # a larger notes.jsonl is not counted: only its last note is read
NOTE_WORDS = 40  # characters of the last note the list shows
STATES = (
    "queued", "starting", "running", "unknown", "succeeded", "failed", "cancelled", "lost"
)  # fmt: skip


@dataclass
class Query:
    """The runs page's query string, parsed (unknown or bad values fall back to defaults; a bad
    `where` expression is kept, and the page says why it is one)."""

    filters: dict[str, str] = field(default_factory=dict)
    sort: str = "id"
    desc: bool = True
    grouped: bool = False
    page: int = 1
    where: str = ""
    metrics: list[str] = field(default_factory=list)  # chosen metric columns (`metric=K`, repeated)
    stats: list[str] = field(default_factory=lambda: ["final"])  # `stat=final|min|max`, repeated
    params: list[str] | None = None  # chosen param columns (`param=K`); None: the common ones
    selected: list[str] = field(default_factory=list)  # `sel=1,2,3`: the ticked runs

    @classmethod
    def parse(cls, params: Any) -> Query:
        filters = {k: params.getunicode(k, "").strip() for k in FILTERS}
        sort = params.getunicode("sort", "id") or "id"
        try:
            page = max(1, int(params.get("page", "1")))
        except ValueError:
            page = 1
        stats = [s for s in STATS_ORDER if s in _all(params, "stat")]
        chosen = _all(params, "param")
        sel = (params.getunicode("sel", "") or "").split(",")
        return cls(
            filters={k: v for k, v in filters.items() if v},
            sort=sort if sort in COLUMNS or Column.parse(sort) else "id",
            desc=params.get("desc", "1") != "0",
            grouped=params.get("groupby") == "1",
            page=page,
            where=(params.getunicode("where", "") or "").strip(),
            metrics=list(dict.fromkeys(_all(params, "metric")))[:CHOICES_MAX],
            stats=stats or ["final"],
            params=list(dict.fromkeys(chosen))[:CHOICES_MAX] if chosen else None,
            selected=list(dict.fromkeys(i for i in sel if RUN_ID.match(i)))[:SELECTED_MAX],
        )

    @property
    def narrowed(self) -> bool:
        return bool(self.filters or self.where)

    def state(self) -> dict[str, Any]:
        """Every parameter of this view (the filter form carries them as hidden fields)."""
        params: dict[str, Any] = dict(self.filters)
        params.update(sort=self.sort, desc="1" if self.desc else "0", page=self.page)
        params.update(where=self.where, metric=self.metrics, param=self.params or [])
        params.update(sel=",".join(self.selected), groupby="1" if self.grouped else "")
        params["stat"] = [] if self.stats == ["final"] else self.stats
        return params

    def url(self, **changes: Any) -> str:
        """This page's URL with some parameters changed (used by sort links and pagination)."""
        params = self.state()
        params.update(changes)
        kept = {k: v for k, v in params.items() if v not in ("", None, [])}
        return "/?" + urlencode(kept, doseq=True)


def _all(params: Any, name: str) -> list[str]:
    """Every non-empty value of a repeated parameter (`metric=a&metric=b`)."""
    values = params.decode().getall(name)  # decoded: a key may be any UTF-8 text
    return [v.strip() for v in values if isinstance(v, str) and v.strip()]


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
    row: dict[str, Any] | Broken,
    glance: Glance | None = None,
    declared: Declared | None = None,
    columns: Columns | None = None,
    store: RunStore | None = None,
) -> dict[str, Any]:
    """What one table row shows (all plain strings; the template escapes them); `declared`:
    the objective of the run's group; `cells`: the (text, title) of each sweep column."""
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
        "cells": [cell(c, row, store) for c in (columns.params + columns.metrics)]
        if columns
        else [],
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


def _kept(
    rows: list[dict[str, Any] | Broken], query: Query, where: Where, store: RunStore | None
) -> list[dict[str, Any] | Broken]:
    """The rows the filters, the free text and the `where` expression keep."""
    field_filters = {k: v for k, v in query.filters.items() if k != "q"}
    kept: list[dict[str, Any] | Broken] = []
    runs_dir = str(store.home.runs_dir) if store is not None else None
    for row in rows:
        if isinstance(row, Broken):
            # A run that cannot be read matches no field, but must not vanish silently.
            if not field_filters and not where.terms and query.filters.get("q", row.id) in row.id:
                kept.append(row)
        elif matches(row, query.filters) and (
            not where.terms or where.matches(row, partial(summaries_of, store, row, runs_dir))
        ):
            kept.append(row)
    return kept


def _ordered(
    kept: list[dict[str, Any] | Broken], query: Query, store: RunStore | None
) -> list[dict[str, Any] | Broken]:
    column = Column.parse(query.sort)
    if column is not None:
        kept = sort_rows(kept, column, query.desc, store)
    else:
        kept.sort(key=_sort_key(query.sort), reverse=query.desc)
    if query.grouped:  # stable: keeps the chosen order inside each group
        kept.sort(key=_group_of)
    return kept


def select(
    rows: list[dict[str, Any] | Broken], query: Query, store: RunStore | None = None
) -> dict[str, Any]:
    """The rows of one page, after filters, the `where` expression, sorting, grouping and
    paging; with `store`, each shown run's latest main metric, notes and chosen metric columns
    are read from its files (PER_PAGE runs at most; every kept run's metric summaries only when
    the expression or the sort needs them). `where_error`: why the expression is not one (it is
    then not applied)."""
    try:
        where, where_error = parse_where(query.where), ""
    except UsageError as exc:
        where, where_error = Where(), str(exc)
    with list_deadline():
        return _page(rows, query, store, where, where_error)


def _page(
    rows: list[dict[str, Any] | Broken],
    query: Query,
    store: RunStore | None,
    where: Where,
    where_error: str,
) -> dict[str, Any]:
    kept = _ordered(_kept(rows, query, where, store), query, store)
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
    cols = columns_for(kept, page_rows, query.params, query.metrics, query.stats, store)
    shown = [view_row(r, _glance(store, r), declared(r), cols, store) for r in page_rows]
    return {
        "rows": shown,
        "total": len(kept),
        "page": page,
        "pages": pages,
        "columns": cols,
        "where_error": where_error,
    }


GLANCES: StampCache[Glance] = StampCache((METRICS, NOTES), Glance.read, cap=4096)


def _glance(store: RunStore | None, row: dict[str, Any] | Broken) -> Glance | None:
    if store is None or isinstance(row, Broken):
        return None
    return GLANCES.get(store, str(row["id"]))


def runs_page() -> str:
    ctx = current()
    query = Query.parse(bottle.request.query)
    data = select(ctx.store.list_rows(), query, ctx.store)
    if data["where_error"]:
        bottle.response.status = 400  # the page, with the message and the expression to fix
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

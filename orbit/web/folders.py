"""The folders view: the folder tree of `orbit folders`, with the runs and the bench jobs filed
in each folder (`orbit run --folder`, `orbit bench run --folder`, `orbit mv`).

    GET /browse                 the top level: its folders, runs and bench jobs
    GET /browse?folder=a/b      one folder: its subfolders, the runs and jobs filed right there

Counts come from store/folders.py's `tree` (the one the CLI prints); runs from the listing
index, jobs from their job.json (bench/jobs.py).
"""

from __future__ import annotations

from typing import Any

import bottle

from orbit.errors import UsageError
from orbit.store.folders import FolderCount, normalize, tree
from orbit.web.context import Route, current

MAX_RUNS = 200  # runs listed on the page; the runs list (/?folder=) has them all


def _job_rows(home: Any) -> list[dict[str, Any]]:
    from orbit.bench.jobs import list_jobs

    return [
        {
            "id": j.id,
            "name": j.name,
            "benchmark": j.benchmark,
            "state": j.state,
            "created_at": j.created_at,
            "tasks": len(j.tasks) if isinstance(j.tasks, list) else 0,
            "methods": [m.name for m in j.methods],
            "folder": j.folder if isinstance(j.folder, str) else None,
        }
        for j in list_jobs(home)
    ]


def _children(counts: list[FolderCount], folder: str | None) -> list[FolderCount]:
    """The folders right under `folder` (None: the top level)."""
    depth = 0 if folder is None else folder.count("/") + 1
    prefix = "" if folder is None else folder + "/"
    return [c for c in counts if c.path.startswith(prefix) and c.path.count("/") == depth]


def page() -> str:
    ctx = current()
    try:
        folder = normalize(bottle.request.query.getunicode("folder") or "")
    except UsageError as exc:
        bottle.abort(400, str(exc))
        raise AssertionError("unreachable") from None
    rows = [r for r in ctx.store.list_rows() if isinstance(r, dict)]
    jobs = _job_rows(ctx.home)
    counts, top_level = tree((r.get("folder") for r in rows), (j["folder"] for j in jobs))
    here = next((c for c in counts if c.path == folder), None)
    if folder is not None and here is None:
        bottle.abort(404, f"no run or bench job is filed under {folder!r}")
    runs = [r for r in rows if (r.get("folder") or None) == folder]
    parts = folder.split("/") if folder else []
    return ctx.render(
        "browse",
        title=f"Folder {folder}" if folder else "Folders",
        folder=folder,
        crumbs=[("/".join(parts[: i + 1]), p) for i, p in enumerate(parts)],
        children=_children(counts, folder),
        runs=runs[-MAX_RUNS:][::-1],
        runs_total=len(runs),
        runs_under=here.runs if here else len(rows),
        jobs=[j for j in jobs if j["folder"] == folder][::-1],
        top_level=top_level,
    )


ROUTES: list[Route] = [("GET", "/browse", page)]

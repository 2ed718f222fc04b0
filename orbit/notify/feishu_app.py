"""The Feishu bot's card of one run (what a finished run sends, and the bot's /show).

A minimal version: id, state and reason, command, resources, duration, final metrics and, for
a run that failed, the end of its log that says why; built from what `orbit show --json` says
(store/describe.py with review/metrics.py's summaries). Read-only: nothing is written.
"""

from __future__ import annotations

from typing import Any

from orbit.human import fmt_metric, gpu_phrase, human_seconds
from orbit.notify.lark import card, plain
from orbit.review.metrics import metrics_json
from orbit.store.describe import describe
from orbit.store.home import Home
from orbit.store.runs import RunStore

SHOWN_METRICS = 12
EXCERPT_CHARS = 2000


def run_card(home: Home, run_id: str, *, image_key: str | None = None) -> dict[str, Any]:
    """The card of run `run_id` (an exact id; an OrbitError when it cannot be read);
    `image_key`, an uploaded image (its metric curves), shown under the metrics."""
    store = RunStore(home)
    run = store.load(run_id)
    d = describe(store, run, notes=False, metrics=metrics_json(run))
    state = str(d["state"])
    title = f"run {run.label} {state}"
    fields = [("state", f"{state}: {d['reason']}" if d.get("reason") else state)]
    if d.get("group"):
        fields.append(("group", str(d["group"])))
    fields.append(("command", " ".join(str(c) for c in d["command"])))
    res = d.get("resources") or {}
    text = f"{res.get('cpus')} CPUs, {res.get('mem_gb')} GiB"
    if res.get("gpus"):
        text += ", " + gpu_phrase(res["gpus"], res.get("gpu_ids"), res.get("gpu_mem_gb"))
    fields.append(("resources", text))
    if d.get("started_at"):
        fields.append(("duration", human_seconds(d.get("duration_s"))))
    if d.get("exit_code") is not None:
        fields.append(("exit code", str(d["exit_code"])))
    shown = [{"is_short": False, "text": plain(f"{k}: {v}")} for k, v in fields]
    elements: list[dict[str, Any]] = [{"tag": "div", "fields": shown}]
    summary = (d.get("metrics") or {}).get("summary") or {}
    lines = [f"{k} {fmt_metric(s.get('latest'))}" for k, s in summary.items()]
    if len(lines) > SHOWN_METRICS:
        lines = [*lines[:SHOWN_METRICS], f"… and {len(lines) - SHOWN_METRICS} more"]
    if lines:
        elements.append({"tag": "div", "text": plain("final metrics: " + ", ".join(lines))})
    if image_key:
        elements.append({"tag": "img", "img_key": image_key, "alt": plain("metric curves")})
    excerpt = d.get("error_excerpt")
    if excerpt:
        if len(excerpt) > EXCERPT_CHARS:
            excerpt = "…" + excerpt[-(EXCERPT_CHARS - 1) :]
        elements.append({"tag": "hr"})
        elements.append({"tag": "div", "text": plain(f"log ends:\n{excerpt}")})
    return card(title, state, elements)

"""The bot's answers to `/gpu`, `/runs [N]`, `/show ID` and `/help`: each an interactive card
(Feishu's card JSON 1.0, as notify/lark.py's `card` builds it). Read-only, always: nothing in
the home is changed (a tick is never run, a dead shepherd never repaired from here).

    answer(home, "/runs 5", web_url="http://gpu1:7777")

The text is a message's, its @mention already stripped. Forgiving: spaces around it, a
full-width slash or space, the command word in any case, or no slash at all. Anything else
(empty, unknown, `/help`) is the card that lists the commands. An OrbitError (an unknown or
ambiguous run id, a damaged file) is a card with its one line; a card never exceeds Feishu's
limit for a card message (lark.CARD_BYTES): long lists say "… and N more".

User text (run names, commands, reasons, log lines) goes in plain_text only: lark_md would
turn a run named `<at id=all></at>` into a mention of everyone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orbit.errors import OrbitError
from orbit.human import ago
from orbit.notify.curves import curves_png
from orbit.notify.feishu_app import run_card
from orbit.notify.fit import cut
from orbit.notify.lark import CARD_BYTES, card, card_bytes, plain
from orbit.review.objective import declared_of, metric_text
from orbit.store.describe import latest_metrics
from orbit.store.groups import Declared
from orbit.store.home import Home
from orbit.store.index import IndexCache
from orbit.store.model import Run
from orbit.store.runs import Broken, RunStore

RUNS_DEFAULT = 10
RUNS_MAX = 30
GPUS_SHOWN = 32
QUEUE_SHOWN = 10
LEASES_SHOWN = 20
LINE_CHARS = 300  # one listed run, GPU, lease or queued run
Upload = Callable[[bytes], str | None]  # an image's bytes -> its image_key, None if refused
# The bot is a long-lived process: as the web server's, its /runs parses only what was
# appended to index.jsonl since its last answer (store/index.py).
_INDEX = IndexCache()

HELP = (
    ("/gpu", "each GPU's memory, utilisation and holder; CPUs, memory and the queue"),
    ("/runs [N]", f"the {RUNS_DEFAULT} most recent runs (N: up to {RUNS_MAX}), newest first"),
    ("/show ID", "one run: state, resources, metrics and why it failed (an id prefix will do)"),
    ("/help", "this list"),
)
ALIASES = {
    "gpu": "gpu",
    "gpus": "gpu",
    "resources": "gpu",
    "runs": "runs",
    "ps": "runs",
    "show": "show",
    "help": "help",
    "h": "help",
    "?": "help",
    "start": "help",
}


def answer(
    home: Home, text: str, *, web_url: str | None = None, upload: Upload | None = None
) -> dict[str, Any]:
    """The card that answers the command `text` (see the module). `upload` (the bot's
    `Lark.upload_image`, or a wrapper that answers None when Feishu refuses) puts a run's
    curves on /show's card; `web_url` links the web view (default: the `web_url` setting)."""
    word, args = parse(text)
    command = ALIASES.get(word)
    try:
        if command == "gpu":
            answered = gpu_card(home)
        elif command == "runs":
            answered = runs_card(home, args)
        elif command == "show":
            answered = show_card(home, args, web_url, upload)
        else:
            unknown = f"unknown command /{word}" if word and command is None else None
            answered = help_card(unknown)
    except OrbitError as exc:
        answered = line_card(str(exc))
    except OSError as exc:  # a file the home could not give (permissions, I/O)
        answered = line_card(f"{exc.filename or 'a file'}: {exc.strerror or exc}")
    return fit(answered)


def parse(text: str) -> tuple[str, list[str]]:
    """The command word (lower case, no slash) and its arguments: "" for an empty text."""
    words = text.replace("\uff0f", "/").split()  # str.split: any Unicode space, U+3000 too
    while words and words[0].startswith("@"):  # a mention the caller left in (`@_user_1`)
        words.pop(0)
    if not words:
        return "", []
    first = words[0].lstrip("/")
    if not first and len(words) > 1:  # "/ gpu"
        words = words[1:]
        first = words[0]
    return first.lower(), words[1:]


# --- /gpu ------------------------------------------------------------------------------------
def gpu_card(home: Home) -> dict[str, Any]:
    """The resources report (sched/report.py, what `orbit resources` prints) as a card."""
    from orbit.sched.report import (
        cpu_memory_lines,
        executor_line,
        gpu_line,
        gpu_source,
        lease_line,
        queue_line,
        report,
    )

    data = report(home)
    users = {i: lease.get("user") for lease in data["leases"] for i in lease["gpus"]}
    sections: list[tuple[str, list[str]]] = []
    slurm = executor_line(data)
    if slurm is not None:
        sections.append(("Executor", [slurm]))
    else:
        gpus = data["gpus"]
        lines = []
        for g in gpus[:GPUS_SHOWN]:
            user = users.get(g["index"]) if g["holder"] else None
            lines.append(_cut(gpu_line(g) + (f", by {user}" if user else "")))
        lines += _more(len(gpus), GPUS_SHOWN)
        title = f"GPUs ({gpu_source(data)}, {data['gpus_free']} free)" if gpus else "GPUs"
        sections.append((title, lines or [gpu_source(data)]))
        sections.append(("CPUs and memory", [" ".join(x.split()) for x in cpu_memory_lines(data)]))
    leases = data["leases"]
    lease_lines = [_cut(lease_line(x)) for x in leases[:LEASES_SHOWN]]
    sections.append(("Leases", lease_lines + _more(len(leases), LEASES_SHOWN) or ["none"]))
    queue = data["queue"]
    queue_lines = [_cut(queue_line(q)) for q in queue[:QUEUE_SHOWN]]
    title = f"Queue ({len(queue)})" if queue else "Queue"
    sections.append((title, queue_lines + _more(len(queue), QUEUE_SHOWN) or ["empty"]))
    if data["nodes"]:
        names = ", ".join(str(r.get("name")) for r in data["nodes"])
        sections.append(("Other nodes", [_cut(f"{names} (`orbit resources` on the host)")]))
    if data["problems"]:
        sections.append(("Problems", [_cut(p) for p in data["problems"]]))
    return card("GPUs and the queue", "", _sections(sections))


# --- /runs -----------------------------------------------------------------------------------
def runs_card(home: Home, args: list[str]) -> dict[str, Any]:
    """The most recent runs, newest first: id, state, name (or command), age, main metric."""
    n = RUNS_DEFAULT
    if args:
        try:
            n = int(args[0])
        except ValueError:
            n = 0
        if n < 1 or len(args) > 1:
            return line_card(f"usage: /runs [N], N a number from 1 to {RUNS_MAX}")
    shown = min(n, RUNS_MAX)
    store = RunStore(home, index_cache=_INDEX)
    rows = store.list_rows()  # a damaged run directory is a Broken entry, never an error
    newest = rows[::-1][:shown]
    declared: dict[str | None, Declared | None] = {}
    lines = [_cut(_run_line(store, r, declared)) for r in newest]
    if not lines:
        return line_card("no runs yet", title="Recent runs")
    note = []
    if n > RUNS_MAX:
        note.append(f"(at most {RUNS_MAX} are listed)")
    if len(rows) > shown:
        note.append(f"… and {len(rows) - shown} older (`orbit ps -a` on the host)")
    elements: list[dict[str, Any]] = [{"tag": "div", "text": plain("\n".join(lines))}]
    if note:
        elements.append({"tag": "note", "elements": [plain(" ".join(note))]})
    return card(f"Recent runs ({len(newest)} of {len(rows)})", "", elements)


def _run_line(
    store: RunStore, row: dict[str, Any] | Broken, declared: dict[str | None, Declared | None]
) -> str:
    """`12  failed  lr-sweep  5m ago  loss 0.25  — exit code 1`."""
    if isinstance(row, Broken):
        return f"{row.id}  unreadable  {row.problem}"
    run_id, state = str(row["id"]), str(row.get("state"))
    what = row.get("name") or " ".join(str(c) for c in row.get("command") or []) or "-"
    parts = [run_id, state, str(what), ago(row.get("submitted_at"))]
    group = row.get("group")
    if group not in declared:
        declared[group] = declared_of(store.home, group)[0]
    latest, _ = latest_metrics(Run(run_id, store.run_dir(run_id)))
    metric = metric_text(latest, declared[group])
    if metric:
        parts.append(metric)
    if state not in ("succeeded", "running", "starting") and row.get("reason"):
        parts.append(f"— {row['reason']}")
    return "  ".join(parts)


# --- /show -----------------------------------------------------------------------------------
def show_card(
    home: Home, args: list[str], web_url: str | None, upload: Upload | None = None
) -> dict[str, Any]:
    """The run card (notify/feishu_app.py) of the run `args[0]` names, as `orbit show`
    resolves it (an id, a unique id prefix, a unique name or name prefix), with its curves
    when `upload` takes the image (a refused upload leaves the card without it)."""
    if not args:
        return line_card("usage: /show ID (a run id, a unique id prefix or a run's name)")
    if len(args) > 1:
        return line_card(f"/show takes one run id, got {len(args)}: {' '.join(args)}")
    store = RunStore(home)
    run_id = store.resolve_id(args[0])
    image_key = None
    if upload is not None:
        png = curves_png([store.load(run_id)])
        image_key = upload(png) if png is not None else None
    return run_card(home, run_id, image_key=image_key, web_url=web_url)


# --- /help and errors ------------------------------------------------------------------------
def help_card(unknown: str | None = None) -> dict[str, Any]:
    lines = [f"{cmd}  {what}" for cmd, what in HELP]
    elements: list[dict[str, Any]] = []
    if unknown:
        elements.append({"tag": "div", "text": plain(_cut(unknown))})
    elements.append({"tag": "div", "text": plain("\n".join(lines))})
    elements.append(
        {"tag": "note", "elements": [plain("Read-only. In a group, mention the bot first.")]}
    )
    return card("Orbit: commands", "", elements)


def line_card(line: str, *, title: str = "Orbit") -> dict[str, Any]:
    """A card with one line (an error's, a usage)."""
    return card(title, "", [{"tag": "div", "text": plain(_cut(line, 2000))}])


# --- the pieces and the size -----------------------------------------------------------------
def _sections(sections: list[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """Each (title, lines) as a bold title (fixed text: lark_md is safe) and plain lines."""
    out: list[dict[str, Any]] = []
    for title, lines in sections:
        out.append({"tag": "div", "text": {"tag": "lark_md", "content": f"**{title}**"}})
        out.append({"tag": "div", "text": plain("\n".join(lines))})
    return out


def _more(total: int, shown: int) -> list[str]:
    return [f"… and {total - shown} more"] if total > shown else []


def _cut(text: str, chars: int = LINE_CHARS) -> str:
    """One line of at most `chars` characters (notify/fit.py's cut)."""
    return cut(" ".join(text.split("\n")), chars)


def fit(answered: dict[str, Any]) -> dict[str, Any]:
    """The card cut below CARD_BYTES (notify/lark.py): its longest text halved, again, until it fits
    (each cut text ends in "…"); a card that still does not fit is one line saying so."""
    for _ in range(64):
        if card_bytes(answered) <= CARD_BYTES:
            return answered
        texts = list(_texts(answered))
        if not texts:
            break
        holder, key = max(texts, key=lambda t: len(t[0][t[1]]))
        value = holder[key]
        if len(value) < 40:
            break
        holder[key] = value[: len(value) // 2] + "…"
    if card_bytes(answered) <= CARD_BYTES:
        return answered
    return line_card("the answer was too large for a Feishu card; see it on the host")


def _texts(node: Any) -> Any:
    """(dict, key) of every text `content` in the card."""
    if isinstance(node, dict):
        if node.get("tag") in ("plain_text", "lark_md", "markdown") and isinstance(
            node.get("content"), str
        ):
            yield node, "content"
        for value in node.values():
            yield from _texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _texts(value)

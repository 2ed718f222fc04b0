"""The lessons digest (review/lessons.py) as one page of plain text: headings, lines of at most
100 columns, the groups' newest conclusions whole, long notes shortened with a mark that says
where to read them whole. What `orbit lessons` prints, the SessionStart hook hands an agent and
the web's lessons page shows as text."""

from __future__ import annotations

import shlex
import textwrap
from typing import Any

from orbit.human import fmt_metric, fmt_num
from orbit.review.best import params_text
from orbit.review.objective import Objective

LONG_NOTE = 600  # a note past this many characters (but a group's newest, its conclusion)
SHORT_NOTE = 400  # is shortened to this many, with a mark and where to read it whole
SHOWN_CONCLUSIONS = 3  # groups whose newest note is given whole at the top
SHOWN_GROUPS = 12
MAX_CHARS = 5000  # the page: notes beyond it are left to --json
SHOWN_VALUES = 10  # values listed per param key; more are given as a range
WIDTH = 100


def _cut(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def render(d: dict[str, Any]) -> str:
    """The digest as plain text: headings, short lines (≤ 100 columns), about a page. The
    newest conclusion of each group (up to SHOWN_CONCLUSIONS) is given whole; other long
    notes are shortened with a mark that says where to read them whole."""
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
    lines += _group_lines(d)
    conclusions = _conclusions(d)
    for n in conclusions:
        stamp = str(n.get("time") or "")[:16].replace("T", " ")
        lines += ["", f"## Conclusion of group {n['group']} ({stamp}, {n.get('author')})"]
        lines += _paragraphs(str(n.get("text") or ""))
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
        for line in (f.get("outcome") or {}).get("lines") or []:  # what came of its settings
            lines += textwrap.wrap(line, WIDTH, initial_indent="  ", subsequent_indent="    ",
                                   max_lines=2, placeholder=" …")  # fmt: skip
    if not d["failures"]:
        lines.append("- none")
    lines += _go_on_section(d)
    head = "\n".join(lines) + "\n\n## Notes (newest first)\n"
    rest = [n for n in d["notes"] if n not in conclusions]
    notes = [_note_lines(n) for n in rest]
    while notes and len(head) + sum(len(n) for n in notes) > MAX_CHARS:
        notes.pop()  # the oldest go first: the page stays a page
    total = int(d.get("notes_total") or len(d["notes"]))
    if not d["notes"]:
        notes = ["- none yet (orbit note -g GROUP TEXT records a conclusion once)\n"]
    elif not rest:
        notes = ["- none but the conclusion above\n"]
    left = total - len(conclusions) - len(notes)
    if d["notes"] and left > 0:
        notes.append(f"- … {left} more: {_whole_command(d)}\n")
    return head + "".join(notes)


def _group_lines(d: dict[str, Any]) -> list[str]:
    """One line per group (the first 8): its runs, its objective and its own digest. A
    group's digest names no group but its own, and says only what is wrong with it."""
    groups = d.get("groups") or []
    if d["scope"].get("group") is not None:
        return [f"warning: {g['warning']}" for g in groups if g.get("warning")]
    if not groups:
        return []
    out = ["", "## Groups"]
    for g in groups[:SHOWN_GROUPS]:
        o = g.get("objective")
        way = f"; objective {o['metric']}:{o['direction']}" if o else ""
        states = ", ".join(f"{n} {s}" for s, n in g["states"].items())
        n = g["runs"]
        command = f"orbit lessons -g {shlex.quote(g['group'])}"
        out.append(
            _cut(f"- {g['group']} (`{command}`): {n} run{'s' if n != 1 else ''}, {states}{way}")
        )
        if g.get("warning"):
            out.append(_cut(f"  warning: {g['warning']}"))
    if len(groups) > SHOWN_GROUPS:
        out.append(f"- … {len(groups) - SHOWN_GROUPS} more groups (orbit lessons --json)")
    alone = d["runs"] - sum(g["runs"] for g in groups)
    if alone:
        out.append(f"- {alone} run{'s' if alone != 1 else ''} in no group")
    return out


def _conclusions(d: dict[str, Any]) -> list[dict[str, Any]]:
    """The newest note of each group, newest first (the first SHOWN_CONCLUSIONS)."""
    seen: dict[str, dict[str, Any]] = {}
    for n in d["notes"]:  # newest first
        if n.get("group") and n["group"] not in seen:
            seen[n["group"]] = n
    return list(seen.values())[:SHOWN_CONCLUSIONS]


def _paragraphs(text: str) -> list[str]:
    """`text` whole, wrapped at WIDTH, its own line breaks kept."""
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out += textwrap.wrap(para, WIDTH, break_long_words=True) or [""]
    return out


def go_on_lines(step: dict[str, Any], group: str) -> list[str]:
    """The newest launch of a group as a reader needs it to go on: what it asked for, where
    from, and the commands that extend and repeat it (`orbit group show`, the digest)."""
    req = step.get("request") or {}
    res = req.get("resources") or {}
    stamp = str(step.get("time") or "")[:16].replace("T", " ")
    n = step.get("count")
    lines = [
        f"- newest launch {stamp}: {step.get('kind')} of {n} run{'' if n == 1 else 's'} "
        f"({step.get('launches')} launch{'' if step.get('launches') == 1 else 'es'} in all)"
    ]
    what = [f"image {req.get('image') or req.get('dockerfile') or '?'}"]
    units = {"mem_gb": "mem {} GiB", "gpu_mem_gb": "GPU mem {} GiB"}
    what += [
        units.get(k, k + " {}").format(fmt_num(float(v)))
        for k, v in res.items()
        if isinstance(v, int | float)
    ]
    if req.get("timeout_min"):
        what.append(f"timeout {fmt_num(float(req['timeout_min']))} min")
    lines.append("- " + "; ".join(what))
    lines.append("- command: " + shlex.join(str(c) for c in step.get("command") or []))
    params = "; ".join(
        f"{k}={','.join(map(str, v))}" for k, v in (step.get("params") or {}).items()
    )
    if params:
        lines.append(f"- params: {params}")
    if step.get("project"):
        lines.append(f"- code: {step['project']}")
    if step.get("like"):
        lines.append(f"- extend it: {step['like']}")
    lines.append(f"- repeat it: {step.get('command_line')}")
    return [w for line in lines for w in _wrapped(line).splitlines()]


def _go_on_section(d: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for g in (d.get("groups") or [])[:SHOWN_CONCLUSIONS]:
        if g.get("go_on"):
            out += ["", f"## To go on (group {g['group']})", *go_on_lines(g["go_on"], g["group"])]
    return out


def _whole_command(d: dict[str, Any]) -> str:
    scope = d["scope"]
    if scope.get("group") is not None:
        return f"orbit group show {shlex.quote(scope['group'])} (group notes), orbit show ID"
    return "orbit lessons --json, orbit group show GROUP, orbit show ID"


def _note_lines(n: dict[str, Any]) -> str:
    runs = n.get("runs") or []
    where = f"group {n['group']}" if n.get("group") else "run" + ("s " if len(runs) > 1 else " ")
    where += ", ".join(runs[:6]) + (" …" if len(runs) > 6 else "")
    stamp = str(n.get("time") or "")[:16].replace("T", " ")
    text = " ".join(str(n.get("text") or "").split())
    if len(text) > LONG_NOTE:
        whole = (
            f"orbit group show {shlex.quote(n['group'])}"
            if n.get("group")
            else f"orbit show {runs[0]}"
        )
        text = f"{text[:SHORT_NOTE].rstrip()} … [shortened: {len(text)} characters; whole: {whole}]"
    return _wrapped(f"- [{stamp}, {where}, {n.get('author')}] {text}")


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
    o = Objective.from_json(d.get("objective") or {}, d["scope"].get("group"))
    metric = d.get("metric")
    if not metric:
        return ["## Best", *_wrapped(f"- {o.problem or 'not ranked'}").splitlines()]
    out = [_cut(f"## Best by final {o.text()}")]
    if o.warning:
        out += _wrapped(f"- warning: {o.warning}").splitlines()
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
    names = [g["group"] for g in d.get("groups") or []]
    only = d["scope"].get("group") or (names[0] if len(names) == 1 else None)
    group = shlex.quote(only) if only is not None else "GROUP"
    if more > 0:
        out.append(
            f"- … {more} more settings (orbit best -g {group} --metric "
            f"{metric}:{o.direction} --by-params)"
        )
    b = d.get("best_run")
    if b:
        out.append(
            _cut(
                f"- best single run: {b['id']} ({params_text(b['params'])}), "
                f"{metric} {fmt_metric(b['value'])}"
            )
        )
    return out + _passed_over(o)


def _passed_over(o: Objective) -> list[str]:
    """Why the keys a pick passed over were not taken (only for a picked objective)."""
    if o.metric_why != "picked" or not o.passed_over:
        return []
    shown = "; ".join(f"{k}: {why}" for k, why in list(o.passed_over.items())[:4])
    return _wrapped(f"- not ranked by: {shown}").splitlines()

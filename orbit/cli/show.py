"""orbit show ID: request, state and reason, resources, peaks, latest metrics, notes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from orbit.cli.common import add_json, print_json, runs_argument, side_tick
from orbit.env import Env
from orbit.errors import ExitCode, OrbitError
from orbit.human import fmt_metric, gpu_phrase, human_seconds

SHOWN_METRICS = 12  # metric lines in the text; --json has them all


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="details of a run")
    runs_argument(p, nargs=None, help="run id, unique id prefix, unique name or name prefix")  # type: ignore[arg-type]
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.cli.watch import needs_repair
    from orbit.review.metrics import metrics_json
    from orbit.store.describe import describe
    from orbit.store.lognote import log_note
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    run = store.resolve(args.runs)
    if needs_repair(run):
        side_tick(env)  # its shepherd died: settle or restart it first
        run = store.load(run.id)
    d = describe(store, run, metrics=metrics_json(run, save=True))
    session = _session(run)
    if session is not None:
        d["session"] = session
    auth = run.spec.get("auth") if isinstance(run.spec.get("auth"), dict) else None
    if auth is not None:
        d["auth"] = auth
    node = _node(env, run, d)
    if args.json:
        print_json(env, d)
        return ExitCode.OK
    lines = [
        f"run {run.label}",
        *_request(d),
        *_outcome(d, log_note(run.status)),
        *_times(d),
        *_code(d),
        *_session_lines(session),
        *_auth_lines(auth),
        *_node_lines(node),
    ]
    env.stdout.write("".join(line + "\n" for line in lines))
    return ExitCode.OK


def _node(env: Env, run: Any, d: dict[str, Any]) -> dict[str, Any] | None:
    """Where a run sent to another node is (docs/nodes.md); its output/ stays there and is
    listed through the node (d["output"]), or, when the node cannot be reached, said so."""
    from orbit.nodes.client import outputs

    name = run.status.get("node")
    if not name:
        return None
    remote = run.status.get("remote") or {}
    node: dict[str, Any] = {"name": name, "id": remote.get("id"), "lease": remote.get("lease")}
    try:
        files = outputs(env.home, run, timeout=10)
    except OrbitError as exc:
        node["output_error"] = str(exc)
    else:
        if files is not None:
            listed = [{"name": f["path"], "type": "file", "size": f["size"]} for f in files]
            d["output"] = {"files": listed, "count": len(listed)}
    d["node"] = node
    return node


def _node_lines(node: dict[str, Any] | None) -> list[str]:
    if node is None:
        return []
    there = f"as run {node['id']}" if node.get("id") else "not sent yet"
    gpus = ((node.get("lease") or {}).get("gpus")) or []
    text = f"{node['name']} ({there}"
    if gpus:
        text += ", " + ", ".join(f"GPU {g.get('index')}" for g in gpus)
    text += "); output/ stays there"
    if node.get("output_error"):
        text += f" (not readable now: {node['output_error']})"
    return [_field("node", text)]


def _session(run: Any) -> dict[str, Any] | None:
    """The agent session that launched the run: harness, id and messages copied so far."""
    from orbit.agents.transcript import count_messages, transcript_file

    agent = run.spec.get("agent")
    if not isinstance(agent, dict):
        return None
    path = transcript_file(run)
    try:
        messages = count_messages(path) if path else 0
    except OSError:
        messages = 0
    return {
        "harness": agent.get("harness"),
        "session_id": agent.get("session_id"),
        "messages": messages,
        "transcript": str(path) if path else None,
    }


def _session_lines(session: dict[str, Any] | None) -> list[str]:
    if session is None:
        return []
    n = session["messages"]
    copied = f"{n} message{'' if n == 1 else 's'}" if session["transcript"] else "not copied yet"
    text = f"{session['harness'] or 'agent'} {session['session_id']} ({copied}; `orbit session`)"
    return [_field("session", text)]


def _auth_lines(auth: dict[str, Any] | None) -> list[str]:
    """The agent CLI that ran inside the container (`orbit run --auth`)."""
    if auth is None:
        return []
    cli = auth.get("cli")
    version = f" {cli['version']}" if isinstance(cli, dict) and cli.get("version") else ""
    text = (
        f"{auth.get('harness')}{version} inside, auth profile {auth.get('profile')} "
        f"({auth.get('kind')}); its transcript in session/"
    )
    return [_field("agent", text)]


def _field(label: str, text: str) -> str:
    return f"  {label:<10} {text}"


def _request(d: dict[str, Any]) -> list[str]:
    """State, where the run is filed, and what it asked for."""
    state = d["state"] + (f": {d['reason']}" if d.get("reason") else "")
    out = [_field("state", state), *_excerpt(d)]
    for key in ("group", "folder"):
        if d.get(key):
            out.append(_field(key, d[key]))
    for key in ("tags", "params"):
        if d.get(key):
            out.append(_field(key, ", ".join(f"{k}={v}" for k, v in d[key].items())))
    out.append(_field("image", str(d.get("image"))))
    out.append(_field("command", " ".join(d["command"])))
    res = d.get("resources") or {}
    text = f"{res.get('cpus')} CPUs, {res.get('mem_gb')} GiB memory"
    if res.get("gpus"):
        text += ", " + gpu_phrase(res["gpus"], res.get("gpu_ids"), res.get("gpu_mem_gb"))
    if d.get("timeout_min"):
        text += f", timeout {d['timeout_min']} min"
    out.append(_field("resources", text))
    out.extend(_datasets(d.get("datasets") or []))
    return out


def _datasets(uses: list[Any]) -> list[str]:
    """`imagenet at /data/imagenet (read-only; /srv/imagenet)`, one line each (`-d`)."""
    out = []
    for i, use in enumerate(u for u in uses if isinstance(u, dict)):
        mode = "read-write" if use.get("rw") else "read-only"
        text = f"{use.get('name')} at {use.get('target')} ({mode}; {use.get('path')})"
        out.append(_field("datasets" if i == 0 else "", text))
    return out


def _excerpt(d: dict[str, Any]) -> list[str]:
    """The end of a failed run's log that says why (error_excerpt), under its reason."""
    lines = (d.get("error_excerpt") or "").split("\n")
    return [_field("log ends" if i == 0 else "", line) for i, line in enumerate(lines) if line]


def _outcome(d: dict[str, Any], note: str | None) -> list[str]:
    """Leased GPUs, peaks, exit code and a log that may lack lines (store/lognote.py)."""
    from orbit.execute.watching import gpu_peak_text, peaks_text  # here: not at start-up

    out = []
    lease_gpus = (d.get("lease") or {}).get("gpus") or []
    if lease_gpus:
        out.append(_field("gpus", ", ".join(f"GPU {g['index']} ({g['uuid']})" for g in lease_gpus)))
    peaks = d.get("peaks") or {}
    if peaks:
        out.append(_field("peaks", peaks_text(peaks, d.get("duration_s"))))
    if peaks.get("gpus"):
        out.append(_field("gpu peaks", "; ".join(gpu_peak_text(g) for g in peaks["gpus"])))
    if d.get("exit_code") is not None:
        killed = " (killed for memory)" if d["oom_killed"] else ""
        out.append(_field("exit code", f"{d['exit_code']}{killed}"))
    if note:
        out.append(_field("log", f"{note}; see log.pos"))
    return out


def _times(d: dict[str, Any]) -> list[str]:
    out = [_field("submitted", str(d.get("submitted_at")))]
    if d.get("started_at"):
        out.append(_field("started", d["started_at"]))
    if d.get("finished_at"):
        out.append(
            _field("finished", f"{d['finished_at']} (ran {human_seconds(d.get('duration_s'))})")
        )
    return out


def _code(d: dict[str, Any]) -> list[str]:
    """The code, latest metrics, the directory and the notes."""
    out = []
    proj = d.get("project") or {}
    if proj.get("mode") == "copy":
        dirty = ", dirty" if proj.get("dirty") else ""
        commit = (proj.get("commit") or "no commit")[:12]
        out.append(
            _field("code", f"{proj.get('path')} @ {commit}{dirty}, snapshot {proj.get('snapshot')}")
        )
    elif proj.get("mode") == "mount":
        out.append(_field("code", f"{proj.get('path')} (mounted read-only)"))
    out.extend(_metrics(d.get("metrics") or {}))
    out.append(_field("directory", d["dir"]))
    for note in d.get("notes") or []:
        out.append(_field("note", f"[{note.get('time', '')[:19]}] {note.get('text', '')}"))
    for note in d.get("group_notes") or []:
        stamp = f"[{note.get('time', '')[:19]}] "
        out.append(_field("group note", f"{stamp}{note.get('text', '')} ({note.get('author')})"))
    return out


def _metrics(m: dict[str, Any]) -> list[str]:
    """`loss 0.25 (min 0.25 @3, max 1.2 @0)` per numeric key (@: the step), then the latest
    values that are not numbers."""
    summary = m.get("summary") or {}
    x = m.get("x") or "step"
    at = "@" if x == "step" else f"@{x} "
    parts = [
        f"{k} {fmt_metric(s['latest'])} (min {fmt_metric(s['min'])} {at}{s['min_step']}, "
        f"max {fmt_metric(s['max'])} {at}{s['max_step']})"
        for k, s in summary.items()
    ]
    out = [_field("metrics" if i == 0 else "", p) for i, p in enumerate(parts[:SHOWN_METRICS])]
    if len(parts) > SHOWN_METRICS:
        out.append(_field("", f"… {len(parts) - SHOWN_METRICS} more keys (orbit show --json)"))
    rest = {k: v for k, v in (m.get("latest") or {}).items() if k not in summary and k != x}
    if rest:
        out.append(_field("" if out else "metrics", json.dumps(rest, ensure_ascii=False)[:300]))
    return out

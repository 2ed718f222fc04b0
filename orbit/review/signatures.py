"""Failure signatures: failed runs grouped by the cause their logs name.

A signature is the key line of a run's error excerpt (a traceback's exception, an
out-of-memory or shell error line) with what differs between runs of the same cause made
equal: numbers, hex addresses, uuids, times, paths (their base name stays), long quoted
values. The innermost frame's file and function stay, so the same exception raised in two
places is two causes; a short quoted name stays too (`KeyError: 'lr'` and `KeyError: 'seed'`
are two causes). A run that Orbit itself ended (timed out, killed for memory, lost) is grouped
by its reason, since its log's last lines are whatever it happened to be printing; memory kills
at any limit are one cause, and so are timeouts of any length, but their signature as shown
names the real limits, peaks and durations (`killed for memory at 0.25 GiB ×3 (peak 0.25
GiB)`). Each failure also says what came of its settings (orbit/review/outcomes.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from orbit.errors import NotFoundError
from orbit.human import fmt_gib, fmt_minutes, fmt_num
from orbit.review.objective import number
from orbit.review.outcomes import (
    Outcome,
    Setting,
    outcome,
    params_of,
    peak_bytes,
    setting_key,
    succeeded_by_setting,
)
from orbit.store import grouprows
from orbit.store.excerpt import from_command, key_line, run_excerpt
from orbit.store.model import Run, RunState, parse_iso
from orbit.store.runs import RunStore, id_key

EXAMPLES = 20  # run ids listed per signature (the count says how many there are)
MAX_SIGNATURE = 300
FAILED = (RunState.FAILED, RunState.LOST)

UUID = re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
TIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
HEX_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
HEX_ID = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{12,}\b")
PATH = re.compile(r"(?<![\w:])(?:[\w.~-]*/)+([\w.-]*)")
QUOTED = re.compile(r"'([^'\n]*)'|\"([^\"\n]*)\"")
NAME = re.compile(r"[A-Za-z_][\w.-]{0,39}")
NUMBER = re.compile(r"(?<![A-Za-z\d.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
FRAME_PARTS = re.compile(r'^\s*File "([^"]*)", line \d+, in (\S+)')
# The reasons of runs Orbit ended (store/exitrecord.py), with the limit and the duration.
MEMORY = re.compile(r"killed for memory(?: \(limit (\d+(?:\.\d+)?) GiB\))?")
TIMEOUT = re.compile(r"timed out after (\d+(?:\.\d+)?) (s|min)")
KILLED, TIMED_OUT = "killed for memory", "timed out"
NO_OUTPUT = " (no output)"
SHOWN_VALUES = 3  # limits or durations listed with their counts; more are given as a range


def normalise(text: str) -> str:
    text = UUID.sub("<uuid>", text)
    text = TIME.sub("<time>", text)
    text = HEX_ADDRESS.sub("<addr>", text)
    text = HEX_ID.sub("<hex>", text)
    text = PATH.sub(lambda m: m.group(1) or "<path>", text)
    text = QUOTED.sub(_quoted, text)
    text = NUMBER.sub("N", text)
    return " ".join(text.split())[:MAX_SIGNATURE]


def _quoted(m: re.Match[str]) -> str:
    quote = "'" if m.group(1) is not None else '"'
    value = m.group(1) if m.group(1) is not None else m.group(2)
    return f"{quote}{value if NAME.fullmatch(value) else '…'}{quote}"


def signature(excerpt: str) -> str:
    """The normalised key line of an error excerpt, with the innermost frame's file and
    function when it is a traceback: `OverflowError: math range error (train.py, in sigmoid)`."""
    key = normalise(key_line(excerpt) or "")
    frames = [m for line in excerpt.split("\n") if (m := FRAME_PARTS.match(line))]
    if frames:
        path, func = frames[-1].group(1), frames[-1].group(2)
        key += f" ({path.rsplit('/', 1)[-1]}, in {func})"
    return key


def run_signature(reason: str | None, excerpt: str | None) -> str:
    """A failed run's cause, the key its failures are grouped by: its excerpt's signature when
    the run's own command failed (`exit code N`), its reason when Orbit ended it (or there is
    no output at all): `killed for memory` and `timed out` whatever the limit."""
    if excerpt and from_command(reason):
        return signature(excerpt)
    if reason and MEMORY.fullmatch(reason):
        cause = KILLED
    elif reason and TIMEOUT.fullmatch(reason):
        cause = TIMED_OUT
    else:
        cause = normalise(reason or "failed without a reason")
    return cause + ("" if excerpt else NO_OUTPUT)


def shown_signature(cause: str, runs: Sequence[Run]) -> str:
    """The signature of `runs` (one cause) as shown: a memory kill with the limits and the
    peak measured, a timeout with its durations; any other cause as it is."""
    base = cause.removesuffix(NO_OUTPUT)
    suffix = cause[len(base) :]
    if base == KILLED:
        limits = [v for r in runs if (v := _limit(r))]
        text = KILLED + (" at " + _spread(limits, lambda v: f"{fmt_num(v)} GiB") if limits else "")
        peaks = [p for r in runs if (p := peak_bytes(r))]
        if peaks:
            text += f" (peak {_range(fmt_gib(min(peaks)), fmt_gib(max(peaks)))})"
        return text + suffix
    if base == TIMED_OUT:
        durations = [v for r in runs if (v := _duration(r))]
        return (
            "timed out after " + _spread(durations, fmt_minutes) if durations else base
        ) + suffix
    return cause


def _limit(run: Run) -> float | None:
    m = MEMORY.fullmatch(run.reason or "")
    if m and m.group(1):
        return float(m.group(1))
    resources = run.spec.get("resources")
    return number(resources.get("mem_gb")) if isinstance(resources, dict) else None


def _duration(run: Run) -> float | None:
    """A timeout in minutes, as its reason says (else as run.yaml asked)."""
    m = TIMEOUT.fullmatch(run.reason or "")
    if m:
        return float(m.group(1)) / (60 if m.group(2) == "s" else 1)
    return number(run.spec.get("timeout_min"))


def _spread(values: list[float], text: Callable[[float], str]) -> str:
    """`0.25 GiB ×3`, `0.25 GiB ×2, 0.5 GiB ×1`; more than SHOWN_VALUES values as a range."""
    counts = Counter(text(v) for v in values)
    ordered = sorted(set(values))
    shown = list(dict.fromkeys(text(v) for v in ordered))
    if len(shown) <= SHOWN_VALUES:
        return ", ".join(f"{t} ×{counts[t]}" for t in shown)
    return _range(shown[0], shown[-1])


def _range(low: str, high: str) -> str:
    """`0.25–0.5 GiB` (one unit), `1.2 s–5 min`, or `0.25 GiB` when both are the same."""
    if low == high:
        return low
    (a, _, unit_a), (b, _, unit_b) = low.rpartition(" "), high.rpartition(" ")
    return f"{a}–{b} {unit_a}" if unit_a == unit_b and a and b else f"{low}–{high}"


@dataclass
class Failure:
    signature: str
    count: int
    shared_params: dict[str, Any]
    first_seen: str | None
    last_seen: str | None
    run_ids: list[str]
    example_id: str
    reason: str | None
    excerpt: str | None
    cause: str = ""  # the grouping key: the signature without the limits and durations
    outcome: Outcome = field(default_factory=lambda: Outcome([]))

    def to_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "count": self.count,
            "shared_params": self.shared_params,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "run_ids": self.run_ids,
            "example_id": self.example_id,
            "reason": self.reason,
            "excerpt": self.excerpt,
            "cause": self.cause,
            "outcome": self.outcome.to_json(),
        }


def _seen(run: Run) -> str:
    return str(run.status.get("finished_at") or run.status.get("submitted_at") or "")


def varying_keys(params: Sequence[Mapping[str, Any]]) -> set[str]:
    """The params whose value is not the same in every run (missing counts as a value)."""
    keys = {k for p in params for k in p}
    missing = object()
    return {k for k in keys if len({repr(p.get(k, missing)) for p in params}) > 1}


def shared_params(runs: Sequence[Run], varying: set[str]) -> dict[str, Any]:
    """The params of `varying` that every one of `runs` has with the same value."""
    first = params_of(runs[0])
    return {
        k: v
        for k, v in first.items()
        if k in varying and all(k in params_of(r) and params_of(r)[k] == v for r in runs[1:])
    }


def failures(
    runs: Iterable[Run], considered: Sequence[Mapping[str, Any]] | None = None
) -> list[Failure]:
    """The failed and lost runs among `runs`, grouped by signature, most frequent first.

    A param is reported as shared only when it varies among the runs considered: the params
    of each of them in `considered` (index rows carry them), else those of `runs` (any state).
    So `lr=50` is named when the lr=50 runs of a sweep failed and the others did not.
    The succeeded runs among `runs` tell each failure's outcome (outcomes.py).
    """
    runs = list(runs)
    varying = varying_keys(considered if considered is not None else [params_of(r) for r in runs])
    groups: dict[str, list[tuple[Run, str | None]]] = {}
    for run in runs:
        if run.state not in FAILED:
            continue
        excerpt = run_excerpt(run)
        groups.setdefault(run_signature(run.reason, excerpt), []).append((run, excerpt))
    # Only the succeeded runs of the failed runs' groups can be of their settings.
    failed_groups = {m[0].spec.get("group") for members in groups.values() for m in members}
    succeeded = succeeded_by_setting(r for r in runs if r.spec.get("group") in failed_groups)
    out = []
    for sig, members in groups.items():
        members.sort(key=lambda m: id_key(m[0].id))
        member_runs = [m[0] for m in members]
        seen = sorted(_seen(r) for r in member_runs)
        latest, excerpt = max(members, key=lambda m: (_seen(m[0]), id_key(m[0].id)))
        out.append(
            Failure(
                signature=shown_signature(sig, member_runs),
                count=len(members),
                shared_params=shared_params(member_runs, varying),
                first_seen=seen[0] or None,
                last_seen=seen[-1] or None,
                run_ids=[r.id for r in member_runs[:EXAMPLES]],
                example_id=latest.id,
                reason=latest.reason,
                excerpt=excerpt,
                cause=sig,
                outcome=outcome(member_runs, succeeded),
            )
        )
    # Most frequent first; of equal counts, the one seen last first.
    return sorted(out, key=lambda f: (f.count, f.last_seen or ""), reverse=True)


def _in_scope(row: dict[str, Any], folder: str | None, since: datetime | None) -> bool:
    folder = (folder or "").strip("/")
    if folder:
        mine = str(row.get("folder") or "")
        if mine != folder and not mine.startswith(folder + "/"):
            return False
    if since is not None:
        when = parse_iso(row.get("finished_at") or row.get("submitted_at"))
        if when is None or when < since:
            return False
    return True


def failed_in_scope(
    store: RunStore,
    group: str | None = None,
    folder: str | None = None,
    since: datetime | None = None,
) -> tuple[list[Run], list[dict[str, Any]]]:
    """For `failures` over a scope (a group, a folder and below, ended since a time): the
    failed and lost runs with the succeeded runs of their settings (in or out of the scope:
    they tell the outcome), and the params of the runs considered (the failed runs and the
    other runs of their groups in scope, to tell which params vary). Everything else comes
    from the listing index: only those runs' directories are read. NotFoundError for a group
    no run names."""
    if group is None:
        every = [r for r in store.list_rows() if isinstance(r, dict)]
    else:  # only the group's rows: a growing history costs this question nothing
        every = [r for r in grouprows.rows(store, group) if isinstance(r, dict)]
        if not every:
            raise NotFoundError(f"no runs in group {group!r}")
    rows = [r for r in every if _in_scope(r, folder, since)]
    failed_states = {s.value for s in FAILED}
    failed = [r for r in rows if r.get("state") in failed_states]
    ids = {r["id"] for r in failed}
    groups = {r.get("group") for r in failed if r.get("group")}
    considered = [r.get("params") or {} for r in rows if r["id"] in ids or r.get("group") in groups]
    settings = {_row_setting(r) for r in failed} - {None}
    fixes = [
        r
        for r in every
        if r.get("state") == RunState.SUCCEEDED.value and _row_setting(r) in settings
    ]
    loaded = store.load_many(r["id"] for r in [*failed, *fixes])
    return [r for r in loaded if isinstance(r, Run)], considered


def _row_setting(row: dict[str, Any]) -> Setting | None:
    return setting_key(row.get("group"), row.get("params"), row.get("command"))
